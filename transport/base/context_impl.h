// The Context implementation (not a public header; base/context.h is the interface).
//
// create(): each selected provider with >= 1 device is initialised and listens on device 0;
// every rank allgathers one PeerRecord (host identity + its providers' handles in its
// ZCX_PROVIDERS order). For a pair of ranks the provider is the first one in the LOWER rank's
// order that both have (so both sides pick the same one even if their ZCX_PROVIDERS differ);
// LOCAL_ONLY providers count only for peers with the same host identity.
// endpoint(): connects a send comm (a non-blocking connect loop bounded by ZCX_TIMEOUT,
// accepting incoming connections meanwhile). The receive direction is the peer's own send
// comm, accepted in progress() and matched to its rank by peer_info(); receives posted
// before it arrives wait in the request until it does.
// Duplex (a provider with connect_reverse, ZCX_DUPLEX_WAIT > 0): only the lower rank of a
// pair connects; the higher one sends back over that connection once it has accepted it
// (its sends wait unposted until then), and the lower one's receive side comes from
// accept_reverse on its own send comm. A lower rank that has not connected within
// ZCX_DUPLEX_WAIT gets a connection of the higher rank's own, as without duplex.
#pragma once

#include "base/context.h"
#include "base/departures.h"
#include "base/range_counts.h"

#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <deque>
#include <mutex>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace zcx {

inline constexpr size_t kMaxContextProviders = 8;
// Host transfers up to kBounceBytes over a provider that registers memory go through blocks
// of the context's own memory, registered once per connection: copying them costs less than
// registering the caller's bytes for one transfer (see Context::mem_register).
inline constexpr size_t kBounceBytes = 16 * 1024;
inline constexpr size_t kBounceSlabBlocks = 64;

struct ProviderSlot {
  const zcx_provider_ops_t* ops = nullptr;
  void* ctx = nullptr;
  void* listen_comm = nullptr;
  uint8_t handle[ZCX_HANDLE_BYTES] = {};
  std::vector<void*> accepted;   // per peer rank: its send comm's receiving side
  uint32_t mem_kinds = ZCX_MEM_HOST;  // of device 0 (get_properties), the one it listens on
  bool needs_flush = false;           // receives into GPU memory need iflush
};

struct RemoteRank {
  uint64_t host_id = 0;
  int32_t departure_fd = -1;  // its departure page (base/departures.h), -1: none; both
  uint64_t departure_token = 0;  // cleared once the page is mapped (watch_host_peers)
  SockAddr activity;  // where it answers activity queries (base/activity_server.h); len 0: none
  std::vector<std::pair<uint8_t, std::vector<uint8_t>>> providers;  // (id, handle) in its order
};

class ContextImpl;
class EndpointImpl;

// One provider registration; deregistered when the last owner lets go (the context's cache
// for a registered or held range, and every request posted with it).
struct Registration {
  const zcx_provider_ops_t* ops = nullptr;
  void* comm = nullptr;
  void* mh = nullptr;
  Registration(const zcx_provider_ops_t* o, void* c, void* m) : ops(o), comm(c), mh(m) {}
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() { (void)ops->dereg_mr(comm, mh); }
};

// A posted (or, after a provider's "retry later", not yet posted) send or receive.
class Request {
 public:
  EndpointImpl* ep = nullptr;
  bool is_send = false;
  void* buf = nullptr;
  size_t size = 0;
  int tag = 0;
  void* preq = nullptr;  // the provider's request once posted
  int mem_kind = ZCX_MEM_HOST;  // ZCX_MEM_CUDA: posted by isend_device / irecv_device
  std::shared_ptr<Registration> reg;  // providers that need one: kept until the request ends
  char* bounce = nullptr;  // a small host transfer's copy in a context block (kBounceBytes)
  void* wire() const { return bounce ? bounce : buf; }  // what the provider moves
  bool flushing = false;        // received; preq is now the provider's iflush
  size_t moved = 0;             // bytes the provider moved (a receive's, after its flush)
  Status error = Status::kSuccess;  // posting (or a test by another's wait) failed: reported
                                    // by the next test of it
  bool provider_done = false;       // completed when another request's wait tested it
  size_t provider_moved = 0;        // and moved this much
  std::string error_text;
};

class EndpointImpl final : public Endpoint {
 public:
  EndpointImpl(ContextImpl* ctx, int peer, size_t slot, void* send_comm)
      : ctx_(ctx), peer_(peer), slot_(slot), send_comm_(send_comm) {}
  int peer() const override { return peer_; }
  const zcx_provider_ops_t* provider() const override;
  Status isend(const void* buf, size_t size, int tag, Request** req) override;
  Status irecv(void* buf, size_t size, int tag, Request** req) override;
  bool moves_device_memory() const override;
  Status isend_device(const void* buf, size_t size, int tag, Request** req) override;
  Status irecv_device(void* buf, size_t size, int tag, Request** req) override;
  Status transfer(bool is_send, void* buf, size_t size, int tag, int mem_kind, Request** req);

  ContextImpl* ctx_;
  const int peer_;
  const size_t slot_;   // index into the context's providers
  void* send_comm_;     // null while a reverse send comm is awaited (kReverse)
  // Duplex roles (see the top of this file): kReverse, the higher rank, until its send comm
  // exists; kAwaitReverse, the lower rank, until its receive side does.
  enum class Duplex : uint8_t { kNone, kReverse, kAwaitReverse };
  Duplex duplex_ = Duplex::kNone;
  // kReverse: when to connect on its own; after that, while send_comm_ is still null (kNone:
  // connecting one of its own), that connect's deadline.
  int64_t open_by_ns_ = 0;
  StickyError recv_error_;  // accept_reverse failed: every receive from the peer fails
  // Requests not yet accepted by the provider ("retry later", or no recv comm yet), in
  // posting order per direction: a later request is never posted before an earlier one.
  std::deque<Request*> unposted_[2];  // [0] receives, [1] sends
};

