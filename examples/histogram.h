// SPDX-License-Identifier: Apache-2.0
//
// LatencyHistogram: a log-linear histogram of non-negative integers (nanoseconds, typically).
//
// Values below 64 have a bucket each; above, every power-of-two range [2^e, 2^(e+1)) is split into
// 32 equal sub-buckets, so a bucket's width is at most 1/32 of its lower bound: a percentile read
// back is within about 3% of the true value. 1920 buckets cover the whole uint64 range; recording
// is a few instructions and never allocates. Histograms of several pairs merge by adding counts.
//
// Thread-safety: thread-compatible (each actor keeps its own; merge after the fact).
//
// Example:
//
//   troupe::examples::LatencyHistogram rtt;
//   rtt.Record(absl::GetCurrentTimeNanos() - sent_at_ns);
//   printf("p99 %.1f us\n", rtt.Percentile(0.99) / 1e3);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::examples {

class LatencyHistogram {
 public:
  static constexpr uint32_t kSubBucketBits = 5;
  static constexpr uint32_t kSubBuckets = 1u << kSubBucketBits;
  static constexpr size_t kBuckets = (64 - kSubBucketBits + 1) * kSubBuckets;

  LatencyHistogram() : counts_(kBuckets, 0) {}

  // Returns the bucket of `value` (0 to kBuckets - 1).
  static size_t BucketIndex(uint64_t value);
  // Returns the smallest and the largest value of bucket `index` (< kBuckets).
  static uint64_t BucketLow(size_t index);
  static uint64_t BucketHigh(size_t index);

  // Counts `value` once (`times` times).
  void Record(uint64_t value, uint64_t times = 1);
  // Adds `times` to bucket `index`; ignored when `index` is out of range (bytes from the network).
  void AddToBucket(size_t index, uint64_t times);
  // Adds every count of `other`.
  void Merge(const LatencyHistogram& other);

  // Returns the number of values recorded.
  uint64_t count() const { return count_; }
  // Returns the count of bucket `index` (< kBuckets).
  uint64_t bucket(size_t index) const { return counts_[index]; }
  // Returns the value below which a fraction `q` (0 to 1) of the values lie: the middle of the
  // bucket holding the rank ceil(q * count). 0 for an empty histogram.
  uint64_t Percentile(double q) const;

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
};

}  // namespace troupe::examples
