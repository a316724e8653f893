// The tcp provider: internal types shared by its files.
//
// A connection (send comm -> recv comm) is nsocks TCP sockets. Each message is a 24-byte
// header (docs/WIRE.md "tcp provider") on socket 0, then its payload: inline on socket 0 when
// it is at most inline_max bytes, else striped round-robin over all sockets in chunk-byte
// pieces, read and written directly from and to the user buffer. Every socket walks the
// message sequence in order, so both sides derive the same layout from (size, layout).
// The acceptor may send back over the same sockets (tcp_reverse.cc): each direction is its
// own comm over its own duplicates of the fds.
// A comm and its requests are driven by one thread at a time (as NCCL's proxy does); only
// connect() shares state (Context::connecting) and takes Context::mu.
#pragma once

#include "base/provider.h"
#include "common/fd.h"
#include "common/socket.h"
#include "common/status.h"
#include "common/wire.h"

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcx::tcp {

inline constexpr int kMaxSocks = 8;
inline constexpr int kMaxRecvs = 8;
inline constexpr int kMaxRequests = 512;     // per comm: the request pool
inline constexpr int kRecvMsgSlots = 1024;   // headers a recv comm reads ahead
inline constexpr size_t kMaxMessage = size_t{1} << 40;
inline constexpr size_t kMaxInline = size_t{1} << 20;
inline constexpr uint32_t kHelloMagic = 0x5443585a;  // "ZXCT"
inline constexpr uint32_t kMsgMagic = 0x4d43585a;    // "ZXCM"
inline constexpr uint32_t kReverseMagic = 0x5243585a;  // "ZXCR"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kHelloBytes = 128;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr int kIovMax = 64;
inline constexpr size_t kStageBytes = 64 * 1024;
inline constexpr size_t kStageBelow = 16 * 1024;  // payload rests shorter than this are staged

// Object tags: catch a comm or request of the wrong kind (or a freed one) at the boundary.
enum : uint32_t {
  kListenTag = 0x7c11a001,
  kSendTag = 0x7c11a002,
  kRecvTag = 0x7c11a003,
  kRequestTag = 0x7c11a004,
  kDeadTag = 0xdeadbeef,
};

// tcp_config.cc
int config_nsocks(bool peer_on_this_host);  // ZCX_TCP_NSOCKS, resolved
size_t config_inline();
size_t config_chunk();
size_t config_send_max(bool peer_on_this_host);  // ZCX_TCP_SEND_MAX, resolved
size_t config_sndbuf();
size_t config_rcvbuf();

// How a connection splits messages over its sockets; both ends use the connector's values.
struct Layout {
  int nsocks = 1;
  size_t inline_max = 0;
  size_t chunk = 1;
};
// Payload bytes of a message of `size` that socket s carries.
size_t stripe_bytes(const Layout& l, size_t size, int s);
// iovecs for socket s's part of the message from byte `off` of that part; returns count.
int stripe_iov(const Layout& l, char* base, size_t size, int s, size_t off, iovec* iov,
               int max);

struct Connector;

struct Context {
  Context();
  ~Context();  // in tcp_ep.cc, where Connector is complete
  zcx_provider_init_t self{};
  int pid = 0;
  SockAddr addr;
  std::string ifname;
  std::vector<SockAddr> own_addrs;  // this host's addresses: is a peer on this host?
  zcx_device_props_t props{};
  int ndev = 0;   // 0 when ZCX_SOCKET_IFNAME matches no interface
  std::mutex mu;  // guards connecting
  std::map<std::string, std::unique_ptr<Connector>> connecting;
};

// tcp_device.cc
Status device_discover(Context* ctx);

struct Comm;

struct Request {
  uint32_t tag = kDeadTag;
  Comm* comm = nullptr;
  int n = 0;          // buffers (1 for a send)
  int assigned = 0;   // buffers that a message has been matched to (recv)
  int left = 0;       // messages not yet complete
  int64_t posted_ns = 0;  // 0 until check_timeout first reads the clock for it
  std::array<char*, kMaxRecvs> data{};
  std::array<size_t, kMaxRecvs> cap{};
  std::array<int, kMaxRecvs> tags{};
  std::array<size_t, kMaxRecvs> got{};
  std::array<bool, kMaxRecvs> taken{};
};

struct Message {
  char* data = nullptr;
  size_t size = 0;
  int tag = 0;
  Request* req = nullptr;
  int socks_left = 0;
};

struct Sock {
  UniqueFd fd;
  uint64_t cursor = 0;   // sequence number of the message this socket works on
  size_t off = 0;        // bytes of this socket's part done (send: header included)
};

struct Comm {
  uint32_t tag = kDeadTag;
  bool is_send = false;
  Context* ctx = nullptr;
  zcx_peer_info_t peer{};
  std::string peer_text;  // "peer rank R (host H, pid P)"
  Layout layout;
  size_t send_max = SIZE_MAX;  // send: most bytes per sendmsg (ZCX_TCP_SEND_MAX)
  std::array<Sock, kMaxSocks> socks;
  std::vector<Request> pool;
  std::vector<int> free_reqs;
  std::vector<Message> ring;  // message seq k at ring[k % ring.size()]
  uint64_t head = 0;          // oldest incomplete message
  uint64_t tail = 0;          // next message sequence number
  std::vector<Request*> pending;  // recv: requests with unmatched buffers, in order
  size_t pend_head = 0, pend_count = 0;
  uint8_t hdr[kHeaderBytes]{};
  // recv: socket 0 reads small things (headers, short payloads) into this staging buffer so
  // that one recv() takes a header with its payload, or several small messages at once.
  std::vector<char> stage;
  size_t stage_begin = 0, stage_end = 0;
  // The data path counts its moves and reads no clock (a clock read per message is a
  // visible share of an 8-byte round trip); check_timeout turns a change of the count into
  // a time when it reads the clock, every 64th idle poll.
  uint64_t moves = 0;
  uint64_t moves_seen = 0;
  int64_t last_progress_ns = 0;
  int64_t timeout_ns = 0;      // ZCX_TIMEOUT, read once when the comm is made
  uint32_t idle_polls = 0;     // test() calls since the clock was last read
  StickyError error;
  // Duplex (tcp_reverse.cc): the other direction of this connection is claimed, and the
  // reverse hello's bytes so far (sent by a recv comm's side, read by a send comm's).
  bool reversed = false;
  std::array<uint8_t, kHelloBytes> reverse_hello{};
  size_t reverse_done = 0;
};

std::string describe_peer(const zcx_peer_info_t& p);
// Builds a comm over connected sockets (ownership moves in).
std::unique_ptr<Comm> comm_create(Context* ctx, bool is_send, const zcx_peer_info_t& peer,
                                  const Layout& layout, UniqueFd* fds);

// tcp_progress.cc
Request* request_get(Comm* c);
void request_put(Request* r);
Status progress_send(Comm* c);
Status progress_recv(Comm* c);
// Records a comm-fatal error (first wins), logs it, and returns it.
Status comm_fail(Comm* c, Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// tcp_md.cc: registrations are tokens (tcp reads and writes user memory directly).
Status md_register(void* comm, void* data, size_t size, int kind, void** mhandle);
Status md_deregister(void* comm, void* mhandle);

// tcp_ep.cc
void put_host(wire::Writer& w, const char* host);
void get_host(wire::Reader& r, char* host);  // made printable
bool same_secret(uint64_t a, uint64_t b);    // constant time: the secret is a bearer token
struct Listener;
Status ep_listen(Context* ctx, void* handle, Listener** out);
Status ep_connect(Context* ctx, const void* handle, Comm** out);
Status ep_accept(Listener* l, Comm** out);
void ep_close_listen(Listener* l);
bool ep_is_listener(const void* p);

// tcp_reverse.cc
Status ep_connect_reverse(Comm* recv, Comm** out);
Status ep_accept_reverse(Comm* send, Comm** out);

}  // namespace zcx::tcp
