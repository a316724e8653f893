// ncclNet_v8_t: int sizes in isend/irecv (NCCL keeps transfers <= 1 GiB for this version),
// no vProps, no max*Bytes.
#include "api.h"
#include "properties.h"

namespace zcx::plugin {
namespace {

ncclResult_t init(ncclDebugLogger_t logger) { return api_legacy_init(logger); }

ncclResult_t get_properties(int dev, ncclNetProperties_v8_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  NeutralProps n;
  ncclResult_t r = api_get_properties(dev, &n);
  if (r != ncclSuccess) return r;
  fill_common_props(n, props);
  return ncclSuccess;
}

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  return api_listen(api_legacy_ctx(), dev, handle, listen_comm);
}

ncclResult_t connect(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_t**) {
  return api_connect(api_legacy_ctx(), dev, handle, send_comm);
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_t**) {
  return api_accept(listen_comm, recv_comm);
}

ncclResult_t isend(void* comm, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0 || req == nullptr) return ncclInvalidArgument;
  return api_isend(comm, data, static_cast<size_t>(size), tag, mh, req);
}

ncclResult_t irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  if (n < 1 || n > kMaxRecvsCap || sizes == nullptr || req == nullptr) return ncclInvalidArgument;
  size_t wide[kMaxRecvsCap];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return api_irecv(comm, n, data, wide, tags, mhs, req);
}

}  // namespace
}  // namespace zcx::plugin

using namespace zcx::plugin;

extern "C" {
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    kPluginName, init, api_devices, get_properties, listen, connect, accept, api_reg_mr,
    api_reg_mr_dmabuf, api_dereg_mr, isend, irecv, api_iflush, api_test, api_close_send,
    api_close_recv, api_close_listen, /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr,
};
}  // extern "C"
