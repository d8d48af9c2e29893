// SPDX-License-Identifier: Apache-2.0
//
// Executor pool scheduling seen from actors: activation budgets, the run-next slot, work stealing,
// fair mode, the stuck-handler watchdog, the pool time counters, and suspend/resume.
//
// The scheduling policies need the real workers (TestRuntime has none), so most tests run real
// threads. They assert on counts and orders, never on speed: every wait has a deadline
// (testutil::WaitTimeout, generous, scaled under sanitizers), every loop a bound, and the sizes
// shrink under sanitizers. Where a test needs a window of real time (a busy handler, a blocked
// worker, an idle pool) the window is a lower bound only. Suspend/resume's "nothing is handled
// while suspended" cases run on TestRuntime, where "nothing" can be checked without waiting.
//
// The policy tests (budgets, run-next, stealing, fair order) skip themselves under
// TROUPE_SHUFFLE (the actors_ut.shuffled run): every pool then randomizes its ready order on
// purpose.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::EvKick;
using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvKick;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::Scaled;
using testutil::WaitTimeout;
using testutil::WaitUntil;

enum : EventType {
  kEvBlock = EventSpaceBegin(kUserEventSpace + 6),
  kEvSchedulingEnd,
};
static_assert(InEventSpace(kEvSchedulingEnd - 1, kUserEventSpace + 6));

// Makes a Sleeper block its worker (the event the watchdog names).
struct EvBlock final : EventLocal<EvBlock, kEvBlock> {};

// -- helpers --------------------------------------------------------------------------------------

// True when TROUPE_SHUFFLE makes every pool shuffle its ready order.
bool ShuffledByEnvironment() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read only; nothing in this process calls setenv.
  const char* env = std::getenv("TROUPE_SHUFFLE");
  return env != nullptr && *env != '\0';
}

constexpr const char* kShuffledSkip =
    "TROUPE_SHUFFLE is set: every pool randomizes its ready order, there is no policy to check";

// Adds a pool with `threads` workers and a short spin to `config`; returns it for more settings.
proto::PoolConfig* AddPool(proto::ActorSystemConfig* config, const std::string& name,
                           uint32_t threads) {
  proto::PoolConfig* pool = config->add_pools();
  pool->set_name(name);
  pool->set_threads(threads);
  pool->set_spin_time_us(5);
  return pool;
}

// Creates a node from `config` and sets `*pool` to the index of its pool `name`; fails the test
// and returns null when the node does not start or has no such pool.
std::unique_ptr<ActorSystem> MakeNodeWithPool(const proto::ActorSystemConfig& config,
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

RegisterOptions OnPool(uint32_t pool) {
  RegisterOptions options;
  options.pool = pool;
  return options;
}

// Keeps the calling thread busy (never sleeping or yielding: the handler under test must occupy
// its worker) for at least `duration`; returns how long it actually took.
absl::Duration BusyFor(absl::Duration duration) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + absl::ToChronoNanoseconds(duration);
  auto now = start;
  while (now < until) {
    now = std::chrono::steady_clock::now();
  }
  return absl::FromChrono(now - start);
}

// Returns the share of the most frequent thread among `counts`, in [0, 1] (0 when empty).
double DominantShare(const std::map<std::thread::id, uint64_t>& counts) {
  uint64_t total = 0;
  uint64_t top = 0;
  for (const auto& [thread, n] : counts) {
    total += n;
    top = std::max(top, n);
  }
  return total == 0 ? 0.0 : static_cast<double>(top) / static_cast<double>(total);
}

// Returns the line of `sink` that contains every one of `needles`, or an empty string.
std::string LineWithAll(const CapturingLogSink& sink, const std::vector<std::string>& needles) {
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
void RegisterPair(ActorSystem& system, uint32_t pool, uint64_t round_trips, Pair* pair,
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
void Serve(ActorSystem& system, const Pair& pair) {
  system.Send(pair.a, std::make_unique<EvValue>(1), kNoFlags, 0, pair.b);
}

// -- activation budgets ---------------------------------------------------------------------------

constexpr int kBystanders = 100;
constexpr int kBurst = 10;
// The hot actor's bound: far more events than a passing test lets it handle.
constexpr uint64_t kMaxHotEvents = 100'000'000;

// Shared by the hot actor and the bystanders of a one-worker pool.
struct HotRace {
  // Runs of consecutive hot events so far (the test thread reads it).
  std::atomic<uint64_t> run{0};
  // Whether the last event handled on the pool's only worker was the hot actor's; that worker
  // alone reads and writes it.
  bool last_was_hot = false;
  std::atomic<uint64_t> hot_events{0};
  std::atomic<bool> stop{false};
  std::atomic<int> bootstrapped{0};
  std::atomic<int> handled{0};
  // Per bystander: `run` just before the test sent its event and when the bystander handled it.
  std::array<uint64_t, kBystanders> sent_run{};
  std::array<std::atomic<uint64_t>, kBystanders> handled_run{};
  // Per bystander: the pool's budget preemptions and the hot actor's events just after the test
  // sent its event (the event was queued by then) and when the bystander handled it.
  std::array<uint64_t, kBystanders> sent_preemptions{};
  std::array<std::atomic<uint64_t>, kBystanders> handled_preemptions{};
  std::array<uint64_t, kBystanders> sent_hot_events{};
  std::array<std::atomic<uint64_t>, kBystanders> handled_hot_events{};
};

// Sends itself the next event from each handler, until stopped (or kMaxHotEvents).
class HotActor : public Actor {
 public:
  explicit HotActor(HotRace* race) : Actor(&HotActor::StateWork), race_(race) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    if (!race_->last_was_hot) {
      race_->last_was_hot = true;
      // relaxed: the test thread's read is ordered by the send/handle of a bystander's event.
      race_->run.fetch_add(1, std::memory_order_relaxed);
    }
    // relaxed: a bound, read for progress only.
    const uint64_t n = race_->hot_events.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n < kMaxHotEvents && !race_->stop.load(std::memory_order_relaxed)) {
      Send(SelfId(), std::make_unique<EvValue>(n));
    }
  }

  HotRace* race_;
};

