// Socket helpers shared by the bootstrap and the tcp provider: addresses, interface choice
// (ZCX_SOCKET_IFNAME), non-blocking listen/connect, and bounded blocking I/O.
#pragma once

#include "common/clock.h"
#include "common/fd.h"
#include "common/status.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <string>
#include <vector>

namespace zcx {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  int port() const;
  void set_port(int port);
  std::string to_string() const;  // "1.2.3.4:5" or "[::1]:5"
};

// Parses "host:port", "[v6]:port" or "host" (port 0); resolves names with getaddrinfo.
Status sockaddr_parse(const std::string& text, SockAddr* out);

// The address to listen on and advertise to peers: the interface chosen by
// ZCX_SOCKET_IFNAME, else the first up non-loopback interface, else loopback. Port 0.
// *ifname receives the interface name.
Status socket_local_address(SockAddr* out, std::string* ifname);
// This host's addresses (interfaces that are up; ports 0), for sockaddr_is_this_host.
std::vector<SockAddr> socket_own_addresses();
// Whether addr (port ignored) reaches this host: a loopback address or one in `own`
// (socket_own_addresses(), listed once by the caller: it asks the kernel).
bool sockaddr_is_this_host(const SockAddr& addr, const std::vector<SockAddr>& own);
bool sockaddr_is_this_host(const SockAddr& addr);  // lists the addresses itself

// Non-blocking, close-on-exec TCP listener bound to addr (port 0 picks one); *bound gets
// the actual address.
Status socket_listen(const SockAddr& addr, int backlog, UniqueFd* fd, SockAddr* bound);
// A port of 127.0.0.1 free now, for a launcher's or a test's ZCX_ROOT. It lies below the
// kernel's ephemeral range (ip_local_port_range, which connect() and listeners on port 0
// draw from), so that no other job's connection takes it before rank 0 binds it; a port
// from bind(0) was taken that way under parallel tests.
Status socket_pick_loopback_port(int* port);
// Starts a non-blocking connect; completion is seen by socket_connect_done.
Status socket_connect_start(const SockAddr& addr, UniqueFd* fd);
// kSuccess when connected, kInProgress while pending, an error when refused/unreachable.
Status socket_connect_done(int fd, const SockAddr& addr);
// Non-blocking accept; kInProgress when no connection is pending.
Status socket_accept(int listen_fd, UniqueFd* fd, SockAddr* peer);

Status socket_set_nonblocking(int fd);
void socket_set_nodelay(int fd);

// Blocking-with-deadline I/O on a non-blocking fd (bootstrap and handshakes only).
// Errors name `peer` (a description such as "rank 3 (host)").
Status socket_send_all(int fd, const void* buf, size_t len, const Deadline& dl,
                       const char* peer);
Status socket_recv_all(int fd, void* buf, size_t len, const Deadline& dl, const char* peer);

std::string local_host_name();

}  // namespace zcx
