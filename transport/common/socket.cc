#include "common/socket.h"

#include "common/config_vars.h"
#include "common/log.h"
#include "common/random.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace zcx {

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::set_port(int port) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(static_cast<uint16_t>(port));
  else if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(static_cast<uint16_t>(port));
}

std::string SockAddr::to_string() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
              sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

Status sockaddr_parse(const std::string& text, SockAddr* out) {
  if (out == nullptr || text.empty() || text.size() > 255)
    return set_error(Status::kInvalidArg, kLogNet, "invalid socket address '%.64s'",
                     text.c_str());
  std::string host = text, port = "0";
  if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos)
      return set_error(Status::kInvalidArg, kLogNet, "invalid address '%s'", text.c_str());
    host = text.substr(1, close - 1);
    if (close + 1 < text.size() && text[close + 1] == ':') port = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':');
             colon != std::string::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return set_error(Status::kInvalidArg, kLogNet, "cannot resolve '%s': %s", text.c_str(),
                     gai_strerror(rc));
  memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::kSuccess;
}

namespace {

// ZCX_SOCKET_IFNAME grammar as NCCL_SOCKET_IFNAME: prefixes, ^ excludes, = exact.
bool ifname_matches(const std::string& spec, const char* name) {
  if (spec.empty()) return true;
  std::string s = spec;
  bool exclude = s[0] == '^';
  if (exclude) s.erase(0, 1);
  bool exact = !s.empty() && s[0] == '=';
  if (exact) s.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= s.size() && !hit) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    hit = exact ? item == name : strncmp(name, item.c_str(), item.size()) == 0;
  }
  return exclude ? !hit : hit;
}

struct IfAddr {
  std::string name;
  SockAddr addr;
  bool loopback;
};

std::vector<IfAddr> list_interfaces() {
  std::vector<IfAddr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    int fam = it->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr))
      continue;  // link-local needs a scope id peers cannot use
    IfAddr a;
    a.name = it->ifa_name;
    a.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    a.addr.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.addr.storage, it->ifa_addr, a.addr.len);
    out.push_back(a);
  }
  freeifaddrs(list);
  // IPv4 first: most clusters route it, and it sorts deterministically.
  std::stable_sort(out.begin(), out.end(),
                   [](const IfAddr& x, const IfAddr& y) { return x.addr.family() < y.addr.family(); });
  return out;
}

bool same_ip(const SockAddr& a, const SockAddr& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a.sa())->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b.sa())->sin_addr.s_addr;
  return memcmp(&reinterpret_cast<const sockaddr_in6*>(a.sa())->sin6_addr,
                &reinterpret_cast<const sockaddr_in6*>(b.sa())->sin6_addr, sizeof(in6_addr)) == 0;
}

}  // namespace

std::vector<SockAddr> socket_own_addresses() {
  std::vector<SockAddr> out;
  for (const IfAddr& i : list_interfaces()) out.push_back(i.addr);
  return out;
}

bool sockaddr_is_this_host(const SockAddr& addr, const std::vector<SockAddr>& own) {
  if (addr.family() == AF_INET &&
      (ntohl(reinterpret_cast<const sockaddr_in*>(addr.sa())->sin_addr.s_addr) >> 24) == 127)
    return true;
  if (addr.family() == AF_INET6 &&
      IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr.sa())->sin6_addr))
    return true;
  for (const SockAddr& a : own)
    if (same_ip(a, addr)) return true;
  return false;
}

bool sockaddr_is_this_host(const SockAddr& addr) {
  return sockaddr_is_this_host(addr, socket_own_addresses());
}

Status socket_local_address(SockAddr* out, std::string* ifname) {
  std::string spec = params::socket_ifname.get();
  std::vector<IfAddr> all = list_interfaces();
  const IfAddr* pick = nullptr;
  for (const IfAddr& a : all) {
    if (!spec.empty() ? ifname_matches(spec, a.name.c_str()) : !a.loopback) {
      pick = &a;
      break;
    }
  }
  if (pick == nullptr && spec.empty())
    for (const IfAddr& a : all)
      if (a.loopback) {
        pick = &a;
        break;
      }
  if (pick == nullptr) {
    std::string names;
    for (const IfAddr& a : all)  // one entry per address: name each interface once
      if (("," + names + ",").find("," + a.name + ",") == std::string::npos)
        names += (names.empty() ? "" : ",") + a.name;
    return set_error(Status::kNoDevice, kLogNet,
                     "no network interface matches ZCX_SOCKET_IFNAME='%s' (up interfaces: %s)",
                     spec.c_str(), names.c_str());
  }
  *out = pick->addr;
  out->set_port(0);
  if (ifname) *ifname = pick->name;
  return Status::kSuccess;
}

Status socket_set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return set_error(Status::kSystem, kLogNet, "fcntl(O_NONBLOCK): %s", errno_text(errno));
  return Status::kSuccess;
}