// Handles one event and records the hot actor's run, its event count and the pool's budget
// preemptions at that moment.
class Bystander : public Actor {
 public:
  Bystander(int index, uint32_t pool, HotRace* race)
      : Actor(&Bystander::StateWork), index_(index), pool_(pool), race_(race) {}

 private:
  void Bootstrap() override {
    // release: pairs with the test's acquire load before it starts the hot actor.
    race_->bootstrapped.fetch_add(1, std::memory_order_release);
  }

  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    race_->last_was_hot = false;
    // relaxed: see HotActor; the store is published by the release increment below.
    race_->handled_run[index_].store(race_->run.load(std::memory_order_relaxed),
                                     std::memory_order_relaxed);
    race_->handled_hot_events[index_].store(race_->hot_events.load(std::memory_order_relaxed),
                                            std::memory_order_relaxed);
    // This worker counted every preemption itself: the value is exact here.
    race_->handled_preemptions[index_].store(system()->Counters().pools[pool_].budget_preemptions,
                                             std::memory_order_relaxed);
    // release: pairs with the test's acquire load of `handled`.
    race_->handled.fetch_add(1, std::memory_order_release);
  }

  const int index_;
  const uint32_t pool_;
  HotRace* race_;
};

// On a one-worker pool with the given budgets, a hot actor that always has its next event ready
// keeps running; each of kBystanders events sent from outside (in bursts) must be handled before
// the hot actor's next activation: between the send and the handling, the hot actor starts at
// most one new run (the brief's measure: runs of consecutive hot events), its activations are
// preempted at most once (which also catches a hot actor that keeps the worker for several budgets
// in a row, which counts as one run), and with an event budget it handles at most one budget.
void ExpectHotActorDelaysOthersByAtMostOneBudget(uint32_t max_events, uint64_t max_time_us) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  proto::PoolConfig* hot_pool = AddPool(&config, "Hot", 1);
  hot_pool->set_max_events_per_activation(max_events);
  hot_pool->set_max_activation_time_us(max_time_us);
  HotRace race;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Hot", &pool);
  ASSERT_NE(system, nullptr);

  std::vector<ActorId> bystanders;
  bystanders.reserve(kBystanders);
  for (int i = 0; i < kBystanders; ++i) {
    bystanders.push_back(
        system->Register(std::make_unique<Bystander>(i, pool, &race), OnPool(pool)));
  }
  ASSERT_TRUE(WaitUntil([&] {
    return race.bootstrapped.load(std::memory_order_acquire) == kBystanders;
  })) << testutil::DescribeCounters(*system);
  const ActorId hot = system->Register(std::make_unique<HotActor>(&race), OnPool(pool));
  system->Send(hot, std::make_unique<EvValue>(0));
  // A few budgets' worth first, so that the bystanders meet a hot actor in full swing.
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].budget_preemptions >= 3; }))
      << testutil::DescribeCounters(*system);
  const uint64_t preemptions_before = system->Counters().pools[pool].budget_preemptions;

  for (int burst = 0; burst < kBystanders / kBurst; ++burst) {
    for (int i = burst * kBurst; i < (burst + 1) * kBurst; ++i) {
      race.sent_run[i] = race.run.load(std::memory_order_relaxed);
      system->Send(bystanders[i], std::make_unique<EvValue>(i));
      race.sent_hot_events[i] = race.hot_events.load(std::memory_order_relaxed);
      race.sent_preemptions[i] = system->Counters().pools[pool].budget_preemptions;
    }
    ASSERT_TRUE(WaitUntil([&] {
      return race.handled.load(std::memory_order_acquire) == (burst + 1) * kBurst;
    })) << "burst "
        << burst << " was never handled: " << testutil::DescribeCounters(*system);
  }
  const uint64_t hot_events = race.hot_events.load(std::memory_order_relaxed);
  race.stop.store(true, std::memory_order_relaxed);
  ASSERT_LT(hot_events, kMaxHotEvents) << "the hot actor stopped before the bystanders were done";

  // How much of the hot actor each bystander waited through, by each measure; the worst one counts.
  // (Only a positive difference: what the test reads after its send may already be newer.)
  auto excess = [](uint64_t handled, uint64_t sent) { return handled > sent ? handled - sent : 0; };
  std::array<uint64_t, kBystanders> runs{};
  std::array<uint64_t, kBystanders> budgets{};
  std::array<uint64_t, kBystanders> events{};
  int went_back = 0;
  for (int i = 0; i < kBystanders; ++i) {
    const uint64_t handled_run = race.handled_run[i].load(std::memory_order_relaxed);
    went_back += handled_run < race.sent_run[i] ? 1 : 0;
    runs[i] = excess(handled_run, race.sent_run[i]);
    budgets[i] = excess(race.handled_preemptions[i].load(std::memory_order_relaxed),
                        race.sent_preemptions[i]);
    events[i] =
        excess(race.handled_hot_events[i].load(std::memory_order_relaxed), race.sent_hot_events[i]);
  }
  auto worst = [](const std::array<uint64_t, kBystanders>& values) {
    return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
  };
  EXPECT_EQ(went_back, 0) << "the run counter went backwards";
  const size_t r = worst(runs);
  EXPECT_LE(runs[r], 1u) << "bystander " << r << " was sent its event during run "
                         << race.sent_run[r] << " of the hot actor and handled it " << runs[r]
                         << " runs later";
  const size_t b = worst(budgets);
  EXPECT_LE(budgets[b], 1u) << "bystander " << b << " waited through " << budgets[b]
                            << " budget preemptions of the hot actor";
  if (max_events < 1'000'000) {
    const size_t e = worst(events);
    EXPECT_LE(events[e], max_events)
        << "bystander " << e << " waited through " << events[e] << " hot events";
  }
  EXPECT_GT(system->Counters().pools[pool].budget_preemptions, preemptions_before)
      << testutil::DescribeCounters(*system);
}

