// The public collective API across forked processes over the real transport (tcp on
// loopback, whatever ZCX_PROVIDERS selects in this build), launched zcx-run style through
// ZCX_RANK/ZCX_NRANKS/ZCX_ROOT/ZCX_SECRET. Every result is checked element by element in the
// child; a child's exit code names the step that failed.
#include "process_ranks.h"

#include "base/registry.h"
#include "common/config.h"
#include "reduce/half.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

namespace zcx {
namespace {

int32_t val(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000003u + i * 7u); }

int fail(int rank, int step) {
  fprintf(stderr, "rank %d step %d: %s\n", rank, step, zcx_get_last_error());
  return step;
}

int check_allreduce(zcx_comm_t comm, int rank, int n, size_t count, int step) {
  std::vector<int32_t> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = val(rank, i);
  if (zcx_allreduce(buf.data(), buf.data(), count, ZCX_INT32, ZCX_SUM, comm, nullptr) != ZCX_SUCCESS)
    return fail(rank, step);
  for (size_t i = 0; i < count; ++i) {
    uint32_t want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<uint32_t>(val(r, i));
    if (buf[i] != static_cast<int32_t>(want)) return fail(rank, step + 1);
  }
  return 0;
}

int check_rooted_and_gathers(zcx_comm_t comm, int rank, int n) {
  const size_t count = 100003;
  std::vector<int32_t> buf(count), all(count * n);
  for (int root = 0; root < n; ++root) {
    for (size_t i = 0; i < count; ++i) buf[i] = rank == root ? val(root, i) : -1;
    if (zcx_broadcast(buf.data(), buf.data(), count, ZCX_INT32, root, comm, nullptr)) return fail(rank, 40);
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != val(root, i)) return fail(rank, 41);
  }
  for (size_t i = 0; i < count; ++i) buf[i] = val(rank, i);
  if (zcx_allgather(buf.data(), all.data(), count, ZCX_INT32, comm, nullptr)) return fail(rank, 42);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i)
      if (all[q * count + i] != val(q, i)) return fail(rank, 43);
  std::vector<int32_t> a2a(count * n);
  for (size_t i = 0; i < count * n; ++i) all[i] = val(rank, i);
  if (zcx_alltoall(all.data(), a2a.data(), count, ZCX_INT32, comm, nullptr)) return fail(rank, 44);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      if (a2a[p * count + i] != val(p, rank * count + i)) return fail(rank, 45);
  return 0;
}

int check_p2p_split_async(zcx_comm_t comm, int rank, int n) {
  std::vector<int32_t> out(5000, rank), in(5000, -1);
  zcx_group_start();
  zcx_coll_send(out.data(), out.size(), ZCX_INT32, (rank + 1) % n, comm, nullptr);
  zcx_coll_recv(in.data(), in.size(), ZCX_INT32, (rank + n - 1) % n, comm, nullptr);
  if (zcx_group_end() != ZCX_SUCCESS) return fail(rank, 50);
  if (in[0] != (rank + n - 1) % n || in[4999] != in[0]) return fail(rank, 51);
  zcx_comm_t sub = nullptr;
  if (zcx_comm_split(comm, rank % 2, rank, &sub, nullptr) != ZCX_SUCCESS || !sub) return fail(rank, 52);
  int32_t x = rank, want = 0;
  for (int q = rank % 2; q < n; q += 2) want += q;
  if (zcx_allreduce(&x, &x, 1, ZCX_INT32, ZCX_SUM, sub, nullptr) || x != want) return fail(rank, 53);
  zcx_comm_destroy(sub);
  std::vector<uint16_t> h(1001, coll::f32_to_f16(static_cast<float>(rank)));
  zcx_coll_request_t req = nullptr;
  if (zcx_iallreduce(h.data(), h.data(), h.size(), ZCX_FLOAT16, ZCX_AVG, comm, nullptr, &req))
    return fail(rank, 54);
  if (zcx_coll_wait(req) != ZCX_SUCCESS) return fail(rank, 55);
  if (h[1000] != coll::f32_to_f16(static_cast<float>(n * (n - 1) / 2) / static_cast<float>(n)))
    return fail(rank, 56);
  return zcx_barrier_comm(comm, nullptr) == ZCX_SUCCESS ? 0 : fail(rank, 57);
}

