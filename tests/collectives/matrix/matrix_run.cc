// One rank of a matrix group (matrix_run.h).
#include "matrix/matrix_run.h"

#include "bootstrap/test_util.h"
#include "common/config.h"
#include "matrix/matrix_kinds.h"
#include "process_ranks.h"

#include <malloc.h>
#include <unistd.h>

#include <zcx/coll.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zcx::coll::matrix {
namespace {

int ceil_lg(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}
int floor_lg(int p) {
  int l = 0;
  while ((2 << l) <= p) ++l;
  return l;
}

int emulated_hosts(int n) { return n >= 6 ? 3 : 2; }

int most_ranks_on_a_host(int n) {
  std::vector<int> per(emulated_hosts(n), 0);
  for (int r = 0; r < n; ++r) ++per[emulated_host(r, n)];
  return *std::max_element(per.begin(), per.end());
}

// The bulk lane's segment budget in force (ZCX_COLL_SHARED_BULK).
size_t bulk_budget() {
  const auto* p = static_cast<const config::SizeParam*>(config::find("ZCX_COLL_SHARED_BULK"));
  return p ? p->get() : 0;
}

// What the planner must choose: the forced algorithm, except hier where it declines (all
// ranks on one host, or one rank per host), which falls back to the ring.
Algo expected_algo(const Case& c, int n) {
  if (c.algo == Algo::kShared) {  // one host always; the lane's rule (select.h): a slot
                                  // for up to 4 KiB per rank, the bulk lane above
    const size_t per_rank = c.count * zcx_dtype_size(static_cast<zcx_dtype_t>(c.dtype));
    SelectInput in;
    in.kind = c.kind;
    in.nranks = n;
    in.bytes = c.kind == CollKind::kAllgather || c.kind == CollKind::kReducescatter ? per_rank * n : per_rank;
    in.shared_lane = true;
    in.shared_bulk_piece = shared_bulk_piece(n, bulk_budget());
    if (shared_lane_fits(in)) return Algo::kShared;
    Algo first;
    candidates(c.kind, &first, 1);
    return first;
  }
  if (c.algo != Algo::kHier) return c.algo;
  bool runs = c.emulated_hosts && n >= 3;
  return runs ? Algo::kHier : Algo::kRing;
}

// k of the float bound: the longest chain of rounded operations (matrix_data.h).
int rounding_depth(CollKind kind, Algo algo, int n) {
  if (n <= 1) return 0;
  int k = n - 1;
  const int lg = ceil_lg(n);
  if (kind == CollKind::kReduce && algo == Algo::kBinomial) k = lg * (lg + 1) / 2;
  if (kind == CollKind::kAllreduce && algo == Algo::kTree) k = 2 * floor_lg(n - 1) + 1;
  if (kind == CollKind::kAllreduce && algo == Algo::kRhd)
    k = floor_lg(n) + ((1 << floor_lg(n)) < n ? 1 : 0);
  if (kind == CollKind::kAllreduce && algo == Algo::kHier) {
    const int lq = ceil_lg(most_ranks_on_a_host(n));
    k = lq * (lq + 1) / 2 + emulated_hosts(n) - 1;
  }
  return std::min(k, n - 1);
}

// Moves this process to host name "zcx-emulated-<h>" (a UTS namespace of its own, so the
// real host is untouched). The communicator groups ranks by the bootstrap's host name, and
// the context's host identity (host name + boot id) decides where shm may be used.
bool enter_emulated_host(int rank, int n) {
  return test::become_host("zcx-emulated-" + std::to_string(emulated_host(rank, n)));
}

// The same ranks as `world`, on emulated hosts (so hier really runs), from a unique id rank 0
// broadcasts over `world`. Cross-host links need tcp, so shm groups use "shm,tcp" here.
// Every rank first agrees that every rank could move (root, or CAP_SYS_ADMIN, is needed);
// *out stays NULL when not.
zcx_status_t make_emulated_comm(zcx_comm_t world, int rank, int n, const char* provider,
                                zcx_comm_t* out) {
  int moved = enter_emulated_host(rank, n) ? 1 : 0;
  zcx_status_t st = zcx_allreduce(&moved, &moved, 1, ZCX_INT32, ZCX_MIN, world, nullptr);
  if (st != ZCX_SUCCESS || !moved) return st;
  zcx_unique_id_t id{};
  if (rank == 0 && zcx_get_unique_id(&id) != ZCX_SUCCESS) return ZCX_ERR_INTERNAL;
  st = zcx_broadcast(&id, &id, sizeof id, ZCX_UINT8, 0, world, nullptr);
  if (st != ZCX_SUCCESS) return st;
  test::ScopedEnv providers("ZCX_PROVIDERS", std::string(provider) == "shm" ? "shm,tcp" : provider);
  zcx_comm_config_t config;
  zcx_comm_config_init(&config);
  config.name = "emulated-hosts";
  return zcx_comm_init_rank(out, n, &id, rank, &config);
}

// The cases allocate and free buffers of up to 64 MiB each. By default glibc maps each one
// afresh and unmaps it on free, so every case pays a page fault and a zeroing per page
// (about a fifth of a full run's time). Keeping freed memory in the heap lets the next case
// reuse the pages. This process only runs the matrix, so the retained memory is bounded by
// its largest case.
void keep_freed_buffers() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

void report(int fd, const std::string& line) { dprintf(fd, "%s\n", line.c_str()); }

std::string algo_env(const Case& c) {
  return std::string(coll_kind_name(c.kind)) + ":" + algo_name(c.algo);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int emulated_host(int rank, int nranks) { return rank * emulated_hosts(nranks) / nranks; }

int run_group_rank(const char* provider, int rank, int nranks, const std::vector<Case>& cases,
                   int report_fd) {
  const std::string who = ": rank " + std::to_string(rank) + ": ";
  keep_freed_buffers();
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  setenv("ZCX_COLL_SHARED_LANE", "1", 1);  // the matrix forces the shared algorithm too
  zcx_comm_t world = nullptr, emulated = nullptr;
  if (zcx_comm_init_env(&world, nullptr) != ZCX_SUCCESS) {
    report(report_fd, std::string("ERROR init") + who + zcx_get_last_error());
    return 2;
  }
  bool need_emulated = std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.emulated_hosts; });
  if (need_emulated && make_emulated_comm(world, rank, nranks, provider, &emulated) != ZCX_SUCCESS) {
    report(report_fd, std::string("ERROR emulated-hosts init") + who + zcx_get_last_error());
    return 2;
  }
  if (need_emulated && !emulated && rank == 0)
    report(report_fd, "SKIP emulated-hosts cases: no UTS namespace (needs root or CAP_SYS_ADMIN)");
  int rc = 0;
  double small_s = 0, large_s = 0, check_s = 0, slowest_s = 0;
  std::string slowest;
  size_t ran = 0;
  for (const Case& c : cases) {
    if (c.emulated_hosts && !emulated) continue;
    // Through the config registry rather than setenv: a communicator caches its algorithm
    // choices and drops them only when the registry's generation changes.
    config::set_override("ZCX_ALGO", algo_env(c));
    CaseEnv env;
    env.comm = c.emulated_hosts ? emulated : world;
    env.rank = rank, env.nranks = nranks;
    env.expected_algo = expected_algo(c, nranks);
    env.depth = rounding_depth(c.kind, env.expected_algo, nranks);
    auto t0 = std::chrono::steady_clock::now();
    CaseResult res = run_case(env, c);
    const double took = seconds_since(t0);
    (c.large ? large_s : small_s) += took;
    check_s += res.check_s;
    if (took > slowest_s) slowest_s = took, slowest = c.name();
    ++ran;
    if (res.status != ZCX_SUCCESS) {
      report(report_fd, "ERROR " + c.name() + who + zcx_status_string(res.status) + ": " + zcx_get_last_error());
      rc = 2;
      break;
    }
    for (const std::string& w : res.wrong) report(report_fd, "FAIL " + c.name() + who + w);
    if (!res.wrong.empty()) rc = 1;
  }
  char done[400];
  snprintf(done, sizeof done,
           "DONE rank %d cases %zu small_s %.2f large_s %.2f (checking %.2f) slowest %.2f s: %s",
           rank, ran, small_s, large_s, check_s, slowest_s, slowest.c_str());
  report(report_fd, done);
  if (emulated && zcx_comm_destroy(emulated) != ZCX_SUCCESS && rc == 0) rc = 2;
  if (zcx_comm_destroy(world) != ZCX_SUCCESS && rc == 0) {
    report(report_fd, std::string("ERROR destroy") + who + zcx_get_last_error());
    rc = 2;
  }
  return rc;
}

}  // namespace zcx::coll::matrix
