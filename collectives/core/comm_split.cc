// zcx_comm_split. A new communicator gets a context of its own (bootstrap, connections), as
// ncclCommSplit makes new connections: communicators sharing one context share its
// connections, whose messages are matched in order, so two of them with operations in flight
// at once (request-based calls, or two threads) had their messages cross. Each group's first
// member makes the new bootstrap's unique id; an allgather over the parent hands it round.
#include "common/bootstrap/bootstrap.h"
#include "common/log.h"
#include "core/comm.h"

#include <algorithm>
#include <cstring>

namespace zcx::coll {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The members of `color`, ordered by key then old rank: (key, old rank).
std::vector<std::pair<int64_t, int>> members_of(const std::vector<int64_t>& all, int color) {
  std::vector<std::pair<int64_t, int>> members;
  for (size_t r = 0; 2 * r < all.size(); ++r)
    if (all[2 * r] == color) members.push_back({all[2 * r + 1], static_cast<int>(r)});
  std::sort(members.begin(), members.end());
  return members;
}

// A fresh unique id for the new group's bootstrap (all zero when it could not be made: the
// members see that and fail together instead of waiting for a root that never listens).
zcx_unique_id_t leader_id() {
  zcx_unique_id_t out{};
  UniqueId id;
  if (unique_id_create(&id) != Status::kSuccess || unique_id_encode(id, &out) != Status::kSuccess) {
    ZCX_WARN(kLogColl, "split: cannot make the new communicator's bootstrap root: %s",
             last_error());
    std::memset(&out, 0, sizeof out);
  }
  return out;
}

}  // namespace

Status Comm::gather(const void* mine, void* all, size_t bytes) {
  OpArgs a;
  a.kind = CollKind::kAllgather;
  a.sendbuf = mine;
  a.recvbuf = all;
  a.count = bytes;
  a.dtype = ZCX_UINT8;
  return run(a);
}

Status Comm::split(int color, int key, std::unique_ptr<Comm>* out) {
  *out = nullptr;
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * world_.size());
  ZCX_TRY(gather(mine, all.data(), sizeof mine));
  std::vector<std::pair<int64_t, int>> members;
  if (color >= 0) members = members_of(all, color);
  const bool leader = !members.empty() && members[0].second == rank_;
  const zcx_unique_id_t my_id = leader ? leader_id() : zcx_unique_id_t{};
  std::vector<zcx_unique_id_t> ids(world_.size());
  ZCX_TRY(gather(&my_id, ids.data(), sizeof my_id));
  if (color < 0) return Status::kSuccess;
  int newrank = 0;
  while (members[newrank].second != rank_) ++newrank;
  const int nnew = static_cast<int>(members.size());
  UniqueId id;
  if (unique_id_decode(ids[members[0].second], &id) != Status::kSuccess)
    return set_error(Status::kRemote, kLogColl, "split of '%s': %s (the new group's first "
                     "member) could not make its bootstrap root", name_.c_str(),
                     peer_name(members[0].second).c_str());
  std::unique_ptr<Bootstrap> bs;
  ZCX_TRY(Bootstrap::init(id, newrank, nnew, &bs));
  std::unique_ptr<Context> ctx;
  ZCX_TRY(Context::create(std::move(bs), &ctx));
  std::vector<int> world(members.size());
  for (int r = 0; r < nnew; ++r) world[r] = r;
  Context* raw = ctx.get();
  return create(raw, std::move(ctx), std::move(world), newrank, mix(mix(id_, seq_), color),
                name_ + "/" + std::to_string(color), out);
}

}  // namespace zcx::coll
