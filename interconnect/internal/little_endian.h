// SPDX-License-Identifier: Apache-2.0
//
// Little-endian integer access for the interconnect's wire formats (frames and handshakes): the
// wire byte order is little-endian whatever the host's.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace troupe::interconnect::internal {

inline void Put32(char* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<char>(value >> (8 * i));
  }
}

inline void Put64(char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(value >> (8 * i));
  }
}

inline uint32_t Get32(const char* in) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(in[i]);
  }
  return value;
}

inline uint64_t Get64(const char* in) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(in[i]);
  }
  return value;
}

// Returns true when `bytes` could be the start of a stream that begins with `magic`
// (little-endian): its first min(4, size) bytes match. Lets a reader refuse garbage at its first
// wrong byte.
inline bool CouldStartWith(std::string_view bytes, uint32_t magic) {
  for (size_t i = 0; i < bytes.size() && i < 4; ++i) {
    if (static_cast<unsigned char>(bytes[i]) != ((magic >> (8 * i)) & 0xffu)) {
      return false;
    }
  }
  return true;
}

}  // namespace troupe::interconnect::internal
