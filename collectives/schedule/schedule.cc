// Schedule building.
#include "schedule/schedule.h"

#include <cstring>

namespace zcx::coll {

Schedule::Schedule(zcx_dtype_t dtype, zcx_redop_t op) : dtype_(dtype), op_(op) {}

int Schedule::add(Task t, Deps deps) {
  t.dep_begin = static_cast<uint32_t>(deps_.size());
  for (int d : deps)
    if (d != kNoTask) deps_.push_back(d);
  t.dep_end = static_cast<uint32_t>(deps_.size());
  tasks_.push_back(t);
  return static_cast<int>(tasks_.size() - 1);
}

void Schedule::add_deps(int task, const std::vector<int>& deps) {
  if (task == kNoTask) return;
  // Dependencies of a task must be contiguous: only the last task may gain more.
  Task& t = tasks_[task];
  if (task != static_cast<int>(tasks_.size()) - 1) return;
  for (int d : deps)
    if (d != kNoTask) deps_.push_back(d);
  t.dep_end = static_cast<uint32_t>(deps_.size());
}

int Schedule::send(int peer, const void* buf, size_t bytes, Deps deps) {
  if (bytes == 0) return kNoTask;
  Task t{TaskKind::kSend};
  t.peer = peer, t.src = buf, t.bytes = bytes;
  return add(t, deps);
}

int Schedule::recv(int peer, void* buf, size_t bytes, Deps deps) {
  if (bytes == 0) return kNoTask;
  Task t{TaskKind::kRecv};
  t.peer = peer, t.dst = buf, t.bytes = bytes;
  return add(t, deps);
}

int Schedule::send_checked(int peer, const void* buf, size_t bytes, Deps deps) {
  Task t{TaskKind::kSend};
  t.peer = peer, t.src = buf, t.bytes = bytes, t.per_message_header = true;
  return add(t, deps);
}

int Schedule::recv_checked(int peer, void* buf, size_t bytes, Deps deps) {
  Task t{TaskKind::kRecv};
  t.peer = peer, t.dst = buf, t.bytes = bytes, t.per_message_header = true;
  return add(t, deps);
}

void Schedule::check_link(int to, int from) {
  Task snd{TaskKind::kSend};
  snd.peer = to;
  add(snd, {});
  Task rcv{TaskKind::kRecv};
  rcv.peer = from;
  add(rcv, {});
}

int Schedule::reduce(void* dst, const void* a, const void* b, size_t bytes, Deps deps) {
  if (bytes == 0) return kNoTask;
  Task t{TaskKind::kReduce};
  t.dst = dst, t.src = a, t.src2 = b, t.bytes = bytes;
  return add(t, deps);
}

int Schedule::copy(void* dst, const void* src, size_t bytes, Deps deps) {
  if (bytes == 0 || dst == src) return kNoTask;
  Task t{TaskKind::kCopy};
  t.dst = dst, t.src = src, t.bytes = bytes;
  return add(t, deps);
}

void* Schedule::scratch(size_t bytes) {
  scratch_.emplace_back(pool_, bytes);
  return scratch_.back().data();
}

void Schedule::append(Schedule&& other) {
  int shift = static_cast<int>(tasks_.size());
  uint32_t dep_shift = static_cast<uint32_t>(deps_.size());
  for (int d : other.deps_) deps_.push_back(d + shift);
  for (Task t : other.tasks_) {
    t.dep_begin += dep_shift;
    t.dep_end += dep_shift;
    tasks_.push_back(t);
  }
  for (auto& s : other.scratch_) scratch_.push_back(std::move(s));
  other.scratch_.clear();
}

void ScheduleTraffic::add(const Schedule& s) {
  for (const Task& t : s.tasks()) {
    if (t.kind == TaskKind::kReduce) reduced += t.bytes;
    if (t.kind == TaskKind::kCopy) copied += t.bytes;
    if (t.peer < 0 || static_cast<size_t>(t.peer) >= peers.size()) continue;
    PeerTraffic& p = peers[static_cast<size_t>(t.peer)];
    if (t.kind == TaskKind::kSend) p.sent += t.bytes, ++p.sends;
    if (t.kind == TaskKind::kRecv) p.received += t.bytes, ++p.receives;
  }
}

}  // namespace zcx::coll
