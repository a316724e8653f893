// zcx-mpi: a communicator from MPI_COMM_WORLD, then every collective checked against MPI's
// own result on the same inputs (MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Allgatherv, MPI_Reduce_scatter,
// MPI_Alltoallv, MPI_Sendrecv, MPI_Barrier), for int32, int64, uint8, float32 and float64
// (MPI has no 16-bit floats), sum/prod/min/max (avg against MPI's sum / nranks), in place and
// out of place, every root. Inputs are small integers, so even float sums and products are
// exact in any order and every comparison is bit-exact. Run under mpirun (ctest label mpi);
// exit code 0 on success; every rank prints its failures.
#include <zcx/coll_mpi.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_n = 1, g_failures = 0;
zcx_comm_t g_comm = nullptr;

void fail(const std::string& what) {
  if (g_failures++ < 20) fprintf(stderr, "rank %d: %s (%s)\n", g_rank, what.c_str(), zcx_get_last_error());
}
bool ok(zcx_status_t st, const std::string& what) {
  if (st != ZCX_SUCCESS) fail(what + ": " + zcx_status_string(st));
  return st == ZCX_SUCCESS;
}
template <class T>
void same(const std::vector<T>& ours, const std::vector<T>& mpi, const std::string& what) {
  if (ours.size() != mpi.size()) return fail(what + ": size differs from MPI's");
  for (size_t i = 0; i < ours.size(); ++i)
    if (std::memcmp(&ours[i], &mpi[i], sizeof(T)) != 0)
      return fail(what + " differs from MPI at element " + std::to_string(i) + ": zcx " +
                  std::to_string(ours[i]) + ", MPI " + std::to_string(mpi[i]));
}

template <class T> struct Types;
template <> struct Types<int32_t> { static constexpr zcx_dtype_t z = ZCX_INT32; static MPI_Datatype m() { return MPI_INT32_T; } };
template <> struct Types<int64_t> { static constexpr zcx_dtype_t z = ZCX_INT64; static MPI_Datatype m() { return MPI_INT64_T; } };
template <> struct Types<uint8_t> { static constexpr zcx_dtype_t z = ZCX_UINT8; static MPI_Datatype m() { return MPI_UINT8_T; } };
template <> struct Types<float> { static constexpr zcx_dtype_t z = ZCX_FLOAT32; static MPI_Datatype m() { return MPI_FLOAT; } };
template <> struct Types<double> { static constexpr zcx_dtype_t z = ZCX_FLOAT64; static MPI_Datatype m() { return MPI_DOUBLE; } };

const zcx_redop_t kOps[] = {ZCX_SUM, ZCX_PROD, ZCX_MIN, ZCX_MAX, ZCX_AVG};
MPI_Op mpi_op(zcx_redop_t op) {
  switch (op) {
    case ZCX_PROD: return MPI_PROD;
    case ZCX_MIN: return MPI_MIN;
    case ZCX_MAX: return MPI_MAX;
    default: return MPI_SUM;  // avg: MPI's sum, divided here
  }
}

// Rank r's element i: small integers (-2..2 for prod) so that every result is exact.
template <class T>
std::vector<T> input(size_t count, zcx_redop_t op, int salt) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) {
    long x = static_cast<long>((i * 7 + static_cast<size_t>(g_rank) * 13 + static_cast<size_t>(salt)) % 101);
    v[i] = static_cast<T>(op == ZCX_PROD ? x % 5 - 2 : x - 50);
  }
  return v;
}

// MPI's result of an avg: the sum divided by nranks in T (integers truncate, as zcx does).
template <class T>
void finish_avg(zcx_redop_t op, std::vector<T>* v) {
  if (op != ZCX_AVG) return;
  for (T& x : *v) x = static_cast<T>(x / static_cast<T>(g_n));
}

std::string name(const char* coll, zcx_dtype_t dt, zcx_redop_t op, bool in_place, int root = -1) {
  std::string s = std::string(coll) + " " + zcx_dtype_name(dt) + " " + zcx_redop_name(op) +
                  (in_place ? " in place" : " out of place");
  return root < 0 ? s : s + " root " + std::to_string(root);
}

