// Context set-up: providers, the handle exchange, provider choice per peer, endpoints.
// Design notes are in base/context_impl.h.
#include "base/context_impl.h"

#include "base/registry.h"
#include "common/bootstrap/bootstrap_wire.h"
#include "common/check.h"
#include "common/config_vars.h"
#include "common/wire.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

namespace zcx {
namespace {

// Allgathered per rank: host id u64, departure page fd i32 and token u64, activity address
// (bootwire::kAddrBytes), count u32, then kMaxContextProviders x (id u8, handle).
constexpr size_t kRecordBytes = 8 + 4 + 8 + bootwire::kAddrBytes + 4 +
                                kMaxContextProviders * (1 + ZCX_HANDLE_BYTES);

uint64_t hash64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::string local_host_identity() {
  std::string boot_id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot_id);
  return local_host_name() + "/" + boot_id;
}

Status Endpoint::isend_device(const void*, size_t, int, Request**) {
  return set_error(Status::kUnsupported, kLogNet, "this endpoint does not move GPU memory");
}
Status Endpoint::irecv_device(void*, size_t, int, Request**) {
  return set_error(Status::kUnsupported, kLogNet, "this endpoint does not move GPU memory");
}

Status Context::create(std::unique_ptr<Bootstrap> bs, std::unique_ptr<Context>* out) {
  return create(std::move(bs), ContextOptions{}, out);
}

Status Context::create(std::unique_ptr<Bootstrap> bs, const ContextOptions& options,
                       std::unique_ptr<Context>* out) {
  ZCX_CHECK_ARG(bs != nullptr && out != nullptr, kLogInit, "context create: NULL argument");
  auto ctx = std::make_unique<ContextImpl>(std::move(bs));
  ZCX_TRY(ctx->setup(options));
  *out = std::move(ctx);
  return Status::kSuccess;
}

Status ContextImpl::setup(const ContextOptions& options) {
  ZCX_TRY(open_providers(options));
  std::string identity = options.host_identity.empty() ? local_host_identity()
                                                       : options.host_identity;
  departures_.open_own();
  SockAddr activity;  // len 0: this rank answers no activity queries
  if (!ok(activity_server_.listen(&activity))) {
    ZCX_INFO(kLogInit, "rank %d: answers no activity queries: %s", rank(), last_error());
    activity = SockAddr{};
  }
  ZCX_TRY(exchange_records(identity, activity));
  watch_host_peers();
  start_activity_server();
  return Status::kSuccess;
}

// Only a job that spans hosts answers activity queries (a thread); elsewhere the pages
// say it all. Without the thread the listener is closed, so that askers see a refusal
// rather than silence.
void ContextImpl::start_activity_server() {
  const uint64_t my_host = ranks_[static_cast<size_t>(rank())].host_id;
  const bool spans_hosts = std::any_of(ranks_.begin(), ranks_.end(),
                                       [&](const RemoteRank& r) { return r.host_id != my_host; });
  if (spans_hosts) {
    if (ok(activity_server_.start(&departures_, bs_->secret(), rank()))) return;
    ZCX_WARN(kLogInit, "rank %d: answers no activity queries: %s", rank(), last_error());
  }
  activity_server_.stop();
}

std::vector<PeerActivity> ContextImpl::ask_activity(const std::vector<int>& peers,
                                                    int timeout_ms) {
  std::vector<SockAddr> addrs;
  for (int p : peers)
    addrs.push_back(p >= 0 && p < nranks() ? ranks_[static_cast<size_t>(p)].activity : SockAddr{});
  return zcx::ask_activity(peers, addrs, bs_->secret(), rank(), timeout_ms);
}

// Maps the departure page of every other rank with our host identity (base/departures.h).
// The tokens are needed only here: none is kept afterwards.
void ContextImpl::watch_host_peers() {
  const uint64_t my_host = ranks_[static_cast<size_t>(rank())].host_id;
  for (int r = 0; r < nranks(); ++r) {
    RemoteRank& them = ranks_[static_cast<size_t>(r)];
    if (r != rank() && them.host_id == my_host)
      departures_.watch(r, bs_->pid(r), them.departure_fd, them.departure_token);
    them.departure_fd = -1;
    them.departure_token = 0;
  }
}

// Opens every provider that has a device; one that fails to initialise is skipped (INFO),
// so a job still runs over the others.
Status ContextImpl::open_providers(const ContextOptions& options) {
  std::vector<const zcx_provider_ops_t*> list =
      options.providers.empty() ? providers_selected() : options.providers;
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = rank();
  self.nranks = nranks();
  self.secret = bs_->secret();
  snprintf(self.host, sizeof self.host, "%s", bs_->host(rank()).c_str());
  for (const zcx_provider_ops_t* ops : list) {
    if (providers_.size() == kMaxContextProviders) break;
    ProviderSlot p;
    p.ops = ops;
    int ndev = 0;
    zcx_status_t rc = ops->init(&self, &p.ctx);
    if (rc == ZCX_SUCCESS) rc = ops->devices(p.ctx, &ndev);
    if (rc == ZCX_SUCCESS && ndev > 0) rc = ops->listen(p.ctx, 0, p.handle, &p.listen_comm);
    if (rc != ZCX_SUCCESS || ndev <= 0 || p.listen_comm == nullptr) {
      ZCX_INFO(kLogInit, "rank %d: provider %s not used (%s)", rank(), ops->name,
               rc != ZCX_SUCCESS ? last_error() : "no device");
      if (p.ctx) (void)ops->finalize(p.ctx);
      continue;
    }
    p.accepted.assign(static_cast<size_t>(nranks()), nullptr);
    zcx_device_props_t props{};
    if (ops->get_properties(p.ctx, 0, &props) == ZCX_SUCCESS) {
      p.mem_kinds = props.mem_kinds;
      p.needs_flush = props.needs_flush != 0;
    }
    providers_.push_back(std::move(p));
  }
  return Status::kSuccess;
}

Status ContextImpl::exchange_records(const std::string& host_identity,
                                     const SockAddr& activity) {
  std::vector<uint8_t> all(kRecordBytes * static_cast<size_t>(nranks()));
  wire::Writer w(all.data() + kRecordBytes * static_cast<size_t>(rank()), kRecordBytes);
  w.u64(hash64(host_identity));
  w.u32(static_cast<uint32_t>(departures_.own_fd()));
  w.u64(departures_.own_token());
  uint8_t addr[bootwire::kAddrBytes] = {};
  if (activity.len != 0) bootwire::encode_addr(activity, addr);
  w.bytes(addr, sizeof addr);
  w.u32(static_cast<uint32_t>(providers_.size()));
  for (const ProviderSlot& p : providers_) {
    w.u8(p.ops->id);
    w.bytes(p.handle, ZCX_HANDLE_BYTES);
  }
  Status s = bs_->allgather(all.data(), kRecordBytes);
  if (failed(s))
    return set_error(s, kLogInit, "rank %d: exchanging provider handles failed: %s", rank(),
                     last_error());
  ranks_.resize(static_cast<size_t>(nranks()));
  for (int r = 0; r < nranks(); ++r) {
    wire::Reader rd(all.data() + kRecordBytes * static_cast<size_t>(r), kRecordBytes);
    RemoteRank& rr = ranks_[static_cast<size_t>(r)];
    rr.host_id = rd.u64();
    rr.departure_fd = static_cast<int32_t>(rd.u32());
    rr.departure_token = rd.u64();
    uint8_t addr[bootwire::kAddrBytes];
    rd.bytes(addr, sizeof addr);
    if (!bootwire::decode_addr(addr, &rr.activity)) rr.activity = SockAddr{};  // none
    uint32_t count = rd.u32();
    if (count > kMaxContextProviders)
      return set_error(Status::kProtocol, kLogInit, "%s sent %u providers (max %zu)",
                       who(r).c_str(), count, kMaxContextProviders);
    for (uint32_t i = 0; i < count; ++i) {
      uint8_t id = rd.u8();
      std::vector<uint8_t> handle(ZCX_HANDLE_BYTES);
      rd.bytes(handle.data(), handle.size());
      rr.providers.emplace_back(id, std::move(handle));
    }
  }
  ZCX_INFO(kLogInit, "rank %d: context up with providers [%s]", rank(), provider_list(rank()).c_str());
  return Status::kSuccess;
}

std::string ContextImpl::provider_list(int r) const {
  std::string out;
  for (const auto& [id, handle] : ranks_[static_cast<size_t>(r)].providers) {
    // This rank's providers, then every one built: the peer may have chosen others
    // (ZCX_PROVIDERS differs between ranks), and their names say what to fix.
    std::string name = "id" + std::to_string(id);
    for (const zcx_provider_ops_t* ops : providers_built())
      if (ops->id == id) name = ops->name;
    for (const ProviderSlot& p : providers_)
      if (p.ops->id == id) name = p.ops->name;
    out += (out.empty() ? "" : ",") + name;
  }
  return out;
}

// The first provider in the lower rank's order that both ranks have (LOCAL_ONLY ones only
// on the same host), restricted to `name` when given; DEVICE_ONLY ones only by name.
bool ContextImpl::find_provider(int peer, const std::string& name, size_t* slot) const {
  const RemoteRank& me = ranks_[static_cast<size_t>(rank())];
  const RemoteRank& them = ranks_[static_cast<size_t>(peer)];
  const RemoteRank& order = rank() <= peer ? me : them;
  const RemoteRank& other = rank() <= peer ? them : me;
  bool same_host = me.host_id == them.host_id;
  for (const auto& [id, handle] : order.providers) {
    bool both = false;
    for (const auto& o : other.providers) both |= o.first == id;
    for (size_t i = 0; both && i < providers_.size(); ++i) {
      const zcx_provider_ops_t* ops = providers_[i].ops;
      if (ops->id != id || (!name.empty() && name != ops->name)) continue;
      if ((ops->flags & ZCX_PROVIDER_LOCAL_ONLY) && !same_host) continue;
      if ((ops->flags & ZCX_PROVIDER_DEVICE_ONLY) && name.empty()) continue;
      *slot = i;
      return true;
    }
  }
  return false;
}

bool ContextImpl::reaches(int peer, const std::string& provider) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  size_t slot = 0;
  return peer >= 0 && peer < nranks() && find_provider(peer, provider, &slot);
}

