#include "transport/provider_util.h"

#include "common/clock.h"

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>

namespace zcx::test {

ProviderCtx::~ProviderCtx() {
  if (ctx != nullptr) (void)ops->finalize(ctx);
}

zcx_status_t ProviderCtx::init(const zcx_provider_ops_t* o, int rank, int nranks,
                               uint64_t secret) {
  ops = o;
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = rank;
  self.nranks = nranks;
  self.secret = secret;
  gethostname(self.host, sizeof self.host - 1);
  return ops->init(&self, &ctx);
}

zcx_status_t connect_pair(ProviderCtx& from, ProviderCtx& to, void** send_comm,
                          void** recv_comm, int timeout_ms) {
  char handle[ZCX_HANDLE_BYTES] = {};
  void* listen_comm = nullptr;
  *send_comm = *recv_comm = nullptr;
  zcx_status_t st = to.ops->listen(to.ctx, 0, handle, &listen_comm);
  if (st != ZCX_SUCCESS) return st;
  Deadline dl = Deadline::after_ms(timeout_ms);
  while (st == ZCX_SUCCESS && (*send_comm == nullptr || *recv_comm == nullptr)) {
    if (dl.expired()) st = ZCX_ERR_TIMEOUT;
    if (st == ZCX_SUCCESS && *send_comm == nullptr)
      st = from.ops->connect(from.ctx, 0, handle, send_comm);
    if (st == ZCX_SUCCESS && *recv_comm == nullptr)
      st = to.ops->accept(listen_comm, recv_comm);
  }
  (void)to.ops->close_listen(listen_comm);
  return st;
}

zcx_status_t wait_requests(const zcx_provider_ops_t* ops, std::vector<void*>& reqs,
                           std::vector<size_t>* sizes, int timeout_ms) {
  if (sizes) sizes->assign(reqs.size(), 0);
  size_t left = 0;
  for (void* r : reqs) left += r != nullptr;
  Deadline dl = Deadline::after_ms(timeout_ms);
  for (uint32_t polls = 0; left > 0; ++polls) {
    if (polls % 64 == 0 && dl.expired()) return ZCX_ERR_TIMEOUT;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i] == nullptr) continue;
      int done = 0;
      size_t sz[8] = {};
      zcx_status_t st = ops->test(reqs[i], &done, sz);
      if (st != ZCX_SUCCESS) return st;
      if (!done) continue;
      reqs[i] = nullptr;
      --left;
      if (sizes) (*sizes)[i] = sz[0];
    }
  }
  return ZCX_SUCCESS;
}

zcx_status_t test_each_once(const zcx_provider_ops_t* ops, std::vector<void*>& reqs) {
  for (void*& q : reqs) {
    int done = 0;
    if (q == nullptr) continue;
    zcx_status_t st = ops->test(q, &done, nullptr);
    if (st != ZCX_SUCCESS) return st;
    if (done) q = nullptr;
  }
  return ZCX_SUCCESS;
}

// Whole words first where the pattern's words are this machine's byte order, bytes after.
void fill_pattern(void* buf, size_t size, int rank) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t i = 0;
  if constexpr (std::endian::native == std::endian::little)
    for (; i + 8 <= size; i += 8) {
      const uint64_t w = pattern_word(rank, size, i / 8);
      std::memcpy(p + i, &w, sizeof w);
    }
  for (; i < size; ++i) p[i] = pattern_byte(rank, size, i);
}

std::string check_pattern(const void* buf, size_t size, int rank) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t i = 0;
  if constexpr (std::endian::native == std::endian::little)
    for (; i + 8 <= size; i += 8) {  // stops at the word with the first mismatch
      uint64_t w;
      std::memcpy(&w, p + i, sizeof w);
      if (w != pattern_word(rank, size, i / 8)) break;
    }
  for (; i < size; ++i) {
    if (p[i] == pattern_byte(rank, size, i)) continue;
    char msg[160];
    snprintf(msg, sizeof msg, "byte %zu of %zu from rank %d is 0x%02x, expected 0x%02x", i,
             size, rank, p[i], pattern_byte(rank, size, i));
    return msg;
  }
  return "";
}

zcx_status_t post_send(const zcx_provider_ops_t* ops, void* comm, void* data, size_t size,
                       int tag, void* mhandle, void** req, int timeout_ms) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  *req = nullptr;
  while (*req == nullptr) {
    zcx_status_t st = ops->isend(comm, data, size, tag, mhandle, req);
    if (st != ZCX_SUCCESS) return st;
    if (*req == nullptr && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

zcx_status_t post_recv(const zcx_provider_ops_t* ops, void* comm, int n, void** data,
                       size_t* sizes, int* tags, void** mhandles, void** req,
                       int timeout_ms) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  *req = nullptr;
  while (*req == nullptr) {
    zcx_status_t st = ops->irecv(comm, n, data, sizes, tags, mhandles, req);
    if (st != ZCX_SUCCESS) return st;
    if (*req == nullptr && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

}  // namespace zcx::test
