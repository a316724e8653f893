/* Built against an installed zcx (find_package or pkg-config) and run under its zcx-run: a
 * communicator from the launcher's environment and one checked allreduce. */
#include <zcx/coll.h>

#include <stdint.h>
#include <stdio.h>

int main(void) {
  zcx_comm_t comm = NULL;
  if (zcx_comm_init_env(&comm, NULL) != ZCX_SUCCESS) {
    fprintf(stderr, "consumer_coll: %s\n", zcx_get_last_error());
    return 1;
  }
  int rank = 0, n = 0;
  (void)zcx_comm_rank(comm, &rank);
  (void)zcx_comm_nranks(comm, &n);
  enum { kCount = 4096 };
  static int32_t v[kCount];
  for (int i = 0; i < kCount; ++i) v[i] = rank + i;
  zcx_status_t st = zcx_allreduce(v, v, kCount, ZCX_INT32, ZCX_SUM, comm, NULL);
  int wrong = st != ZCX_SUCCESS;
  for (int i = 0; i < kCount && !wrong; ++i) wrong = v[i] != n * i + n * (n - 1) / 2;
  printf("consumer_coll: rank %d of %d: allreduce %s\n", rank, n, wrong ? "WRONG" : "ok");
  if (st != ZCX_SUCCESS) fprintf(stderr, "consumer_coll: %s\n", zcx_get_last_error());
  return zcx_comm_destroy(comm) == ZCX_SUCCESS && !wrong ? 0 : 1;
}
