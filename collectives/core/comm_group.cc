// Point-to-point groups of a communicator: the calls between zcx_group_start and _end (or
// one send or receive alone) planned as one operation, host or stream-ordered.
#include "core/comm.h"

#include "common/log.h"

#include <vector>

namespace zcx::coll {

// Sends to self and receives from self, paired in call order, become copies: NCCL and MPI
// allow them (a rank of a one-rank job, or an alltoall written as sends and receives, talks
// to itself). A send to self without its receive in the group could never complete.
Status Comm::self_copies(const std::vector<OpArgs>& calls, Schedule* out) const {
  std::vector<const OpArgs*> sends, recvs;
  for (const OpArgs& call : calls)
    if (call.root == rank_) (call.sendbuf ? sends : recvs).push_back(&call);
  if (sends.size() != recvs.size())
    return set_error(Status::kInvalidUsage, kLogColl, "comm '%s' rank %d: %zu sends to self and "
                     "%zu receives from self: each needs its partner in the same group "
                     "(zcx_group_start/end)", name_.c_str(), rank_, sends.size(), recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    const OpArgs& send = *sends[i];
    const OpArgs& recv = *recvs[i];
    const size_t sent = send.count * send.esize(), room = recv.count * recv.esize();
    if (sent != room)
      return set_error(Status::kMismatch, kLogColl, "comm '%s' rank %d: send to self #%zu has "
                       "%zu bytes, its receive %zu", name_.c_str(), rank_, i + 1, sent, room);
    if (recv.recvbuf != send.sendbuf) out->copy(recv.recvbuf, send.sendbuf, sent);
  }
  return Status::kSuccess;
}

// A group's calls as one operation: copies for the sends to self, then each call's
// messages, numbered per link once every call has planned (a failed plan numbers none).
Status Comm::plan_group(const std::vector<OpArgs>& calls, Op* op) {
  if (!calls.empty()) op->sched.set_device(calls.front().device);  // one device per group
  ZCX_TRY(self_copies(calls, &op->sched));
  op->desc.kind = static_cast<uint8_t>(CollKind::kSendRecv);
  for (const OpArgs& call : calls) {
    if (call.root == rank_) continue;  // a copy (self_copies)
    Op one(call.dtype, call.op);
    ZCX_TRY(plan(call, &one));
    op->desc = one.desc;
    op->sched.append(std::move(one.sched));
  }
  for (Task& t : op->sched.mutable_tasks()) {  // p2p message numbers per link
    if (t.kind == TaskKind::kSend) t.msg_seq = ++p2p_sent_[t.peer];
    if (t.kind == TaskKind::kRecv) t.msg_seq = ++p2p_recvd_[t.peer];
  }
  op->desc.count = 0;
  op->desc.dtype = ZCX_UINT8;  // p2p headers compare bytes, whatever the dtypes
  return Status::kSuccess;
}

Status Comm::prepare_group(const std::vector<OpArgs>& calls, std::shared_ptr<Op>* out) {
  ZCX_TRY(check_usable());
  ZCX_TRY(claim_context());  // before plan numbers the messages
  refresh_tuning();
  auto op = std::make_shared<Op>(ZCX_UINT8, ZCX_SUM);
  if (Status st = plan_group(calls, op.get()); st != Status::kSuccess) {
    release_context_if_idle();
    return st;
  }
  *out = std::move(op);
  return Status::kSuccess;
}

Status Comm::post_group(const std::vector<OpArgs>& calls, std::shared_ptr<Op>* out) {
  CommStats::Inside inside(stats_);
  ZCX_TRY(prepare_group(calls, out));
  enqueue(*out);
  return Status::kSuccess;
}

}  // namespace zcx::coll
