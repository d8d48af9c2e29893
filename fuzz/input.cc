// SPDX-License-Identifier: Apache-2.0
#include "fuzz/input.h"

#include <algorithm>

namespace troupe::fuzz {

// -- reading ------------------------------------------------------------------------------------

uint8_t InputReader::Byte() {
  if (offset_ >= data_.size()) {
    return 0;
  }
  return static_cast<uint8_t>(data_[offset_++]);
}

uint16_t InputReader::U16() {
  const uint16_t low = Byte();
  return static_cast<uint16_t>(low | (Byte() << 8));
}

uint32_t InputReader::U32() {
  const uint32_t low = U16();
  return low | (static_cast<uint32_t>(U16()) << 16);
}

std::string_view InputReader::Bytes(size_t n) {
  const size_t take = std::min(n, data_.size() - std::min(offset_, data_.size()));
  const std::string_view bytes = data_.substr(std::min(offset_, data_.size()), take);
  offset_ += take;
  return bytes;
}

std::string_view InputReader::Rest() { return Bytes(data_.size()); }

SplitPlan ReadSplitPlan(InputReader& in) {
  SplitPlan plan;
  const size_t count = in.Byte() % 8;
  for (size_t i = 0; i < count; ++i) {
    plan.sizes.push_back(in.Byte());
  }
  return plan;
}

std::vector<std::string_view> Split(std::string_view stream, const SplitPlan& plan) {
  if (plan.sizes.empty()) {
    return {stream};
  }
  std::vector<std::string_view> chunks;
  size_t offset = 0;
  bool after_empty = false;
  for (size_t i = 0; offset < stream.size(); ++i) {
    size_t size = plan.sizes[i % plan.sizes.size()];
    if (size == 0 && !after_empty) {
      chunks.emplace_back();
      after_empty = true;
      continue;
    }
    // An empty Append is followed by a real one, so a plan of zeros still ends.
    size = std::min(std::max<size_t>(size, 1), stream.size() - offset);
    chunks.push_back(stream.substr(offset, size));
    offset += size;
    after_empty = false;
  }
  return chunks;
}

// -- writing ------------------------------------------------------------------------------------

void PutSplitPlan(const std::vector<uint8_t>& sizes, std::string* out) {
  PutByte(static_cast<uint8_t>(std::min<size_t>(sizes.size(), 7)), out);
  for (size_t i = 0; i < sizes.size() && i < 7; ++i) {
    PutByte(sizes[i], out);
  }
}

void PutByte(uint8_t value, std::string* out) { out->push_back(static_cast<char>(value)); }

void PutU16(uint16_t value, std::string* out) {
  PutByte(static_cast<uint8_t>(value), out);
  PutByte(static_cast<uint8_t>(value >> 8), out);
}

void PutU32(uint32_t value, std::string* out) {
  PutU16(static_cast<uint16_t>(value), out);
  PutU16(static_cast<uint16_t>(value >> 16), out);
}

}  // namespace troupe::fuzz
