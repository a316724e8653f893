// The objects the plugin hands to NCCL: a per-communicator context, listen comms, send and
// recv comms, and requests. Each wraps the provider's object; the wrapper remembers what a
// version-neutral test() needs (how many sizes to report) and carries a magic number so a
// stray pointer from the caller is reported instead of followed.
#pragma once

#include "base/provider.h"

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace zcx::plugin {

inline constexpr uint32_t kCtxMagic = 0x5a435843;     // "CXCZ"
inline constexpr uint32_t kListenMagic = 0x5a43584c;  // "LXCZ"
inline constexpr uint32_t kCommMagic = 0x5a43584d;    // "MXCZ"
inline constexpr uint32_t kRequestMagic = 0x5a435852; // "RXCZ"

// One per NCCL communicator (v11) or one per process (v8..v10).
struct Ctx {
  uint32_t magic = kCtxMagic;
  uint64_t comm_id = 0;
  int traffic_class = -1;
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  const zcx_provider_ops_t* ops = nullptr;
  void* plisten = nullptr;
  int dev = 0;
};

struct Comm;

enum class RequestKind : uint8_t { kSend, kRecv, kFlush };

struct Request {
  uint32_t magic = 0;  // kRequestMagic while in use
  Comm* comm = nullptr;
  void* preq = nullptr;
  int n = 1;
  RequestKind kind = RequestKind::kSend;
};

struct Comm {
  uint32_t magic = kCommMagic;
  bool is_send = true;
  const zcx_provider_ops_t* ops = nullptr;
  void* pcomm = nullptr;
  // NCCL calls regMr from its proxy service thread while the progress thread calls
  // isend/irecv/test on the same comm: every provider call on this comm holds this lock.
  std::mutex mu;

  // Request slots (stable addresses); grows past 32 x maxRecvs in flight if NCCL asks.
  Request* take_request(RequestKind kind, int n) {
    Request* r;
    if (free_.empty()) {
      r = &pool_.emplace_back();
    } else {
      r = free_.back();
      free_.pop_back();
    }
    *r = Request{kRequestMagic, this, nullptr, n, kind};
    return r;
  }
  void give_request(Request* r) {
    r->magic = 0;
    free_.push_back(r);
  }

 private:
  std::deque<Request> pool_;
  std::vector<Request*> free_;
};

}  // namespace zcx::plugin
