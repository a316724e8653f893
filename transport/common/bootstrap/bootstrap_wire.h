// On-wire formats of the bootstrap (docs/WIRE.md, "Bootstrap"). All little-endian, written
// and read through common/wire.h so every field from a peer is bounds-checked.
//
//   Hello  (128 bytes, client -> server, first bytes of every bootstrap connection)
//   Reply  (128 bytes, server -> client: accepted, or rejected with a reason)
//   Frame  (16-byte header + payload) for everything after the handshake.
#pragma once

#include "common/socket.h"
#include "common/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace zcx::bootwire {

inline constexpr uint32_t kMagic = 0x4258435a;  // "ZCXB"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kHelloBytes = 128;
inline constexpr size_t kReplyBytes = 128;
inline constexpr size_t kFrameHeaderBytes = 16;
inline constexpr size_t kHostBytes = 64;      // host name incl. NUL padding
inline constexpr size_t kAddrBytes = 20;      // family u16, port u16, 16 address bytes
inline constexpr size_t kReasonBytes = 120;
inline constexpr size_t kPeerRecordBytes = 4 + kAddrBytes + kHostBytes;
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 30;

// Which listener a connection is for.
enum class ConnKind : uint16_t { kRoot = 1, kPeer = 2 };

struct Hello {
  uint16_t wire_version = kWireVersion;
  ConnKind kind = ConnKind::kRoot;
  uint32_t lib_version = 0;
  uint32_t nranks = 0;
  uint64_t secret = 0;
  uint32_t rank = 0;
  uint32_t pid = 0;
  SockAddr listen;     // where this rank accepts bootstrap peer connections
  std::string host;
};

void encode_hello(const Hello& h, uint8_t out[kHelloBytes]);
// kProtocol when the magic is wrong or a field is malformed (the bytes are not a zcx hello).
Status decode_hello(const uint8_t in[kHelloBytes], Hello* out, std::string* why);

// Checks a decoded hello against this job. Returns kSuccess, or kAuth (secret or version)
// / kMismatch (nranks, rank) with *why set. Never puts the secret into *why.
Status check_hello(const Hello& h, ConnKind kind, uint64_t secret, int nranks,
                   std::string* why);

void encode_reply(Status status, const std::string& reason, uint8_t out[kReplyBytes]);
Status decode_reply(const uint8_t in[kReplyBytes], Status* status, std::string* reason);

enum class FrameType : uint16_t {
  kTable = 1,         // root -> rank: nranks peer records
  kGather = 2,        // rank -> root: this rank's allgather slot
  kGatherResult = 3,  // root -> rank: all slots
  kError = 4,         // root -> rank: the job failed; payload is the reason text
  kMessage = 5,       // rank -> rank: bootstrap send/recv payload
};

struct FrameHeader {
  FrameType type = FrameType::kError;
  uint32_t tag = 0;
  uint64_t len = 0;
};

void encode_frame_header(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
Status decode_frame_header(const uint8_t in[kFrameHeaderBytes], FrameHeader* out);

struct PeerRecord {
  uint32_t pid = 0;
  SockAddr listen;
  std::string host;
};
void encode_peer_record(const PeerRecord& r, uint8_t* out);  // kPeerRecordBytes
bool decode_peer_record(const uint8_t* in, PeerRecord* out);

void encode_addr(const SockAddr& a, uint8_t out[kAddrBytes]);
bool decode_addr(const uint8_t in[kAddrBytes], SockAddr* out);

}  // namespace zcx::bootwire
