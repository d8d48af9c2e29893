// SPDX-License-Identifier: Apache-2.0
//
// The runtime's watchdog thread: stuck handlers and starved pools, handing a blocked worker's
// queued work to idle workers, temporary threads for pools whose workers are all inside long
// handlers, and thread lending between pools (thread_lending.h).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/internal/executor_pool.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"

namespace troupe::internal {
namespace {

// The watchdog's view of one worker.
struct WorkerWatch {
  // The handler sequence last seen (odd: inside a handler) and since when.
  uint64_t sequence = 0;
  absl::Time since;
  bool reported = false;
};

}  // namespace

void Runtime::WatchdogLoop() {
  pthread_setname_np(pthread_self(), "watchdog");
  absl::Duration shortest = absl::Milliseconds(40);  // ticks of 10 ms when nothing is reported
  for (const auto& pool : pools_) {
    for (const absl::Duration bound :
         {pool->settings().stuck_threshold, pool->settings().extra_thread_after}) {
      if (bound > absl::ZeroDuration()) {
        shortest = std::min(shortest, bound);
      }
    }
  }
  if (lending_ != nullptr) {
    // Ticks at least once per lending period while handlers run.
    shortest = std::min(
        shortest, 4 * absl::Milliseconds(static_cast<int64_t>(config_.lending().period_ms())));
  }
  // Ticks come every 1-10 ms while handlers run (a stuck worker's local queue is handed out that
  // soon) and back off to 100 ms while the node is idle.
  const absl::Duration busy_tick =
      std::clamp(shortest / 4, absl::Milliseconds(1), absl::Milliseconds(10));
  const absl::Duration idle_tick = std::max(busy_tick, absl::Milliseconds(100));
  absl::Duration tick = busy_tick;
  std::vector<std::vector<WorkerWatch>> watches(pools_.size());
  std::vector<bool> starved(pools_.size(), false);
  for (size_t p = 0; p < pools_.size(); ++p) {
    watches[p].resize(pools_[p]->worker_count());
  }
  troupe::MutexLock lock(&watchdog_mu_);
  while (!watchdog_mu_.AwaitWithDeadline(absl::Condition(&watchdog_stop_), absl::Now() + tick)) {
    const absl::Time now = absl::Now();
    bool busy = false;
    for (size_t p = 0; p < pools_.size(); ++p) {
      ExecutorPool& pool = *pools_[p];
      const absl::Duration threshold = pool.settings().stuck_threshold;
      const absl::Duration extra_after = pool.settings().extra_thread_after;
      const uint32_t running = pool.threads();
      pool.KeepPollerWatched();
      // A pool that lent its last thread and has work waits for the next lending period.
      busy = busy || (running == 0 && pool.QueueLength() > 0);
      uint32_t stuck = 0;
      uint32_t long_running = 0;
      absl::Duration shortest_long = absl::InfiniteDuration();
      for (uint32_t w = 0; w < pool.worker_count(); ++w) {
        WorkerWatch& watch = watches[p][w];
        const HandlerTrace& trace = pool.trace(w);
        // acquire: pairs with the release in HandlerTrace::Begin.
        const uint64_t sequence = trace.sequence.load(std::memory_order_acquire);
        busy = busy || sequence != watch.sequence || (sequence & 1) != 0;
        if (sequence != watch.sequence || (sequence & 1) == 0) {
          if (watch.reported) {
            TROUPE_LOG(kWarn, kActors)
                << "pool " << pool.settings().name << " worker " << w
                << ": the stuck handler returned after at least "
                << absl::FormatDuration(absl::Trunc(now - watch.since, absl::Milliseconds(1)));
          }
          watch = WorkerWatch{sequence, now, false};
          continue;
        }
        // In the same handler for a whole tick: what it queued locally or holds in its run-next
        // slot goes to idle workers.
        pool.Kick(w);
        if (w < running && extra_after > absl::ZeroDuration() && now - watch.since >= extra_after) {
          ++long_running;
          shortest_long = std::min(shortest_long, now - watch.since);
        }
        if (threshold <= absl::ZeroDuration() || now - watch.since < threshold) {
          continue;
        }
        ++stuck;
        if (watch.reported) {
          continue;
        }
        const ActorId actor = trace.actor();
        const uint32_t type = trace.event_type.load(std::memory_order_relaxed);
        const std::type_info* actor_type = trace.actor_type.load(std::memory_order_relaxed);
        // Seqlock: the fields belong to this handler only if the sequence did not move.
        std::atomic_thread_fence(std::memory_order_acquire);
        if (trace.sequence.load(std::memory_order_relaxed) != sequence) {
          continue;
        }
        watch.reported = true;
        pool.CountStuckReport();
        TROUPE_LOG(kWarn, kActors) << absl::StrFormat(
            "stuck actor %s (%s) has been handling event %s (0x%08x) for at least %s on pool %s "
            "worker %u",
            actor.ToString(), TypeName(actor_type), EventTypeName(type), type,
            absl::FormatDuration(absl::Trunc(now - watch.since, absl::Milliseconds(1))),
            pool.settings().name, w);
      }
      if (extra_after > absl::ZeroDuration()) {
        UpdateTemporaryThread(pool, long_running > 0 && long_running >= running, shortest_long);
      }
      const bool all_stuck = stuck > 0 && stuck >= running;
      if (all_stuck && !starved[p]) {
        TROUPE_LOG(kError, kActors) << "pool " << pool.settings().name << " is starved: all "
                                    << stuck << " workers have been inside handlers for more than "
                                    << absl::FormatDuration(threshold) << "; its other actors wait";
      }
      starved[p] = all_stuck;
    }
    if (lending_ != nullptr) {
      LendThreads();
    }
    tick = busy ? busy_tick : std::min(tick * 2, idle_tick);
  }
}

void Runtime::UpdateTemporaryThread(ExecutorPool& pool, bool all_long, absl::Duration longest) {
  if (all_long == pool.temporary()) {
    return;
  }
  pool.SetTemporary(all_long);
  if (all_long) {
    TROUPE_LOG(kWarn, kActors) << "pool " << pool.settings().name << ": all " << pool.threads()
                               << " workers have been inside handlers for at least "
                               << absl::FormatDuration(absl::Trunc(longest, absl::Milliseconds(1)))
                               << "; a temporary thread runs its other actors until one returns";
  } else {
    TROUPE_LOG(kInfo, kActors) << "pool " << pool.settings().name
                               << ": a long handler returned; the temporary thread is retired";
  }
}

void Runtime::LendThreads() {
  const int64_t now = SteadyNanos();
  const int64_t period_ns =
      absl::ToInt64Nanoseconds(absl::Milliseconds(config_.lending().period_ms()));
  if (lending_busy_ns_.empty()) {
    for (const auto& pool : pools_) {
      lending_busy_ns_.push_back(pool->BusyNanos());
    }
    lending_at_ns_ = now;
    return;
  }
  const int64_t elapsed = now - lending_at_ns_;
  if (elapsed < period_ns) {
    return;
  }
  std::vector<LendingSample> samples;
  for (size_t p = 0; p < pools_.size(); ++p) {
    const int64_t busy = pools_[p]->BusyNanos();
    samples.push_back(
        {static_cast<double>(busy - lending_busy_ns_[p]) / static_cast<double>(elapsed),
         pools_[p]->QueueLength()});
    lending_busy_ns_[p] = busy;
  }
  lending_at_ns_ = now;
  const std::vector<LendingMove> moves = lending_->Decide(samples);
  for (const LendingMove& move : moves) {
    for (const int p : {move.from, move.to}) {
      if (p != LendingMove::kBudget) {
        pools_[static_cast<size_t>(p)]->SetThreads(lending_->threads()[static_cast<size_t>(p)]);
      }
    }
    TROUPE_LOG(kDebug, kActors) << "thread lending: "
                                << (move.from == LendingMove::kBudget
                                        ? std::string("budget")
                                        : pools_[static_cast<size_t>(move.from)]->settings().name)
                                << " -> "
                                << (move.to == LendingMove::kBudget
                                        ? std::string("budget")
                                        : pools_[static_cast<size_t>(move.to)]->settings().name)
                                << ": " << move.reason;
  }
}

}  // namespace troupe::internal
