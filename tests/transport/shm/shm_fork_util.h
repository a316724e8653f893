// Multi-process helpers for the shm tests: ranks are fork()ed children (or the test process
// itself) that exchange connection handles through a shared anonymous "board".
#pragma once

#include "common/fork_ranks.h"
#include "common/fork_shared.h"
#include "shm_test_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>

namespace zcx::shm_test {

inline constexpr int kMaxRanks = 8;

struct Board {
  uint8_t handle[kMaxRanks][kMaxRanks][ZCX_HANDLE_BYTES];  // [from][to]: to's listener
  std::atomic<int> published;
  std::atomic<int> started;
  std::atomic<int> finished;
  char error[kMaxRanks][256];
};

// The board, shared with the forked ranks.
using SharedBoard = test::ForkShared<Board>;

// Full mesh for `rank` of `n`: sc[j] sends to j, rc[j] receives from j.
struct Mesh {
  void* lc[kMaxRanks] = {};
  void* sc[kMaxRanks] = {};
  void* rc[kMaxRanks] = {};
  int n = 0;
  ~Mesh() {
    for (int j = 0; j < n; ++j) {
      if (sc[j] != nullptr) (void)ops()->close_send(sc[j]);
      if (rc[j] != nullptr) (void)ops()->close_recv(rc[j]);
      if (lc[j] != nullptr) (void)ops()->close_listen(lc[j]);
    }
  }
};

inline void record(Board* b, int rank, const std::string& what) {
  snprintf(b->error[rank], sizeof(b->error[rank]), "rank %d: %s (%s)", rank, what.c_str(),
           zcx::last_error());
}

// Every rank listens for each peer, publishes, waits for all, then connects and accepts.
inline bool mesh_connect(Board* b, int rank, int n, void* ctx, Mesh* m, int ms = 10000) {
  m->n = n;
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    if (ops()->listen(ctx, 0, b->handle[j][rank], &m->lc[j]) != ZCX_SUCCESS) {
      record(b, rank, "listen");
      return false;
    }
  }
  b->published.fetch_add(1);
  Deadline dl = Deadline::after_ms(ms);
  while (b->published.load() < n)
    if (dl.expired()) return record(b, rank, "peers never published handles"), false;
  int left = 2 * (n - 1);
  while (left > 0) {
    if (dl.expired()) return record(b, rank, "connection set-up timed out"), false;
    for (int j = 0; j < n; ++j) {
      if (j == rank) continue;
      if (m->sc[j] == nullptr) {
        if (ops()->connect(ctx, 0, b->handle[rank][j], &m->sc[j]) != ZCX_SUCCESS)
          return record(b, rank, "connect"), false;
        left -= m->sc[j] != nullptr;
      }
      if (m->rc[j] == nullptr) {
        if (ops()->accept(m->lc[j], &m->rc[j]) != ZCX_SUCCESS)
          return record(b, rank, "accept"), false;
        left -= m->rc[j] != nullptr;
      }
    }
  }
  return true;
}

}  // namespace zcx::shm_test
