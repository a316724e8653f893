#include "harness_util.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace zcx::plugin_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLimit = std::chrono::seconds(20);

std::string rc_text(const char* what, ncclResult_t r) {
  return std::string(what) + " returned ncclResult " + std::to_string(static_cast<int>(r));
}

}  // namespace

std::vector<Case> all_cases() {
  static const Variant kFake{"fake", ZCX_PLUGIN_FAKE_PATH, "fake"};
  static const Variant kReal{"real", ZCX_PLUGIN_REAL_PATH, nullptr};
  std::vector<Case> out;
  for (const Variant& v : {kReal, kFake})
    for (int version : {11, 10, 9, 8}) out.push_back(Case{v, version});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(info.param.variant.label) + "_v" + std::to_string(info.param.version);
}

namespace {

// PLUGIN_HARNESS_PROVIDER pins the provider of the "real" variant (the rdma guest runs the
// harness with ib). Without any RDMA device present, an ib run skips; with one, it must pass.
const char* real_provider(std::string* skip) {
  const char* forced = getenv("PLUGIN_HARNESS_PROVIDER");
  if (forced == nullptr || *forced == '\0') return nullptr;
  if (strcmp(forced, "ib") == 0) {
    bool any = false;
    if (DIR* dir = opendir("/sys/class/infiniband")) {
      while (dirent* e = readdir(dir)) any |= e->d_name[0] != '.';
      closedir(dir);
    }
    if (!any) *skip = "PLUGIN_HARNESS_PROVIDER=ib but no RDMA device in /sys/class/infiniband";
  }
  return forced;
}

}  // namespace

bool open_plugin(const Case& c, NetDriver* d, std::string* why, std::string* skip) {
  const char* provider = c.variant.provider;
  bool forced = false;
  if (provider == nullptr) {
    provider = real_provider(skip);
    if (!skip->empty()) return false;
    forced = provider != nullptr;
  }
  if (provider != nullptr) setenv("ZCX_NET_PROVIDER", provider, 1);
  else unsetenv("ZCX_NET_PROVIDER");
  if (!d->load(c.variant.path, c.version, why)) return false;
  ncclResult_t r = d->init();
  if (r == ncclSuccess) return true;
  std::string reason = "init failed (ncclResult " + std::to_string(static_cast<int>(r)) + ")";
  for (const std::string& line : logged_lines())
    if (line.find("no usable provider") != std::string::npos) reason = line;
  if (c.variant.provider == nullptr && !forced) *skip = "plugin has no usable provider here: " + reason;
  else *why = reason;
  return false;
}

void fill(void* buf, size_t size, unsigned seed) {
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(seed * 131 + i * 31 + (i >> 8));
}

bool verify(const void* buf, size_t size, unsigned seed, std::string* why) {
  const auto* p = static_cast<const unsigned char*>(buf);
  for (size_t i = 0; i < size; ++i) {
    auto want = static_cast<unsigned char>(seed * 131 + i * 31 + (i >> 8));
    if (p[i] != want) {
      *why = "byte " + std::to_string(i) + " of " + std::to_string(size) + " (seed " +
             std::to_string(seed) + "): got " + std::to_string(p[i]) + " want " + std::to_string(want);
      return false;
    }
  }
  return true;
}

std::string connect_pair_single_thread(NetDriver& d, int dev, void** sc, void** rc, void** lc,
                                       double* max_call_ms) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  *sc = *rc = *lc = nullptr;
  ncclResult_t r = d.listen(dev, handle, lc);
  if (r != ncclSuccess || *lc == nullptr) return rc_text("listen", r);
  auto start = Clock::now();
  *max_call_ms = 0;
  // NCCL's GDR self-test shape: one thread alternates connect and accept.
  while (*sc == nullptr || *rc == nullptr) {
    if (Clock::now() - start > kLimit) return "connect/accept did not finish in 20 s";
    auto t0 = Clock::now();
    if (*sc == nullptr && (r = d.connect(dev, handle, sc)) != ncclSuccess) return rc_text("connect", r);
    if (*rc == nullptr && (r = d.accept(*lc, rc)) != ncclSuccess) return rc_text("accept", r);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ms > *max_call_ms) *max_call_ms = ms;
  }
  return "";
}

std::string isend_retry(NetDriver& d, void* sc, void* data, size_t size, int tag, void* mh,
                        void** req, int* null_retries) {
  auto start = Clock::now();
  *req = nullptr;
  while (*req == nullptr) {
    ncclResult_t r = d.isend(sc, data, size, tag, mh, req);
    if (r != ncclSuccess) return rc_text("isend", r);
    if (*req != nullptr) break;
    if (null_retries != nullptr) ++*null_retries;
    if (Clock::now() - start > kLimit) return "isend returned a NULL request for 20 s";
  }
  return "";
}

std::string irecv_retry(NetDriver& d, void* rc, int n, void** data, size_t* sizes, int* tags,
                        void** mhs, void** req, bool optional_completion) {
  auto start = Clock::now();
  for (;;) {
    // NCCL pre-sets the sentinel for LL/LL128 receives.
    *req = optional_completion ? reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION) : nullptr;
    ncclResult_t r = d.irecv(rc, n, data, sizes, tags, mhs, req);
    if (r != ncclSuccess) return rc_text("irecv", r);
    if (*req == reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION))
      return "irecv left the optional-completion sentinel in *request instead of a request";
    if (*req != nullptr) return "";
    if (Clock::now() - start > kLimit) return "irecv returned a NULL request for 20 s";
  }
}

std::string wait_done(NetDriver& d, void* req, int* sizes) {
  auto start = Clock::now();
  int done = 0;
  while (!done) {
    ncclResult_t r = d.test(req, &done, sizes);
    if (r != ncclSuccess) return rc_text("test", r);
    if (!done && Clock::now() - start > kLimit) return "request not done after 20 s";
  }
  return "";
}

}  // namespace zcx::plugin_test
