// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/thread_lending.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::internal {

ThreadLending::ThreadLending(std::vector<LendingLimits> pools, uint32_t budget)
    : pools_(std::move(pools)) {
  uint32_t configured = 0;
  for (const LendingLimits& pool : pools_) {
    threads_.push_back(pool.threads);
    configured += pool.threads;
    enabled_ = enabled_ || pool.min_threads != pool.threads || pool.max_threads != pool.threads;
  }
  bound_ = std::max(budget, configured);
}

uint32_t ThreadLending::Total() const {
  return std::accumulate(threads_.begin(), threads_.end(), 0U);
}

bool ThreadLending::BacksUp(size_t pool, const LendingSample& sample) const {
  // With no thread, busy >= 0 holds: any queue backs up.
  return sample.queue_length > 0 && sample.busy_threads >= kBusyShare * threads_[pool];
}

bool ThreadLending::CanSpare(size_t pool, const LendingSample& sample) const {
  return sample.queue_length <= 0 && threads_[pool] - sample.busy_threads >= kSpareThreads;
}

std::string ThreadLending::Figures(size_t pool, const LendingSample& sample) const {
  return absl::StrFormat("%s: busy %.2f of %u threads, queue %d", pools_[pool].name,
                         sample.busy_threads, threads_[pool], sample.queue_length);
}

int ThreadLending::FindLender(size_t pool, const std::vector<LendingSample>& samples,
                              const std::vector<bool>& moved) const {
  int idle = -1;
  int lower = -1;
  for (size_t other = 0; other < pools_.size(); ++other) {
    if (other == pool || moved[other] || threads_[other] <= pools_[other].min_threads) {
      continue;
    }
    const LendingLimits& limits = pools_[other];
    if (CanSpare(other, samples[other])) {
      // Lower priority first, then the one with the most idle.
      const auto spare = [&](size_t p) { return threads_[p] - samples[p].busy_threads; };
      if (idle < 0 || limits.priority < pools_[idle].priority ||
          (limits.priority == pools_[idle].priority && spare(other) > spare(idle))) {
        idle = static_cast<int>(other);
      }
    } else if ((threads_[pool] == 0 || limits.priority < pools_[pool].priority) &&
               (lower < 0 || limits.priority < pools_[lower].priority)) {
      lower = static_cast<int>(other);
    }
  }
  return idle >= 0 ? idle : lower;
}

std::vector<LendingMove> ThreadLending::Decide(const std::vector<LendingSample>& samples) {
  std::vector<LendingMove> moves;
  if (!enabled_ || samples.size() != pools_.size()) {
    return moves;
  }
  std::vector<bool> moved(pools_.size(), false);
  // 1. What a pool borrowed goes back once it idles.
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (threads_[p] > pools_[p].threads && threads_[p] > pools_[p].min_threads &&
        CanSpare(p, samples[p])) {
      moves.push_back({static_cast<int>(p), LendingMove::kBudget,
                       absl::StrCat("gives one back, idle (", Figures(p, samples[p]), ")")});
      --threads_[p];
      moved[p] = true;
    }
  }
  // 2. Backed-up pools, the most important and then the longest queue first.
  std::vector<size_t> needy;
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (!moved[p] && threads_[p] < pools_[p].max_threads && BacksUp(p, samples[p])) {
      needy.push_back(p);
    }
  }
  std::stable_sort(needy.begin(), needy.end(), [&](size_t a, size_t b) {
    if ((threads_[a] == 0) != (threads_[b] == 0)) {
      return threads_[a] == 0;  // a pool with no thread at all first
    }
    if (pools_[a].priority != pools_[b].priority) {
      return pools_[a].priority > pools_[b].priority;
    }
    return samples[a].queue_length > samples[b].queue_length;
  });
  for (const size_t p : needy) {
    if (moved[p]) {
      continue;  // it lent a thread to a more important pool this period
    }
    const std::string why = absl::StrCat("backed up (", Figures(p, samples[p]), ")");
    if (Total() < bound_) {
      moves.push_back(
          {LendingMove::kBudget, static_cast<int>(p),
           absl::StrCat(why, ", from the budget's room (", Total(), " of ", bound_, " threads)")});
      ++threads_[p];
      moved[p] = true;
      continue;
    }
    const int lender = FindLender(p, samples, moved);
    if (lender < 0) {
      continue;
    }
    const auto from = static_cast<size_t>(lender);
    const char* kind = CanSpare(from, samples[from])                ? "idle "
                       : pools_[from].priority < pools_[p].priority ? "lower-priority "
                                                                    : "busy ";
    moves.push_back({lender, static_cast<int>(p),
                     absl::StrCat(why, ", from ", kind, Figures(from, samples[from]))});
    --threads_[from];
    ++threads_[p];
    moved[from] = true;
    moved[p] = true;
  }
  // 3. A pool that lent a thread gets it back once there is room again.
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (!moved[p] && threads_[p] < pools_[p].threads && Total() < bound_) {
      moves.push_back({LendingMove::kBudget, static_cast<int>(p),
                       absl::StrCat("takes back a lent thread (", Figures(p, samples[p]), ")")});
      ++threads_[p];
      moved[p] = true;
    }
  }
  return moves;
}

}  // namespace troupe::internal
