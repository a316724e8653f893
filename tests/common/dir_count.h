// Counting a directory's entries: the fds of /proc/self/fd, the threads of /proc/self/task,
// the segments in /dev/shm. For the tests that check nothing was left behind.
#pragma once

#include <dirent.h>

#include <cstring>

namespace zcx::test {

// Entries of `path` (no dot entries), or only those whose name contains `needle`.
inline int count_dir(const char* path, const char* needle = nullptr) {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d))
      n += needle == nullptr ? e->d_name[0] != '.' : strstr(e->d_name, needle) != nullptr;
    closedir(d);
  }
  return n;
}

}  // namespace zcx::test
