#include "net_driver.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace zcx::plugin_test {
namespace {

std::mutex g_log_mu;
std::vector<std::string> g_lines;

void test_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_lines.emplace_back(msg);
  if (getenv("PLUGIN_HARNESS_VERBOSE") != nullptr || level == NCCL_LOG_WARN)
    fprintf(stderr, "[nccl-logger level=%d flags=0x%lx %s:%d] %s\n", static_cast<int>(level),
            flags, file, line, msg);
}

template <typename P>
void copy_common(const P& in, Props* out) {
  out->name = in.name != nullptr ? in.name : "";
  out->pci_null = in.pciPath == nullptr;
  out->pci_path = in.pciPath != nullptr ? in.pciPath : "";
  out->guid = in.guid;
  out->ptr_support = in.ptrSupport;
  out->reg_is_global = in.regIsGlobal;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->max_comms = in.maxComms;
  out->max_recvs = in.maxRecvs;
}

}  // namespace

std::vector<std::string> logged_lines() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_lines;
}

void clear_logged_lines() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_lines.clear();
}

NetDriver::~NetDriver() { unload(); }

bool NetDriver::load(const std::string& path, int version, std::string* why) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    *why = std::string("dlopen: ") + dlerror();
    return false;
  }
  std::string sym = "ncclNetPlugin_v" + std::to_string(version);
  table_ = dlsym(lib_, sym.c_str());
  if (table_ == nullptr) {
    *why = "no symbol " + sym;
    unload();
    return false;
  }
  version_ = version;
  legacy_init_done_ = false;
  ctxs_.clear();
  return true;
}

void NetDriver::unload() {
  if (lib_ != nullptr) dlclose(lib_);
  lib_ = nullptr;
  table_ = nullptr;
}

bool NetDriver::has_symbol(int version) const {
  std::string sym = "ncclNetPlugin_v" + std::to_string(version);
  return lib_ != nullptr && dlsym(lib_, sym.c_str()) != nullptr;
}

#define ZCX_T8 (static_cast<ncclNet_v8_t*>(table_))
#define ZCX_T9 (static_cast<ncclNet_v9_t*>(table_))
#define ZCX_T10 (static_cast<ncclNet_v10_t*>(table_))
#define ZCX_T11 (static_cast<ncclNet_v11_t*>(table_))
// Calls the same-signature member of whichever version is loaded.
#define ZCX_SAME(member, ...)                                  \
  (version_ == 11   ? ZCX_T11->member(__VA_ARGS__)             \
   : version_ == 10 ? ZCX_T10->member(__VA_ARGS__)             \
   : version_ == 9  ? ZCX_T9->member(__VA_ARGS__)              \
                    : ZCX_T8->member(__VA_ARGS__))

const char* NetDriver::name() const { return ZCX_T8->name; }  // first member in every version

ncclResult_t NetDriver::init() {
  if (version_ == 11) {
    void* ctx = nullptr;
    ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclResult_t r = ZCX_T11->init(&ctx, 0x1234 + ctxs_.size(), &config, test_logger, nullptr);
    if (r == ncclSuccess) ctxs_.push_back(ctx);
    return r;
  }
  if (legacy_init_done_) return ncclSuccess;  // NCCL's adapter initialises once
  ncclResult_t r = version_ == 10 ? ZCX_T10->init(test_logger, nullptr)
                   : version_ == 9 ? ZCX_T9->init(test_logger) : ZCX_T8->init(test_logger);
  legacy_init_done_ = r == ncclSuccess;
  return r;
}

ncclResult_t NetDriver::finalize() {
  if (version_ != 11 || ctxs_.empty()) return ncclSuccess;
  ncclResult_t r = ZCX_T11->finalize(ctxs_.back());
  ctxs_.pop_back();
  return r;
}

ncclResult_t NetDriver::devices(int* n) { return ZCX_SAME(devices, n); }

