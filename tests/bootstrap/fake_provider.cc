#include "bootstrap/fake_provider.h"

#include "base/handle.h"
#include "common/simulated_cuda.h"
#include "common/status.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace zcx::test {
namespace {

struct Message {
  std::vector<uint8_t> data;
};

enum class Gdr { kNone, kFlushed, kUnflushed };  // GPU memory; with iflush or without

struct Channel {
  std::mutex mu;
  std::deque<Message> queue;
  bool dma = false;  // fakegdr: copies reach GPU memory, as a NIC's DMA does
};

using CopyFn = void (*)(void*, const void*, size_t);

// The simulated CUDA runtime's fake_cuda_dma_copy (tests/gpu/fake_cuda), whose device memory
// the host cannot touch but a simulated device can; null until that runtime is loaded.
CopyFn simulated_dma_copy() {
  static std::atomic<CopyFn> found{nullptr};
  if (CopyFn fn = found.load()) return fn;
  CopyFn fn = simulated_cuda_symbol<CopyFn>("fake_cuda_dma_copy");
  if (fn != nullptr) found.store(fn);
  return fn;
}

void channel_copy(const Channel& ch, void* dst, const void* src, size_t n) {
  CopyFn dma = ch.dma ? simulated_dma_copy() : nullptr;
  if (dma != nullptr) dma(dst, src, n);
  else memcpy(dst, src, n);
}

struct Ctx {
  const zcx_provider_ops_t* ops;
  zcx_provider_init_t self;
  int connect_calls = 0;
};

struct Req;
struct Recv {
  std::shared_ptr<Channel> ch;
  zcx_peer_info_t peer;
  std::set<Req*> open;       // receives not yet reported done: dropped by close
  std::deque<Req*> waiting;  // posted, not yet given a message: matched in posting order
};

struct Listen {
  uint64_t id;
  std::deque<Recv*> pending;
};

struct Send {
  const zcx_provider_ops_t* ops;
  std::shared_ptr<Channel> ch;
  int isend_calls = 0;
};

struct Mr {
  void* data;
  size_t size;
};

struct Req {
  bool is_send;
  Recv* recv = nullptr;
  void* buf = nullptr;
  size_t cap = 0;
  size_t sent = 0;              // send: its size; receive: the size of its message
  bool matched = false;         // receive: its message arrived
  bool too_big = false;         // ... and did not fit
};

std::mutex g_mu;
std::map<uint64_t, Listen*> g_listens;
uint64_t g_next_listen = 1;


zcx_status_t fk_init(const zcx_provider_init_t* self, void** ctx) {
  fake_stats().open_ctxs++;
  *ctx = new Ctx{nullptr, *self};
  return ZCX_SUCCESS;
}
zcx_status_t fk_finalize(void* ctx) {
  fake_stats().open_ctxs--;
  delete static_cast<Ctx*>(ctx);
  return ZCX_SUCCESS;
}
zcx_status_t fk_devices(void*, int* n) {
  *n = 1;
  return ZCX_SUCCESS;
}
zcx_status_t fk_nodevices(void*, int* n) {
  *n = 0;
  return ZCX_SUCCESS;
}

template <Gdr kGdr>
zcx_status_t fk_props(void*, int, zcx_device_props_t* p) {
  memset(p, 0, sizeof *p);
  strcpy(p->name, "fake0");
  p->mem_kinds = ZCX_MEM_HOST | (kGdr != Gdr::kNone ? ZCX_MEM_CUDA : 0);
  p->needs_flush = kGdr == Gdr::kFlushed;
  return ZCX_SUCCESS;
}

template <uint8_t kId>
zcx_status_t fk_listen(void*, int, void* handle, void** listen_comm) {
  auto* l = new Listen;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    l->id = g_next_listen++;
    g_listens[l->id] = l;
  }
  fake_stats().open_comms++;
  if (failed(handle_encode(kId, &l->id, sizeof l->id, handle))) return ZCX_ERR_INTERNAL;
  *listen_comm = l;
  return ZCX_SUCCESS;
}

