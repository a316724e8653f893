#include "base/handle.h"

#include "common/wire.h"

#include <cstring>

namespace zcx {

Status handle_encode(uint8_t provider_id, const void* payload, size_t len, void* handle) {
  if (handle == nullptr || (payload == nullptr && len != 0))
    return set_error(Status::kInvalidArg, kLogNet, "handle_encode: NULL argument");
  if (len > kHandlePayloadMax)
    return set_error(Status::kInvalidArg, kLogNet, "handle payload of %zu bytes exceeds %zu",
                     len, kHandlePayloadMax);
  memset(handle, 0, ZCX_HANDLE_BYTES);
  wire::Writer w(handle, ZCX_HANDLE_BYTES);
  w.u32(kHandleMagic);
  w.u8(kHandleVersion);
  w.u8(provider_id);
  w.u16(static_cast<uint16_t>(len));
  w.bytes(payload, len);
  return w.ok() ? Status::kSuccess : Status::kInternal;
}

Status handle_decode(const void* handle, uint8_t provider_id, void* payload, size_t cap,
                     size_t* len) {
  if (handle == nullptr || payload == nullptr || len == nullptr)
    return set_error(Status::kInvalidArg, kLogNet, "handle_decode: NULL argument");
  wire::Reader r(handle, ZCX_HANDLE_BYTES);
  uint32_t magic = r.u32();
  uint8_t version = r.u8();
  uint8_t id = r.u8();
  size_t n = r.u16();
  if (magic != kHandleMagic)
    return set_error(Status::kInvalidArg, kLogNet,
                     "connection handle is corrupt or foreign (magic 0x%08x)", magic);
  if (version != kHandleVersion)
    return set_error(Status::kInvalidArg, kLogNet,
                     "connection handle version %u, this zcx reads version %u", version,
                     kHandleVersion);
  if (id != provider_id)
    return set_error(Status::kInvalidArg, kLogNet,
                     "connection handle is for provider id %u, expected %u", id, provider_id);
  if (n > kHandlePayloadMax || n > cap)
    return set_error(Status::kInvalidArg, kLogNet,
                     "connection handle payload length %zu is out of bounds", n);
  r.bytes(payload, n);
  *len = n;
  return r.ok() ? Status::kSuccess : Status::kInvalidArg;
}

}  // namespace zcx
