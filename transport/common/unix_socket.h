// Helpers for the local providers' control sockets (shm, cuda_ipc): abstract-namespace Unix
// socket addresses, the SO_PEERCRED check, and packets that may carry file descriptors.
#pragma once

#include "common/fd.h"
#include "common/status.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zcx::unix_socket {

// "\0<prefix>-<nonce as 16 hex digits>": never a file, gone with the socket.
socklen_t abstract_addr(const char* prefix, uint64_t nonce, sockaddr_un* sa);
// kAuth unless the peer of `fd` runs as our user with pid `expect_pid`. provider/who word
// the message ("shm", "listener").
Status check_peer_cred(int fd, int expect_pid, const char* provider, const char* who,
                       uint32_t subsys);
// The most descriptors one packet carries.
inline constexpr size_t kMaxPacketFds = 64;

// One packet, with `fd` attached when >= 0 (or the nfds <= kMaxPacketFds of `fds`); never
// blocks. kInProgress when the socket is full; otherwise a quiet kRemote error (the caller
// says what the packet was).
Status send_packet(int sock, const void* buf, size_t len, int fd);
Status send_packet_fds(int sock, const void* buf, size_t len, const int* fds, size_t nfds);
// One packet; *fd gets the first descriptor passed with it (any others are closed), or *fds
// all of them. Never blocks: kInProgress when nothing has arrived; quiet kRemote when the
// peer closed, kProtocol when the packet or its descriptors were truncated (more than
// kMaxPacketFds).
Status recv_packet(int sock, void* buf, size_t cap, size_t* len, UniqueFd* fd);
Status recv_packet_fds(int sock, void* buf, size_t cap, size_t* len, std::vector<UniqueFd>* fds);

}  // namespace zcx::unix_socket
