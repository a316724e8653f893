// Communicators made over one context with zcx_comm_init_context share its connections,
// whose messages are matched in order: operations of two of them in flight at once would
// interleave their messages (coll.h). The communicator whose operations are in flight holds
// the context's claim; another's operation then fails at once, naming both, instead of as a
// tag mismatch later (possibly on a peer, about a message it never sent).
#pragma once

#include "base/context.h"
#include "common/status.h"

#include <string>

namespace zcx::coll {

class ContextClaim {
 public:
  ContextClaim(const Context* ctx, std::string holder) : ctx_(ctx), holder_(std::move(holder)) {}
  ~ContextClaim() { release(); }
  ContextClaim(const ContextClaim&) = delete;
  ContextClaim& operator=(const ContextClaim&) = delete;

  // Held already, or taken now; kInvalidUsage naming the holder when another has it.
  [[nodiscard]] Status acquire();
  void release();

 private:
  const Context* ctx_;
  std::string holder_;  // "communicator 'name'", as errors name it
  bool held_ = false;
};

}  // namespace zcx::coll
