#include "output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zcx::run {
namespace {
// A line longer than this is cut and printed in pieces, so one rank cannot make us buffer
// without bound.
constexpr size_t kMaxLine = 64 * 1024;
}  // namespace

void write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    len -= static_cast<size_t>(n);
  }
}

PrefixedStream::PrefixedStream(int rank, UniqueFd source, int sink)
    : prefix_("[" + std::to_string(rank) + "] "), source_(std::move(source)), sink_(sink) {}

void PrefixedStream::emit(const char* data, size_t len) {
  std::string line;
  line.reserve(prefix_.size() + len + 1);
  line.append(prefix_).append(data, len).push_back('\n');
  write_all(sink_, line.data(), line.size());
}

void PrefixedStream::flush_partial() {
  if (!partial_.empty()) emit(partial_.data(), partial_.size());
  partial_.clear();
}

void PrefixedStream::pump() {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(source_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close();
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      emit(partial_.data() + start, nl - start);
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() >= kMaxLine) flush_partial();
  }
}

void PrefixedStream::close() {
  flush_partial();
  source_.reset();
}

}  // namespace zcx::run
