// ContextClaim: one process-wide table of the contexts held, under a mutex (taken only when
// a communicator over a shared context goes from idle to busy and back).
#include "core/context_claim.h"

#include "common/log.h"

#include <mutex>
#include <unordered_map>

namespace zcx::coll {
namespace {

struct Holders {
  std::mutex mu;
  std::unordered_map<const Context*, std::string> by_context;
};

Holders& holders() {
  static Holders* h = new Holders();  // never destroyed: claims may be released at exit
  return *h;
}

}  // namespace

Status ContextClaim::acquire() {
  if (held_) return Status::kSuccess;
  Holders& h = holders();
  std::lock_guard<std::mutex> lock(h.mu);
  auto [it, taken] = h.by_context.try_emplace(ctx_, holder_);
  if (!taken)
    return set_error(Status::kInvalidUsage, kLogColl,
                     "%s cannot start an operation: %s, made over the same context "
                     "(zcx_comm_init_context), has operations in flight, and communicators over "
                     "one context share its connections. Complete the other's operations first, "
                     "or give this one connections of its own (zcx_comm_split)",
                     holder_.c_str(), it->second.c_str());
  held_ = true;
  return Status::kSuccess;
}

void ContextClaim::release() {
  if (!held_) return;
  Holders& h = holders();
  std::lock_guard<std::mutex> lock(h.mu);
  h.by_context.erase(ctx_);
  held_ = false;
}

}  // namespace zcx::coll
