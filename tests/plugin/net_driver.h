// Loads libnccl-net-zcx exactly as NCCL 2.28.9 does (dlopen RTLD_NOW|RTLD_LOCAL, dlsym of
// ncclNetPlugin_vN) and calls it the way NCCL's version adapters do: v11 gets one init per
// communicator and a finalize; v8..v10 get a single init and no finalize. The driver hides
// the per-version signatures so every test runs against every exported version.
#pragma once

#include "nccl/net_abi.h"

#include <cstddef>
#include <string>
#include <vector>

namespace zcx::plugin_test {

struct Props {
  std::string name;
  std::string pci_path;  // "" when the plugin reported NULL
  bool pci_null = true;
  uint64_t guid = 0;
  int ptr_support = 0, reg_is_global = 0, speed = 0, port = 0, max_comms = 0, max_recvs = 0;
  float latency = 0;
  size_t max_p2p_bytes = 0;
  int vprops_ndevs = 0;
};

// Log lines the plugin sent to NCCL's logger (formatted), shared by all drivers.
std::vector<std::string> logged_lines();
void clear_logged_lines();

class NetDriver {
 public:
  NetDriver() = default;
  ~NetDriver();
  NetDriver(const NetDriver&) = delete;
  NetDriver& operator=(const NetDriver&) = delete;

  // dlopen + dlsym("ncclNetPlugin_v<version>"); error text in *why on failure.
  bool load(const std::string& path, int version, std::string* why);
  void unload();  // dlclose
  const char* name() const;
  int version() const { return version_; }
  bool has_symbol(int version) const;

  ncclResult_t init();  // v11: new ctx per call; older: once per load
  ncclResult_t finalize();
  ncclResult_t devices(int* n);
  ncclResult_t properties(int dev, Props* p);
  ncclResult_t listen(int dev, void* handle, void** lc);
  ncclResult_t connect(int dev, void* handle, void** sc);
  ncclResult_t accept(void* lc, void** rc);
  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mh);
  ncclResult_t dereg_mr(void* comm, void* mh);
  ncclResult_t isend(void* sc, void* data, size_t size, int tag, void* mh, void** req);
  ncclResult_t irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req);
  ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req);
  ncclResult_t test(void* req, int* done, int* sizes);
  ncclResult_t close_send(void* c);
  ncclResult_t close_recv(void* c);
  ncclResult_t close_listen(void* c);

 private:
  void* lib_ = nullptr;
  int version_ = 0;
  void* table_ = nullptr;
  std::vector<void*> ctxs_;  // v11 contexts, newest last
  bool legacy_init_done_ = false;
  void* ctx() const { return ctxs_.empty() ? nullptr : ctxs_.back(); }
};

}  // namespace zcx::plugin_test