Status ContextImpl::choose_provider(int peer, const std::string& name, size_t* slot) const {
  if (find_provider(peer, name, slot)) return Status::kSuccess;
  const bool same_host = ranks_[static_cast<size_t>(rank())].host_id ==
                         ranks_[static_cast<size_t>(peer)].host_id;
  const std::string mine = provider_list(rank());
  // None at all here: a setting (ZCX_PROVIDERS, ZCX_SOCKET_IFNAME, ZCX_IB_HCA) or a missing
  // library left every provider without a device; zcx-info prints each one's reason.
  const char* advice = mine.empty() ? "this rank found no provider with a device: `zcx-info` "
                                      "says why for each, under the same ZCX_ settings"
                                    : "check ZCX_PROVIDERS and that the providers have devices "
                                      "on both hosts";
  return set_error(Status::kNoDevice, kLogInit,
                   "rank %d: no provider%s%s reaches %s (this rank has [%s], the peer [%s]%s); %s",
                   rank(), name.empty() ? "" : " named ", name.c_str(), who(peer).c_str(),
                   mine.c_str(), provider_list(peer).c_str(),
                   same_host ? "" : "; shm/cuda_ipc only reach the same host", advice);
}

Status ContextImpl::endpoint(int peer, Endpoint** ep, const std::string& provider) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ZCX_CHECK_ARG(ep != nullptr, kLogInit, "endpoint: output is NULL");
  ZCX_CHECK_ARG(peer >= 0 && peer < nranks(), kLogInit, "endpoint: peer %d out of range [0,%d)",
                peer, nranks());
  ZCX_TRY(check_usable());
  size_t slot = 0;
  ZCX_TRY(choose_provider(peer, provider, &slot));
  auto key = std::make_pair(peer, slot);
  auto it = endpoints_.find(key);
  if (it == endpoints_.end()) {
    auto made = std::make_unique<EndpointImpl>(this, peer, slot, nullptr);
    ZCX_TRY(open_endpoint(made.get()));
    it = endpoints_.emplace(key, std::move(made)).first;
  }
  *ep = it->second.get();
  return Status::kSuccess;
}

