// The cuda_ipc POST (docs/WIRE.md "cuda_ipc"): written by the receiver per irecv, read by the
// sender, every field bounds-checked before use. A buffer over several cuMem allocations
// (kPieces) lists them after the usual fields, one descriptor each.
#include "common/wire.h"
#include "cuda_ipc/cuda_ipc.h"

namespace zcx::cuda_ipc {
namespace {

void put_export(wire::Writer& w, const Export& e) {
  w.u64(e.base);
  w.u64(e.size);
  w.u64(e.offset);
  w.u64(e.buffer_id);
}

void get_export(wire::Reader& r, Export* e) {
  e->base = r.u64();
  e->size = r.u64();
  e->offset = r.u64();
  e->buffer_id = r.u64();
}

// Whether the pieces hold the capacity: the first from its offset, the others whole.
bool pieces_hold(const PostedBuffer& p) {
  uint64_t room = 0;
  for (size_t i = 0; i < p.pieces.size(); ++i) {
    const Export& e = p.pieces[i];
    if (e.size > kMaxMessage || e.offset > e.size || (i > 0 && e.offset != 0)) return false;
    room += e.size - e.offset;
  }
  return p.cap <= room;
}

// One descriptor per kVmm piece, none otherwise.
bool fds_match(const PostedBuffer& p) {
  size_t vmm = 0;
  for (const Export& e : p.pieces) vmm += e.kind == ExportKind::kVmm;
  return p.fds.size() == vmm;
}

}  // namespace

size_t post_write(uint64_t seq, const PostedBuffer& p, uint8_t* buf) {
  wire::Writer w(buf, kMaxPacket);
  const Export& first = p.pieces.front();
  const bool pieces = p.pieces.size() > 1;
  w.u32(kPostMagic);
  w.u64(seq);
  w.u64(p.cap);
  w.u32(static_cast<uint32_t>(pieces ? ExportKind::kPieces : first.kind));
  put_export(w, first);
  w.bytes(first.legacy, sizeof(first.legacy));
  if (pieces) {
    w.u32(static_cast<uint32_t>(p.pieces.size() - 1));
    for (size_t i = 1; i < p.pieces.size(); ++i) put_export(w, p.pieces[i]);
  }
  return w.size();
}

bool post_read(wire::Reader& r, uint64_t* seq, PostedBuffer* p) {
  *seq = r.u64();
  p->cap = r.u64();
  const uint32_t kind = r.u32();
  Export first;
  get_export(r, &first);
  r.bytes(first.legacy, sizeof(first.legacy));
  const bool pieces = kind == static_cast<uint32_t>(ExportKind::kPieces);
  first.kind = pieces ? ExportKind::kVmm : static_cast<ExportKind>(kind);
  p->pieces.assign(1, first);
  const uint32_t more = pieces ? r.u32() : 0;
  if (!r.ok() || kind > static_cast<uint32_t>(ExportKind::kPieces) ||
      (pieces && (more == 0 || more >= kMaxPieces)))
    return false;
  for (uint32_t i = 0; i < more; ++i) {
    Export e;
    e.kind = ExportKind::kVmm;
    get_export(r, &e);
    p->pieces.push_back(e);
  }
  if (!r.ok() || !fds_match(*p)) return false;
  if (first.kind == ExportKind::kNone) {
    p->pieces[0].size = 0;
    return p->cap == 0;
  }
  return pieces_hold(*p);
}

}  // namespace zcx::cuda_ipc