void socket_set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Status socket_listen(const SockAddr& addr, int backlog, UniqueFd* fd, SockAddr* bound) {
  UniqueFd s(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return set_error(Status::kSystem, kLogNet, "socket: %s", errno_text(errno));
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s.get(), addr.sa(), addr.len) != 0)
    return set_error(Status::kSystem, kLogNet, "bind %s: %s", addr.to_string().c_str(),
                     errno_text(errno));
  if (listen(s.get(), backlog) != 0)
    return set_error(Status::kSystem, kLogNet, "listen: %s", errno_text(errno));
  if (bound) {
    bound->len = sizeof bound->storage;
    getsockname(s.get(), bound->sa(), &bound->len);
  }
  *fd = std::move(s);
  return Status::kSuccess;
}

namespace {

// The low end of the kernel's ephemeral port range (its default when it cannot be read).
int ephemeral_low() {
  int low = 32768, high = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re")) {
    if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    fclose(f);
  }
  return low;
}

// Binds 127.0.0.1:port (port 0: any) as a listener would; *bound gets the port. Quiet.
bool loopback_port_free(int port, int* bound) {
  UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof a;
  if (!s.valid() || setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return false;
  *bound = ntohs(a.sin_port);
  return true;
}

}  // namespace

Status socket_pick_loopback_port(int* port) {
  constexpr int kSpan = 12288;  // candidates: this many ports below the ephemeral range
  const int top = ephemeral_low() - 1, bottom = std::max(1024, top - kSpan);
  for (int tries = 0; top > bottom && tries < 64; ++tries) {
    const int candidate = bottom + static_cast<int>(random_u64() % (top - bottom));
    if (loopback_port_free(candidate, port)) return Status::kSuccess;
  }
  if (loopback_port_free(0, port)) return Status::kSuccess;  // the kernel's pick, racy
  return set_error(Status::kSystem, kLogNet, "cannot find a free port on 127.0.0.1: %s",
                   errno_text(errno));
}

Status socket_connect_start(const SockAddr& addr, UniqueFd* fd) {
  UniqueFd s(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return set_error(Status::kSystem, kLogNet, "socket: %s", errno_text(errno));
  socket_set_nodelay(s.get());
  int rc;
  do {
    rc = connect(s.get(), addr.sa(), addr.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS)
    return set_error_quiet(Status::kRemote, "connect to %s: %s", addr.to_string().c_str(),
                           errno_text(errno));
  *fd = std::move(s);
  return Status::kSuccess;
}

Status socket_connect_done(int fd, const SockAddr& addr) {
  pollfd p{fd, POLLOUT, 0};
  int rc = poll(&p, 1, 0);
  if (rc == 0) return Status::kInProgress;
  int err = 0;
  socklen_t len = sizeof err;
  if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) return Status::kSuccess;
  return set_error_quiet(Status::kRemote, "connect to %s: %s", addr.to_string().c_str(),
                         errno_text(err));
}

Status socket_accept(int listen_fd, UniqueFd* fd, SockAddr* peer) {
  SockAddr a;
  a.len = sizeof a.storage;
  int c;
  do {
    c = accept4(listen_fd, a.sa(), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (c < 0 && errno == EINTR);
  if (c < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
      return Status::kInProgress;
    return set_error(Status::kSystem, kLogNet, "accept: %s", errno_text(errno));
  }
  socket_set_nodelay(c);
  fd->reset(c);
  if (peer) *peer = a;
  return Status::kSuccess;
}

namespace {
Status wait_fd(int fd, short events, const Deadline& dl, const char* peer, const char* what) {
  pollfd p{fd, events, 0};
  for (;;) {
    int rc = poll(&p, 1, dl.remaining_ms());
    if (rc > 0) return Status::kSuccess;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return set_error(Status::kSystem, kLogNet, "poll: %s", errno_text(errno));
    return set_error_quiet(Status::kTimeout, "timed out (ZCX_TIMEOUT) %s %s", what, peer);
  }
}
}  // namespace

Status socket_send_all(int fd, const void* buf, size_t len, const Deadline& dl,
                       const char* peer) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      ZCX_TRY(wait_fd(fd, POLLOUT, dl, peer, "sending to"));
    } else {
      return set_error_quiet(Status::kRemote, "send to %s failed: %s", peer,
                             n == 0 ? "closed" : errno_text(errno));
    }
  }
  return Status::kSuccess;
}

Status socket_recv_all(int fd, void* buf, size_t len, const Deadline& dl, const char* peer) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return set_error_quiet(Status::kRemote, "%s closed the connection", peer);
    } else if (errno == EAGAIN || errno == EINTR) {
      ZCX_TRY(wait_fd(fd, POLLIN, dl, peer, "receiving from"));
    } else {
      return set_error_quiet(Status::kRemote, "receive from %s failed: %s", peer,
                             errno_text(errno));
    }
  }
  return Status::kSuccess;
}

std::string local_host_name() {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  return host;
}

}  // namespace zcx