TEST(SchedulingTest, HotActorDoesNotDelayOthersBeyondOneBudget) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  ExpectHotActorDelaysOthersByAtMostOneBudget(/*max_events=*/100, /*max_time_us=*/10'000'000);
}

TEST(SchedulingTest, HotActorDoesNotDelayOthersBeyondOneTimeBudget) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  ExpectHotActorDelaysOthersByAtMostOneBudget(/*max_events=*/1'000'000'000, /*max_time_us=*/1000);
}

// -- run-next slot --------------------------------------------------------------------------------

TEST(SchedulingTest, PingPongPairStaysOnOneWorker) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  const uint64_t round_trips = Scaled(50'000, 2'000);
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Pair", 2);
  Pair pair;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Pair", &pool);
  ASSERT_NE(system, nullptr);
  RegisterPair(*system, pool, round_trips, &pair);
  // The two Bootstraps, so that the interval below holds the game only.
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].events >= 2; }));
  const PoolCounters before = system->Counters().pools[pool];

  Serve(*system, pair);
  ASSERT_TRUE(pair.done.WaitForNotificationWithTimeout(WaitTimeout()))
      << testutil::DescribeCounters(*system);
  // The counters are added at the end of each activation: wait for the last one.
  ASSERT_TRUE(WaitUntil(
      [&] { return system->Counters().pools[pool].events >= before.events + 2 * round_trips; }));
  const PoolCounters after = system->Counters().pools[pool];

  ASSERT_EQ(after.workers.size(), 2u);
  uint64_t total = 0;
  uint64_t top = 0;
  for (size_t w = 0; w < after.workers.size(); ++w) {
    const uint64_t delta = after.workers[w].events - before.workers[w].events;
    total += delta;
    top = std::max(top, delta);
  }
  EXPECT_GE(total, 2 * round_trips);
  EXPECT_GE(static_cast<double>(top), 0.95 * static_cast<double>(total))
      << "the busiest worker handled " << top << " of " << total << " events";
  const double share = DominantShare(pair.Threads());
  EXPECT_GE(share, 0.95) << "the pair moved between threads: " << pair.Threads().size()
                         << " threads, the busiest ran " << share << " of its handlers";
}

TEST(SchedulingTest, TwoPingPongPairsEachStayOnOneWorker) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  const uint64_t round_trips = Scaled(50'000, 2'000);
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Pairs", 2);
  std::array<Pair, 2> pairs;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Pairs", &pool);
  ASSERT_NE(system, nullptr);
  for (Pair& pair : pairs) {
    RegisterPair(*system, pool, round_trips, &pair);
  }
  for (const Pair& pair : pairs) {
    Serve(*system, pair);
  }
  for (size_t p = 0; p < pairs.size(); ++p) {
    ASSERT_TRUE(pairs[p].done.WaitForNotificationWithTimeout(WaitTimeout()))
        << "pair " << p << ": " << testutil::DescribeCounters(*system);
  }
  // While the pool settles a pair may move once or twice (both started on the shared queue, and
  // an idle worker may steal one from behind the other); after that each keeps its worker. How
  // many handlings happen before the settling depends on the machine, so count moves, not shares.
  constexpr uint64_t kMaxMoves = 8;
  for (size_t p = 0; p < pairs.size(); ++p) {
    EXPECT_LE(pairs[p].Moves(), kMaxMoves)
        << "pair " << p << " kept moving between threads: " << pairs[p].Moves() << " moves in "
        << 2 * round_trips << " handlings; the busiest thread ran "
        << DominantShare(pairs[p].Threads()) << " of them";
  }
}

// -- stealing -------------------------------------------------------------------------------------

constexpr int kStealTargets = 20;

struct StealLog {
  troupe::Mutex mu;
  std::vector<std::thread::id> threads ABSL_GUARDED_BY(mu);
  std::atomic<int> started{0};
  std::atomic<int> bootstrapped{0};
  // Set by the Spawner: a target started while the Spawner's handler was still busy.
  std::atomic<bool> started_during_block{false};
};

// Records its thread, then keeps its worker busy for 2 ms.
class StealTarget : public Actor {
 public:
  explicit StealTarget(StealLog* log) : Actor(&StealTarget::StateWork), log_(log) {}

 private:
  void Bootstrap() override {
    // release: pairs with the test's acquire load.
    log_->bootstrapped.fetch_add(1, std::memory_order_release);
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    // release: pairs with the Spawner's and the test's acquire loads.
    log_->started.fetch_add(1, std::memory_order_release);
    {
      troupe::MutexLock lock(&log_->mu);
      log_->threads.push_back(std::this_thread::get_id());
    }
    BusyFor(absl::Milliseconds(2));
  }

  StealLog* log_;
};

// On EvKick sends one event to each target (they wait in this worker's run-next slot and local
// queue), then keeps its worker busy for at least 50 ms and until a target has started elsewhere
// (bounded).
class Spawner : public Actor {
 public:
  Spawner(std::vector<ActorId> targets, StealLog* log)
      : Actor(&Spawner::StateWork), targets_(std::move(targets)), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
      return;
    }
    for (const ActorId& target : targets_) {
      Send(target, std::make_unique<EvValue>(0));
    }
    BusyFor(absl::Milliseconds(50));
    const bool stolen = WaitUntil(
        [this] { return log_->started.load(std::memory_order_acquire) > 0; }, absl::Seconds(10));
    // release: pairs with the test's acquire load.
    log_->started_during_block.store(stolen, std::memory_order_release);
  }

  std::vector<ActorId> targets_;
  StealLog* log_;
};

