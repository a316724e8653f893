// A symbol of the simulated CUDA runtime (tests/gpu/fake_cuda) that tests and the fake
// providers use: its counters, its DMA copy. Null when the loaded runtime is a real one, or
// before any runtime is loaded (ZCX_CUDA_RUNTIME_LIBRARY names the simulator where it is
// used). A found symbol keeps its library's reference, so the runtime stays loaded.
#pragma once

#include <dlfcn.h>

#include <cstdlib>

namespace zcx::test {

template <typename Fn>
Fn simulated_cuda_symbol(const char* name) {
  const char* lib = std::getenv("ZCX_CUDA_RUNTIME_LIBRARY");
  void* h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* sym = h ? dlsym(h, name) : nullptr;
  if (h != nullptr && sym == nullptr) dlclose(h);
  return reinterpret_cast<Fn>(sym);
}

}  // namespace zcx::test
