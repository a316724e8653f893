#include "common/dl/dl.h"

namespace zcx {

bool DlLibrary::open(std::initializer_list<const char*> names) {
  reset();
  for (const char* n : names) {
    handle_ = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      name_ = n;
      error_.clear();
      return true;
    }
    const char* e = dlerror();
    error_ = e ? e : "dlopen failed";
  }
  return false;
}

void DlLibrary::reset() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
  name_.clear();
}

}  // namespace zcx