TEST(SchedulingTest, IdleWorkerStealsFromBusyWorker) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Steal", 2);
  StealLog log;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Steal", &pool);
  ASSERT_NE(system, nullptr);
  std::vector<ActorId> targets;
  targets.reserve(kStealTargets);
  for (int i = 0; i < kStealTargets; ++i) {
    targets.push_back(system->Register(std::make_unique<StealTarget>(&log), OnPool(pool)));
  }
  ASSERT_TRUE(
      WaitUntil([&] { return log.bootstrapped.load(std::memory_order_acquire) == kStealTargets; }));
  const ActorId spawner = system->Register(std::make_unique<Spawner>(targets, &log), OnPool(pool));
  const uint64_t steals_before = system->Counters().pools[pool].steals;

  system->Send(spawner, std::make_unique<EvKick>());
  ASSERT_TRUE(WaitUntil([&] {
    return log.started.load(std::memory_order_acquire) == kStealTargets &&
           system->Counters().pools[pool].queue_length == 0;
  })) << testutil::DescribeCounters(*system);
  // The last target's 2 ms are not over yet: wait for every activation to end (the counters are
  // added then).
  ASSERT_TRUE(WaitUntil([&] {
    return system->Counters().pools[pool].events >= uint64_t{kStealTargets} * 2 + 2;
  })) << testutil::DescribeCounters(*system);

  EXPECT_TRUE(log.started_during_block.load(std::memory_order_acquire))
      << "no target started while the spawner's handler kept its worker busy: the queued targets "
         "were not handed to the idle worker";
  EXPECT_GT(system->Counters().pools[pool].steals, steals_before)
      << testutil::DescribeCounters(*system);
  std::vector<std::thread::id> threads;
  {
    troupe::MutexLock lock(&log.mu);
    threads = log.threads;
  }
  ASSERT_EQ(threads.size(), static_cast<size_t>(kStealTargets));
  std::sort(threads.begin(), threads.end());
  const auto distinct = std::unique(threads.begin(), threads.end()) - threads.begin();
  EXPECT_GE(distinct, 2) << "every target ran on the spawner's worker";
}

// -- suspend and resume ---------------------------------------------------------------------------

// One node configured like the real-thread tests' nodes.
TestRuntimeOptions OneNode() { return {.config = testutil::SmallConfig()}; }

// Returns the values of the EvValue events in `events`, in order.
std::vector<uint64_t> Values(const std::vector<Received>& events) {
  std::vector<uint64_t> values;
  for (const Received& r : events) {
    if (r.type == kEvValue) {
      values.push_back(r.value);
    }
  }
  return values;
}

// Returns first, first + 1, ..., last - 1.
std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> values;
  for (uint64_t v = first; v < last; ++v) {
    values.push_back(v);
  }
  return values;
}

TEST(SchedulingTest, SuspendKeepsOrderAndLosesNothing) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  constexpr uint64_t kPerStep = 100;
  uint64_t next = 0;
  auto send_step = [&] {
    for (uint64_t i = 0; i < kPerStep; ++i) {
      system->Send(recorder, std::make_unique<EvValue>(next++));
    }
  };
  ASSERT_TRUE(system->Suspend(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Suspend(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Resume(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Resume(recorder).ok());
  send_step();

  ASSERT_TRUE(inbox.WaitForType(kEvValue, 4 * kPerStep)) << testutil::DescribeCounters(*system);
  const std::vector<Received> events = inbox.Snapshot();
  EXPECT_EQ(events.size(), 4 * kPerStep) << "the state function saw other events (suspend/resume?)";
  EXPECT_EQ(Values(events), Range(0, 4 * kPerStep));
}

TEST(SchedulingTest, SuspendedActorHandlesNothingUntilLastResume) {
  TestRuntime runtime(OneNode());
  Inbox inbox;
  const ActorId recorder = runtime.Register(std::make_unique<Recorder>(&inbox));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  for (uint64_t v = 0; v < 5; ++v) {
    runtime.Send(recorder, std::make_unique<EvValue>(v));
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(inbox.Snapshot().empty()) << "handled while suspended twice";

  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  for (uint64_t v = 5; v < 8; ++v) {
    runtime.Send(recorder, std::make_unique<EvValue>(v));
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(inbox.Snapshot().empty()) << "handled after one resume of two suspends";

  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(8));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), Range(0, 9));
}

// What a SelfSuspender saw: values, and its SuspendCount() in each handler.
struct SelfSuspendLog {
  std::vector<uint64_t> values;
  std::vector<uint32_t> counts;
  uint32_t count_after_suspend = 0;
};

// Suspends itself on EvKick; records every EvValue. TestRuntime only (single thread).
class SelfSuspender : public Actor {
 public:
  explicit SelfSuspender(SelfSuspendLog* log) : Actor(&SelfSuspender::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        Suspend();
        log_->count_after_suspend = SuspendCount();
        break;
      case kEvValue:
        log_->values.push_back(ev->Get<EvValue>()->value);
        log_->counts.push_back(SuspendCount());
        break;
      default:
        Unhandled(ev);
    }
  }

  SelfSuspendLog* log_;
};

TEST(SchedulingTest, ActorSuspendsItselfUntilResumedFromOutside) {
  TestRuntime runtime(OneNode());
  SelfSuspendLog log;
  const ActorId actor = runtime.Register(std::make_unique<SelfSuspender>(&log));
  runtime.Send(actor, std::make_unique<EvValue>(0));
  runtime.Send(actor, std::make_unique<EvKick>());
  // Already queued behind the kick when the actor suspends itself: held too.
  runtime.Send(actor, std::make_unique<EvValue>(1));
  runtime.Send(actor, std::make_unique<EvValue>(2));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.count_after_suspend, 1u);
  EXPECT_EQ(log.values, std::vector<uint64_t>{0});

  runtime.Send(actor, std::make_unique<EvValue>(3));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.values, std::vector<uint64_t>{0});

  ASSERT_TRUE(runtime.node().Resume(actor).ok());
  runtime.Send(actor, std::make_unique<EvValue>(4));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.values, Range(0, 5));
  EXPECT_EQ(log.counts, std::vector<uint32_t>(5, 0));
}

