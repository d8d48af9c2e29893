// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the executor pool tests (scheduling_test.cc, suspend_test.cc,
// fair_mode_test.cc, watchdog_test.cc, pool_counters_test.cc and the *_timing_test.cc files): pool
// configs, busy handlers, the shuffle skip, and the ping-pong Players that keep a pool busy.
//
// The scheduling policies need the real workers (TestRuntime has none), so these helpers serve
// real-thread tests. Nothing here sleeps; BusyFor spins on purpose (a handler that must occupy its
// worker).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "proto/config.pb.h"
#include "ut/actors/test_util.h"

namespace troupe::testutil {

// A bound for endless games and hot actors: far more events than a passing test lets them handle.
inline constexpr uint64_t kMaxHotEvents = 100'000'000;

// -- pools and handlers ---------------------------------------------------------------------------

// True when TROUPE_SHUFFLE makes every pool shuffle its ready order.
inline bool ShuffledByEnvironment() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read only; nothing in this process calls setenv.
  const char* env = std::getenv("TROUPE_SHUFFLE");
  return env != nullptr && *env != '\0';
}

inline constexpr const char* kShuffledSkip =
    "TROUPE_SHUFFLE is set: every pool randomizes its ready order, there is no policy to check";

// Adds a pool with `threads` workers and a short spin to `config`; returns it for more settings.
inline proto::PoolConfig* AddPool(proto::ActorSystemConfig* config, const std::string& name,
                                  uint32_t threads) {
  proto::PoolConfig* pool = config->add_pools();
  pool->set_name(name);
  pool->set_threads(threads);
  pool->set_spin_time_us(5);
  return pool;
}

// Creates a node from `config` and sets `*pool` to the index of its pool `name`; fails the test
// and returns null when the node does not start or has no such pool.
inline std::unique_ptr<ActorSystem> MakeNodeWithPool(const proto::ActorSystemConfig& config,
                                                     const std::string& name, uint32_t* pool) {
  std::unique_ptr<ActorSystem> system = MakeSystem(config);
  if (system == nullptr) {
    return nullptr;
  }
  const absl::StatusOr<uint32_t> index = system->PoolIndex(name);
  if (!index.ok()) {
    ADD_FAILURE() << index.status();
    return nullptr;
  }
  *pool = *index;
  return system;
}

// Returns options that register an actor on pool `pool`.
inline RegisterOptions OnPool(uint32_t pool) {
  RegisterOptions options;
  options.pool = pool;
  return options;
}

// Keeps the calling thread busy (never sleeping or yielding: the handler under test must occupy
// its worker) for at least `duration`; returns how long it actually took.
inline absl::Duration BusyFor(absl::Duration duration) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + absl::ToChronoNanoseconds(duration);
  auto now = start;
  while (now < until) {
    now = std::chrono::steady_clock::now();
  }
  return absl::FromChrono(now - start);
}

// Returns the share of the most frequent thread among `counts`, in [0, 1] (0 when empty).
inline double DominantShare(const std::map<std::thread::id, uint64_t>& counts) {
  uint64_t total = 0;
  uint64_t top = 0;
  for (const auto& [thread, n] : counts) {
    total += n;
    top = std::max(top, n);
  }
  return total == 0 ? 0.0 : static_cast<double>(top) / static_cast<double>(total);
}

// Returns the line of `sink` that contains every one of `needles`, or an empty string.
inline std::string LineWithAll(const CapturingLogSink& sink,
                               const std::vector<std::string>& needles) {
  for (const std::string& line : sink.Lines()) {
    if (std::all_of(needles.begin(), needles.end(), [&line](const std::string& needle) {
          return absl::StrContains(line, needle);
        })) {
      return line;
    }
  }
  return {};
}

// -- ping-pong ------------------------------------------------------------------------------------

// Where one Player's handlers ran. Written by the actor only; read by the test once the game is
// over (the game's end event orders the last write before the read).
struct PlayerLog {
  std::map<std::thread::id, uint64_t> threads;
  // Handlings on another thread than the player's previous one.
  uint64_t moves = 0;
  std::thread::id last;
};

// Answers EvValue{n} from its sender with EvValue{n + 1} until n reaches `last` (then notifies
// `done`) or `stop` is set. Two Players whose first ball names the other as sender play ping-pong.
class Player : public Actor {
 public:
  Player(uint64_t last, PlayerLog* log, troupe::Notification* done,
         const std::atomic<bool>* stop = nullptr, std::atomic<uint64_t>* handled = nullptr)
      : Actor(&Player::StateWork),
        last_(last),
        log_(log),
        done_(done),
        stop_(stop),
        handled_(handled) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    if (log_ != nullptr) {
      const std::thread::id self = std::this_thread::get_id();
      ++log_->threads[self];
      if (log_->last != std::thread::id() && log_->last != self) {
        ++log_->moves;
      }
      log_->last = self;
    }
    if (handled_ != nullptr) {
      // relaxed: a progress counter; the test only needs it to grow.
      handled_->fetch_add(1, std::memory_order_relaxed);
    }
    const uint64_t n = ev->Get<EvValue>()->value;
    // relaxed: the flag only ends the game, a late look costs one more round.
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      return;
    }
    if (n >= last_) {
      if (done_ != nullptr) {
        done_->Notify();
      }
      return;
    }
    Send(ev->sender(), std::make_unique<EvValue>(n + 1));
  }

  const uint64_t last_;
  PlayerLog* log_;
  troupe::Notification* done_;
  const std::atomic<bool>* stop_;
  std::atomic<uint64_t>* handled_;
};

// One ping-pong pair and what it recorded.
struct Pair {
  ActorId a;
  ActorId b;
  PlayerLog log_a;
  PlayerLog log_b;
  troupe::Notification done;

  // Returns how often either player ran on another thread than the time before.
  uint64_t Moves() const { return log_a.moves + log_b.moves; }

  // Returns the threads of both players' handlings together.
  std::map<std::thread::id, uint64_t> Threads() const {
    std::map<std::thread::id, uint64_t> all = log_a.threads;
    for (const auto& [thread, n] : log_b.threads) {
      all[thread] += n;
    }
    return all;
  }
};

// Registers `pair`'s players on `pool` for a game of `round_trips` (or endless until `stop`).
inline void RegisterPair(ActorSystem& system, uint32_t pool, uint64_t round_trips, Pair* pair,
                         const std::atomic<bool>* stop = nullptr,
                         std::atomic<uint64_t>* handled = nullptr) {
  pair->a = system.Register(
      std::make_unique<Player>(2 * round_trips, &pair->log_a, &pair->done, stop, handled),
      OnPool(pool));
  pair->b = system.Register(
      std::make_unique<Player>(2 * round_trips, &pair->log_b, &pair->done, stop, handled),
      OnPool(pool));
}

// Serves the first ball of `pair`'s game.
inline void Serve(ActorSystem& system, const Pair& pair) {
  system.Send(pair.a, std::make_unique<EvValue>(1), kNoFlags, 0, pair.b);
}

// -- counting -------------------------------------------------------------------------------------

// Counts EvValue events.
class EventCounter : public Actor {
 public:
  explicit EventCounter(std::atomic<uint64_t>* count)
      : Actor(&EventCounter::StateWork), count_(count) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    // relaxed: a count the test polls.
    count_->fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<uint64_t>* count_;
};

}  // namespace troupe::testutil
