// SPDX-License-Identifier: Apache-2.0
//
// How the fuzz targets read their input, and how fuzz_make_seeds writes inputs in the same layout.
//
// Every target takes arbitrary bytes: InputReader reads them front to back and, past the end,
// yields zeros and empty strings, so any input is a valid one (libFuzzer mutates bytes, not
// structures). Targets that feed a stream decoder start with a split plan:
//
//   offset  size  field
//   0       1     n: the number of chunk sizes (n % 8; 0: the whole stream in one Append)
//   1       n     chunk sizes in bytes, used in turn until the stream is consumed; 0 is an empty
//                 Append (the next chunk then takes at least one byte, so the plan always ends)
//
// so the fuzzer chooses where the stream is cut, as a TCP connection would.
//
// Thread-safety: thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::fuzz {

// Reads an input front to back; never fails.
class InputReader {
 public:
  explicit InputReader(std::string_view data) : data_(data) {}

  // Returns the next byte, or 0 past the end.
  uint8_t Byte();
  // Returns the next little-endian integers (missing bytes read as 0).
  uint16_t U16();
  uint32_t U32();
  // Returns up to `n` next bytes (fewer at the end).
  std::string_view Bytes(size_t n);
  // Returns every byte not read yet.
  std::string_view Rest();

  bool empty() const { return offset_ >= data_.size(); }

 private:
  std::string_view data_;
  size_t offset_ = 0;
};

// Where a stream is cut into Append calls (see the layout above).
struct SplitPlan {
  std::vector<uint8_t> sizes;
};

// Reads a split plan.
SplitPlan ReadSplitPlan(InputReader& in);

// Cuts `stream` as `plan` says. Chunks point into `stream`; they cover it exactly, in order.
std::vector<std::string_view> Split(std::string_view stream, const SplitPlan& plan);

// -- writing inputs (fuzz_make_seeds) ----------------------------------------------------------

// Appends a split plan of `sizes` (at most 7) to `out`.
void PutSplitPlan(const std::vector<uint8_t>& sizes, std::string* out);
void PutByte(uint8_t value, std::string* out);
void PutU16(uint16_t value, std::string* out);
void PutU32(uint32_t value, std::string* out);

}  // namespace troupe::fuzz
