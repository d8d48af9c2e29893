// SPDX-License-Identifier: Apache-2.0
//
// lending_bench: what threads moving between pools by load (proto ThreadLendingConfig) buys, each
// benchmark with lending off (lending:0, every pool keeps its count) and on (lending:1).
//   - BM_SaturatedBesideIdle   kActors actors on a User pool of one thread each handle events of
//                              kWork of CPU; a Batch pool of one thread idles beside it. The budget
//                              is the machine's cores. events/s; `user_threads` is the User pool's
//                              count at the end. With lending, User borrows Batch's thread
//                              (Batch's min_threads is 0), so the rate should approach what the
//                              spare cores allow (2x on two cores).
//   - BM_AlternatingBusyPool   two pools of one thread each (A and B, 0..2 threads with lending);
//                              the load moves from one to the other every kPhase, kPhases times per
//                              run. events/s over the run, and `follow_ms`: the median time from a
//                              switch to the busy pool running two threads (sampled every 200 us
//                              by the benchmark thread; -1 when it never does, as without lending).
// Ping-pong, ring and skynet with and without lending: actors_bench with TROUPE_BENCH_LENDING=1
// (its pools get lending ranges) against the same binary without.
// Excluded: node creation and Stop; the first period after a node starts (each run waits for the
// pools to settle first). Every benchmark uses real time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"