// Picks the endpoint's duplex role (context_impl.h) and connects unless it is the higher
// rank of a duplex pair. The lower rank watches for a reverse whatever its own
// ZCX_DUPLEX_WAIT says: a peer that reverses with a different setting is still received.
Status ContextImpl::open_endpoint(EndpointImpl* ep) {
  const zcx_provider_ops_t* ops = providers_[ep->slot_].ops;
  const bool pairs = ops->connect_reverse && ops->accept_reverse && ep->peer_ != rank();
  const int64_t wait = params::duplex_wait_ns();
  if (!pairs || rank() < ep->peer_ || wait == 0) {
    if (pairs && rank() < ep->peer_) ep->duplex_ = EndpointImpl::Duplex::kAwaitReverse;
    return connect_send(ep->peer_, ep->slot_, &ep->send_comm_);
  }
  ep->duplex_ = EndpointImpl::Duplex::kReverse;
  ep->open_by_ns_ = now_ns() + wait;
  return open_send(ep);
}

// The higher rank's send comm: the reverse of the lower rank's connection once accepted;
// past ZCX_DUPLEX_WAIT without it, a connection of its own (bounded by ZCX_TIMEOUT). Leaves
// send_comm_ null meanwhile, so the sends wait unposted.
Status ContextImpl::open_send(EndpointImpl* ep) {
  ProviderSlot& p = providers_[ep->slot_];
  void* recv = p.accepted[static_cast<size_t>(ep->peer_)];
  const bool reverse = ep->duplex_ == EndpointImpl::Duplex::kReverse;
  if (reverse && recv == nullptr) {
    ZCX_TRY(accept_pending(p));
    recv = p.accepted[static_cast<size_t>(ep->peer_)];
  }
  zcx_status_t rc = ZCX_SUCCESS;
  if (reverse && recv != nullptr) {
    rc = p.ops->connect_reverse(recv, &ep->send_comm_);
  } else if (reverse && now_ns() < ep->open_by_ns_) {
    return Status::kSuccess;
  } else {
    if (reverse) {
      ZCX_INFO(kLogNet, "rank %d: no %s connection from %s within ZCX_DUPLEX_WAIT; "
               "connecting one of our own", rank(), p.ops->name, who(ep->peer_).c_str());
      ep->duplex_ = EndpointImpl::Duplex::kNone;
      ep->open_by_ns_ = now_ns() + params::timeout_ms() * 1000000;
    }
    rc = p.ops->connect(p.ctx, 0, peer_handle(ep->peer_, ep->slot_), &ep->send_comm_);
  }
  if (rc != ZCX_SUCCESS)
    return set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s connect to %s failed: %s",
                     rank(), p.ops->name, who(ep->peer_).c_str(), last_error());
  if (ep->send_comm_ != nullptr) {
    ep->duplex_ = EndpointImpl::Duplex::kNone;
  } else if (ep->duplex_ == EndpointImpl::Duplex::kNone && now_ns() > ep->open_by_ns_) {
    return set_error(Status::kTimeout, kLogNet, "rank %d: %s connection to %s not "
                     "established within ZCX_TIMEOUT", rank(), p.ops->name, who(ep->peer_).c_str());
  }
  return Status::kSuccess;
}

