// ZCX_ variables of the tcp provider. Defaults come from loopback runs of
// zcx_provider_bench (tests/transport/provider_bench.cc) on the 2-core dev VM.
#include "common/config.h"
#include "tcp/tcp.h"

#include <algorithm>

namespace zcx::tcp {
namespace {

const config::IntParam nsocks{"ZCX_TCP_NSOCKS", 2,
    "Data sockets per tcp connection; large messages are striped over them.", 1, kMaxSocks};
const config::SizeParam inline_bytes{"ZCX_TCP_INLINE", 64 * 1024,
    "Messages up to this size travel whole on the first socket, right behind their header; "
    "larger ones are striped over all sockets (max 1M)."};
const config::SizeParam chunk{"ZCX_TCP_CHUNK", 512 * 1024,
    "Stripe unit of large tcp messages: chunk i goes to socket i mod ZCX_TCP_NSOCKS."};
const config::SizeParam sndbuf{"ZCX_TCP_SNDBUF", 0,
    "SO_SNDBUF of tcp data sockets in bytes; 0 keeps the kernel's autotuning."};
const config::SizeParam rcvbuf{"ZCX_TCP_RCVBUF", 0,
    "SO_RCVBUF of tcp data sockets in bytes; 0 keeps the kernel's autotuning."};

}  // namespace

int config_nsocks() { return static_cast<int>(nsocks.get()); }
size_t config_inline() { return std::min(inline_bytes.get(), kMaxInline); }
size_t config_chunk() { return std::clamp<size_t>(chunk.get(), 4096, size_t{1} << 30); }
size_t config_sndbuf() { return std::min<size_t>(sndbuf.get(), size_t{1} << 30); }
size_t config_rcvbuf() { return std::min<size_t>(rcvbuf.get(), size_t{1} << 30); }

}  // namespace zcx::tcp
