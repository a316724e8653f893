// Algorithm and chunk selection by an alpha-beta (Hockney) cost model per link class
// (shared/reference/collectives.md §5.2). Every decision can be explained in one line,
// logged under ZCX_DEBUG_SUBSYS=TUNING. ZCX_ALGO overrides the model:
//   ZCX_ALGO=ring                          every collective that has a ring
//   ZCX_ALGO=allreduce:rhd,broadcast:chain per collective
// ZCX_CHUNK_SIZE (bytes, 0 = model) fixes the pipeline chunk.
#pragma once

#include "common/status.h"

#include <cstddef>
#include <string>

namespace zcx::coll {

enum class CollKind : int {
  kAllreduce, kBroadcast, kReduce, kAllgather, kReducescatter, kAlltoall,
  kAllgatherv, kReducescatterv, kAlltoallv, kBarrier, kSendRecv, kCount
};
const char* coll_kind_name(CollKind k);

enum class Algo : int {
  kRing, kTree, kRhd, kBinomial, kChain, kPairwise, kDirect, kHier, kShared, kCount
};
const char* algo_name(Algo a);
bool algo_from_name(const std::string& name, Algo* out);

// The shared lane (core/shared_lane.h): a communicator whose ranks all run on one host moves
// contributions of up to kSharedMaxBytes per rank through one shared segment.
inline constexpr size_t kSharedMaxBytes = 4096;
inline constexpr int kSharedMaxRanks = 64;
// The bulk lane (core/shared_lane.h) carries larger collectives in pieces of up to
// kSharedBulkMaxPiece bytes per rank and round; n ranks share n*(n+1) pieces.
inline constexpr size_t kSharedBulkMaxPiece = size_t{1} << 20;
inline constexpr size_t kSharedBulkMinPiece = 4096;
// The piece size for `nranks` within `budget` bytes of segment (0: too small for a bulk lane).
size_t shared_bulk_piece(int nranks, size_t budget);

enum class LinkClass : int { kShm = 0, kNet = 1, kCount };

struct ModelParams {
  double alpha_us[2];      // per-message latency, by LinkClass
  double bw_gbs[2];        // one direction of a link, GB/s (1e9 B/s)
  double reduce_gbs;       // CPU reduction throughput (bytes of output per second / 1e9)
};
ModelParams model_params();  // ZCX_COLL_{ALPHA_US,BW_GBS}_{SHM,NET}, ZCX_COLL_REDUCE_GBS

// Whether the host's ranks outnumber its CPUs, as all its members agree (at the shared
// lane's set-up, core/comm_lane.cc).
enum class Oversubscribed : int { kNo, kYes, kUnknown };

struct SelectInput {
  CollKind kind = CollKind::kAllreduce;
  size_t bytes = 0;        // per-rank vector (allreduce/bcast/reduce), total gathered/scattered
                           // (AG/RS and V forms), or total sent per rank (alltoall)
  int nranks = 1;
  LinkClass link = LinkClass::kShm;  // the slowest link class the communicator spans
  int nnodes = 1;          // hosts the communicator spans
  int ppn = 1;             // most ranks on one host
  bool shared_lane = false;  // the communicator can use the shared lane (one host, 2..64 ranks)
  size_t shared_bulk_piece = 0;  // its bulk lane's piece in bytes (0: none)
  // kYes: the bulk lane also takes broadcasts and allgathers. kUnknown (the lane is not set
  // up yet): it may, so that such a call sets the lane up and is then chosen again.
  Oversubscribed oversubscribed = Oversubscribed::kNo;
};

// Whether the shared lane can carry this operation: a per-rank contribution that fits a
// slot, or (where the communicator has a bulk lane) an allreduce, reduce, broadcast,
// allgather or reducescatter of any size.
bool shared_lane_fits(const SelectInput& in);
// Whether it goes through the bulk lane: one of those larger than a slot, or a non-empty
// reducescatter (which has no slot form).
bool shared_lane_bulk(const SelectInput& in);

struct Choice {
  Algo algo = Algo::kDirect;
  size_t chunk = 0;        // pipeline chunk in bytes, 0 = one message per step
  double est_us = 0;
  std::string why;         // e.g. "allreduce 4 MiB p=8 net: ring 812us* tree 1630us ..."
};

// The algorithms that implement a collective (the first is the default fallback).
int candidates(CollKind k, Algo* out, int max);
// Model time of `algo` for `in` with `chunk` bytes per message (0 = unchunked).
double estimate_us(Algo algo, const SelectInput& in, const ModelParams& m, size_t chunk);
// The model's chunk for `algo` (0 when it does not pipeline).
size_t model_chunk(Algo algo, const SelectInput& in, const ModelParams& m);
// Picks, honouring ZCX_ALGO / ZCX_CHUNK_SIZE; an override that does not apply to this
// collective warns once and falls back to the model.
Choice select(const SelectInput& in);

}  // namespace zcx::coll
