// Registration cache, one per device (MRs belong to the device's PD, so any comm on the
// device can use them: regIsGlobal). Entries cover exact byte ranges, not whole pages, so a
// remote key never exposes bytes outside what the caller registered. A registration that
// lies inside an existing entry shares it (refcount); the MR is deregistered when the last
// reference goes. There is no invalidation on free(): memory must stay allocated while it is
// registered, as with NCCL's cache.
#include "ib/ib.h"

#include "common/log.h"
#include "zcx/config.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zcx::ib {
namespace {

constexpr unsigned kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ;

const char* kind_name(int kind) {
  switch (kind) {
    case ZCX_MEM_HOST: return "host";
    case ZCX_MEM_CUDA: return "CUDA";
    case ZCX_MEM_DMABUF: return "dmabuf";
    default: return "unknown-kind";
  }
}

std::string memlock_text() {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return "unknown";
  if (rl.rlim_cur == RLIM_INFINITY) return "unlimited";
  return std::to_string(rl.rlim_cur / 1024) + " KiB";
}

// Called with dev->mr_mu held: an entry covering [start, start+len), or nullptr.
MrEntry* find_cover(Device* dev, uintptr_t start, size_t len) {
  for (MrEntry* e : dev->mrs) {
    if (e->start > start) break;
    if (start + len <= e->start + e->len) return e;
  }
  return nullptr;
}

void insert_sorted(Device* dev, MrEntry* e) {
  auto at = std::upper_bound(dev->mrs.begin(), dev->mrs.end(), e,
                             [](MrEntry* a, MrEntry* b) { return a->start < b->start; });
  dev->mrs.insert(at, e);
}

Status reg_failed(Device* dev, void* data, size_t size, int kind, const char* path, int err) {
  return set_error(Status::kSystem, kLog,
                   "ib: registering %zu bytes of %s memory at %p on %s failed via %s: %s "
                   "(errno %d). Check `ulimit -l` (now %s) for host memory%s",
                   size, kind_name(kind), data, dev->name.c_str(), path, errno_text(err), err,
                   memlock_text().c_str(),
                   kind == ZCX_MEM_HOST ? "" : ", and that nvidia_peermem or dmabuf is available "
                                               "for GPU memory");
}

}  // namespace

Status mr_register(Device* dev, void* data, size_t size, int kind, MrEntry** out) {
  if (data == nullptr || size == 0 || size > kMaxMessage)
    return set_error(Status::kInvalidArg, kLog, "ib: cannot register %zu bytes at %p", size, data);
  uintptr_t start = reinterpret_cast<uintptr_t>(data);
  {
    std::lock_guard<std::mutex> lock(dev->mr_mu);
    if (MrEntry* e = find_cover(dev, start, size)) {
      ++e->refs;
      *out = e;
      return Status::kSuccess;
    }
  }
  errno = 0;
  ibv_mr* mr = ibv_shim_reg_mr(dev->pd, data, size, kAccess);
  if (mr == nullptr) {
    int err = errno ? errno : EINVAL;
    const char* path = ibv_shim()->reg_mr_iova2 ? "ibv_reg_mr_iova2" : "ibv_reg_mr";
#if ZCX_HAVE_CUDA
    if (kind == ZCX_MEM_CUDA) {  // no peer-memory module: try dmabuf
      int fd = -1;
      uint64_t off = 0;
      if (ok(cuda_dmabuf_fd(data, size, &fd, &off))) {
        UniqueFd owner(fd);
        return mr_register_dmabuf(dev, data, size, kind, off, fd, out);
      }
    }
#endif
    return reg_failed(dev, data, size, kind, path, err);
  }
  auto* e = new MrEntry{dev, start, size, 1, mr, kind};
  std::lock_guard<std::mutex> lock(dev->mr_mu);
  insert_sorted(dev, e);
  *out = e;
  return Status::kSuccess;
}

Status mr_register_dmabuf(Device* dev, void* data, size_t size, int kind, uint64_t offset,
                          int fd, MrEntry** out) {
  const IbvApi* api = ibv_shim();
  if (api == nullptr || api->reg_dmabuf_mr == nullptr)
    return set_error(Status::kUnsupported, kLog,
                     "ib: this libibverbs has no ibv_reg_dmabuf_mr (rdma-core >= 34 needed)");
  if (data == nullptr || size == 0 || fd < 0)
    return set_error(Status::kInvalidArg, kLog, "ib: bad dmabuf registration (%p, %zu, fd %d)",
                     data, size, fd);
  uintptr_t start = reinterpret_cast<uintptr_t>(data);
  errno = 0;
  ibv_mr* mr = api->reg_dmabuf_mr(dev->pd, offset, size, start, fd, static_cast<int>(kAccess));
  if (mr == nullptr) return reg_failed(dev, data, size, kind, "ibv_reg_dmabuf_mr", errno ? errno : EINVAL);
  auto* e = new MrEntry{dev, start, size, 1, mr, kind};
  std::lock_guard<std::mutex> lock(dev->mr_mu);
  insert_sorted(dev, e);
  *out = e;
  return Status::kSuccess;
}

void mr_release(MrEntry* e) {
  if (e == nullptr) return;
  Device* dev = e->dev;
  std::lock_guard<std::mutex> lock(dev->mr_mu);
  if (--e->refs > 0) return;
  auto it = std::find(dev->mrs.begin(), dev->mrs.end(), e);
  if (it != dev->mrs.end()) dev->mrs.erase(it);
  if (int rc = ibv_shim()->dereg_mr(e->mr); rc != 0)
    ZCX_WARN(kLog, "ib: ibv_dereg_mr on %s failed: %s", dev->name.c_str(), errno_text(rc));
  delete e;
}

Status mr_check(const void* mhandle, const void* data, size_t size, const char* what) {
  if (size == 0) return Status::kSuccess;
  const auto* e = static_cast<const MrEntry*>(mhandle);
  uintptr_t a = reinterpret_cast<uintptr_t>(data);
  if (e == nullptr || a < e->start || size > e->len || a - e->start > e->len - size)
    return set_error(Status::kInvalidArg, kLog,
                     "ib: %s buffer %p (+%zu bytes) is not inside its registration %p "
                     "(register it with reg_mr first)",
                     what, data, size, mhandle);
  return Status::kSuccess;
}

}  // namespace zcx::ib