TEST(SchedulingTest, ResumeOfActorNotSuspendedIsIgnored) {
  CapturingLogSink sink;
  TestRuntime runtime(OneNode());
  Inbox inbox;
  const ActorId recorder = runtime.Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(1));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{1});
  EXPECT_FALSE(LineWithAll(sink, {recorder.ToString(), "not suspended"}).empty())
      << "no warning about the stray resume; log:\n"
      << absl::StrJoin(sink.Lines(), "\n");

  // The stray resume left no credit behind: a suspend still holds events until its resume.
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(2));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{1});
  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), Range(1, 3));
  EXPECT_EQ(inbox.Snapshot().size(), 2u) << "the state function saw a suspend or resume";
}

// Records EvValue values; ends itself while handling `last`. TestRuntime only.
class Quitter : public Actor {
 public:
  Quitter(uint64_t last, std::vector<uint64_t>* values)
      : Actor(&Quitter::StateWork), last_(last), values_(values) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t v = ev->Get<EvValue>()->value;
    values_->push_back(v);
    if (v == last_) {
      PassAway();
    }
  }

  const uint64_t last_;
  std::vector<uint64_t>* values_;
};

TEST(SchedulingTest, PassAwayDuringReplayReportsRemainingHeldEventsUndelivered) {
  TestRuntime runtime(OneNode());
  std::vector<uint64_t> values;
  const ActorId quitter = runtime.Register(std::make_unique<Quitter>(2, &values));
  const ActorId edge = runtime.AllocateEdgeActor();
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.node().Suspend(quitter).ok());
  for (uint64_t v = 1; v <= 5; ++v) {
    runtime.Send(quitter, std::make_unique<EvValue>(v), edge, kTrackDelivery, /*cookie=*/v);
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(values.empty());
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u);

  ASSERT_TRUE(runtime.node().Resume(quitter).ok());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(values, Range(1, 3));
  std::vector<EventHandlePtr> reports = runtime.TakeEdgeEvents(edge);
  ASSERT_EQ(reports.size(), 3u);
  for (size_t i = 0; i < reports.size(); ++i) {
    const EvUndelivered* undelivered = reports[i]->Get<EvUndelivered>();
    ASSERT_NE(undelivered, nullptr) << "report " << i << ": " << reports[i]->ToString();
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kActorNotFound);
    EXPECT_EQ(undelivered->source_type, kEvValue);
    EXPECT_EQ(undelivered->cookie, 3 + i) << "held events reported out of order";
    EXPECT_FALSE(undelivered->unsure);
  }
  EXPECT_EQ(runtime.node().Counters().dropped_events, 0u);
}

TEST(SchedulingTest, SuspendAndResumeRejectIdsThatAreNotLocalActors) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(system->RegisterService(ServiceId("sched"), recorder).ok());
  const ActorId remote = recorder.WithNode(system->node_id() + 1);
  for (const ActorId& id :
       {ActorId(), ServiceId("sched"), ServiceId("sched", system->node_id()), remote}) {
    EXPECT_EQ(system->Suspend(id).code(), absl::StatusCode::kInvalidArgument) << id.ToString();
    EXPECT_EQ(system->Resume(id).code(), absl::StatusCode::kInvalidArgument) << id.ToString();
  }
  // None of them reached the actor (a suspend would hold the value below), and the local id
  // itself is accepted.
  EXPECT_TRUE(system->Suspend(recorder).ok());
  EXPECT_TRUE(system->Resume(recorder).ok());
  system->Send(recorder, std::make_unique<EvValue>(7));
  ASSERT_TRUE(inbox.WaitForType(kEvValue));
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{7});
  EXPECT_EQ(inbox.Snapshot().size(), 1u);
}

// Keeps every EvValue's value, in handling order; publishes the count.
class ValueCollector : public Actor {
 public:
  ValueCollector(std::vector<uint64_t>* values, std::atomic<uint64_t>* count)
      : Actor(&ValueCollector::StateWork), values_(values), count_(count) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    values_->push_back(ev->Get<EvValue>()->value);
    // release: publishes the push_back to the test's acquire load.
    count_->fetch_add(1, std::memory_order_release);
  }

  std::vector<uint64_t>* values_;
  std::atomic<uint64_t>* count_;
};

TEST(SchedulingTest, SuspendResumeStressKeepsPerSenderOrder) {
  constexpr int kSenders = 4;
  const uint64_t per_sender = Scaled(2'000, 200);
  constexpr int kToggles = 200;
  constexpr uint32_t kMaxDepth = 3;
  std::vector<uint64_t> values;
  std::atomic<uint64_t> count{0};
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId collector = system->Register(std::make_unique<ValueCollector>(&values, &count));

  std::atomic<bool> go{false};
  std::vector<std::thread> senders;
  senders.reserve(kSenders);
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      // acquire: pairs with the release store below (a start line, so the sends overlap).
      WaitUntil([&] { return go.load(std::memory_order_acquire); });
      for (uint64_t i = 0; i < per_sender; ++i) {
        system->Send(collector,
                     std::make_unique<EvValue>(uint64_t{static_cast<uint32_t>(s)} << 32 | i));
      }
    });
  }
  std::mt19937 rng(20261121);
  uint32_t depth = 0;
  go.store(true, std::memory_order_release);
  // EXPECT, not ASSERT, until the senders are joined.
  for (int t = 0; t < kToggles; ++t) {
    const bool suspend = depth == 0 || (depth < kMaxDepth && rng() % 2 == 0);
    if (suspend) {
      EXPECT_TRUE(system->Suspend(collector).ok());
      ++depth;
    } else {
      EXPECT_TRUE(system->Resume(collector).ok());
      --depth;
    }
    std::this_thread::yield();
  }
  for (; depth > 0; --depth) {
    EXPECT_TRUE(system->Resume(collector).ok());
  }
  for (std::thread& sender : senders) {
    sender.join();
  }

  const uint64_t expected = kSenders * per_sender;
  ASSERT_TRUE(WaitUntil([&] { return count.load(std::memory_order_acquire) >= expected; }))
      << count.load() << " of " << expected << " handled: " << testutil::DescribeCounters(*system);
  // Joins the workers: `values` is the test's now. A duplicate would have been handled by then or
  // never; the count and the order check below see it.
  system->Stop();
  ASSERT_EQ(count.load(std::memory_order_acquire), expected);
  ASSERT_EQ(values.size(), expected);
  std::array<uint64_t, kSenders> next{};
  uint64_t out_of_order = 0;
  for (const uint64_t v : values) {
    const auto sender = static_cast<size_t>(v >> 32);
    const uint64_t seq = v & 0xffffffffu;
    ASSERT_LT(sender, next.size());
    out_of_order += seq != next[sender] ? 1 : 0;
    next[sender] = seq + 1;
  }
  EXPECT_EQ(out_of_order, 0u);
  for (int s = 0; s < kSenders; ++s) {
    EXPECT_EQ(next[s], per_sender) << "sender " << s;
  }
}

