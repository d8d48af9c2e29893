// SPDX-License-Identifier: Apache-2.0
//
// The rule that moves threads between a node's pools by load (proto ThreadLendingConfig), as a
// pure function of one period's figures, so tests can feed it recorded series.
//
// Inputs per pool and period: its thread count, its busy time over the period in threads (busy
// nanoseconds / period nanoseconds, summed over its workers), and its ready queue at the end of the
// period. A pool
//   - backs up when its queue holds a mailbox and its threads were busy at least kBusyShare of the
//     period (a pool whose threads idle runs what it queues without help);
//   - has a thread to spare when at least kSpareThreads of its threads idled over the period and
//   its
//     queue is empty.
// Each period, in this order, with at most one move per pool:
//   | step | who                                          | takes from |
//   |------|----------------------------------------------|-------------------------------------------|
//   | 1    | a pool above its configured count, not       | gives one back to the budget | |      |
//   backed up, with a thread to spare            |                                           | | 2
//   | backed-up pools below max_threads, higher    | the budget's room; else a pool above its  | |
//   | priority first, then the longer queue        | min_threads with a thread to spare (lower | |
//   |                                              | priority first, then the most idle); else | |
//   |                                              | a pool of lower priority above its        | |
//   |                                              | min_threads, busy or not                  | |
//   3    | a pool below its configured count            | the budget's room (its lent thread back)
//   |
// A pool at 0 threads (min_threads 0) with a mailbox queued backs up whatever its busy time, goes
// first in step 2, and takes from any pool above its min_threads, busy or not, whatever the
// priorities: no pool waits for a thread longer than a period.
// The budget's room is the bound (the larger of the budget and the configured counts' sum) less the
// pools' current counts. A pool never goes below min_threads or above max_threads, and the counts
// never add up to more than the bound.
//
// Thread-safety: thread-compatible (one caller, the runtime's watchdog thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::internal {

// What a pool may do, fixed at start.
struct LendingLimits {
  std::string name;
  // The configured count (where the pool starts and returns to).
  uint32_t threads = 1;
  uint32_t min_threads = 1;
  uint32_t max_threads = 1;
  uint32_t priority = 0;
};

// One pool over one period.
struct LendingSample {
  // Busy time over the period, in threads (0 .. current count, give or take clock skew).
  double busy_threads = 0;
  // Ready mailboxes waiting at the period's end.
  int64_t queue_length = 0;
};

// One thread changing pools (`from` or `to` is kBudget when the budget's room gives or takes it).
struct LendingMove {
  static constexpr int kBudget = -1;
  int from = kBudget;
  int to = kBudget;
  // Why, with the figures (for the debug log).
  std::string reason;
};

class ThreadLending {
 public:
  // A pool backs up when its threads were busy at least this share of the period.
  static constexpr double kBusyShare = 0.9;
  // A pool has a thread to spare when at least this many of its threads idled.
  static constexpr double kSpareThreads = 0.9;

  // `budget` is the configured budget; the bound is the larger of it and the counts' sum.
  ThreadLending(std::vector<LendingLimits> pools, uint32_t budget);

  // True when some pool may change its count (min_threads or max_threads differs from threads).
  bool enabled() const { return enabled_; }
  uint32_t bound() const { return bound_; }
  const std::vector<LendingLimits>& pools() const { return pools_; }
  // The current counts (start: the configured ones).
  const std::vector<uint32_t>& threads() const { return threads_; }

  // Decides one period from `samples` (one per pool, in order), applies the moves to threads()
  // and returns them.
  std::vector<LendingMove> Decide(const std::vector<LendingSample>& samples);

 private:
  bool BacksUp(size_t pool, const LendingSample& sample) const;
  bool CanSpare(size_t pool, const LendingSample& sample) const;
  // The lender for backed-up `pool` (step 2), or -1.
  int FindLender(size_t pool, const std::vector<LendingSample>& samples,
                 const std::vector<bool>& moved) const;
  uint32_t Total() const;
  std::string Figures(size_t pool, const LendingSample& sample) const;

  std::vector<LendingLimits> pools_;
  std::vector<uint32_t> threads_;
  uint32_t bound_ = 0;
  bool enabled_ = false;
};

}  // namespace troupe::internal
