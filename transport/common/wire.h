// Bounds-checked little-endian writer/reader for every on-wire format (docs/WIRE.md).
// A Reader never reads past its buffer: a short or malformed input sets a sticky failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace zcx::wire {

class Writer {
 public:
  Writer(void* buf, size_t cap) : buf_(static_cast<uint8_t*>(buf)), cap_(cap) {}
  void u8(uint8_t v) { put(&v, 1); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void bytes(const void* p, size_t n) { put(p, n); }
  // A string as u16 length + bytes.
  void str(const std::string& s) {
    u16(static_cast<uint16_t>(s.size() > 0xffff ? 0xffff : s.size()));
    put(s.data(), s.size() > 0xffff ? 0xffff : s.size());
  }
  bool ok() const { return ok_; }
  size_t size() const { return pos_; }

 private:
  void put(const void* p, size_t n) {
    if (!ok_ || n > cap_ - pos_) {
      ok_ = false;
      return;
    }
    if (n) memcpy(buf_ + pos_, p, n);
    pos_ += n;
  }
  void put_le(uint64_t v, size_t n) {
    uint8_t b[8];
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    put(b, n);
  }
  uint8_t* buf_;
  size_t cap_;
  size_t pos_ = 0;
  bool ok_ = true;
};

class Reader {
 public:
  Reader(const void* buf, size_t len) : buf_(static_cast<const uint8_t*>(buf)), len_(len) {}
  uint8_t u8() { return static_cast<uint8_t>(get_le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get_le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get_le(4)); }
  uint64_t u64() { return get_le(8); }
  void bytes(void* out, size_t n) {
    if (!take(n)) {
      memset(out, 0, n);
      return;
    }
    if (n) memcpy(out, buf_ + pos_ - n, n);
  }
  // A u16-length string of at most `max` bytes.
  std::string str(size_t max) {
    size_t n = u16();
    if (n > max || !take(n)) {
      ok_ = false;
      return std::string();
    }
    return std::string(reinterpret_cast<const char*>(buf_ + pos_ - n), n);
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? len_ - pos_ : 0; }

 private:
  bool take(size_t n) {
    if (!ok_ || n > len_ - pos_) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  uint64_t get_le(size_t n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(buf_[pos_ - n + i]) << (8 * i);
    return v;
  }
  const uint8_t* buf_;
  size_t len_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace zcx::wire
