// Runs one schedule over the transport: issues tasks in list order once their dependencies
// are complete, sends the operation descriptor ahead of the first message on every link
// (and checks the one that arrives), tests in-flight requests, and turns failures into
// errors that name the peer: a dead peer (the transport's error), a disagreeing peer
// (kMismatch), or a silent one (kTimeout after ZCX_TIMEOUT without any progress).
#pragma once

#include "base/context.h"
#include "common/clock.h"
#include "core/desc.h"
#include "schedule/schedule.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zcx::coll {

// Stream-ordered GPU operations (a schedule with device() >= 0): the stream their copies and
// reductions run on, and the pinned host memory that staged transfers go through.
struct DeviceIo {
  void* stream = nullptr;               // cudaStream_t of the communicator's GPU runner
  std::shared_ptr<ScratchPool> pinned;  // bounce buffers of staged transfers
  // The device may see a NIC's writes late (GPUDirect RDMA writes unordered, host-side flush
  // supported): after a receive into device memory over the network, flush them.
  bool flush_gdr_writes = false;
};

// What the executor needs from a communicator.
class PeerLinks {
 public:
  virtual ~PeerLinks() = default;
  virtual Status endpoint(int peer, Endpoint** ep) = 0;  // lazy connection
  virtual Context& context() = 0;
  virtual std::string peer_name(int peer) const = 0;     // "rank 3 (hostB)"
  // The members whose processes are known to have exited without finalizing, in rank order
  // (checked while an operation stalls or after a link failed, so that ranks not linked to
  // a dead rank still name it).
  virtual std::vector<int> dead_members() { return {}; }
  // "rank 2 of 'world' (...)", or "rank 0 of 'world' (...) and rank 2 of 'world' (...)".
  std::string peer_names(const std::vector<int>& peers) const {
    std::string out;
    for (int p : peers) out += (out.empty() ? "" : " and ") + peer_name(p);
    return out;
  }
  // "; rank 2 of 'world' (...) finalized and exited before this operation ended" for each
  // member that left cleanly (not dead, but never coming back), else "": a timeout says it.
  virtual std::string departed_note() { return ""; }
  // "; rank 2 of 'world' (...) has not called this operation (...)" for each live member of
  // this host that looks silent in operation `seq` (never called it, or called it and
  // stopped polling), once this rank has been stalled since `stalled_since_ns` for a second;
  // else "". A stalled neighbour gives up at about the time we do: this names the cause.
  virtual std::string stall_note(uint64_t seq, int64_t stalled_since_ns) {
    (void)seq;
    (void)stalled_since_ns;
    return "";
  }
  // Device memory: the endpoint that carries it to `peer`, either one that moves GPU memory
  // itself (cuda_ipc, or the host endpoint where its provider does GPUDirect RDMA; *staged =
  // false) or a host endpoint that the executor feeds through pinned bounce buffers (*staged
  // = true). Descriptors always go over endpoint().
  virtual Status data_endpoint(int peer, Endpoint** ep, bool* staged) {
    *staged = false;
    return endpoint(peer, ep);
  }
  virtual const DeviceIo* device_io() { return nullptr; }
};

class Executor {
 public:
  // timeout_ms: ZCX_TIMEOUT as the communicator read it (no progress for that long fails).
  Executor(const Schedule* schedule, PeerLinks* links, const OpDesc& desc, int nranks,
           int64_t timeout_ms);
  // Advances as far as possible without blocking. *done when every task completed.
  Status progress(bool* done);
  // Requests still owned by the transport (their buffers must stay alive).
  bool has_inflight() const { return !inflight_.empty(); }
  // Ends the operation's holds on its buffers (done by progress() when it completes; the
  // communicator calls it for an operation that failed or never ran). Idempotent.
  void release_ranges();
  // When this operation last moved (a move not yet stamped by a clock read counts as now).
  int64_t last_progress_ns() const { return moved_since_clock_ ? now_ns() : last_progress_ns_; }

 private:
  struct Slot {
    Request* req = nullptr;
    Request* hdr = nullptr;
    bool hdr_done = true;
    bool data_done = true;
    std::unique_ptr<ScratchBlock> bounce;  // staged device transfer: its host copy
    bool gpu_flush = false;  // a GPUDirect receive whose provider has no iflush
  };
  bool deps_done(int i) const;
  Status issue(int i);
  Status issue_local(const Task& t);
  Status issue_send(int i, Endpoint* ep, Endpoint* data_ep, bool staged);
  Status issue_recv(int i, Endpoint* ep, Endpoint* data_ep, bool staged);
  // Device memory (executor_device.cc): copies and reductions on the GPU runner's stream, and
  // the host copies of staged transfers.
  bool on_device() const { return sched_->device() >= 0; }
  Status device_compute(const Task& t);
  Status stage_out(const Task& t, Slot& s);  // send: device -> bounce
  Status stage_buffer(const Task& t, Slot& s);
  Status stage_in(const Task& t, Slot& s);   // received: bounce -> device
  Status flush_gdr_writes();                 // after a GPUDirect receive (DeviceIo)
  struct Allocation {
    uintptr_t base = 0, size = 0;  // {0, 0} when CUDA cannot say
  };
  Allocation allocation_of(const void* p) const;  // the CUDA allocation holding p
  Status test(int i, bool* complete);
  Status test_header(int i, const Task& t, Slot& s);
  Status check_header(int i, const Task& t, size_t size);  // the peer's descriptor vs ours
  Status fail_recv(Status st, const Task& t);
  Status fail(Status st, const Task& t, const char* action);
  std::string exited_note(int peer);
  Status timeout_error() const;
  std::string what() const;  // "allreduce #7 on comm 'world'", built only for messages
  std::string waiting_for() const;  // "waiting for rank 3 of 'world' (...)"

  const Schedule* sched_;
  PeerLinks* links_;
  Departures* page_;  // links_->context().departures(), noted as this rank polls (may be null)
  OpDesc desc_;
  std::vector<Slot> slots_;
  std::vector<uint8_t> complete_;
  std::vector<OpDesc> hdrs_;         // per task: header sent or received
  std::vector<uint8_t> link_sent_, link_recv_;  // per peer: descriptor done on this link
  std::vector<uint8_t> link_ok_;     // per peer: its descriptor arrived and matched
  std::vector<int> inflight_;
  // The operation's transfer buffers as a few contiguous ranges, held at the context while
  // the operation runs on a provider that registers memory, so each range is registered
  // once per connection rather than once per chunk (Context::hold_range). Released when the
  // operation completes or fails; never left behind, since a range held after the caller
  // frees its memory would keep a registration of the old pages for the next operation.
  std::vector<std::pair<const void*, size_t>> held_;
  bool holding_ = false;
  void hold_ranges();
  size_t next_ = 0;
  int64_t last_progress_ns_;
  Status check_members(int64_t now);

  int64_t timeout_ms_;
  uint32_t calls_ = 0;  // progress() calls that did not finish: the clock is read every 32nd
  bool moved_since_clock_ = false;  // last_progress_ns_ is stamped at the next clock read
  int64_t next_member_check_ns_ = 0;
};

}  // namespace zcx::coll