template <uint8_t kId, Gdr kGdr>
zcx_status_t fk_connect(void* vctx, int, const void* handle, void** send_comm) {
  auto* ctx = static_cast<Ctx*>(vctx);
  *send_comm = nullptr;
  uint64_t id = 0;
  size_t len = 0;
  if (failed(handle_decode(handle, kId, &id, sizeof id, &len)) || len != sizeof id)
    return ZCX_ERR_INVALID_ARG;
  if (++ctx->connect_calls % 3 != 0) {  // "not yet" twice, then connected
    fake_stats().connect_pending++;
    return ZCX_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_listens.find(id);
  if (it == g_listens.end()) return ZCX_ERR_REMOTE;
  auto ch = std::make_shared<Channel>();
  ch->dma = kGdr != Gdr::kNone;
  auto* r = new Recv{ch, {ctx->self.rank, 0, {}}, {}, {}};
  memcpy(r->peer.host, ctx->self.host, sizeof r->peer.host);
  r->peer.host[sizeof r->peer.host - 1] = 0;
  it->second->pending.push_back(r);
  *send_comm = new Send{nullptr, ch};
  fake_stats().open_comms += 2;
  return ZCX_SUCCESS;
}

zcx_status_t fk_accept(void* listen_comm, void** recv_comm) {
  auto* l = static_cast<Listen*>(listen_comm);
  std::lock_guard<std::mutex> lock(g_mu);
  *recv_comm = nullptr;
  if (l->pending.empty()) return ZCX_SUCCESS;
  *recv_comm = l->pending.front();
  l->pending.pop_front();
  return ZCX_SUCCESS;
}

zcx_status_t fk_peer_info(void* comm, zcx_peer_info_t* info) {
  *info = static_cast<Recv*>(comm)->peer;
  return ZCX_SUCCESS;
}

template <Gdr kGdr>
zcx_status_t fk_reg(void*, void* data, size_t size, int kind, void** mh) {
  bool cuda = kGdr != Gdr::kNone && kind == ZCX_MEM_CUDA;
  if ((kind != ZCX_MEM_HOST && !cuda) || data == nullptr) return ZCX_ERR_INVALID_ARG;
  fake_stats().registrations++;
  if (cuda) fake_stats().cuda_registrations++;
  *mh = new Mr{data, size};
  return ZCX_SUCCESS;
}
zcx_status_t fk_dereg(void*, void* mh) {
  fake_stats().deregistrations++;
  delete static_cast<Mr*>(mh);
  return ZCX_SUCCESS;
}

bool covers(void* mh, const void* data, size_t size) {
  auto* mr = static_cast<Mr*>(mh);
  auto lo = reinterpret_cast<uintptr_t>(mr->data), p = reinterpret_cast<uintptr_t>(data);
  return p >= lo && p - lo + size <= mr->size;
}

template <bool kReg>
zcx_status_t fk_isend(void* send_comm, void* data, size_t size, int, void* mh, void** request) {
  auto* s = static_cast<Send*>(send_comm);
  *request = nullptr;
  if (kReg && size > 0 && (mh == nullptr || !covers(mh, data, size))) return ZCX_ERR_INVALID_ARG;
  if (++s->isend_calls % 2 == 1) {  // every other call: "retry later"
    fake_stats().send_retries++;
    return ZCX_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(s->ch->mu);
  Message m{std::vector<uint8_t>(size)};
  if (size > 0) channel_copy(*s->ch, m.data.data(), data, size);
  s->ch->queue.push_back(std::move(m));
  *request = new Req{true, nullptr, nullptr, 0, size};
  return ZCX_SUCCESS;
}

template <bool kReg>
zcx_status_t fk_irecv(void* recv_comm, int n, void** data, size_t* sizes, int*, void** mhs,
                      void** request) {
  if (n != 1) return ZCX_ERR_UNSUPPORTED;
  if (kReg && sizes[0] > 0 && (mhs == nullptr || mhs[0] == nullptr || !covers(mhs[0], data[0], sizes[0])))
    return ZCX_ERR_INVALID_ARG;
  auto* recv = static_cast<Recv*>(recv_comm);
  auto* req = new Req{false, recv, data[0], sizes[0], 0};
  recv->open.insert(req);
  recv->waiting.push_back(req);
  *request = req;
  return ZCX_SUCCESS;
}

// Gives queued messages to the oldest waiting receives (posting order, like a real provider;
// a receive tested before an older one must not take the older one's message).
void match_waiting(Recv* recv) {
  std::lock_guard<std::mutex> lock(recv->ch->mu);
  while (!recv->ch->queue.empty() && !recv->waiting.empty()) {
    Message m = std::move(recv->ch->queue.front());
    recv->ch->queue.pop_front();
    Req* r = recv->waiting.front();
    recv->waiting.pop_front();
    r->matched = true;
    r->sent = m.data.size();
    r->too_big = m.data.size() > r->cap;
    if (!r->too_big && !m.data.empty())
      channel_copy(*recv->ch, r->buf, m.data.data(), m.data.size());
  }
}

zcx_status_t fk_test(void* request, int* done, size_t* sizes) {
  auto* r = static_cast<Req*>(request);
  *done = 0;
  if (!r->is_send) {
    match_waiting(r->recv);
    if (!r->matched) return ZCX_SUCCESS;
    r->recv->open.erase(r);
  }
  const bool too_big = r->too_big;
  if (too_big)
    (void)set_error_quiet(Status::kInvalidUsage, "message of %zu bytes into a %zu-byte receive",
                          r->sent, r->cap);
  sizes[0] = r->sent;
  *done = 1;
  delete r;
  return too_big ? ZCX_ERR_INVALID_USAGE : ZCX_SUCCESS;
}

// The flush completes at its first test. A real device reads the buffer back (ib over RDMA).
zcx_status_t fk_iflush(void* recv_comm, int n, void** data, size_t* sizes, void** mhs,
                       void** request) {
  *request = nullptr;
  if (recv_comm == nullptr || n != 1 || mhs == nullptr || !covers(mhs[0], data[0], sizes[0]))
    return ZCX_ERR_INVALID_ARG;
  fake_stats().flushes++;
  *request = new Req{true, nullptr, nullptr, 0, 0};
  return ZCX_SUCCESS;
}

zcx_status_t fk_close_send(void* c) {
  fake_stats().open_comms--;
  delete static_cast<Send*>(c);
  return ZCX_SUCCESS;
}
zcx_status_t fk_close_recv(void* c) {
  fake_stats().open_comms--;
  for (Req* r : static_cast<Recv*>(c)->open) delete r;
  delete static_cast<Recv*>(c);
  return ZCX_SUCCESS;
}
zcx_status_t fk_close_listen(void* c) {
  auto* l = static_cast<Listen*>(c);
  std::lock_guard<std::mutex> lock(g_mu);
  g_listens.erase(l->id);
  for (Recv* r : l->pending) {
    fake_stats().open_comms--;
    delete r;
  }
  fake_stats().open_comms--;
  delete l;
  return ZCX_SUCCESS;
}

template <uint8_t kId, uint32_t kFlags, bool kHasDevice, Gdr kGdr = Gdr::kNone>
const zcx_provider_ops_t* make_ops(const char* name) {
  constexpr bool kReg = kFlags & ZCX_PROVIDER_NEEDS_REG;
  static const zcx_provider_ops_t ops = {
      sizeof(zcx_provider_ops_t), ZCX_PROVIDER_ABI_VERSION, name, kId, kFlags,
      fk_init, fk_finalize, kHasDevice ? fk_devices : fk_nodevices, fk_props<kGdr>,
      fk_listen<kId>, fk_connect<kId, kGdr>, fk_accept, fk_peer_info,
      fk_reg<kGdr>, nullptr, fk_dereg,
      fk_isend<kReg>, fk_irecv<kReg>, kGdr == Gdr::kFlushed ? fk_iflush : nullptr, fk_test,
      fk_close_send, fk_close_recv, fk_close_listen, nullptr, nullptr};
  return &ops;
}

}  // namespace

FakeStats& fake_stats() {
  static FakeStats s;
  return s;
}

const zcx_provider_ops_t* fake_provider() { return make_ops<200, 0, true>("fake"); }
const zcx_provider_ops_t* fake_local_provider() {
  return make_ops<201, ZCX_PROVIDER_LOCAL_ONLY | ZCX_PROVIDER_NEEDS_REG, true>("fakelocal");
}
const zcx_provider_ops_t* fake_nodev_provider() { return make_ops<202, 0, false>("nodev"); }
const zcx_provider_ops_t* fake_gdr_provider() {
  return make_ops<203, ZCX_PROVIDER_NEEDS_REG, true, Gdr::kFlushed>("fakegdr");
}
const zcx_provider_ops_t* fake_gdr_noflush_provider() {
  return make_ops<204, ZCX_PROVIDER_NEEDS_REG, true, Gdr::kUnflushed>("fakegdr-noflush");
}

}  // namespace zcx::test
