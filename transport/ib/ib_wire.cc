// The ib handshake message (docs/WIRE.md "ib hello"): fixed 256 bytes, little-endian.
#include "ib/ib.h"

#include "common/wire.h"

#include <cstring>

namespace zcx::ib {
namespace {
constexpr uint32_t kHelloMagic = 0x4942585a;  // "ZXBI"
constexpr uint16_t kHelloVersion = 1;
}  // namespace

void hello_encode(const Hello& h, uint16_t kind, uint8_t* out) {
  memset(out, 0, kHelloBytes);
  wire::Writer w(out, kHelloBytes);
  w.u32(kHelloMagic);
  w.u16(kHelloVersion);
  w.u16(kind);
  w.u64(h.secret);
  w.u64(h.nonce);
  w.u32(static_cast<uint32_t>(h.rank));
  w.u32(static_cast<uint32_t>(h.pid));
  w.str(h.host.substr(0, ZCX_HOST_NAME_BYTES - 1));
  w.u8(h.nqps);
  w.u8(h.mtu);
  w.u8(h.link_layer);
  w.u16(h.lid);
  w.bytes(h.gid.raw, 16);
  w.u32(h.psn);
  for (int i = 0; i < kMaxQps; ++i) w.u32(h.qpn[i]);
  w.u64(h.buf_addr);
  w.u32(h.buf_rkey);
}

Status hello_decode(const uint8_t* in, uint16_t kind, Hello* h, const std::string& from) {
  wire::Reader r(in, kHelloBytes);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  uint16_t got_kind = r.u16();
  if (magic != kHelloMagic || got_kind != kind)
    return set_error(Status::kProtocol, kLog,
                     "ib: %s sent a malformed handshake (magic 0x%08x, kind %u): not a zcx ib "
                     "peer, or a mismatched handle",
                     from.c_str(), magic, got_kind);
  if (version != kHelloVersion)
    return set_error(Status::kAuth, kLog,
                     "ib: %s speaks ib wire version %u, this library %u: use the same zcx "
                     "version on every node",
                     from.c_str(), version, kHelloVersion);
  h->secret = r.u64();
  h->nonce = r.u64();
  h->rank = static_cast<int32_t>(r.u32());
  h->pid = static_cast<int32_t>(r.u32());
  h->host = r.str(ZCX_HOST_NAME_BYTES - 1);
  h->nqps = r.u8();
  h->mtu = r.u8();
  h->link_layer = r.u8();
  h->lid = r.u16();
  r.bytes(h->gid.raw, 16);
  h->psn = r.u32() & 0xffffff;
  for (int i = 0; i < kMaxQps; ++i) h->qpn[i] = r.u32();
  h->buf_addr = r.u64();
  h->buf_rkey = r.u32();
  bool sane = r.ok() && h->nqps >= 1 && h->nqps <= kMaxQps && h->mtu >= IBV_MTU_256 &&
              h->mtu <= IBV_MTU_4096 && h->buf_addr != 0;
  for (int i = 0; sane && i < h->nqps; ++i) sane = h->qpn[i] != 0 && h->qpn[i] < (1u << 24);
  if (!sane)
    return set_error(Status::kProtocol, kLog,
                     "ib: %s sent an out-of-range handshake (qps %u, mtu %u)", from.c_str(),
                     h->nqps, h->mtu);
  return Status::kSuccess;
}

}  // namespace zcx::ib