// -- fair mode ------------------------------------------------------------------------------------

// Shared by the Burners and the Gate of one fair-mode round.
struct FairRound {
  troupe::Mutex mu;
  // Burner names in handling order (the ordered phase only).
  std::string order ABSL_GUARDED_BY(mu);
  std::array<std::atomic<int64_t>, 3> burned_ns{};
  std::atomic<int> done{0};
  std::atomic<int> bootstrapped{0};
  troupe::Notification gate_entered;
  troupe::Notification gate_release;
};

// EvValue{us > 0}: keeps its worker busy for `us` microseconds and adds the measured time to
// `burned_ns[index]`. EvValue{0}: appends its name to the round's order.
class Burner : public Actor {
 public:
  Burner(int index, FairRound* round) : Actor(&Burner::StateWork), index_(index), round_(round) {}

 private:
  void Bootstrap() override {
    // release: pairs with the test's acquire load.
    round_->bootstrapped.fetch_add(1, std::memory_order_release);
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t us = ev->Get<EvValue>()->value;
    if (us > 0) {
      const absl::Duration burned = BusyFor(absl::Microseconds(static_cast<int64_t>(us)));
      // relaxed: published by the release increment of `done`.
      round_->burned_ns[index_].fetch_add(absl::ToInt64Nanoseconds(burned),
                                          std::memory_order_relaxed);
    } else {
      troupe::MutexLock lock(&round_->mu);
      round_->order.push_back(static_cast<char>('A' + index_));
    }
    // release: pairs with the test's acquire load.
    round_->done.fetch_add(1, std::memory_order_release);
  }

  const int index_;
  FairRound* round_;
};

// Blocks its worker on EvKick until the test releases it (bounded).
class Gate : public Actor {
 public:
  explicit Gate(FairRound* round) : Actor(&Gate::StateWork), round_(round) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
      return;
    }
    round_->gate_entered.Notify();
    round_->gate_release.WaitForNotificationWithTimeout(WaitTimeout());
  }

  FairRound* round_;
};

// What one round on a one-worker pool gave: the handling order of A, B, C (made ready in that
// order while the worker was blocked) after each burned `burn_us[i]` once, and what they burned.
struct RoundResult {
  std::string order;
  std::array<int64_t, 3> burned_ns{};
};

// Runs one round on `pool` of `system` with fresh actors (fresh mailboxes: zero run time). The
// actors keep pointing at `round`, which must outlive the system.
void RunRound(ActorSystem& system, uint32_t pool, const std::array<uint64_t, 3>& burn_us,
              FairRound* round, RoundResult* result) {
  std::array<ActorId, 3> burners;
  for (int i = 0; i < 3; ++i) {
    burners[i] = system.Register(std::make_unique<Burner>(i, round), OnPool(pool));
  }
  const ActorId gate = system.Register(std::make_unique<Gate>(round), OnPool(pool));
  ASSERT_TRUE(WaitUntil([&] { return round->bootstrapped.load(std::memory_order_acquire) == 3; }));
  for (int i = 0; i < 3; ++i) {
    system.Send(burners[i], std::make_unique<EvValue>(burn_us[i]));
  }
  ASSERT_TRUE(WaitUntil([&] { return round->done.load(std::memory_order_acquire) == 3; }))
      << testutil::DescribeCounters(system);

  system.Send(gate, std::make_unique<EvKick>());
  ASSERT_TRUE(round->gate_entered.WaitForNotificationWithTimeout(WaitTimeout()));
  for (int i = 0; i < 3; ++i) {
    system.Send(burners[i], std::make_unique<EvValue>(0));
  }
  round->gate_release.Notify();
  ASSERT_TRUE(WaitUntil([&] { return round->done.load(std::memory_order_acquire) == 6; }))
      << testutil::DescribeCounters(system);
  {
    troupe::MutexLock lock(&round->mu);
    result->order = round->order;
  }
  for (int i = 0; i < 3; ++i) {
    result->burned_ns[i] = round->burned_ns[i].load(std::memory_order_relaxed);
  }
}

TEST(SchedulingTest, FairModeOrdersByRunTime) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Fair", 1)->set_fair(true);
  constexpr int kMaxRounds = 5;
  std::array<std::unique_ptr<FairRound>, kMaxRounds> rounds;
  for (auto& round : rounds) {
    round = std::make_unique<FairRound>();
  }
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Fair", &pool);
  ASSERT_NE(system, nullptr);
  // A 3 ms, B 1 ms, C 2 ms: least run time first gives B, C, A. The pool charges wall time, so a
  // descheduled handler is charged more: the expected order comes from what each handler measured,
  // and a round whose measured times are too close to call is run again (bounded).
  constexpr std::array<uint64_t, 3> kBurnUs = {3000, 1000, 2000};
  constexpr int64_t kClearGapNs = 300'000;
  for (int attempt = 1; attempt <= kMaxRounds; ++attempt) {
    RoundResult result;
    RunRound(*system, pool, kBurnUs, rounds[attempt - 1].get(), &result);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
    std::string expected = "ABC";
    std::sort(expected.begin(), expected.end(), [&result](char x, char y) {
      return result.burned_ns[x - 'A'] < result.burned_ns[y - 'A'];
    });
    std::array<int64_t, 3> sorted = result.burned_ns;
    std::sort(sorted.begin(), sorted.end());
    const bool clear = sorted[1] - sorted[0] >= kClearGapNs && sorted[2] - sorted[1] >= kClearGapNs;
    if (!clear && attempt < kMaxRounds) {
      continue;
    }
    EXPECT_EQ(result.order, expected)
        << "burned A " << result.burned_ns[0] << " ns, B " << result.burned_ns[1] << " ns, C "
        << result.burned_ns[2] << " ns (round " << attempt << ")";
    if (!clear) {
      ADD_FAILURE() << kMaxRounds << " rounds too close to call on this machine";
    }
    return;
  }
}

