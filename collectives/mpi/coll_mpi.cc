// zcx-mpi: communicator from an MPI communicator. Only MPI_Comm_rank/size and MPI_Bcast of
// the 128-byte unique id; everything else goes through zcx.
#include <zcx/coll_mpi.h>

extern "C" ZCX_API zcx_status_t zcx_comm_init_mpi(zcx_comm_t* comm, MPI_Comm mpi_comm,
                                                  const zcx_comm_config_t* config) {
  if (comm == nullptr) return ZCX_ERR_INVALID_ARG;
  int rank = 0, nranks = 0;
  if (MPI_Comm_rank(mpi_comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(mpi_comm, &nranks) != MPI_SUCCESS)
    return ZCX_ERR_INVALID_ARG;
  zcx_unique_id_t id{};
  zcx_status_t st = ZCX_SUCCESS;
  if (rank == 0) st = zcx_get_unique_id(&id);
  // Share the outcome with the id so that no rank waits for a root that failed.
  int root_ok = st == ZCX_SUCCESS ? 1 : 0;
  if (MPI_Bcast(&root_ok, 1, MPI_INT, 0, mpi_comm) != MPI_SUCCESS) return ZCX_ERR_SYSTEM;
  if (!root_ok) return rank == 0 ? st : ZCX_ERR_REMOTE;
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS) return ZCX_ERR_SYSTEM;
  return zcx_comm_init_rank(comm, nranks, &id, rank, config);
}
