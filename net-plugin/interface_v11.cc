// ncclNet_v11_t (NCCL 2.28.9's native version): per-communicator init/finalize with a ctx.
#include "api.h"
#include "properties.h"

namespace zcx::plugin {
namespace {

ncclResult_t init(void** ctx, uint64_t comm_id, ncclNetCommConfig_t* config,
                  ncclDebugLogger_t logger, ncclProfilerCallback_t) {
  int tc = config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return api_init(ctx, comm_id, tc, logger);
}

ncclResult_t get_properties(int dev, ncclNetProperties_v11_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  NeutralProps n;
  ncclResult_t r = api_get_properties(dev, &n);
  if (r != ncclSuccess) return r;
  fill_v9_props(n, props);
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm, ncclNetDeviceHandle_t**) {
  return api_connect(ctx, dev, handle, send_comm);
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_t**) {
  return api_accept(listen_comm, recv_comm);
}

ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return api_isend(comm, data, size, tag, mh, req);
}

ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void**,
                   void** req) {
  return api_irecv(comm, n, data, sizes, tags, mhs, req);
}

ncclResult_t set_net_attr(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }  // hint: ignored

}  // namespace
}  // namespace zcx::plugin

using namespace zcx::plugin;

extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    kPluginName, init, api_devices, get_properties, api_listen, connect, accept, api_reg_mr,
    api_reg_mr_dmabuf, api_dereg_mr, isend, irecv, api_iflush, api_test, api_close_send,
    api_close_recv, api_close_listen, /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr,
    /*makeVDevice=*/nullptr, api_finalize, set_net_attr,
};
}  // extern "C"
