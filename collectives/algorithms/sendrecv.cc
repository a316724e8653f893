// Point-to-point send or receive (root = peer; a send has sendbuf set). Each message carries
// its own descriptor, so a receive whose count differs from the send's fails with kMismatch.
// Inside a group the schedules of all calls are concatenated and posted together.
#include "algorithms/algorithms.h"

namespace zcx::coll {

Status build_sendrecv(const OpArgs& a, Schedule& s) {
  const size_t bytes = a.count * a.esize();
  if (a.root == a.rank)
    return set_error(Status::kInvalidArg, kLogColl, "send/recv to self (rank %d) is not supported",
                     a.rank);
  if (a.sendbuf) s.send_checked(a.root, a.sendbuf, bytes);
  else s.recv_checked(a.root, a.recvbuf, bytes);
  return Status::kSuccess;
}

}  // namespace zcx::coll