TEST(SchedulingTest, NonFairPoolRunsReadyMailboxesInArrivalOrder) {
  if (ShuffledByEnvironment()) {
    GTEST_SKIP() << kShuffledSkip;
  }
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Fifo", 1);
  FairRound round;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Fifo", &pool);
  ASSERT_NE(system, nullptr);
  RoundResult result;
  RunRound(*system, pool, {3000, 1000, 2000}, &round, &result);
  EXPECT_EQ(result.order, "ABC");
}

// -- stuck handlers -------------------------------------------------------------------------------

// Shared by a Sleeper and its test.
struct SleeperControl {
  troupe::Notification entered;
  troupe::Notification release;
  troupe::Notification returned;
  absl::Duration limit = WaitTimeout();
};

// Blocks its worker on EvBlock until released or `limit` passes.
class Sleeper : public Actor {
 public:
  explicit Sleeper(SleeperControl* control) : Actor(&Sleeper::StateWork), control_(control) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlock) {
      Unhandled(ev);
      return;
    }
    control_->entered.Notify();
    control_->release.WaitForNotificationWithTimeout(control_->limit);
    control_->returned.Notify();
  }

  SleeperControl* control_;
};

// Waits until `handled` has grown by `by` while the Sleeper is still inside its handler.
::testing::AssertionResult ProgressWhileBlocked(const std::atomic<uint64_t>& handled,
                                                const SleeperControl& control, uint64_t by) {
  // relaxed: a progress counter.
  const uint64_t start = handled.load(std::memory_order_relaxed);
  const bool grew =
      WaitUntil([&] { return handled.load(std::memory_order_relaxed) >= start + by; });
  if (!grew) {
    return ::testing::AssertionFailure()
           << "no progress: " << handled.load() - start << " of " << by << " events handled";
  }
  if (control.returned.HasBeenNotified()) {
    return ::testing::AssertionFailure() << "the blocked handler returned before the progress";
  }
  return ::testing::AssertionSuccess();
}

TEST(SchedulingTest, StuckHandlerIsReported) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  // 1 s: under load a worker of the pair can be descheduled inside a handler for a few hundred
  // milliseconds, which the watchdog rightly counts as stuck too.
  AddPool(&config, "Work", 2)->set_stuck_threshold_ms(1000);
  SleeperControl control;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> handled{0};
  Pair pair;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Work", &pool);
  ASSERT_NE(system, nullptr);
  RegisterPair(*system, pool, kMaxHotEvents, &pair, &stop, &handled);
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(pool));
  Serve(*system, pair);
  system->Send(sleeper, std::make_unique<EvBlock>());
  ASSERT_TRUE(control.entered.WaitForNotificationWithTimeout(WaitTimeout()));
  const absl::Time entered_at = absl::Now();

  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].stuck_reports >= 1; }))
      << testutil::DescribeCounters(*system);
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  // The scenario: the handler blocks for 2 s; the other actors keep going all along.
  absl::SleepFor(entered_at + absl::Seconds(2) - absl::Now());
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  control.release.Notify();
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(WaitUntil([&] { return sink.Contains("the stuck handler returned"); }));
  stop.store(true, std::memory_order_relaxed);

  EXPECT_EQ(system->Counters().pools[pool].stuck_reports, 1u);
  const std::string line = LineWithAll(sink, {"stuck actor", sleeper.ToString(), "Sleeper)",
                                              absl::StrFormat("0x%08x", kEvBlock), "pool Work"});
  EXPECT_FALSE(line.empty()) << "no stuck report naming " << sleeper.ToString()
                             << ", Sleeper and the event; log:\n"
                             << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_FALSE(sink.Contains("is starved")) << "one of two workers stuck is not starvation";
}

TEST(SchedulingTest, StarvedPoolIsReported) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Solo", 1)->set_stuck_threshold_ms(200);
  SleeperControl control;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> handled{0};
  Pair pair;
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> solo = system->PoolIndex("Solo");
  const absl::StatusOr<uint32_t> user = system->PoolIndex("User");
  ASSERT_TRUE(solo.ok() && user.ok());
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(*solo));
  RegisterPair(*system, *user, kMaxHotEvents, &pair, &stop, &handled);
  Serve(*system, pair);
  system->Send(sleeper, std::make_unique<EvBlock>());
  ASSERT_TRUE(control.entered.WaitForNotificationWithTimeout(WaitTimeout()));

  EXPECT_TRUE(WaitUntil([&] { return sink.Contains("pool Solo is starved"); }))
      << "log:\n"
      << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  control.release.Notify();
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));
  stop.store(true, std::memory_order_relaxed);
  EXPECT_EQ(system->Counters().pools[*solo].stuck_reports, 1u);
  EXPECT_FALSE(LineWithAll(sink, {"stuck actor", sleeper.ToString()}).empty());
}

TEST(SchedulingTest, ZeroStuckThresholdReportsNothing) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  // The other pools keep the watchdog running, with a threshold the blocked handler outlasts.
  for (proto::PoolConfig& pool : *config.mutable_pools()) {
    pool.set_stuck_threshold_ms(100);
  }
  AddPool(&config, "Quiet", 1)->set_stuck_threshold_ms(0);
  SleeperControl control;
  control.limit = absl::Milliseconds(400);
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> quiet = system->PoolIndex("Quiet");
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(*quiet));
  system->Send(sleeper, std::make_unique<EvBlock>());
  // Nobody releases it: it blocks its worker for the whole `limit`.
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));

  EXPECT_EQ(system->Counters().pools[*quiet].stuck_reports, 0u);
  EXPECT_FALSE(sink.Contains("stuck")) << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_FALSE(sink.Contains("starved")) << absl::StrJoin(sink.Lines(), "\n");
}

