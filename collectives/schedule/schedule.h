// A schedule is one rank's part of one operation: a list of tasks (send, receive, reduce,
// copy) with dependencies on earlier tasks. The executor issues tasks strictly in list order
// (a task waits until its dependencies are complete), so every rank posts its messages to a
// given peer in a deterministic order — the transport matches messages in posting order per
// link. Pipelining comes from ordering: receives listed ahead of the reductions that consume
// them are posted early. Zero-byte transfers are dropped (both ends compute the same sizes),
// except header-only messages of per-message-checked operations (p2p, alltoallv).
#pragma once

#include <zcx/coll.h>

#include "schedule/scratch_pool.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

namespace zcx::coll {

enum class TaskKind : uint8_t { kSend, kRecv, kReduce, kCopy };

inline constexpr int kNoTask = -1;

struct Task {
  TaskKind kind;
  int peer = -1;               // communicator rank (send/recv)
  void* dst = nullptr;         // recv, reduce, copy
  const void* src = nullptr;   // send, copy; reduce: first operand
  const void* src2 = nullptr;  // reduce: second operand
  size_t bytes = 0;
  bool per_message_header = false;  // carries its own descriptor with count = bytes
  uint64_t msg_seq = 0;        // per-message header: the p2p message number on this link
  uint32_t dep_begin = 0, dep_end = 0;  // range in Schedule::deps()
};

class Schedule {
 public:
  using Deps = std::initializer_list<int>;
  Schedule(zcx_dtype_t dtype, zcx_redop_t op);

  // Each returns the task index, or kNoTask when nothing needs doing (zero bytes).
  int send(int peer, const void* buf, size_t bytes, Deps deps = {});
  int recv(int peer, void* buf, size_t bytes, Deps deps = {});
  // dst = a (op) b over `bytes` bytes of the schedule's dtype. dst may alias a or b.
  int reduce(void* dst, const void* a, const void* b, size_t bytes, Deps deps = {});
  int copy(void* dst, const void* src, size_t bytes, Deps deps = {});
  // Sends/receives that always happen and carry their own descriptor (count = bytes).
  int send_checked(int peer, const void* buf, size_t bytes, Deps deps = {});
  int recv_checked(int peer, void* buf, size_t bytes, Deps deps = {});
  // Descriptor-only exchange: sends this operation's descriptor to `to` and checks the one
  // from `from` (unless the link already carried one in this operation).
  void check_link(int to, int from);
  // Adds a dependency list that is not an initializer list.
  void add_deps(int task, const std::vector<int>& deps);

  // Scratch memory owned by the schedule: uninitialised, 64-byte aligned, returned to the
  // pool (set_pool) or freed with the schedule.
  void* scratch(size_t bytes);
  void set_pool(std::shared_ptr<ScratchPool> pool) { pool_ = std::move(pool); }

  // Device memory (a stream-ordered GPU operation): the CUDA device of every buffer and
  // scratch block, or -1 for host memory. The executor then copies and reduces on the GPU.
  void set_device(int device) { device_ = device; }
  int device() const { return device_; }

  zcx_dtype_t dtype() const { return dtype_; }
  zcx_redop_t op() const { return op_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  std::vector<Task>& mutable_tasks() { return tasks_; }
  const std::vector<int>& deps() const { return deps_; }
  // Appends another schedule's tasks (groups), shifting its dependency indices.
  void append(Schedule&& other);

 private:
  int add(Task t, Deps deps);

  zcx_dtype_t dtype_;
  zcx_redop_t op_;
  int device_ = -1;
  std::vector<Task> tasks_;
  std::vector<int> deps_;
  std::shared_ptr<ScratchPool> pool_;
  std::vector<ScratchBlock> scratch_;
};

// What schedules move, added up: per peer (communicator rank) the bytes and messages sent
// and received (header-only messages count as messages), and the bytes reduced and copied
// locally. ZCX_STATS (core/comm_stats) and zcx-plan count with it.
struct PeerTraffic {
  uint64_t sent = 0, sends = 0, received = 0, receives = 0;
};
struct ScheduleTraffic {
  explicit ScheduleTraffic(int nranks = 0) : peers(static_cast<size_t>(nranks)) {}
  void add(const Schedule& s);
  std::vector<PeerTraffic> peers;
  uint64_t reduced = 0, copied = 0;
};

}  // namespace zcx::coll
