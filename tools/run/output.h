// Copies a rank's output to ours, one whole line at a time, each with the prefix "[rank] ".
#pragma once

#include "common/fd.h"

#include <string>

namespace zcx::run {

class PrefixedStream {
 public:
  PrefixedStream() = default;
  PrefixedStream(int rank, UniqueFd source, int sink);

  int fd() const { return source_.get(); }
  bool open() const { return source_.valid(); }
  // Reads what is available (the fd is non-blocking) and writes out every complete line.
  // At end of file or on a read error it flushes the partial line and closes the source.
  void pump();
  // Flushes the partial line and closes the source (used when draining stops early).
  void close();

 private:
  void emit(const char* data, size_t len);
  void flush_partial();

  std::string prefix_;
  UniqueFd source_;
  int sink_ = -1;
  std::string partial_;
};

// write() until done or a hard error (our own stdout closed: the output is dropped).
void write_all(int fd, const char* data, size_t len);

}  // namespace zcx::run
