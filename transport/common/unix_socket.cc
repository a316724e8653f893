// Control-socket helpers of the local providers.
#include "common/unix_socket.h"

#include "common/check.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcx::unix_socket {

socklen_t abstract_addr(const char* prefix, uint64_t nonce, sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s-%016llx", prefix,
                   static_cast<unsigned long long>(nonce));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Status check_peer_cred(int fd, int expect_pid, const char* provider, const char* who,
                       uint32_t subsys) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  ZCX_SYSCHECK(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len), subsys,
               "getsockopt(SO_PEERCRED)");
  if (cred.uid != geteuid() || cred.pid != expect_pid)
    return set_error(Status::kAuth, subsys,
                     "%s %s credentials do not match: uid %u pid %d, expected uid %u pid %d; "
                     "%s connects only processes of the same user", provider, who, cred.uid,
                     cred.pid, geteuid(), expect_pid, provider);
  return Status::kSuccess;
}

Status send_packet_fds(int sock, const void* buf, size_t len, const int* fds, size_t nfds) {
  if (nfds > kMaxPacketFds) return set_error_quiet(Status::kInvalidArg, "too many descriptors");
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPacketFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = ctl;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(len)) return Status::kSuccess;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::kInProgress;
  return set_error_quiet(Status::kRemote, "%s", n < 0 ? errno_text(errno) : "short write");
}

Status send_packet(int sock, const void* buf, size_t len, int fd) {
  return send_packet_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0);
}

Status recv_packet_fds(int sock, void* buf, size_t cap, size_t* len, std::vector<UniqueFd>* fds) {
  iovec iov{buf, cap};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPacketFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof(ctl);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::kInProgress;
  if (n <= 0)
    return set_error_quiet(Status::kRemote, "%s", n < 0 ? errno_text(errno) : "closed by the peer");
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfd; ++i) {
      int f;
      memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      fds->emplace_back(f);
    }
  }
  *len = static_cast<size_t>(n);
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
    return set_error_quiet(Status::kProtocol, "packet truncated");
  return Status::kSuccess;
}

Status recv_packet(int sock, void* buf, size_t cap, size_t* len, UniqueFd* fd) {
  std::vector<UniqueFd> fds;
  Status st = recv_packet_fds(sock, buf, cap, len, &fds);
  if (!fds.empty()) *fd = std::move(fds.front());  // the others close here
  return st;
}

}  // namespace zcx::unix_socket
