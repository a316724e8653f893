// GPU memory for the ib provider. Compiled only with ZCX_HAVE_CUDA and never exercised on
// the CPU-only dev/CI VM: it has only been compiled, not tested.
//  - CUDA registration needs a peer-memory module (nvidia_peermem / nv_mem) for ibv_reg_mr
//    on device pointers, or dmabuf: cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr.
//  - libcuda is loaded at run time through the one CUDA shim (common/dl/cuda_shim.h), which
//    libzcx never links; cuMemGetHandleForAddressRange is optional there (CUDA 11.7+).
#include "ib/ib.h"

#include "common/log.h"
#include "zcx/config.h"

#include <unistd.h>

#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#endif

namespace zcx::ib {

#if ZCX_HAVE_CUDA
namespace {

bool peer_memory_present() {
  return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
         access("/sys/kernel/mm/memory_peers/nv_mem_nc/version", F_OK) == 0 ||
         access("/sys/module/nvidia_peermem/version", F_OK) == 0;
}

// DMABUF is usable when ibv_reg_dmabuf_mr exists and a probe with fd -1 fails with
// something other than "not supported" (NCCL's test).
bool dmabuf_supported(Device* dev) {
  const IbvApi* api = ibv_shim();
  if (api == nullptr || api->reg_dmabuf_mr == nullptr || cuda_dmabuf_export(nullptr) == nullptr)
    return false;
  errno = 0;
  ibv_mr* mr = api->reg_dmabuf_mr(dev->pd, 0, 4096, 0, -1, 0);
  if (mr != nullptr) {
    api->dereg_mr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

}  // namespace

uint32_t cuda_mem_kinds(Device* dev) {
  uint32_t kinds = 0;
  if (peer_memory_present()) kinds |= ZCX_MEM_CUDA;
  if (dmabuf_supported(dev)) kinds |= ZCX_MEM_CUDA | ZCX_MEM_DMABUF;
  return kinds;
}

Status cuda_dmabuf_fd(void* data, size_t size, int* fd, uint64_t* offset) {
  std::string why;
  auto get_handle = cuda_dmabuf_export(&why);
  if (get_handle == nullptr)
    return set_error(Status::kUnsupported, kLog, "ib: no dmabuf export of GPU memory: %s",
                     why.c_str());
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t base = reinterpret_cast<uintptr_t>(data) & ~static_cast<uintptr_t>(page - 1);
  size_t len = (reinterpret_cast<uintptr_t>(data) + size - base + page - 1) &
               ~static_cast<size_t>(page - 1);
  int out = -1;
  CUresult rc = get_handle(&out, static_cast<CUdeviceptr>(base), len,
                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (rc != CUDA_SUCCESS)
    return set_error(Status::kSystem, kLog,
                     "ib: cuMemGetHandleForAddressRange(%p, %zu) failed with CUresult %d",
                     data, size, static_cast<int>(rc));
  *fd = out;
  *offset = reinterpret_cast<uintptr_t>(data) - base;
  return Status::kSuccess;
}
#else
uint32_t cuda_mem_kinds(Device*) { return 0; }
Status cuda_dmabuf_fd(void*, size_t, int*, uint64_t*) {
  return set_error(Status::kUnsupported, kLog, "ib: built without CUDA");
}
#endif

}  // namespace zcx::ib