template <class T>
void allreduce(size_t count, zcx_redop_t op, bool in_place) {
  std::vector<T> in = input<T>(count, op, 1), ours(count), mpi(count);
  if (in_place) ours = in;
  const bool z = ok(zcx_allreduce(in_place ? ours.data() : in.data(), ours.data(), count, Types<T>::z, op, g_comm, nullptr), "zcx_allreduce");
  MPI_Allreduce(in.data(), mpi.data(), static_cast<int>(count), Types<T>::m(), mpi_op(op), MPI_COMM_WORLD);
  finish_avg(op, &mpi);
  if (z) same(ours, mpi, name("allreduce", Types<T>::z, op, in_place));
}

template <class T>
void reduce(size_t count, zcx_redop_t op, bool in_place, int root) {
  std::vector<T> in = input<T>(count, op, 2), ours(count), mpi(count);
  if (in_place) ours = in;
  T* recv = in_place || g_rank == root ? ours.data() : nullptr;
  const bool z = ok(zcx_reduce(in_place ? ours.data() : in.data(), recv, count, Types<T>::z, op, root, g_comm, nullptr), "zcx_reduce");
  MPI_Reduce(in.data(), mpi.data(), static_cast<int>(count), Types<T>::m(), mpi_op(op), root, MPI_COMM_WORLD);
  finish_avg(op, &mpi);
  if (z && g_rank == root) same(ours, mpi, name("reduce", Types<T>::z, op, in_place, root));
}

template <class T>
void broadcast(size_t count, bool in_place, int root) {
  std::vector<T> in = input<T>(count, ZCX_SUM, 3), ours(count), mpi = in;
  if (in_place) ours = in;
  const bool z = ok(zcx_broadcast(in_place ? ours.data() : in.data(), ours.data(), count, Types<T>::z, root, g_comm, nullptr), "zcx_broadcast");
  MPI_Bcast(mpi.data(), static_cast<int>(count), Types<T>::m(), root, MPI_COMM_WORLD);
  if (z) same(ours, mpi, name("broadcast", Types<T>::z, ZCX_SUM, in_place, root));
}

template <class T>
void allgather(size_t count, bool in_place) {
  std::vector<T> in = input<T>(count, ZCX_SUM, 4), ours(count * g_n), mpi(count * g_n);
  const T* send = in.data();
  if (in_place) std::copy(in.begin(), in.end(), ours.begin() + g_rank * count), send = ours.data() + g_rank * count;
  const bool z = ok(zcx_allgather(send, ours.data(), count, Types<T>::z, g_comm, nullptr), "zcx_allgather");
  MPI_Allgather(in.data(), static_cast<int>(count), Types<T>::m(), mpi.data(), static_cast<int>(count), Types<T>::m(), MPI_COMM_WORLD);
  if (z) same(ours, mpi, name("allgather", Types<T>::z, ZCX_SUM, in_place));
}

template <class T>
void reducescatter(size_t count, zcx_redop_t op, bool in_place) {
  std::vector<T> in = input<T>(count * g_n, op, 5), buf = in, ours(count), mpi(count);
  T* recv = in_place ? buf.data() + g_rank * count : ours.data();
  const bool z = ok(zcx_reducescatter(in_place ? buf.data() : in.data(), recv, count, Types<T>::z, op, g_comm, nullptr), "zcx_reducescatter");
  if (z && in_place) std::copy(recv, recv + count, ours.begin());
  MPI_Reduce_scatter_block(in.data(), mpi.data(), static_cast<int>(count), Types<T>::m(), mpi_op(op), MPI_COMM_WORLD);
  finish_avg(op, &mpi);
  if (z) same(ours, mpi, name("reducescatter", Types<T>::z, op, in_place));
}

