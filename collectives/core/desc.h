// The operation descriptor that travels ahead of the data on every link an operation uses
// (docs/WIRE.md: "collective descriptor"). The receiver compares it with its own: ranks that
// disagree on the operation, type, count, root, algorithm or sequence fail with kMismatch
// instead of exchanging garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zcx::coll {

inline constexpr uint32_t kDescMagic = 0x7a637844;  // "Dxcz"
inline constexpr uint16_t kDescVersion = 1;

// Fixed-size, little-endian host layout (all ranks of a job share an architecture; the
// transport handshake already rejects mixed builds).
struct OpDesc {
  uint32_t magic = kDescMagic;
  uint16_t version = kDescVersion;
  uint8_t kind = 0;    // CollKind
  uint8_t dtype = 0;   // zcx_dtype_t
  uint8_t redop = 0;   // zcx_redop_t
  uint8_t algo = 0;    // Algo
  uint16_t flags = 0;
  int32_t root = -1;
  uint32_t nranks = 0;
  uint32_t reserved = 0;  // explicit: no uninitialised padding goes on the wire
  uint64_t comm_id = 0;
  uint64_t seq = 0;    // operation number on this communicator
  uint64_t count = 0;  // elements (p2p / per-message forms: this message's bytes)
  uint64_t aux = 0;    // hash of the count/displacement arrays of the V forms
  uint64_t chunk = 0;  // pipeline chunk in bytes: changes the message pattern
};
static_assert(sizeof(OpDesc) == 64, "OpDesc is a wire format");

// "" when equal, else what differs ("count 100 vs 200, root 0 vs 1").
std::string desc_diff(const OpDesc& mine, const OpDesc& theirs);
// "allreduce #7 float32 sum count 100 algo ring", "broadcast #8 int8 count 4 root 1 algo tree".
std::string desc_describe(const OpDesc& d);
// What to do about a difference: issue the same calls, or (when only the plan differs) set
// the selector's variables alike on every rank.
const char* desc_mismatch_advice(const OpDesc& mine, const OpDesc& theirs);
// A 64-bit hash of every field: equal descriptors hash equal; descriptors that differ in one
// word always hash differently, in several words except by a 2^-64 accident (the shared
// lane compares hashes, not 64-byte descriptors).
uint64_t desc_hash(const OpDesc& d);
uint64_t hash_counts(const size_t* a, size_t n, uint64_t seed);

}  // namespace zcx::coll