ncclResult_t NetDriver::properties(int dev, Props* p) {
  ncclResult_t r;
  if (version_ == 8) {
    ncclNetProperties_v8_t v{};
    r = ZCX_T8->getProperties(dev, &v);
    copy_common(v, p);
    return r;
  }
  if (version_ == 11) {
    ncclNetProperties_v11_t v{};
    r = ZCX_T11->getProperties(dev, &v);
    copy_common(v, p);
    p->max_p2p_bytes = v.maxP2pBytes;
    p->vprops_ndevs = v.vProps.ndevs;
    return r;
  }
  ncclNetProperties_v9_t v{};
  r = version_ == 10 ? ZCX_T10->getProperties(dev, &v) : ZCX_T9->getProperties(dev, &v);
  copy_common(v, p);
  p->max_p2p_bytes = v.maxP2pBytes;
  p->vprops_ndevs = v.vProps.ndevs;
  return r;
}

ncclResult_t NetDriver::listen(int dev, void* handle, void** lc) {
  if (version_ == 11) return ZCX_T11->listen(ctx(), dev, handle, lc);
  if (version_ == 10) return ZCX_T10->listen(dev, handle, lc);
  return version_ == 9 ? ZCX_T9->listen(dev, handle, lc) : ZCX_T8->listen(dev, handle, lc);
}

ncclResult_t NetDriver::connect(int dev, void* handle, void** sc) {
  ncclNetDeviceHandle_t* dev_comm = nullptr;
  if (version_ == 11) return ZCX_T11->connect(ctx(), dev, handle, sc, &dev_comm);
  if (version_ == 10) {
    ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return ZCX_T10->connect(dev, &config, handle, sc, &dev_comm);
  }
  return version_ == 9 ? ZCX_T9->connect(dev, handle, sc, &dev_comm)
                       : ZCX_T8->connect(dev, handle, sc, &dev_comm);
}

ncclResult_t NetDriver::accept(void* lc, void** rc) {
  ncclNetDeviceHandle_t* dev_comm = nullptr;
  return ZCX_SAME(accept, lc, rc, &dev_comm);
}

ncclResult_t NetDriver::reg_mr(void* comm, void* data, size_t size, int type, void** mh) {
  return ZCX_SAME(regMr, comm, data, size, type, mh);
}

ncclResult_t NetDriver::dereg_mr(void* comm, void* mh) { return ZCX_SAME(deregMr, comm, mh); }

ncclResult_t NetDriver::isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) {
  if (version_ >= 10) {
    return version_ == 11 ? ZCX_T11->isend(sc, data, size, tag, mh, nullptr, req)
                          : ZCX_T10->isend(sc, data, size, tag, mh, nullptr, req);
  }
  if (version_ == 9) return ZCX_T9->isend(sc, data, size, tag, mh, req);
  return ZCX_T8->isend(sc, data, static_cast<int>(size), tag, mh, req);
}

ncclResult_t NetDriver::irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs,
                              void** req) {
  void* phandles[8] = {};
  if (version_ == 11) return ZCX_T11->irecv(rc, n, data, sizes, tags, mhs, phandles, req);
  if (version_ == 10) return ZCX_T10->irecv(rc, n, data, sizes, tags, mhs, phandles, req);
  if (version_ == 9) return ZCX_T9->irecv(rc, n, data, sizes, tags, mhs, req);
  int narrow[8];
  for (int i = 0; i < n && i < 8; ++i) narrow[i] = static_cast<int>(sizes[i]);
  return ZCX_T8->irecv(rc, n, data, narrow, tags, mhs, req);
}

ncclResult_t NetDriver::iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) {
  return ZCX_SAME(iflush, rc, n, data, sizes, mhs, req);
}

ncclResult_t NetDriver::test(void* req, int* done, int* sizes) { return ZCX_SAME(test, req, done, sizes); }
ncclResult_t NetDriver::close_send(void* c) { return ZCX_SAME(closeSend, c); }
ncclResult_t NetDriver::close_recv(void* c) { return ZCX_SAME(closeRecv, c); }
ncclResult_t NetDriver::close_listen(void* c) { return ZCX_SAME(closeListen, c); }

}  // namespace zcx::plugin_test