namespace {

constexpr int kActors = 4;
// CPU per event: long enough that a run is about scheduling threads, not queues.
constexpr absl::Duration kWork = absl::Microseconds(20);
constexpr int64_t kEventsPerRun = 20'000;
constexpr absl::Duration kPhase = absl::Milliseconds(100);
constexpr int kPhases = 10;
constexpr absl::Duration kTimeout = absl::Seconds(60);

enum : troupe::EventType {
  kEvWork = troupe::EventSpaceBegin(troupe::kUserEventSpace + 40),
};
struct EvWork final : troupe::EventLocal<EvWork, kEvWork> {};

void Spin(absl::Duration duration) {
  const auto until = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(duration);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Handles each EvWork with kWork of CPU, then sends itself another while `budget` (shared by the
// run's actors) lasts or, without a budget, until `stop`; notifies `done` when the budget is spent.
class Worker : public troupe::Actor {
 public:
  Worker(std::atomic<int64_t>* budget, const std::atomic<bool>* stop, std::atomic<int64_t>* handled,
         troupe::Notification* done)
      : Actor(&Worker::StateWork), budget_(budget), stop_(stop), handled_(handled), done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvWork) {
      return;
    }
    Spin(kWork);
    // relaxed: counts the benchmark thread reads after `done` or at the end of a phase.
    handled_->fetch_add(1, std::memory_order_relaxed);
    if (budget_ != nullptr) {
      const int64_t left = budget_->fetch_sub(1, std::memory_order_relaxed) - 1;
      if (left == 0) {
        done_->Notify();
      }
      if (left < kActors) {
        return;  // the last events in flight finish the run
      }
    } else if (stop_->load(std::memory_order_relaxed)) {
      return;
    }
    Forward(SelfId(), ev);
  }

  std::atomic<int64_t>* budget_;
  const std::atomic<bool>* stop_;
  std::atomic<int64_t>* handled_;
  troupe::Notification* done_;
};

troupe::proto::PoolConfig* AddPool(troupe::proto::ActorSystemConfig* config, const char* name,
                                   uint32_t threads) {
  troupe::proto::PoolConfig* pool = config->add_pools();
  pool->set_name(name);
  pool->set_threads(threads);
  return pool;
}

std::unique_ptr<troupe::ActorSystem> Create(benchmark::State& state,
                                            const troupe::proto::ActorSystemConfig& config) {
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> system = troupe::ActorSystem::Create(config);
  if (!system.ok()) {
    state.SkipWithError(absl::StrCat("ActorSystem::Create: ", system.status().ToString()).c_str());
    return nullptr;
  }
  return *std::move(system);
}

uint32_t ThreadsOf(const troupe::ActorSystem& system, uint32_t pool) {
  return system.Counters().pools.at(pool).threads;
}

void BM_SaturatedBesideIdle(benchmark::State& state) {
  const bool lending = state.range(0) != 0;
  const uint32_t cores = std::max(2U, std::thread::hardware_concurrency());
  troupe::proto::ActorSystemConfig config;
  AddPool(&config, "System", 1);
  troupe::proto::PoolConfig* user = AddPool(&config, "User", 1);
  troupe::proto::PoolConfig* batch = AddPool(&config, "Batch", 1);
  AddPool(&config, "IC", 1);
  config.set_default_pool("User");
  if (lending) {
    user->set_max_threads(cores);
    user->set_priority(1);
    batch->set_min_threads(0);
    config.mutable_lending()->set_budget(cores);
  }
  std::unique_ptr<troupe::ActorSystem> system = Create(state, config);
  if (system == nullptr) {
    return;
  }
  std::atomic<int64_t> handled{0};
  int64_t items = 0;
  for (auto _ : state) {
    std::atomic<int64_t> budget{kEventsPerRun};
    troupe::Notification done;
    std::vector<troupe::ActorId> actors;
    for (int i = 0; i < kActors; ++i) {
      actors.push_back(
          system->Register(std::make_unique<Worker>(&budget, nullptr, &handled, &done)));
    }
    for (const troupe::ActorId& actor : actors) {
      system->Send(actor, std::make_unique<EvWork>());
    }
    if (!done.WaitForNotificationWithTimeout(kTimeout)) {
      state.SkipWithError("run not finished in time; node leaked");
      (void)system.release();
      return;
    }
    items += kEventsPerRun;
  }
  state.SetItemsProcessed(items);
  state.counters["user_threads"] = ThreadsOf(*system, 1);
}
BENCHMARK(BM_SaturatedBesideIdle)->ArgName("lending")->Arg(0)->Arg(1)->UseRealTime();

void BM_AlternatingBusyPool(benchmark::State& state) {
  const bool lending = state.range(0) != 0;
  troupe::proto::ActorSystemConfig config;
  for (const char* name : {"A", "B"}) {
    troupe::proto::PoolConfig* pool = AddPool(&config, name, 1);
    if (lending) {
      pool->set_min_threads(0);
      pool->set_max_threads(2);
    }
  }
  config.mutable_lending()->set_budget(2);
  std::unique_ptr<troupe::ActorSystem> system = Create(state, config);
  if (system == nullptr) {
    return;
  }
  std::atomic<int64_t> handled{0};
  std::vector<double> follow_ms;
  absl::Duration loaded;
  // One flag per phase, alive as long as the node: a phase's actors read theirs after it ends.
  std::vector<std::unique_ptr<std::atomic<bool>>> stops;
  for (auto _ : state) {
    for (int phase = 0; phase < kPhases; ++phase) {
      const auto pool = static_cast<uint32_t>(phase % 2);
      stops.push_back(std::make_unique<std::atomic<bool>>(false));
      std::atomic<bool>& stop = *stops.back();
      troupe::RegisterOptions options;
      options.pool = pool;
      for (int i = 0; i < kActors; ++i) {
        const troupe::ActorId actor =
            system->Register(std::make_unique<Worker>(nullptr, &stop, &handled, nullptr), options);
        system->Send(actor, std::make_unique<EvWork>());
      }
      const absl::Time start = absl::Now();
      double followed = -1;
      while (absl::Now() - start < kPhase) {
        if (followed < 0 && ThreadsOf(*system, pool) >= 2) {
          followed = absl::ToDoubleMilliseconds(absl::Now() - start);
        }
        absl::SleepFor(absl::Microseconds(200));
      }
      stop.store(true, std::memory_order_relaxed);
      loaded += absl::Now() - start;
      if (phase > 0) {  // the first phase starts from an idle node, not from a switch
        follow_ms.push_back(followed);
      }
    }
  }
  state.SetItemsProcessed(handled.load(std::memory_order_relaxed));
  std::sort(follow_ms.begin(), follow_ms.end());
  state.counters["follow_ms"] = follow_ms.empty() ? -1 : follow_ms[follow_ms.size() / 2];
  state.counters["loaded_s"] = absl::ToDoubleSeconds(loaded);
}
BENCHMARK(BM_AlternatingBusyPool)
    ->ArgName("lending")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
