// Infrastructure for run-time-loaded shims (libibverbs, CUDA, UCX): libzcx never links
// these libraries, so it loads and runs where they are absent.
#pragma once

#include "common/status.h"

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace zcx {

// RAII dlopen handle. Destruction dlcloses; never throws.
class DlLibrary {
 public:
  DlLibrary() = default;
  ~DlLibrary() { reset(); }
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;

  // Tries each name in turn (e.g. "libibverbs.so.1", "libibverbs.so"); records why the
  // last one failed in error().
  bool open(std::initializer_list<const char*> names);
  bool is_open() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  const std::string& loaded_name() const { return name_; }
  void reset();

  // Resolves `name` into `fn`; false (and error()) when missing.
  template <typename Fn>
  bool symbol(const char* name, Fn*& fn) {
    void* p = handle_ ? dlsym(handle_, name) : nullptr;
    fn = reinterpret_cast<Fn*>(p);
    if (p == nullptr) error_ = std::string("missing symbol ") + name + " in " + name_;
    return p != nullptr;
  }
  // symbol(), and on failure the reason in *why (when given): for chains of required entry
  // points, `need(a) && need(b) && ...`.
  template <typename Fn>
  bool need(const char* name, Fn*& fn, std::string* why) {
    if (symbol(name, fn)) return true;
    if (why) *why = error_;
    return false;
  }

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

}  // namespace zcx
