/* zcx-mpi: build a zcx communicator from an MPI communicator (optional library libzcx-mpi;
 * libzcx itself never links MPI). Collective over mpi_comm: rank 0 of mpi_comm makes a unique
 * id and broadcasts it with MPI_Bcast; ranks and size are taken from mpi_comm. */
#ifndef ZCX_COLL_MPI_H
#define ZCX_COLL_MPI_H

#include <mpi.h>
#include <zcx/coll.h>

#ifdef __cplusplus
extern "C" {
#endif

ZCX_API zcx_status_t zcx_comm_init_mpi(zcx_comm_t* comm, MPI_Comm mpi_comm,
                                       const zcx_comm_config_t* config);

#ifdef __cplusplus
}
#endif
#endif /* ZCX_COLL_MPI_H */
