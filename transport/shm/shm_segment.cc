// Segment geometry and the host identity (the memfd itself: common/memfd).
#include "common/check.h"
#include "shm/shm.h"

#include <cstdio>
#include <cstring>

namespace zcx::shm {
namespace {

bool pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The fine cut (Layout): kFineChunkBytes chunks over a quarter of the ring.
void fine_cut(Layout* l) {
  if (l->chunk_bytes <= kFineChunkBytes || l->chunk_bytes % kFineChunkBytes != 0) return;
  const size_t fit = l->ring_bytes() / 4 / kFineChunkBytes;
  uint32_t n = 1;
  while (size_t(n) * 2 <= fit) n *= 2;
  if (n < 4) return;  // a shallower pipeline stalls whenever either side is descheduled
  l->fine_nchunks = n;
  l->fine_chunk_bytes = kFineChunkBytes;
}

}  // namespace

Status layout_make(uint32_t nslots, uint32_t slot_bytes, uint32_t nchunks,
                   uint32_t chunk_bytes, Layout* out) {
  if (!pow2(nslots) || nslots > 4096 || slot_bytes < 128 || slot_bytes > (1u << 20) ||
      slot_bytes % 64 != 0 || !pow2(nchunks) || nchunks > 64 || chunk_bytes < 4096 ||
      chunk_bytes > (64u << 20) || chunk_bytes % 4096 != 0)
    return set_error(Status::kInvalidArg, kLogShm,
                     "shm ring geometry out of range: %u slots of %u bytes, %u chunks of %u "
                     "bytes (check ZCX_SHM_SLOTS/SLOT_BYTES/CHUNKS/CHUNK_BYTES)",
                     nslots, slot_bytes, nchunks, chunk_bytes);
  Layout l;
  l.nslots = nslots;
  l.slot_bytes = slot_bytes;
  l.nchunks = nchunks;
  l.chunk_bytes = chunk_bytes;
  l.sender_off = sizeof(SegHeader);
  l.receiver_off = l.sender_off + sizeof(SenderLine);
  l.slots_off = l.receiver_off + sizeof(ReceiverLine);
  l.chunks_off = round_up(l.slots_off + size_t(nslots) * slot_bytes, 4096);
  l.total = l.chunks_off + l.ring_bytes();
  fine_cut(&l);
  *out = l;
  return Status::kSuccess;
}

Status host_boot_id(uint8_t out[16]) {
  memset(out, 0, 16);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f == nullptr)
    return set_error(Status::kSystem, kLogShm, "cannot read /proc/sys/kernel/random/boot_id: %s",
                     errno_text(errno));
  char text[64] = {};
  bool ok = fgets(text, sizeof(text), f) != nullptr;
  fclose(f);
  int n = 0;
  for (const char* p = text; ok && *p != '\0' && n < 32; ++p) {
    int v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10 : -1;
    if (v < 0) continue;
    out[n / 2] = static_cast<uint8_t>(out[n / 2] | (v << ((n % 2) ? 0 : 4)));
    ++n;
  }
  if (n != 32)
    return set_error(Status::kSystem, kLogShm, "unexpected boot_id format: '%s'", text);
  return Status::kSuccess;
}

}  // namespace zcx::shm
