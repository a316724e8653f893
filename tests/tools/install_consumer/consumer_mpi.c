/* Built against an installed zcx's "mpi" component and run under mpirun: a communicator
 * from MPI_COMM_WORLD (zcx_comm_init_mpi) and one checked allreduce. */
#include <zcx/coll_mpi.h>

#include <stdint.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  zcx_comm_t comm = NULL;
  zcx_status_t st = zcx_comm_init_mpi(&comm, MPI_COMM_WORLD, NULL);
  int rank = 0, n = 0, wrong = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int64_t v = rank + 1;
  if (st == ZCX_SUCCESS) st = zcx_allreduce(&v, &v, 1, ZCX_INT64, ZCX_SUM, comm, NULL);
  if (st == ZCX_SUCCESS) wrong = v != (int64_t)n * (n + 1) / 2;
  printf("consumer_mpi: rank %d of %d: allreduce %s\n", rank, n, wrong ? "WRONG" : "ok");
  if (st != ZCX_SUCCESS) fprintf(stderr, "consumer_mpi: %s\n", zcx_get_last_error());
  if (comm != NULL && zcx_comm_destroy(comm) != ZCX_SUCCESS) wrong = 1;
  MPI_Finalize();
  return wrong;
}
