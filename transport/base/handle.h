// The versioned connection handle (<= 128 bytes) that listen writes and connect reads.
// Layout (docs/WIRE.md): magic u32 "ZCXH", version u8, provider id u8, payload length u16,
// payload (<= 120 bytes). decode rejects a wrong magic, version, provider or length.
#pragma once

#include "base/provider.h"
#include "common/status.h"

#include <cstddef>
#include <cstdint>

namespace zcx {

inline constexpr uint32_t kHandleMagic = 0x4843585a;  // "ZCXH" little-endian
inline constexpr uint8_t kHandleVersion = 1;
inline constexpr size_t kHandleHeaderBytes = 8;
inline constexpr size_t kHandlePayloadMax = ZCX_HANDLE_BYTES - kHandleHeaderBytes;

Status handle_encode(uint8_t provider_id, const void* payload, size_t len, void* handle);
// Copies the payload into `payload` (capacity `cap`) and its length into *len.
Status handle_decode(const void* handle, uint8_t provider_id, void* payload, size_t cap,
                     size_t* len);

}  // namespace zcx