class ContextImpl final : public Context {
 public:
  explicit ContextImpl(std::unique_ptr<Bootstrap> bs) : bs_(std::move(bs)) {}
  ~ContextImpl() override;
  Status setup(const ContextOptions& options);

  int rank() const override { return bs_->rank(); }
  int nranks() const override { return bs_->nranks(); }
  Bootstrap& bootstrap() override { return *bs_; }
  Status endpoint(int peer, Endpoint** ep, const std::string& provider) override;
  bool reaches(int peer, const std::string& provider) const override;
  Status test(Request* req, bool* done, size_t* size) override;
  Status wait(Request* req, size_t* size) override;
  Status progress() override;
  Status progress_requests(const Request* except) override;
  bool request_live(const Request* req) const override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return live_requests_.count(const_cast<Request*>(req)) != 0;
  }
  std::recursive_mutex& mutex() { return mu_; }
  void abort() override;
  Departures* departures() override { return &departures_; }
  std::vector<PeerActivity> ask_activity(const std::vector<int>& peers, int timeout_ms) override;
  void mark_unclean() override {
    unclean_.store(true, std::memory_order_relaxed);
    departures_.note_failed();
  }
  Status mem_register(void* buf, size_t size) override;
  Status mem_deregister(void* buf, size_t size) override;
  void hold_range(const void* buf, size_t size) override;
  void release_range(const void* buf, size_t size) override;

  // Used by EndpointImpl / requests (context_request.cc).
  Status post(Request* req);             // queues it behind earlier unposted ones
  void flush_unposted(EndpointImpl* ep, bool sends);
  Status post_now(Request* req);
  // The registration a request posts with: its registered or held range's (made once per
  // comm), else one of its own.
  Status registration_for(const Request* req, void* comm, std::shared_ptr<Registration>* out);
  // A receive into GPU memory that the provider's device wants flushed: posts the iflush
  // (the request then waits for it). *started false: nothing to flush.
  Status start_flush(Request* req, bool* started);
  // The provider's test of a posted request, or what an earlier progress_requests kept.
  zcx_status_t provider_test(Request* req, int* done, size_t* moved);
  // The error of a provider's failed test of req, naming the peer.
  Status test_failure(const Request* req, zcx_status_t rc);
  // Drops the cached registrations of ranges inside [buf, buf+size) that are no longer
  // registered or held (all when buf is null); a request that still uses one keeps it until
  // it ends.
  void release_registrations(const void* buf, size_t size);
  ProviderSlot& slot(size_t i) { return providers_[i]; }
  std::string who(int rank) const { return describe_peer(*bs_, rank); }
  Status check_usable() const;
  Request* new_request(EndpointImpl* ep, bool is_send, void* buf, size_t size, int tag,
                       int mem_kind);
  void free_request(Request* req);

 private:
  Status open_providers(const ContextOptions& options);
  Status exchange_records(const std::string& host_identity, const SockAddr& activity);
  Status choose_provider(int peer, const std::string& name, size_t* slot) const;
  bool covering_range(const void* buf, size_t size, RangeCounts::Range* range) const;
  // Counts one use of the range off; the last one drops its cached registrations. False when
  // the range has no count.
  bool uncount(RangeCounts& ranges, const void* buf, size_t size);
  bool bounces(const Request* req) const;
  char* take_bounce();
  Status register_range(size_t slot, void* comm, void* buf, size_t size, int kind, void** mh);
  bool find_provider(int peer, const std::string& name, size_t* slot) const;
  Status connect_send(int peer, size_t slot, void** send_comm);
  const uint8_t* peer_handle(int peer, size_t slot) const;
  Status open_endpoint(EndpointImpl* ep);
  Status open_send(EndpointImpl* ep);  // kReverse / dialing: leaves send_comm_ null meanwhile
  Status accept_pending(ProviderSlot& p);
  void accept_reverses(size_t slot);
  void watch_host_peers();
  void start_activity_server();
  std::string provider_list(int rank) const;

  std::unique_ptr<Bootstrap> bs_;
  std::vector<ProviderSlot> providers_;
  std::vector<RemoteRank> ranks_;
  std::map<std::pair<int, size_t>, std::unique_ptr<EndpointImpl>> endpoints_;  // (peer, slot)
  // (provider slot, comm, range start, range size) -> the range's registration on that comm
  std::map<std::tuple<size_t, void*, uintptr_t, size_t>, std::shared_ptr<Registration>>
      reg_cache_;
  RangeCounts user_regs_;  // mem_register
  RangeCounts held_;       // hold_range
  // Bounce blocks: slabs registered like mem_register ranges, freed after the connections.
  struct FreeSlab {
    void operator()(char* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<char, FreeSlab>> bounce_slabs_;
  std::vector<char*> bounce_free_;
  std::set<Request*> live_requests_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> unclean_{false};  // mark_unclean: this rank's exit is not a clean one
  Departures departures_;
  ActivityServer activity_server_;  // after departures_: stops before the page goes
  int64_t last_accept_poll_ns_ = 0;  // see progress()
  uint32_t progress_calls_ = 0;
  // Serialises calls from several threads. Recursive because endpoint() and wait() drive
  // progress(); wait() takes it per iteration so other threads interleave. abort() does not
  // take it (it must stay bounded while another thread waits).
  mutable std::recursive_mutex mu_;
};

// Host identity: the host name plus the kernel boot id (two containers with the same host
// name on different machines differ; two processes on one boot agree).
std::string local_host_identity();

}  // namespace zcx
