// The 128-byte unique id (docs/WIRE.md): magic u32 "ZCXU", version u8, 3 reserved zero
// bytes, root address (20 bytes: family u16, port u16, address 16), secret u64, then zeros.
// decode rejects any other magic/version, a bad address, a zero secret or non-zero padding.
#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/bootstrap_internal.h"
#include "common/bootstrap/bootstrap_wire.h"
#include "common/check.h"
#include "common/random.h"
#include "common/wire.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace zcx {
namespace {

constexpr uint32_t kIdMagic = 0x5558435a;  // "ZCXU"
constexpr uint8_t kIdVersion = 1;
constexpr size_t kIdUsedBytes = 4 + 4 + bootwire::kAddrBytes + 8;

// Listening sockets made by unique_id_create, waiting for rank 0 of this process.
struct Reserved {
  uint64_t secret;
  int port;
  UniqueFd fd;
};
std::mutex g_reserved_mu;
std::vector<Reserved>& reserved() {
  static std::vector<Reserved> r;
  return r;
}

}  // namespace

Status unique_id_encode(const UniqueId& id, zcx_unique_id_t* out) {
  ZCX_CHECK_ARG(out != nullptr, kLogBootstrap, "unique id output is NULL");
  if (id.secret == 0 || id.root.port() == 0)
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "cannot encode a unique id without a secret and a root port");
  memset(out->internal, 0, sizeof out->internal);
  wire::Writer w(out->internal, sizeof out->internal);
  w.u32(kIdMagic);
  w.u8(kIdVersion);
  w.u8(0);
  w.u16(0);
  uint8_t addr[bootwire::kAddrBytes];
  bootwire::encode_addr(id.root, addr);
  w.bytes(addr, sizeof addr);
  w.u64(id.secret);
  return w.ok() ? Status::kSuccess : Status::kInternal;
}

Status unique_id_decode(const zcx_unique_id_t& in, UniqueId* out) {
  ZCX_CHECK_ARG(out != nullptr, kLogBootstrap, "unique id output is NULL");
  wire::Reader r(in.internal, sizeof in.internal);
  uint32_t magic = r.u32();
  uint8_t version = r.u8();
  uint8_t pad8 = r.u8();
  uint16_t pad16 = r.u16();
  uint8_t addr[bootwire::kAddrBytes];
  r.bytes(addr, sizeof addr);
  uint64_t secret = r.u64();
  if (magic != kIdMagic)
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "not a zcx unique id (wrong magic): was it made by zcx_get_unique_id?");
  if (version != kIdVersion)
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "unique id version %u, this zcx reads version %u", version, kIdVersion);
  bool padding_zero = pad8 == 0 && pad16 == 0;
  for (size_t i = kIdUsedBytes; i < sizeof in.internal; ++i) padding_zero &= in.internal[i] == 0;
  UniqueId id;
  if (!r.ok() || !padding_zero || secret == 0 || !bootwire::decode_addr(addr, &id.root))
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "corrupt unique id (bad address, zero secret or non-zero padding)");
  id.secret = secret;
  *out = id;
  return Status::kSuccess;
}

Status unique_id_create(UniqueId* out) {
  ZCX_CHECK_ARG(out != nullptr, kLogBootstrap, "unique id output is NULL");
  SockAddr local;
  std::string ifname;
  ZCX_TRY(socket_local_address(&local, &ifname));
  UniqueFd fd;
  SockAddr bound;
  ZCX_TRY(socket_listen(local, 256, &fd, &bound));
  UniqueId id;
  id.root = bound;
  ZCX_TRY(random_secret(&id.secret));
  ZCX_INFO(kLogBootstrap, "unique id: root %s (interface %s)", bound.to_string().c_str(),
           ifname.c_str());
  std::lock_guard<std::mutex> lock(g_reserved_mu);
  reserved().push_back(Reserved{id.secret, bound.port(), std::move(fd)});
  *out = id;
  return Status::kSuccess;
}

UniqueFd take_reserved_listener(const UniqueId& id) {
  std::lock_guard<std::mutex> lock(g_reserved_mu);
  auto& r = reserved();
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it->secret == id.secret && it->port == id.root.port()) {
      UniqueFd fd = std::move(it->fd);
      r.erase(it);
      return fd;
    }
  }
  return UniqueFd();
}

}  // namespace zcx
