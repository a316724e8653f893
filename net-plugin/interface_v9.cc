// ncclNet_v9_t: size_t sizes, vProps and max*Bytes; no profiler, no comm config.
#include "api.h"
#include "properties.h"

namespace zcx::plugin {
namespace {

ncclResult_t init(ncclDebugLogger_t logger) { return api_legacy_init(logger); }

ncclResult_t get_properties(int dev, ncclNetProperties_v9_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  NeutralProps n;
  ncclResult_t r = api_get_properties(dev, &n);
  if (r != ncclSuccess) return r;
  fill_v9_props(n, props);
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

ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
  return api_isend(comm, data, size, tag, mh, req);
}

ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs,
                   void** req) {
  return api_irecv(comm, n, data, sizes, tags, mhs, req);
}

}  // namespace
}  // namespace zcx::plugin

using namespace zcx::plugin;

extern "C" {
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    kPluginName, init, api_devices, get_properties, listen, connect, accept, api_reg_mr,
    api_reg_mr_dmabuf, api_dereg_mr, isend, irecv, api_iflush, api_test, api_close_send,
    api_close_recv, api_close_listen, /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr,
    /*makeVDevice=*/nullptr,
};
}  // extern "C"