// -- counters -------------------------------------------------------------------------------------

TEST(SchedulingTest, IdlePoolUsesNoCpu) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Idle", 2)->clear_spin_time_us();  // the default spin
  std::array<Pair, 2> pairs;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Idle", &pool);
  ASSERT_NE(system, nullptr);
  const uint64_t round_trips = Scaled(2'000, 200);
  for (Pair& pair : pairs) {
    RegisterPair(*system, pool, round_trips, &pair);
    Serve(*system, pair);
  }
  for (Pair& pair : pairs) {
    ASSERT_TRUE(pair.done.WaitForNotificationWithTimeout(WaitTimeout()));
  }
  // Every activation is over (its events are counted when it ends); the workers then spin for
  // 20 us and park.
  const uint64_t total_events = pairs.size() * (2 * round_trips + 2);  // Bootstraps included
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].events >= total_events; }))
      << testutil::DescribeCounters(*system);
  const PoolCounters before = system->Counters().pools[pool];
  const absl::Time idle_start = absl::Now();
  // The idle period under test (a real-time window, not a wait for a condition).
  absl::SleepFor(absl::Seconds(1));
  const PoolCounters after = system->Counters().pools[pool];
  const absl::Duration idle = absl::Now() - idle_start;

  EXPECT_LT(after.cpu_time - before.cpu_time, absl::Milliseconds(20))
      << "idle workers burned CPU over " << idle;
  EXPECT_LT(after.busy_time - before.busy_time, idle / 10)
      << "idle workers counted as busy over " << idle;
  EXPECT_EQ(after.events, before.events);
  // Two workers parked for the whole period: close to 2 * idle. Half of one is plenty of margin.
  EXPECT_GE(after.parked_time - before.parked_time, idle / 2)
      << "parked_time did not grow while both workers were parked (parks " << before.parks << " -> "
      << after.parks << ", parked_time " << before.parked_time << " -> " << after.parked_time
      << ")";
}

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

// Shuffle (a debug aid) overrides fair mode: a fair pool on a shuffled node still runs everything.
// (In builds without TROUPE_ENABLE_SHUFFLE the node ignores shuffle and this is a plain fair run.)
TEST(SchedulingTest, FairPoolOnShuffledNodeRunsEverything) {
  constexpr int kActors = 20;
  constexpr int kEventsEach = 50;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  config.mutable_shuffle()->set_enabled(true);
  config.mutable_shuffle()->set_seed(6);
  AddPool(&config, "FairShuffled", 2)->set_fair(true);
  std::atomic<uint64_t> count{0};
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "FairShuffled", &pool);
  ASSERT_NE(system, nullptr);
  std::vector<ActorId> actors;
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(system->Register(std::make_unique<EventCounter>(&count), OnPool(pool)));
  }
  for (int e = 0; e < kEventsEach; ++e) {
    for (const ActorId& actor : actors) {
      system->Send(actor, std::make_unique<EvValue>(static_cast<uint64_t>(e)));
    }
  }
  EXPECT_TRUE(WaitUntil([&] { return count.load() == uint64_t{kActors} * kEventsEach; }))
      << count.load() << " of " << kActors * kEventsEach << " handled; "
      << testutil::DescribeCounters(*system);
}

TEST(SchedulingTest, CountersAreSane) {
  constexpr uint32_t kThreads = 3;
  constexpr int kActors = 10;
  constexpr uint64_t kPerActor = 100;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Count", kThreads);
  std::atomic<uint64_t> count{0};
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Count", &pool);
  ASSERT_NE(system, nullptr);

  const PoolCounters fresh = system->Counters().pools[pool];
  EXPECT_EQ(fresh.name, "Count");
  EXPECT_EQ(fresh.threads, kThreads);
  EXPECT_EQ(fresh.workers.size(), kThreads);
  EXPECT_EQ(fresh.queue_length, 0);
  EXPECT_EQ(fresh.events, 0u);

  std::vector<ActorId> actors;
  actors.reserve(kActors);
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(system->Register(std::make_unique<EventCounter>(&count), OnPool(pool)));
  }
  for (uint64_t v = 0; v < kPerActor; ++v) {
    for (const ActorId& actor : actors) {
      system->Send(actor, std::make_unique<EvValue>(v));
    }
  }
  const uint64_t expected_events = kActors * (kPerActor + 1);  // Bootstrap included
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].events >= expected_events; }))
      << testutil::DescribeCounters(*system);
  EXPECT_EQ(count.load(std::memory_order_relaxed), kActors * kPerActor);

  const PoolCounters c = system->Counters().pools[pool];
  EXPECT_EQ(c.events, expected_events);
  EXPECT_EQ(c.queue_length, 0);
  EXPECT_GT(c.busy_time, absl::ZeroDuration());
  EXPECT_GT(c.cpu_time, absl::ZeroDuration());
  // Not activations <= events: an activation that finds a sender mid-push handles nothing and
  // queues the mailbox again.
  EXPECT_GE(c.activations, static_cast<uint64_t>(kActors));
  EXPECT_EQ(c.stuck_reports, 0u);
  ASSERT_EQ(c.workers.size(), kThreads);
  uint64_t events = 0;
  uint64_t activations = 0;
  uint64_t steals = 0;
  for (const WorkerCounters& worker : c.workers) {
    events += worker.events;
    activations += worker.activations;
    steals += worker.steals;
  }
  EXPECT_EQ(events, c.events);
  EXPECT_EQ(activations, c.activations);
  EXPECT_EQ(steals, c.steals);
  // A pool that never ran anything has nothing queued either.
  const absl::StatusOr<uint32_t> batch = system->PoolIndex("Batch");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(system->Counters().pools[*batch].queue_length, 0);
}

}  // namespace
}  // namespace troupe
