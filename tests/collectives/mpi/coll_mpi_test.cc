// zcx-mpi: a communicator from MPI_COMM_WORLD, then collectives checked against MPI's own
// results. Run under mpirun (ctest label mpi). Exit code 0 on success; every rank prints the
// first failure.
#include <zcx/coll_mpi.h>

#include <cstdio>
#include <vector>

namespace {

int fail(int rank, const char* what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, zcx_get_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int rc = 0;
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_mpi(&comm, MPI_COMM_WORLD, nullptr) != ZCX_SUCCESS) {
    rc = fail(rank, "zcx_comm_init_mpi");
  } else {
    const size_t count = 262147;
    std::vector<long long> mine(count), ours(count), theirs(count);
    for (size_t i = 0; i < count; ++i) mine[i] = static_cast<long long>(i) * (rank + 3) - rank;
    if (zcx_allreduce(mine.data(), ours.data(), count, ZCX_INT64, ZCX_SUM, comm, nullptr))
      rc = fail(rank, "zcx_allreduce");
    MPI_Allreduce(mine.data(), theirs.data(), static_cast<int>(count), MPI_LONG_LONG, MPI_SUM,
                  MPI_COMM_WORLD);
    if (!rc && ours != theirs) rc = fail(rank, "allreduce differs from MPI_Allreduce");
    std::vector<long long> all(count * n), mpi_all(count * n);
    if (!rc && zcx_allgather(mine.data(), all.data(), count, ZCX_INT64, comm, nullptr))
      rc = fail(rank, "zcx_allgather");
    MPI_Allgather(mine.data(), static_cast<int>(count), MPI_LONG_LONG, mpi_all.data(),
                  static_cast<int>(count), MPI_LONG_LONG, MPI_COMM_WORLD);
    if (!rc && all != mpi_all) rc = fail(rank, "allgather differs from MPI_Allgather");
    if (zcx_comm_destroy(comm) != ZCX_SUCCESS && !rc) rc = fail(rank, "zcx_comm_destroy");
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("%s\n", worst ? "FAILED" : "PASSED");
  MPI_Finalize();
  return worst;
}
