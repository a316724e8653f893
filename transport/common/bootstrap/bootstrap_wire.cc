#include "common/bootstrap/bootstrap_wire.h"

#include "common/wire.h"

#include <zcx/zcx.h>

#include <arpa/inet.h>

#include <cstring>

namespace zcx::bootwire {
namespace {

void put_fixed_string(wire::Writer& w, const std::string& s, size_t cap) {
  char buf[kHostBytes > kReasonBytes ? kHostBytes : kReasonBytes] = {};
  size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
  memcpy(buf, s.data(), n);
  w.bytes(buf, cap);
}

// A NUL-padded text field; rejects one without a NUL or with non-printable bytes.
bool get_fixed_string(wire::Reader& r, size_t cap, std::string* out) {
  char buf[kHostBytes > kReasonBytes ? kHostBytes : kReasonBytes];
  r.bytes(buf, cap);
  if (!r.ok()) return false;
  size_t n = strnlen(buf, cap);
  if (n == cap) return false;
  for (size_t i = 0; i < n; ++i)
    if (buf[i] < 0x20 || buf[i] > 0x7e) return false;
  out->assign(buf, n);
  return true;
}

}  // namespace

void encode_addr(const SockAddr& a, uint8_t out[kAddrBytes]) {
  wire::Writer w(out, kAddrBytes);
  uint8_t ip[16] = {};
  if (a.family() == AF_INET) {
    memcpy(ip, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
    w.u16(4);
  } else if (a.family() == AF_INET6) {
    memcpy(ip, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
    w.u16(6);
  } else {
    w.u16(0);
  }
  w.u16(static_cast<uint16_t>(a.port()));
  w.bytes(ip, sizeof ip);
}

bool decode_addr(const uint8_t in[kAddrBytes], SockAddr* out) {
  wire::Reader r(in, kAddrBytes);
  uint16_t fam = r.u16();
  uint16_t port = r.u16();
  uint8_t ip[16];
  r.bytes(ip, sizeof ip);
  if (!r.ok() || port == 0) return false;
  *out = SockAddr{};
  if (fam == 4) {
    auto* s = reinterpret_cast<sockaddr_in*>(&out->storage);
    s->sin_family = AF_INET;
    memcpy(&s->sin_addr, ip, 4);
    out->len = sizeof(sockaddr_in);
  } else if (fam == 6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out->storage);
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, ip, 16);
    out->len = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  out->set_port(port);
  return true;
}

void encode_hello(const Hello& h, uint8_t out[kHelloBytes]) {
  memset(out, 0, kHelloBytes);
  wire::Writer w(out, kHelloBytes);
  w.u32(kMagic);
  w.u16(h.wire_version);
  w.u16(static_cast<uint16_t>(h.kind));
  w.u32(h.lib_version);
  w.u32(h.nranks);
  w.u64(h.secret);
  w.u32(h.rank);
  w.u32(h.pid);
  uint8_t addr[kAddrBytes];
  encode_addr(h.listen, addr);
  w.bytes(addr, sizeof addr);
  put_fixed_string(w, h.host, kHostBytes);
}

Status decode_hello(const uint8_t in[kHelloBytes], Hello* out, std::string* why) {
  wire::Reader r(in, kHelloBytes);
  if (r.u32() != kMagic) {
    *why = "not a zcx bootstrap hello (wrong magic)";
    return Status::kProtocol;
  }
  out->wire_version = r.u16();
  uint16_t kind = r.u16();
  out->kind = static_cast<ConnKind>(kind);
  out->lib_version = r.u32();
  out->nranks = r.u32();
  out->secret = r.u64();
  out->rank = r.u32();
  out->pid = r.u32();
  uint8_t addr[kAddrBytes];
  r.bytes(addr, sizeof addr);
  if (out->wire_version != kWireVersion) return Status::kSuccess;  // check_hello reports it
  if (kind != 1 && kind != 2) {
    *why = "unknown connection kind " + std::to_string(kind);
    return Status::kProtocol;
  }
  if (!decode_addr(addr, &out->listen) || !get_fixed_string(r, kHostBytes, &out->host)) {
    *why = "malformed listen address or host name in hello";
    return Status::kProtocol;
  }
  return Status::kSuccess;
}

Status check_hello(const Hello& h, ConnKind kind, uint64_t secret, int nranks,
                   std::string* why) {
  if (h.wire_version != kWireVersion) {
    *why = "bootstrap wire version " + std::to_string(h.wire_version) + ", expected " +
           std::to_string(kWireVersion) + " (mixed zcx builds in one job?)";
    return Status::kAuth;
  }
  if (h.lib_version != static_cast<uint32_t>(zcx_version())) {
    *why = "zcx library version " + std::to_string(h.lib_version) + ", expected " +
           std::to_string(zcx_version()) + " (every rank must use the same libzcx)";
    return Status::kAuth;
  }
  if (h.secret != secret) {
    *why = "wrong job secret (a process from another job, or ZCX_SECRET differs)";
    return Status::kAuth;
  }
  if (h.kind != kind) {
    *why = "connection of the wrong kind for this listener";
    return Status::kProtocol;
  }
  if (h.nranks != static_cast<uint32_t>(nranks)) {
    *why = "nranks " + std::to_string(h.nranks) + ", expected " + std::to_string(nranks);
    return Status::kMismatch;
  }
  if (h.rank >= static_cast<uint32_t>(nranks)) {
    *why = "rank " + std::to_string(h.rank) + " out of range [0," + std::to_string(nranks) + ")";
    return Status::kMismatch;
  }
  return Status::kSuccess;
}

void encode_reply(Status status, const std::string& reason, uint8_t out[kReplyBytes]) {
  memset(out, 0, kReplyBytes);
  wire::Writer w(out, kReplyBytes);
  w.u32(kMagic);
  w.u16(kWireVersion);
  w.u16(static_cast<uint16_t>(status));
  put_fixed_string(w, reason, kReasonBytes);
}

Status decode_reply(const uint8_t in[kReplyBytes], Status* status, std::string* reason) {
  wire::Reader r(in, kReplyBytes);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  uint16_t code = r.u16();
  if (magic != kMagic || version != kWireVersion || code >= ZCX_STATUS_COUNT ||
      code == ZCX_IN_PROGRESS || !get_fixed_string(r, kReasonBytes, reason))
    return Status::kProtocol;
  *status = static_cast<Status>(code);
  return Status::kSuccess;
}

void encode_frame_header(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  wire::Writer w(out, kFrameHeaderBytes);
  w.u16(static_cast<uint16_t>(h.type));
  w.u16(0);
  w.u32(h.tag);
  w.u64(h.len);
}

Status decode_frame_header(const uint8_t in[kFrameHeaderBytes], FrameHeader* out) {
  wire::Reader r(in, kFrameHeaderBytes);
  uint16_t type = r.u16();
  uint16_t flags = r.u16();
  out->tag = r.u32();
  out->len = r.u64();
  if (type < 1 || type > 5 || flags != 0 || out->len > kMaxFrameBytes) return Status::kProtocol;
  out->type = static_cast<FrameType>(type);
  return Status::kSuccess;
}

void encode_peer_record(const PeerRecord& rec, uint8_t* out) {
  wire::Writer w(out, kPeerRecordBytes);
  w.u32(rec.pid);
  uint8_t addr[kAddrBytes];
  encode_addr(rec.listen, addr);
  w.bytes(addr, sizeof addr);
  put_fixed_string(w, rec.host, kHostBytes);
}

bool decode_peer_record(const uint8_t* in, PeerRecord* out) {
  wire::Reader r(in, kPeerRecordBytes);
  out->pid = r.u32();
  uint8_t addr[kAddrBytes];
  r.bytes(addr, sizeof addr);
  return r.ok() && decode_addr(addr, &out->listen) && get_fixed_string(r, kHostBytes, &out->host);
}

}  // namespace zcx::bootwire
