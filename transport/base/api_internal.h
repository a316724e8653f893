// Internals of the public C API shared by api_*.cc (and a test hook).
#pragma once

#include "base/context.h"

#include <zcx/zcx.h>

#include <map>
#include <set>
#include <memory>

struct zcx_endpoint {
  zcx_context* owner;
  zcx::Endpoint* ep;
};

struct zcx_request {
  zcx_context* owner;
  zcx::Request* req;
};

struct zcx_memreg {
  void* buf;
  size_t size;
};

struct zcx_context {
  std::unique_ptr<zcx::Context> ctx;
  std::map<int, std::unique_ptr<zcx_endpoint>> endpoints;
  std::set<zcx_request*> requests;  // open ones; freed when done or at finalize
  std::set<zcx_memreg*> regs;
};

namespace zcx {

// Handles given to the caller are recorded here so that a stale, foreign or NULL handle is
// an error code rather than a crash (as long as it is not freed memory reused by us).
void handle_add(const void* h);
void handle_remove(const void* h);
bool handle_live(const void* h);

// Test hook: contexts made by zcx_init_* use these options (fake providers) while set.
void api_set_context_options(const ContextOptions* options);

}  // namespace zcx
