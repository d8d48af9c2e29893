// SPDX-License-Identifier: Apache-2.0
//
// Little-endian integer access for the interconnect's wire formats (frames and handshakes): the
// wire byte order is little-endian whatever the host's.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

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

}  // namespace troupe::interconnect::internal