template <class T>
void alltoall(size_t count, bool in_place) {
  std::vector<T> in = input<T>(count * g_n, ZCX_SUM, 6), ours(count * g_n), mpi(count * g_n);
  if (in_place) ours = in;
  const bool z = ok(zcx_alltoall(in_place ? ours.data() : in.data(), ours.data(), count, Types<T>::z, g_comm, nullptr), "zcx_alltoall");
  MPI_Alltoall(in.data(), static_cast<int>(count), Types<T>::m(), mpi.data(), static_cast<int>(count), Types<T>::m(), MPI_COMM_WORLD);
  if (z) same(ours, mpi, name("alltoall", Types<T>::z, ZCX_SUM, in_place));
}

// V forms: rank q's block has base + 3q elements (q = 0 may be empty when base is 0).
std::vector<size_t> vcounts(size_t base) {
  std::vector<size_t> c(g_n);
  for (int q = 0; q < g_n; ++q) c[q] = base + 3 * static_cast<size_t>(q);
  return c;
}
std::vector<size_t> gapped_displs(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  for (size_t q = 1; q < counts.size(); ++q) d[q] = d[q - 1] + counts[q - 1] + 2;
  return d;
}
std::vector<int> ints(const std::vector<size_t>& v) { return std::vector<int>(v.begin(), v.end()); }

template <class T>
void allgatherv(size_t base, bool in_place) {
  std::vector<size_t> counts = vcounts(base), displs = gapped_displs(counts);
  const size_t total = displs.back() + counts.back(), mine = counts[g_rank];
  std::vector<T> in = input<T>(mine, ZCX_SUM, 7), ours(total, T(9)), mpi(total, T(9));
  const T* send = in.data();
  if (in_place) std::copy(in.begin(), in.end(), ours.begin() + displs[g_rank]), send = ours.data() + displs[g_rank];
  const bool z = ok(zcx_allgatherv(send, mine, ours.data(), counts.data(), displs.data(), Types<T>::z, g_comm, nullptr), "zcx_allgatherv");
  std::vector<int> c = ints(counts), d = ints(displs);
  MPI_Allgatherv(in.data(), static_cast<int>(mine), Types<T>::m(), mpi.data(), c.data(), d.data(), Types<T>::m(), MPI_COMM_WORLD);
  if (z) same(ours, mpi, name("allgatherv", Types<T>::z, ZCX_SUM, in_place));
}

template <class T>
void reducescatterv(size_t base, zcx_redop_t op, bool in_place) {
  std::vector<size_t> counts = vcounts(base);
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  size_t off = 0;
  for (int q = 0; q < g_rank; ++q) off += counts[q];
  std::vector<T> in = input<T>(total, op, 8), buf = in, ours(counts[g_rank]), mpi(counts[g_rank]);
  T* recv = in_place ? buf.data() + off : ours.data();
  const bool z = ok(zcx_reducescatterv(in_place ? buf.data() : in.data(), recv, counts.data(), Types<T>::z, op, g_comm, nullptr), "zcx_reducescatterv");
  if (z && in_place) std::copy(recv, recv + counts[g_rank], ours.begin());
  std::vector<int> c = ints(counts);
  MPI_Reduce_scatter(in.data(), mpi.data(), c.data(), Types<T>::m(), mpi_op(op), MPI_COMM_WORLD);
  finish_avg(op, &mpi);
  if (z) same(ours, mpi, name("reducescatterv", Types<T>::z, op, in_place));
}