const uint8_t* ContextImpl::peer_handle(int peer, size_t slot) const {
  for (const auto& [id, h] : ranks_[static_cast<size_t>(peer)].providers)
    if (id == providers_[slot].ops->id) return h.data();
  return nullptr;  // not reached: choose_provider picked a provider the peer has
}

// connect() never blocks; loop on it (accepting incoming connections meanwhile so two
// ranks connecting to each other both make progress) until ZCX_TIMEOUT.
Status ContextImpl::connect_send(int peer, size_t slot, void** send_comm) {
  ProviderSlot& p = providers_[slot];
  const uint8_t* handle = peer_handle(peer, slot);
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (int spins = 0;; ++spins) {
    zcx_status_t rc = p.ops->connect(p.ctx, 0, handle, send_comm);
    if (rc != ZCX_SUCCESS)
      return set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s connect to %s failed: %s",
                       rank(), p.ops->name, who(peer).c_str(), last_error());
    if (*send_comm != nullptr) return Status::kSuccess;
    ZCX_TRY(progress());
    if (dl.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "rank %d: %s connection to %s not established within ZCX_TIMEOUT (is it "
                       "alive? is its address reachable from %s?)",
                       rank(), p.ops->name, who(peer).c_str(), bs_->host(rank()).c_str());
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Listeners are polled at most every kAcceptPollNs: an accept() that finds nothing still
// costs the kernel a socket allocation and free (~2 us per listener), which, paid on every
// progress call, made an 8-byte allreduce 100x slower than the transfer. The clock itself is
// read once per 16 calls (on the small-message path it was the largest single cost). A
// connecting peer waits at most about that long for the next poll.
Status ContextImpl::progress() {
  constexpr int64_t kAcceptPollNs = 200'000;
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ZCX_TRY(check_usable());
  if (++progress_calls_ % 16 == 0) {
    const int64_t now = now_ns();
    if (now - last_accept_poll_ns_ >= kAcceptPollNs) {
      last_accept_poll_ns_ = now;
      for (ProviderSlot& p : providers_) ZCX_TRY(accept_pending(p));
    }
  }
  for (auto& [key, ep] : endpoints_) {
    flush_unposted(ep.get(), false);
    flush_unposted(ep.get(), true);
  }
  return Status::kSuccess;
}

Status ContextImpl::accept_pending(ProviderSlot& p) {
  for (int i = 0; i < 16; ++i) {
    void* comm = nullptr;
    zcx_status_t rc = p.ops->accept(p.listen_comm, &comm);
    if (rc != ZCX_SUCCESS)
      return set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s accept failed: %s", rank(),
                       p.ops->name, last_error());
    if (comm == nullptr) break;
    zcx_peer_info_t info{};
    rc = p.ops->peer_info ? p.ops->peer_info(comm, &info) : ZCX_ERR_UNSUPPORTED;
    if (rc != ZCX_SUCCESS || info.rank < 0 || info.rank >= nranks() ||
        p.accepted[static_cast<size_t>(info.rank)] != nullptr) {
      ZCX_WARN(kLogNet, "rank %d: dropping a %s connection claiming rank %d (%s)", rank(),
               p.ops->name, info.rank,
               rc != ZCX_SUCCESS ? "no peer info" : "out of range or already connected");
      (void)p.ops->close_recv(comm);
      continue;
    }
    p.accepted[static_cast<size_t>(info.rank)] = comm;
    ZCX_TRACE(kLogNet, "rank %d: accepted %s connection from %s", rank(), p.ops->name,
              who(info.rank).c_str());
  }
  accept_reverses(static_cast<size_t>(&p - providers_.data()));
  return Status::kSuccess;
}

