// Built against an installed zcx and run under its zcx-run: a context through the C++
// wrappers (zcx.hpp), then each rank sends its rank to the next and receives the previous.
#include <zcx/zcx.hpp>

#include <cstdio>

int main() {
  auto ctx = zcx::api::Context::from_env();
  if (!ctx) {
    std::fprintf(stderr, "consumer_p2p: %s\n", ctx.error_message());
    return 1;
  }
  const int rank = ctx->rank(), n = ctx->nranks();
  auto next = ctx->endpoint((rank + 1) % n);
  auto prev = ctx->endpoint((rank + n - 1) % n);
  if (!next || !prev) {
    std::fprintf(stderr, "consumer_p2p: %s\n", next ? prev.error_message() : next.error_message());
    return 1;
  }
  int got = -1;
  auto recv = prev->irecv(&got, sizeof got);
  const zcx_status_t sent = next->send(&rank, sizeof rank);
  const zcx_status_t received = recv ? recv->wait() : recv.status();
  const bool right = sent == ZCX_SUCCESS && received == ZCX_SUCCESS && got == (rank + n - 1) % n;
  std::printf("consumer_p2p: rank %d of %d over %s: ring exchange %s\n", rank, n,
              next->provider(), right ? "ok" : "WRONG");
  return right ? 0 : 1;
}