// alltoallv: rank s sends base + s + 2p elements to p; blocks in peer order with gaps.
template <class T>
void alltoallv(size_t base, bool in_place) {
  std::vector<size_t> sc(g_n), rc(g_n);
  for (int p = 0; p < g_n; ++p) sc[p] = base + g_rank + 2 * p, rc[p] = base + p + 2 * g_rank;
  std::vector<size_t> sd = gapped_displs(sc), rd = gapped_displs(rc);
  const size_t send_ext = sd.back() + sc.back(), recv_ext = rd.back() + rc.back();
  std::vector<T> in = input<T>(send_ext, ZCX_SUM, 9), ours(std::max(send_ext, recv_ext), T(9)), mpi(recv_ext, T(9));
  if (in_place) std::copy(in.begin(), in.end(), ours.begin());
  const bool z = ok(zcx_alltoallv(in_place ? ours.data() : in.data(), sc.data(), sd.data(), ours.data(), rc.data(), rd.data(), Types<T>::z, g_comm, nullptr), "zcx_alltoallv");
  std::vector<int> a = ints(sc), b = ints(sd), c = ints(rc), d = ints(rd);
  MPI_Alltoallv(in.data(), a.data(), b.data(), Types<T>::m(), mpi.data(), c.data(), d.data(), Types<T>::m(), MPI_COMM_WORLD);
  ours.resize(recv_ext);
  if (z && in_place) {  // the gaps hold send data there: compare the blocks only
    for (int p = 0; p < g_n; ++p)
      if (!std::equal(mpi.begin() + rd[p], mpi.begin() + rd[p] + rc[p], ours.begin() + rd[p]))
        fail(name("alltoallv", Types<T>::z, ZCX_SUM, true) + " differs from MPI");
    return;
  }
  if (z) same(ours, mpi, name("alltoallv", Types<T>::z, ZCX_SUM, in_place));
}

// Ring shift by `shift` in one group, against MPI_Sendrecv.
template <class T>
void sendrecv(size_t count, int shift) {
  const int to = (g_rank + shift) % g_n, from = (g_rank - shift + g_n) % g_n;
  std::vector<T> in = input<T>(count, ZCX_SUM, 10 + shift), ours(count), mpi(count);
  zcx_group_start();
  zcx_status_t a = zcx_coll_send(in.data(), count, Types<T>::z, to, g_comm, nullptr);
  zcx_status_t b = zcx_coll_recv(ours.data(), count, Types<T>::z, from, g_comm, nullptr);
  zcx_status_t e = zcx_group_end();
  const bool z = ok(a, "zcx_coll_send") && ok(b, "zcx_coll_recv") && ok(e, "zcx_group_end");
  MPI_Sendrecv(in.data(), static_cast<int>(count), Types<T>::m(), to, 0, mpi.data(), static_cast<int>(count), Types<T>::m(), from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (z) same(ours, mpi, "send/recv shift " + std::to_string(shift) + " " + zcx_dtype_name(Types<T>::z));
}

template <class T>
void every_collective() {
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (zcx_redop_t op : kOps) {
      allreduce<T>(100003, op, in_place);
      reducescatter<T>(10007, op, in_place);
      reducescatterv<T>(1001, op, in_place);
      for (int root = 0; root < g_n; ++root) reduce<T>(10007, op, in_place, root);
    }
    for (int root = 0; root < g_n; ++root) broadcast<T>(100003, in_place, root);
    allgather<T>(10007, in_place);
    alltoall<T>(10007, in_place);
    allgatherv<T>(in_place ? 0 : 1001, in_place);
    alltoallv<T>(in_place ? 0 : 1001, in_place);
  }
  for (int shift = 1; shift < g_n; ++shift) sendrecv<T>(10007, shift);
}

// zcx's barrier holds every rank until the last one (rank 0, 0.3 s late) arrives; MPI's
// barrier lines the ranks up first so the measurement starts together.
void barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (g_rank == 0) usleep(300000);
  if (!ok(zcx_barrier_comm(g_comm, nullptr), "zcx_barrier_comm")) return;
  if (MPI_Wtime() - t0 < 0.25) fail("zcx_barrier_comm returned before rank 0 arrived");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  if (zcx_comm_init_mpi(&g_comm, MPI_COMM_WORLD, nullptr) != ZCX_SUCCESS) {
    fail("zcx_comm_init_mpi");
  } else {
    every_collective<int32_t>();
    every_collective<int64_t>();
    every_collective<uint8_t>();
    every_collective<float>();
    every_collective<double>();
    barrier();
    if (zcx_comm_destroy(g_comm) != ZCX_SUCCESS) fail("zcx_comm_destroy");
  }
  int worst = 0;
  MPI_Allreduce(&g_failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s (%d ranks)\n", worst ? "FAILED" : "PASSED", g_n);
  MPI_Finalize();
  return worst ? 1 : 0;
}
