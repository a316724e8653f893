// ZCX_ variables of the tcp provider. Defaults come from loopback runs on the 2-core dev VM.
// Sockets: between two processes of one host, 1 socket beat 4 in 3 of 4 alternating quiet
// runs both for zcx-perf p2p at 64 MiB (4.6 vs 4.0, 4.1 vs 3.4 GB/s) and for a 2-rank 256
// MiB allreduce (1.89 vs 1.57 GB/s busbw): over loopback every byte is a kernel copy on the
// two CPUs, and more sockets add work, not bandwidth. (Runs taken while other jobs loaded
// the VM had favoured 4, which keep more data in flight when a process is descheduled.)
// Across hosts a NIC spreads flows over its queues and cores, so remote peers get 4 — not
// measured here (no second host). A 256K chunk spreads a 1 MiB message over all 4 sockets
// and beat 512K, with no difference at 64 MiB. The inline limit only decides which
// messages stay on socket 0; below one chunk the layout is the same either way.
#include "common/config.h"
#include "tcp/tcp.h"

#include <cstdint>

namespace zcx::tcp {
namespace {

// One sendmsg() per 160 KiB to a peer on this host, measured rather than derived. A 64 MiB
// loopback stream on the dev VM, 2026-12-06, median of 3-5 runs (GB/s): whole sends 6.8,
// pieces of 96K 8.5, 160K 9.1, 224K 8.6-8.8, 352K and more 6.8-7.0; tools/perf/tcp_pingpong.c
// (no library): whole 6.8, 160K 8.6. Pieces that end on a multiple of 64 KiB (loopback's
// MTU) gained less or lost (64K 7.0, 128K 6.5, 256K 7.4); 32K lost (6.0). Why is
// not settled: the send queue stays full (about 4 MB) either way, while the receive queue
// holds less (ss: 0.7-0.9 MB against 0.9-1.9 MB), which fits copies that find their bytes
// still in cache. Across hosts the NIC sets the pace: not measured (no second host), so
// remote peers keep whole sends.
constexpr size_t kLoopbackSendMax = 160 * 1024;

const config::IntParam nsocks{"ZCX_TCP_NSOCKS", 0,
    "Data sockets per tcp connection; large messages are striped over them. 0: 1 to a peer "
    "on this host (loopback copies gain nothing from more), 4 to a remote one.", 0, kMaxSocks};
const config::SizeParam inline_bytes{"ZCX_TCP_INLINE", 64 * 1024,
    "Messages up to this size travel whole on the first socket, right behind their header; "
    "larger ones are striped over all sockets.", 0, kMaxInline};
const config::SizeParam chunk{"ZCX_TCP_CHUNK", 256 * 1024,
    "Stripe unit of large tcp messages: chunk i goes to socket i mod ZCX_TCP_NSOCKS.", 4096,
    size_t{1} << 30};
const config::SizeParam send_max{"ZCX_TCP_SEND_MAX", 0,
    "Most bytes one sendmsg() hands the kernel on a tcp data socket. 0: 160K to a peer on "
    "this host (a 64 MiB loopback stream ran about 28% faster in such pieces), no bound to "
    "a remote one.", 0, size_t{1} << 40};
const config::SizeParam sndbuf{"ZCX_TCP_SNDBUF", 0,
    "SO_SNDBUF of tcp data sockets in bytes; 0 keeps the kernel's autotuning.", 0,
    size_t{1} << 30};
const config::SizeParam rcvbuf{"ZCX_TCP_RCVBUF", 0,
    "SO_RCVBUF of tcp data sockets in bytes; 0 keeps the kernel's autotuning.", 0,
    size_t{1} << 30};

}  // namespace

int config_nsocks(bool peer_on_this_host) {
  const int n = static_cast<int>(nsocks.get());
  if (n > 0) return n;
  return peer_on_this_host ? 1 : 4;
}
size_t config_send_max(bool peer_on_this_host) {
  const size_t n = send_max.get();
  if (n > 0) return n;
  return peer_on_this_host ? kLoopbackSendMax : SIZE_MAX;
}
// The bounds are the parameters' ranges (out of range: the default, with a warning).
size_t config_inline() { return inline_bytes.get(); }
size_t config_chunk() { return chunk.get(); }
size_t config_sndbuf() { return sndbuf.get(); }
size_t config_rcvbuf() { return rcvbuf.get(); }

}  // namespace zcx::tcp
