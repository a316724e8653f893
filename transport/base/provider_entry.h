// Pieces of a provider's C entry points (provider.h) that do not depend on the transport:
// handing a made object out through a void**, deleting one given back, a comm's peer, and
// the dereg of a registration that is only a marker. shm and cuda_ipc build their ops tables
// from them; tcp, ib and ucx have entry points with more to do.
#pragma once

#include "base/provider.h"
#include "common/status.h"

namespace zcx {

// Runs make(&t) for a T* t and hands t out through `out` whatever the status (a make that
// fails leaves t null), so the caller never reads an unset pointer.
template <typename T, typename Make>
zcx_status_t hand_out(void** out, Make&& make) {
  T* made = nullptr;
  const Status st = make(&made);
  *out = made;
  return to_c(st);
}

// A close or finalize whose whole work is the T's destructor.
template <typename T>
zcx_status_t delete_as(void* p) {
  if (p == nullptr) return ZCX_ERR_INVALID_ARG;
  delete static_cast<T*>(p);
  return ZCX_SUCCESS;
}

// peer_info of a comm type that keeps its peer in `peer`.
template <typename Comm>
zcx_status_t peer_info_of(void* comm, zcx_peer_info_t* info) {
  if (comm == nullptr || info == nullptr) return ZCX_ERR_INVALID_ARG;
  *info = static_cast<Comm*>(comm)->peer;
  return ZCX_SUCCESS;
}

// dereg_mr of a provider whose reg_mr hands out a marker and keeps nothing.
inline zcx_status_t dereg_marker(void* comm, void* mhandle) {
  return comm == nullptr || mhandle == nullptr ? ZCX_ERR_INVALID_ARG : ZCX_SUCCESS;
}

}  // namespace zcx
