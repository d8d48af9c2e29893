// SPDX-License-Identifier: Apache-2.0
#include "histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace troupe::examples {

// Bucket layout: values 0..63 map to themselves; a larger value with its top bit at position e
// keeps its 6 top bits (32..63) as `sub`, shifted right by e - 5, and lands at shift * 32 + sub.
// Both ranges meet at 64 = (shift 1, sub 32), so indices are dense.
size_t LatencyHistogram::BucketIndex(uint64_t value) {
  if (value < size_t{2} * kSubBuckets) {
    return static_cast<size_t>(value);
  }
  const uint32_t top = static_cast<uint32_t>(std::bit_width(value)) - 1;
  const uint32_t shift = top - kSubBucketBits;
  return static_cast<size_t>(shift) * kSubBuckets + static_cast<size_t>(value >> shift);
}

uint64_t LatencyHistogram::BucketLow(size_t index) {
  if (index < size_t{2} * kSubBuckets) {
    return index;
  }
  const size_t shift = index / kSubBuckets - 1;
  const uint64_t sub = index - shift * kSubBuckets;
  return sub << shift;
}

uint64_t LatencyHistogram::BucketHigh(size_t index) {
  if (index < size_t{2} * kSubBuckets) {
    return index;
  }
  const size_t shift = index / kSubBuckets - 1;
  return BucketLow(index) + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::Record(uint64_t value, uint64_t times) {
  counts_[BucketIndex(value)] += times;
  count_ += times;
}

void LatencyHistogram::AddToBucket(size_t index, uint64_t times) {
  if (index >= kBuckets) {
    return;
  }
  counts_[index] += times;
  count_ += times;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) {
    counts_[i] += other.counts_[i];
  }
  count_ += other.count_;
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) {
    return 0;
  }
  q = std::clamp(q, 0.0, 1.0);
  const auto rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      return BucketLow(i) + (BucketHigh(i) - BucketLow(i)) / 2;
    }
  }
  return BucketHigh(kBuckets - 1);
}

}  // namespace troupe::examples