int coll_rank(int rank, int n, const test::LaunchJob& job) {
  test::set_rank_env(rank, n, job);
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS) return fail(rank, 10);
  int step = 20;
  for (const char* algo : {"ring", "tree", "rhd"}) {
    config::set_override("ZCX_ALGO", algo);  // setenv would not drop the comm's cached choice
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000003}}) {
      if (int rc = check_allreduce(comm, rank, n, count, step)) return rc;
    }
    step += 5;
  }
  config::clear_override("ZCX_ALGO");
  // Argument checks: a stream with host buffers (no CUDA here: unsupported; with CUDA: host
  // memory is not device memory), bad dtype/root, NULL buffers.
  int32_t one = 1;
  int fake_stream = 0;
  zcx_status_t streamed = zcx_allreduce(&one, &one, 1, ZCX_INT32, ZCX_SUM, comm, &fake_stream);
  if (streamed != ZCX_ERR_UNSUPPORTED && streamed != ZCX_ERR_INVALID_ARG) return fail(rank, 35);
  if (zcx_allreduce(&one, &one, 1, static_cast<zcx_dtype_t>(99), ZCX_SUM, comm, nullptr) !=
          ZCX_ERR_INVALID_ARG ||
      zcx_broadcast(&one, &one, 1, ZCX_INT32, n, comm, nullptr) != ZCX_ERR_INVALID_ARG ||
      zcx_allreduce(nullptr, &one, 1, ZCX_INT32, ZCX_SUM, comm, nullptr) != ZCX_ERR_INVALID_ARG)
    return fail(rank, 36);
  if (int rc = check_rooted_and_gathers(comm, rank, n)) return rc;
  if (int rc = check_p2p_split_async(comm, rank, n)) return rc;
  if (zcx_comm_destroy(comm) != ZCX_SUCCESS) return fail(rank, 90);
  // A communicator over a context the application made (and keeps).
  zcx_context_t ctx = nullptr;
  if (zcx_init_from_env(&ctx) != ZCX_SUCCESS) return fail(rank, 91);
  if (zcx_comm_init_context(&comm, ctx, nullptr) != ZCX_SUCCESS) return fail(rank, 92);
  if (int rc = check_allreduce(comm, rank, n, 4099, 93)) return rc;
  // Destroy with a request still open: it completes the operation first.
  std::vector<int32_t> pending(100000, 1);
  zcx_coll_request_t req = nullptr;
  if (zcx_iallreduce(pending.data(), pending.data(), pending.size(), ZCX_INT32, ZCX_SUM, comm,
                     nullptr, &req) != ZCX_SUCCESS)
    return fail(rank, 94);
  if (zcx_comm_destroy(comm) != ZCX_SUCCESS) return fail(rank, 95);
  if (pending[99999] != n) return fail(rank, 97);
  return zcx_finalize(ctx) == ZCX_SUCCESS ? 0 : fail(rank, 96);
}

TEST(CollProcesses, EveryCollectiveOverTheRealTransport) {
  if (providers_selected().empty()) GTEST_SKIP() << "no provider is built in this tree";
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", "30");
  for (int n : {2, 3, 4}) {
    std::string why;
    const test::LaunchJob job = test::fresh_launch_job(&why);
    ASSERT_FALSE(job.root.empty()) << "no launch job (a free port and a secret): " << why;
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r)
      pids.push_back(test::fork_child([&, r] { return coll_rank(r, n, job); }));
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(test::wait_child(pids[static_cast<size_t>(r)], 100000), 0) << "rank " << r << " of " << n;
  }
}

}  // namespace
}  // namespace zcx