// The lower rank of a duplex pair: its receive side comes back over its own connection. A
// failure there fails the receives from that peer only (as a failed accept would leave
// them), not the whole context.
void ContextImpl::accept_reverses(size_t slot) {
  ProviderSlot& p = providers_[slot];
  for (auto& [key, ep] : endpoints_) {
    if (key.second != slot || ep->duplex_ != EndpointImpl::Duplex::kAwaitReverse) continue;
    void*& recv = p.accepted[static_cast<size_t>(ep->peer_)];
    zcx_status_t rc = recv ? ZCX_SUCCESS : p.ops->accept_reverse(ep->send_comm_, &recv);
    if (rc != ZCX_SUCCESS) {
      std::string why = "receiving from " + who(ep->peer_) + ": " + last_error();
      ZCX_WARN(kLogNet, "rank %d: %s", rank(), why.c_str());
      ep->recv_error_.record(static_cast<Status>(rc), std::move(why));
    }
    if (recv != nullptr || rc != ZCX_SUCCESS) ep->duplex_ = EndpointImpl::Duplex::kNone;
  }
}

Status ContextImpl::check_usable() const {
  if (aborted_) return set_error_quiet(Status::kAborted, "the context was aborted");
  return Status::kSuccess;
}

void ContextImpl::abort() {
  if (aborted_.exchange(true)) return;
  bs_->abort();
}

ContextImpl::~ContextImpl() {
  // Before the connections close: a peer that sees them close, or this process gone, must
  // already read that this rank left cleanly. Requests still open are dropped, which a peer
  // may be waiting for: that is no clean departure either.
  if (!aborted_ && !unclean_.load(std::memory_order_relaxed) && live_requests_.empty())
    departures_.mark_left();
  for (Request* r : live_requests_) delete r;  // close drops what the providers hold
  live_requests_.clear();
  release_registrations(nullptr, 0);
  for (auto& [key, ep] : endpoints_)
    if (ep->send_comm_) (void)providers_[key.second].ops->close_send(ep->send_comm_);
  for (ProviderSlot& p : providers_) {
    for (void* comm : p.accepted)
      if (comm) (void)p.ops->close_recv(comm);
    if (p.listen_comm) (void)p.ops->close_listen(p.listen_comm);
    (void)p.ops->finalize(p.ctx);
  }
}

}  // namespace zcx
