// SPDX-License-Identifier: Apache-2.0
//
// actors_bench: throughput and footprint of the single-node actor runtime (troupe::actors).
//
// What is measured, end to end through the public API (Send/Forward, Register, state functions):
//   - BM_PingPong/pairs:P   round trips per second between a pinger and a ponger that bounce one
//                           event handle (Forward reuses it: no allocation per bounce). With P
//                           pairs the batch is split across them: scheduling and run-next slot
//                           behaviour when there are more pairs than workers.
//   - BM_SelfSend           events per second of actors that send to themselves: the mailbox push
//                           into an already running mailbox plus dispatch; `reuse:0` allocates a
//                           fresh event each time (Send), `reuse:1` forwards the same handle.
//   - BM_FanIn              events per second from 4 sender actors into 1 receiver: the contended
//                           multi-writer push, every event freshly allocated and freed by the
//                           receiver. Senders run on credit (at most kFanInWindow events in flight
//                           each; the receiver grants kFanInAck more per kFanInAck received), so
//                           they send in bursts of kFanInAck and memory stays bounded even though
//                           the receiver's activation budget is far smaller than a sender's.
//   - BM_FanInUnbounded     the same 4 -> 1 fan-in with no flow control: kBurstEvents events sent
//                           as fast as the senders can, so most of them queue at the receiver;
//                           events/s, and peak_mb = the RSS growth at its peak (sampled every
//                           10 ms). What a user who sends without credit meets.
//   - BM_BurstMemory        kBurstEvents small events queued at once in one receiver's mailbox
//                           (its handler holds its worker until all are sent, from the benchmark
//                           thread), then drained: bytes_per_queued_event = RSS growth / events,
//                           and whether the memory comes back once the workers are idle:
//                           back_ms = time from the drain to RSS within kBurstSlackBytes of where
//                           it started (-1: not within kBurstReturnWait), left_mb_1s = what is
//                           still above that start 1 s after the drain. Its figures are about
//                           the whole process: run it alone (--benchmark_filter=BM_BurstMemory),
//                           not after benchmarks whose memory may still be on its way back.
//   - BM_Spawn/external:E   registering kSpawnCount idle actors and running their Bootstrap, from a
//                           spawner actor in batches of kSpawnBatch (E=0) or from the benchmark
//                           thread (E=1); actors/s, and bytes_per_actor = RSS growth
//                           (/proc/self/statm, heap trimmed first) / kSpawnCount while all live.
//   - BM_Ring/tokens:T      hops per second around a ring of kRingSize actors, each forwarding a
//                           token handle to its successor (Forward: no allocation per hop); T
//                           tokens circulate at once (T = 1: one hop in flight, every hop a
//                           hand-off to a mailbox that was idle; T = kRingSize: every actor busy).
//   - BM_Skynet             the classic skynet: a root spawns kSkynetFanOut children, each spawns
//                           as many, down to kSkynetLeaves leaves; every leaf replies its ordinal
//                           and passes away, every inner node sums its children's replies, replies
//                           and passes away. ms per run and actors_per_s: spawn, a short life and
//                           death, all at once, with fresh events for every reply.
// `workers:W` is the User pool size: the default (one per hardware thread) and 1, whose gap is the
// price of spreading actors over cores. Counters: `activations_per_item` (mailbox activations per
// item; 1/batching) and `parks` (times a worker slept on its semaphore during the run).
// Why: these are the costs every actor program pays (a hop, a fan-in, a spawn, an idle actor's
// memory) and the figures bench/README.md compares with CAF; a regression here shows up everywhere.
// Excluded: ActorSystem creation and Stop (thread start/join, destroying the actors) are outside
// the timed region; no interconnect, serialization, timers or services. One item is one round
// trip / one event / one actor / one hop / one whole skynet run. Every benchmark uses real time
// (the work runs on the runtime's workers, not on the benchmark thread); process CPU time is
// reported alongside ("CPU") to show how much CPU all threads burn, idle spinning included.
//
// Each benchmark call creates one node (System 1, User W, Batch 1, IC 1 threads), runs one batch
// of state.iterations() items on the User pool and waits for a completion notification with a
// timeout: a wedged run is reported with SkipWithError and its node is leaked rather than joined,
// so the binary never hangs. Sizes shrink under sanitizers.
//
//   build/bench/bench/actors/actors_bench --benchmark_repetitions=3
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/scoped_actor.h"
#include "actors/supervision.h"
#include "actors/sync.h"
#include "actors/testing/actors.h"
#include "bench/process_memory.h"
#include "bench/sanitized.h"
#include "proto/config.pb.h"

namespace {

#ifdef TROUPE_BENCH_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Longest a batch may take before the benchmark gives up on it.
constexpr absl::Duration kTimeout = kSanitized ? absl::Minutes(5) : absl::Seconds(60);

constexpr int kFanInSenders = 4;
// Events a fan-in sender may have in flight, and the receiver's acknowledgement granularity.
constexpr uint32_t kFanInWindow = 512;
constexpr uint32_t kFanInAck = 128;

// Actors BM_Spawn registers and the spawner's batch (one self-sent continue event per batch).
constexpr uint64_t kSpawnCount = kSanitized ? 20'000 : 1'000'000;
constexpr uint64_t kSpawnBatch = 10'000;

// Actors in BM_Ring's ring.
constexpr int kRingSize = 1000;

// BM_Skynet's tree: each inner node has kSkynetFanOut children; the leaves are numbered
// [0, kSkynetLeaves) and their ordinals add up to kSkynetSum.
constexpr uint64_t kSkynetFanOut = 10;
constexpr uint64_t kSkynetLeaves = kSanitized ? 10'000 : 1'000'000;
constexpr uint64_t kSkynetActors = (kSkynetLeaves * kSkynetFanOut - 1) / (kSkynetFanOut - 1);
constexpr uint64_t kSkynetSum = kSkynetLeaves * (kSkynetLeaves - 1) / 2;
static_assert(kSanitized || (kSkynetActors == 1'111'111 && kSkynetSum == 499'999'500'000));

enum : troupe::EventType {
  kEvStart = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvBall,
  kEvTick,
  kEvData,
  kEvAck,
  kEvContinue,
  kEvToken,
  kEvSetNext,
  kEvSum,
  kEvBurst,
  kEvBenchEnd,
};
static_assert(troupe::InEventSpace(kEvBenchEnd - 1, troupe::kUserEventSpace));

// -- completion ----------------------------------------------------------------------------------

// One batch: `parties` actors each call Arrive once; the last one wakes the benchmark thread.
// Shared (not owned by the stack) so a batch abandoned on timeout never leaves dangling pointers.
struct Completion {
  explicit Completion(int parties) : remaining(parties) {}

  void Arrive() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done.Notify();
    }
  }

  std::atomic<int> remaining;
  troupe::Notification done;  // TSan-visible (actors/sync.h)
};

struct EvStart : troupe::EventLocal<EvStart, kEvStart> {
  EvStart(uint64_t count_value, std::shared_ptr<Completion> completion_value)
      : count(count_value), completion(std::move(completion_value)) {}
  uint64_t count;
  std::shared_ptr<Completion> completion;
};

struct EvBall : troupe::EventLocal<EvBall, kEvBall> {};
struct EvTick : troupe::EventLocal<EvTick, kEvTick> {};
struct EvData : troupe::EventLocal<EvData, kEvData> {
  explicit EvData(uint32_t sender_value) : sender(sender_value) {}
  uint32_t sender;
};
struct EvAck : troupe::EventLocal<EvAck, kEvAck> {};
struct EvContinue : troupe::EventLocal<EvContinue, kEvContinue> {};

// A ring token: `hops` more hops to go; the member that receives it at 0 arrives at `completion`.
struct EvToken : troupe::EventLocal<EvToken, kEvToken> {
  EvToken(uint64_t hops_value, std::shared_ptr<Completion> completion_value)
      : hops(hops_value), completion(std::move(completion_value)) {}
  uint64_t hops;
  std::shared_ptr<Completion> completion;
};

// Closes the ring: the recipient's successor is `next`; it arrives at `completion` once set.
struct EvSetNext : troupe::EventLocal<EvSetNext, kEvSetNext> {
  EvSetNext(troupe::ActorId next_value, std::shared_ptr<Completion> completion_value)
      : next(next_value), completion(std::move(completion_value)) {}
  troupe::ActorId next;
  std::shared_ptr<Completion> completion;
};

// A skynet reply: the sum of a subtree's leaf ordinals; `ok` is false if a Register in it failed.
struct EvSum : troupe::EventLocal<EvSum, kEvSum> {
  EvSum(uint64_t sum_value, bool ok_value) : sum(sum_value), ok(ok_value) {}
  uint64_t sum;
  bool ok;
};

// -- node ----------------------------------------------------------------------------------------

// The default User pool size: one worker per hardware thread.
int64_t DefaultWorkers() { return std::max(1u, std::thread::hardware_concurrency()); }

// User pool sizes to compare: the default and, on a multi-core machine, a single worker. The gap
// between the two is what spreading the actors over cores (cross-core hand-offs) costs.
std::vector<int64_t> WorkerCounts() {
  const int64_t cores = DefaultWorkers();
  return cores > 1 ? std::vector<int64_t>{cores, 1} : std::vector<int64_t>{1};
}

// Creates a node with the four standard pools — System, User, Batch and IC, one thread each
// except User with `workers` — i.e. the default config when `workers` is DefaultWorkers(). Returns
// null (and skips the benchmark) on failure.
std::unique_ptr<troupe::ActorSystem> MakeSystem(benchmark::State& state, int64_t workers) {
  troupe::proto::ActorSystemConfig config;
  for (const char* name : {"System", "User", "Batch", "IC"}) {
    troupe::proto::PoolConfig* pool = config.add_pools();
    pool->set_name(name);
    pool->set_threads(std::string_view(name) == "User" ? static_cast<uint32_t>(workers) : 1);
    // TROUPE_BENCH_LENDING=1: User and Batch lend each other threads, as in the default config
    // (lending_bench.cc compares the two).
    if (const char* lending = std::getenv("TROUPE_BENCH_LENDING");
        lending != nullptr && std::string_view(lending) == "1" &&
        (std::string_view(name) == "User" || std::string_view(name) == "Batch")) {
      pool->set_min_threads(1);
      pool->set_max_threads(static_cast<uint32_t>(std::max<int64_t>(workers, DefaultWorkers())));
      pool->set_priority(std::string_view(name) == "User" ? 1 : 0);
    }
  }
  config.set_default_pool("User");
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> system = troupe::ActorSystem::Create(config);
  if (!system.ok()) {
    state.SkipWithError(absl::StrCat("ActorSystem::Create: ", system.status().ToString()).c_str());
    return nullptr;
  }
  return *std::move(system);
}

// Waits for `completion`. On timeout skips the benchmark and leaks `system`: its workers may be
// wedged, and Stop would join them forever.
bool Await(benchmark::State& state, const Completion& completion,
           std::unique_ptr<troupe::ActorSystem>& system, const char* what) {
  if (completion.done.WaitForNotificationWithTimeout(kTimeout)) {
    return true;
  }
  state.SkipWithError(absl::StrCat(what, ": batch not finished within ",
                                   absl::FormatDuration(kTimeout), "; node leaked")
                          .c_str());
  (void)system.release();
  return false;
}

// The User pool's counters (where every benchmark actor runs).
troupe::PoolCounters UserPool(const troupe::ActorSystem& system) {
  for (const troupe::PoolCounters& pool : system.Counters().pools) {
    if (pool.name == "User") {
      return pool;
    }
  }
  return {};
}

// Reports how the User pool ran `items` items: activations per item (1/batching) and how often
// a worker parked on its semaphore (each park costs a futex wait and a wake-up on the send path).
void ReportPool(benchmark::State& state, const troupe::PoolCounters& before,
                const troupe::PoolCounters& after, int64_t items) {
  if (items <= 0) {
    return;
  }
  state.counters["activations_per_item"] =
      static_cast<double>(after.activations - before.activations) / static_cast<double>(items);
  state.counters["parks"] = static_cast<double>(after.parks - before.parks);
}

// Runs batches of state.max_iterations items split evenly over `starters` (each receives
// EvStart{share, completion}) until the benchmark is done, then reports items and pool counters.
void RunSplitBatches(benchmark::State& state, std::unique_ptr<troupe::ActorSystem>& system,
                     const std::vector<troupe::ActorId>& starters, const char* what) {
  const auto count = static_cast<uint64_t>(starters.size());
  const auto total = static_cast<uint64_t>(state.max_iterations);
  const troupe::PoolCounters before = UserPool(*system);
  while (state.KeepRunningBatch(state.max_iterations)) {
    auto completion = std::make_shared<Completion>(static_cast<int>(count));
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t share = total / count + (i < total % count ? 1 : 0);
      system->Send(starters[i], std::make_unique<EvStart>(share, completion));
    }
    if (!Await(state, *completion, system, what)) {
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  ReportPool(state, before, UserPool(*system), state.iterations());
}

// -- ping-pong -----------------------------------------------------------------------------------

// Returns every ball to its sender (Forward: the ball keeps its sender, the pinger).
using Ponger = troupe::testing::Ponger<EvBall>;

// On EvStart{n}: serves one ball and returns it n times, then arrives at the completion.
class Pinger : public troupe::Actor {
 public:
  explicit Pinger(troupe::ActorId ponger) : Actor(&Pinger::StateWork), ponger_(ponger) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvStart, HandleStart);
      case kEvBall:
        if (--remaining_ == 0) {
          Finish();  // the ball is freed with `ev`
        } else {
          Forward(ponger_, ev);
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  void HandleStart(troupe::EventPtr<EvStart> ev) {
    remaining_ = ev.Get()->count;
    completion_ = std::move(ev.Get()->completion);
    if (remaining_ == 0) {
      Finish();
      return;
    }
    Send(std::make_unique<troupe::EventHandle>(ponger_, SelfId(), std::make_unique<EvBall>()));
  }

  void Finish() {
    completion_->Arrive();
    completion_.reset();
  }

  const troupe::ActorId ponger_;
  uint64_t remaining_ = 0;
  std::shared_ptr<Completion> completion_;
};

// Round trips/s of `pairs` concurrent ping-pong pairs; one item is one round trip.
void BM_PingPong(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(1));
  if (system == nullptr) {
    return;
  }
  std::vector<troupe::ActorId> pingers;
  pingers.reserve(pairs);
  for (int i = 0; i < pairs; ++i) {
    const troupe::ActorId ponger = system->Register(std::make_unique<Ponger>());
    pingers.push_back(system->Register(std::make_unique<Pinger>(ponger)));
  }
  RunSplitBatches(state, system, pingers, "BM_PingPong");
}
BENCHMARK(BM_PingPong)
    ->ArgNames({"pairs", "workers"})
    ->ArgsProduct({{1, 4}, WorkerCounts()})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- ask -----------------------------------------------------------------------------------------

// Answers every EvBall with a new EvBall, by Reply.
class BallReplier : public troupe::Actor {
 public:
  BallReplier() : Actor(&BallReplier::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBall) {
      Reply(ev, std::make_unique<EvBall>());
    } else {
      Unhandled(ev);
    }
  }
};

// On EvStart{n}: asks the replier n times in a row (each Ask waits for the previous reply), then
// arrives at the completion. An ask's round trip: the request, the reply, the timeout armed and
// cancelled, the continuation.
class AskPinger : public troupe::Actor {
 public:
  explicit AskPinger(troupe::ActorId replier) : Actor(&AskPinger::StateWork), replier_(replier) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvStart, HandleStart);
      default:
        Unhandled(ev);
    }
  }

  void HandleStart(troupe::EventPtr<EvStart> ev) {
    remaining_ = ev.Get()->count;
    completion_ = std::move(ev.Get()->completion);
    Next();
  }

  void Next() {
    if (remaining_ == 0) {
      completion_->Arrive();
      completion_.reset();
      return;
    }
    --remaining_;
    Ask<EvBall>(replier_, std::make_unique<EvBall>(), absl::Seconds(10),
                [this](const troupe::AskResult<EvBall>& reply) {
                  if (!reply.ok()) {
                    std::fprintf(stderr, "BM_Ask: %s\n", reply.status().ToString().c_str());
                  }
                  Next();
                });
  }

  const troupe::ActorId replier_;
  uint64_t remaining_ = 0;
  std::shared_ptr<Completion> completion_;
};

// Asks/s of `pairs` concurrent asker-replier pairs; one item is one ask answered. Compare with
// BM_PingPong (the same round trip by hand-forwarded events).
void BM_Ask(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(1));
  if (system == nullptr) {
    return;
  }
  std::vector<troupe::ActorId> askers;
  askers.reserve(pairs);
  for (int i = 0; i < pairs; ++i) {
    const troupe::ActorId replier = system->Register(std::make_unique<BallReplier>());
    askers.push_back(system->Register(std::make_unique<AskPinger>(replier)));
  }
  RunSplitBatches(state, system, askers, "BM_Ask");
}
BENCHMARK(BM_Ask)
    ->ArgNames({"pairs", "workers"})
    ->ArgsProduct({{1}, WorkerCounts()})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// Asks/s from a plain thread, each waited for (troupe::AskFuture(...).get()): a one-shot actor
// registered, the request, the reply, the promise fulfilled and the actor ended, per item.
void BM_ThreadAsk(benchmark::State& state) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(0));
  if (system == nullptr) {
    return;
  }
  const troupe::ActorId replier = system->Register(std::make_unique<BallReplier>());
  for (auto _ : state) {
    troupe::AskResult<EvBall> reply =
        troupe::AskFuture<EvBall>(*system, replier, std::make_unique<EvBall>(), absl::Seconds(10))
            .get();
    if (!reply.ok()) {
      state.SkipWithError(reply.status().ToString().c_str());
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadAsk)->ArgName("workers")->ArgsProduct({WorkerCounts()})->UseRealTime();

// -- restart ------------------------------------------------------------------------------------

// How many restarts a run still needs, and its end.
struct RestartRun {
  std::atomic<int64_t> left{0};
  troupe::Notification done;
};

// Throws on its first event; each new instance sends itself one (in Bootstrap) until the run has
// had its restarts.
class Crasher final : public troupe::Actor {
 public:
  explicit Crasher(RestartRun* run) : Actor(&Crasher::StateWork), run_(run) {}

 private:
  void Bootstrap() override {
    if (run_->left.fetch_sub(1, std::memory_order_relaxed) <= 0) {
      run_->done.Notify();
      return;
    }
    Send(SelfId(), std::make_unique<EvTick>());
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvTick) {
      throw std::runtime_error("crash");
    }
    Unhandled(ev);
  }

  RestartRun* run_;
};

// Restarts its one Crasher at once, every time.
class Restarter final : public troupe::Actor {
 public:
  explicit Restarter(RestartRun* run) : Actor(&Restarter::StateWork), run_(run) {}

  troupe::SupervisorStrategy supervisor_strategy() const override {
    troupe::SupervisorStrategy strategy;
    strategy.max_restarts = std::numeric_limits<uint32_t>::max();
    strategy.min_backoff = absl::ZeroDuration();
    return strategy;
  }

 private:
  void Bootstrap() override {
    RegisterRestartable([run = run_] { return std::make_unique<Crasher>(run); });
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  RestartRun* run_;
};

// Restarts/s of one supervised actor that fails on every event: one item is the failure, the
// parent's decision, a new instance from the factory and its Bootstrap. Logs are at error level
// (a failure and a restart each log a line at warn and info).
void BM_Restart(benchmark::State& state) {
  troupe::proto::ActorSystemConfig config;
  config.mutable_log()->set_level("error");
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> system = troupe::ActorSystem::Create(config);
  if (!system.ok()) {
    state.SkipWithError(system.status().ToString().c_str());
    return;
  }
  constexpr int64_t kRestarts = 2000;
  for (auto _ : state) {
    RestartRun run;
    run.left.store(kRestarts + 1);  // the first instance is no restart
    const troupe::ActorId parent = (*system)->Register(std::make_unique<Restarter>(&run));
    if (!run.done.WaitForNotificationWithTimeout(absl::Seconds(60))) {
      state.SkipWithError("the restarts did not finish within 60 s");
      return;
    }
    (*system)->Send(parent, std::make_unique<troupe::EvPoison>());
  }
  state.SetItemsProcessed(state.iterations() * kRestarts);
}
BENCHMARK(BM_Restart)->UseRealTime();

// -- self-send -----------------------------------------------------------------------------------

// On EvStart{n}: sends itself n ticks one after another, then arrives at the completion.
class SelfSender : public troupe::Actor {
 public:
  explicit SelfSender(bool reuse) : Actor(&SelfSender::StateWork), reuse_(reuse) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvStart, HandleStart);
      case kEvTick:
        if (--remaining_ == 0) {
          completion_->Arrive();
          completion_.reset();
        } else if (reuse_) {
          Forward(SelfId(), ev);
        } else {
          Send(SelfId(), std::make_unique<EvTick>());
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  void HandleStart(troupe::EventPtr<EvStart> ev) {
    remaining_ = ev.Get()->count;
    completion_ = std::move(ev.Get()->completion);
    if (remaining_ == 0) {
      completion_->Arrive();
      completion_.reset();
      return;
    }
    Send(SelfId(), std::make_unique<EvTick>());
  }

  const bool reuse_;
  uint64_t remaining_ = 0;
  std::shared_ptr<Completion> completion_;
};

// Events/s of `actors` independent self-sending actors; one item is one event handled.
void BM_SelfSend(benchmark::State& state) {
  const bool reuse = state.range(0) != 0;
  const int actors = static_cast<int>(state.range(1));
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, DefaultWorkers());
  if (system == nullptr) {
    return;
  }
  std::vector<troupe::ActorId> ids;
  ids.reserve(actors);
  for (int i = 0; i < actors; ++i) {
    ids.push_back(system->Register(std::make_unique<SelfSender>(reuse)));
  }
  RunSplitBatches(state, system, ids, "BM_SelfSend");
}
BENCHMARK(BM_SelfSend)
    ->ArgNames({"reuse", "actors"})
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- fan-in --------------------------------------------------------------------------------------

// Counts EvData from kFanInSenders senders, grants each sender kFanInAck more credit per kFanInAck
// of its events, and arrives at the completion when the batch's count is reached.
class FanInReceiver : public troupe::Actor {
 public:
  FanInReceiver() : Actor(&FanInReceiver::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvData: {
        uint32_t& unacked = unacked_[ev->Get<EvData>()->sender];
        if (++unacked == kFanInAck) {
          unacked = 0;
          // Ack before arriving: the sender handles it before the next batch's EvStart.
          Send(ev->sender(), std::make_unique<EvAck>());
        }
        if (++received_ == expected_) {
          completion_->Arrive();
          completion_.reset();
        }
        break;
      }
        TROUPE_HFUNC(EvStart, HandleStart);
      default:
        Unhandled(ev);
    }
  }

  void HandleStart(troupe::EventPtr<EvStart> ev) {
    received_ = 0;
    expected_ = ev.Get()->count;
    unacked_.fill(0);
    completion_ = std::move(ev.Get()->completion);
    if (expected_ == 0) {
      completion_->Arrive();
      completion_.reset();
    }
  }

  uint64_t received_ = 0;
  uint64_t expected_ = 0;
  std::array<uint32_t, kFanInSenders> unacked_ = {};
  std::shared_ptr<Completion> completion_;
};

// On EvStart{n}: sends n fresh EvData to the receiver, at most kFanInWindow unacknowledged.
class FanInSender : public troupe::Actor {
 public:
  FanInSender(troupe::ActorId receiver, uint32_t index)
      : Actor(&FanInSender::StateWork), receiver_(receiver), index_(index) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvAck:
        credit_ += kFanInAck;
        Pump();
        break;
      case kEvStart:
        remaining_ = ev->Get<EvStart>()->count;
        credit_ = kFanInWindow;
        Pump();
        break;
      default:
        Unhandled(ev);
    }
  }

  void Pump() {
    const uint64_t burst = std::min<uint64_t>(credit_, remaining_);
    for (uint64_t i = 0; i < burst; ++i) {
      Send(receiver_, std::make_unique<EvData>(index_));
    }
    credit_ -= static_cast<uint32_t>(burst);
    remaining_ -= burst;
  }

  const troupe::ActorId receiver_;
  const uint32_t index_;
  uint64_t remaining_ = 0;
  uint32_t credit_ = 0;
};

// Events/s from kFanInSenders senders into one receiver; one item is one event received.
void BM_FanIn(benchmark::State& state) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(0));
  if (system == nullptr) {
    return;
  }
  const troupe::ActorId receiver = system->Register(std::make_unique<FanInReceiver>());
  std::vector<troupe::ActorId> senders;
  senders.reserve(kFanInSenders);
  for (int i = 0; i < kFanInSenders; ++i) {
    senders.push_back(
        system->Register(std::make_unique<FanInSender>(receiver, static_cast<uint32_t>(i))));
  }
  const auto total = static_cast<uint64_t>(state.max_iterations);
  const troupe::PoolCounters before = UserPool(*system);
  while (state.KeepRunningBatch(state.max_iterations)) {
    auto completion = std::make_shared<Completion>(1);
    // The receiver's EvStart is queued before any sender can start, so it precedes every EvData.
    system->Send(receiver, std::make_unique<EvStart>(total, completion));
    for (int i = 0; i < kFanInSenders; ++i) {
      const uint64_t share =
          total / kFanInSenders + (static_cast<uint64_t>(i) < total % kFanInSenders ? 1 : 0);
      system->Send(senders[i], std::make_unique<EvStart>(share, nullptr));
    }
    if (!Await(state, *completion, system, "BM_FanIn")) {
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  ReportPool(state, before, UserPool(*system), state.iterations());
}
BENCHMARK(BM_FanIn)
    ->ArgName("workers")
    ->ArgsProduct({WorkerCounts()})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- bursts: fan-in without flow control, bytes per queued event, memory coming back -----------

// Events of one burst, and how far above its starting RSS a node may stay once the burst drained
// and its workers idle (the target for memory coming back after a burst).
constexpr uint64_t kBurstEvents = kSanitized ? 100'000 : 10'000'000;
constexpr int64_t kBurstSlackBytes = int64_t{64} << 20;
constexpr absl::Duration kBurstReturnWait = absl::Seconds(5);
// EvData a burst sender sends per handler call (a self-sent EvContinue carries on).
constexpr uint64_t kBurstChunk = 4096;

// Starts a burst receiver: count `expected` EvData, then arrive at `completion`; with `release`,
// first hold the worker until it is notified, so that everything sent meanwhile queues.
struct EvBurst : troupe::EventLocal<EvBurst, kEvBurst> {
  EvBurst(uint64_t expected_value, std::shared_ptr<Completion> completion_value,
          std::shared_ptr<troupe::Notification> release_value)
      : expected(expected_value),
        completion(std::move(completion_value)),
        release(std::move(release_value)) {}
  uint64_t expected;
  std::shared_ptr<Completion> completion;
  std::shared_ptr<troupe::Notification> release;
};

class BurstReceiver : public troupe::Actor {
 public:
  BurstReceiver() : Actor(&BurstReceiver::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvData:
        if (++received_ == expected_) {
          completion_->Arrive();
          completion_.reset();
        }
        break;
        TROUPE_HFUNC(EvBurst, HandleBurst);
      default:
        Unhandled(ev);
    }
  }

  void HandleBurst(troupe::EventPtr<EvBurst> ev) {
    received_ = 0;
    expected_ = ev.Get()->expected;
    completion_ = std::move(ev.Get()->completion);
    if (ev.Get()->release != nullptr) {
      ev.Get()->release->WaitForNotification();
    }
  }

  uint64_t received_ = 0;
  uint64_t expected_ = 0;
  std::shared_ptr<Completion> completion_;
};

// On EvStart{n}: sends n fresh EvData to the receiver with no flow control, kBurstChunk per call.
class BurstSender : public troupe::Actor {
 public:
  BurstSender(troupe::ActorId receiver, uint32_t index)
      : Actor(&BurstSender::StateWork), receiver_(receiver), index_(index) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvStart:
        remaining_ = ev->Get<EvStart>()->count;
        SendChunk();
        break;
      case kEvContinue:
        SendChunk();
        break;
      default:
        Unhandled(ev);
    }
  }

  void SendChunk() {
    const uint64_t chunk = std::min(kBurstChunk, remaining_);
    for (uint64_t i = 0; i < chunk; ++i) {
      Send(receiver_, std::make_unique<EvData>(index_));
    }
    remaining_ -= chunk;
    if (remaining_ > 0) {
      Send(SelfId(), std::make_unique<EvContinue>());
    }
  }

  const troupe::ActorId receiver_;
  const uint32_t index_;
  uint64_t remaining_ = 0;
};

// Events/s of kBurstEvents sent by kFanInSenders senders to one receiver with no flow control,
// and the peak RSS growth while they queue.
void BM_FanInUnbounded(benchmark::State& state) {
  int64_t peak_growth = 0;
  uint64_t activations = 0;
  uint64_t preemptions = 0;
  uint64_t parks = 0;
  uint64_t steals = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(0));
    if (system == nullptr) {
      return;
    }
    const troupe::ActorId receiver = system->Register(std::make_unique<BurstReceiver>());
    std::vector<troupe::ActorId> senders;
    for (int i = 0; i < kFanInSenders; ++i) {
      senders.push_back(
          system->Register(std::make_unique<BurstSender>(receiver, static_cast<uint32_t>(i))));
    }
    troupe::bench::TrimHeap();
    const int64_t rss_before = troupe::bench::ResidentBytes();
    auto completion = std::make_shared<Completion>(1);
    state.ResumeTiming();

    system->Send(receiver, std::make_unique<EvBurst>(kBurstEvents, completion, nullptr));
    for (int i = 0; i < kFanInSenders; ++i) {
      const uint64_t share = kBurstEvents / kFanInSenders +
                             (static_cast<uint64_t>(i) < kBurstEvents % kFanInSenders ? 1 : 0);
      system->Send(senders[i], std::make_unique<EvStart>(share, nullptr));
    }
    const absl::Time deadline = absl::Now() + kTimeout;
    while (!completion->done.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
      peak_growth = std::max(peak_growth, troupe::bench::ResidentBytes() - rss_before);
      if (absl::Now() > deadline) {
        state.SkipWithError("BM_FanInUnbounded: the burst did not drain in time; node leaked");
        (void)system.release();  // its workers may be wedged: Stop would join them forever
        return;
      }
    }
    state.PauseTiming();
    // How the pool ran the burst, to tell its fast and slow runs apart.
    const troupe::PoolCounters pool = UserPool(*system);
    activations += pool.activations;
    preemptions += pool.budget_preemptions;
    parks += pool.parks;
    steals += pool.steals;
    system.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBurstEvents));
  state.counters["peak_mb"] = static_cast<double>(peak_growth) / (1 << 20);
  state.counters["activations"] = static_cast<double>(activations);
  state.counters["preemptions"] = static_cast<double>(preemptions);
  state.counters["parks"] = static_cast<double>(parks);
  state.counters["steals"] = static_cast<double>(steals);
}
BENCHMARK(BM_FanInUnbounded)
    ->ArgName("workers")
    ->ArgsProduct({WorkerCounts()})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// Bytes per queued event, and how soon the memory of a drained burst comes back (see the top).
void BM_BurstMemory(benchmark::State& state) {
  for (auto _ : state) {
    std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, DefaultWorkers());
    if (system == nullptr) {
      return;
    }
    const troupe::ActorId receiver = system->Register(std::make_unique<BurstReceiver>());
    troupe::bench::TrimHeap();
    const int64_t rss_before = troupe::bench::ResidentBytes();
    auto completion = std::make_shared<Completion>(1);
    auto release = std::make_shared<troupe::Notification>();
    system->Send(receiver, std::make_unique<EvBurst>(kBurstEvents, completion, release));
    for (uint64_t i = 0; i < kBurstEvents; ++i) {
      system->Send(receiver, std::make_unique<EvData>(0));
    }
    const int64_t rss_queued = troupe::bench::ResidentBytes();
    release->Notify();
    if (!Await(state, *completion, system, "BM_BurstMemory")) {
      return;
    }
    // Sampled while the workers idle: nothing here trims the heap.
    const absl::Time drained = absl::Now();
    double back_ms = -1;
    int64_t left_1s = -1;
    while (absl::Now() - drained < kBurstReturnWait && (back_ms < 0 || left_1s < 0)) {
      const absl::Duration since = absl::Now() - drained;
      const int64_t above = troupe::bench::ResidentBytes() - rss_before;
      if (back_ms < 0 && above <= kBurstSlackBytes) {
        back_ms = absl::ToDoubleMilliseconds(since);
      }
      if (left_1s < 0 && since >= absl::Seconds(1)) {
        left_1s = above;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    state.counters["bytes_per_queued_event"] =
        static_cast<double>(rss_queued - rss_before) / static_cast<double>(kBurstEvents);
    state.counters["back_ms"] = back_ms;
    state.counters["left_mb_1s"] = static_cast<double>(left_1s) / (1 << 20);
    system.reset();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBurstEvents));
}
BENCHMARK(BM_BurstMemory)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// -- spawn ---------------------------------------------------------------------------------------

// The spawn run in progress: idle actors count their Bootstrap here. A global rather than a
// member so that IdleActor carries nothing beyond the Actor base (the footprint measured is the
// runtime's own). Atomic: written by the benchmark thread, read by workers.
struct SpawnRun {
  explicit SpawnRun(uint64_t target_value) : target(target_value), completion(1) {}
  const uint64_t target;
  std::atomic<uint64_t> bootstrapped{0};
  std::atomic<bool> failed{false};
  Completion completion;
};
std::atomic<SpawnRun*> g_spawn_run{nullptr};

// Counts its Bootstrap, then sits idle until the node stops.
class IdleActor : public troupe::Actor {
 public:
  IdleActor() : Actor(&IdleActor::StateIdle) {}

 private:
  void Bootstrap() override {
    SpawnRun* run = g_spawn_run.load(std::memory_order_acquire);
    if (run->bootstrapped.fetch_add(1, std::memory_order_relaxed) + 1 == run->target) {
      run->completion.Arrive();
    }
  }

  TROUPE_STATE(StateIdle) { Unhandled(ev); }
};

// Reports a failed Register: the run can never complete, so wake the benchmark thread now.
void SpawnFailed(SpawnRun* run) {
  if (!run->failed.exchange(true, std::memory_order_acq_rel)) {
    run->completion.Arrive();
  }
}

// On EvStart{n}: registers n idle actors, kSpawnBatch per event (a self-sent EvContinue carries
// on), so the pool's activation budget can preempt the spawner between batches instead of one
// handler holding its worker for the whole run.
class Spawner : public troupe::Actor {
 public:
  Spawner() : Actor(&Spawner::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvStart:
        remaining_ = ev->Get<EvStart>()->count;
        SpawnBatch();
        break;
      case kEvContinue:
        SpawnBatch();
        break;
      default:
        Unhandled(ev);
    }
  }

  void SpawnBatch() {
    const uint64_t batch = std::min(kSpawnBatch, remaining_);
    for (uint64_t i = 0; i < batch; ++i) {
      if (Register(std::make_unique<IdleActor>()).IsEmpty()) {
        SpawnFailed(g_spawn_run.load(std::memory_order_acquire));
        remaining_ = 0;
        return;
      }
    }
    remaining_ -= batch;
    if (remaining_ > 0) {
      Send(SelfId(), std::make_unique<EvContinue>());
    }
  }

  uint64_t remaining_ = 0;
};

// Actors/s of registering and bootstrapping kSpawnCount idle actors, and bytes per live actor.
// external:0 spawns from an actor on the User pool, external:1 from the benchmark thread.
void BM_Spawn(benchmark::State& state) {
  const bool external = state.range(0) != 0;
  double bytes_sum = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(1));
    if (system == nullptr) {
      return;
    }
    const troupe::ActorId spawner =
        external ? troupe::ActorId() : system->Register(std::make_unique<Spawner>());
    // Owned by the loop body; leaked (with the node) on timeout, since workers may still use it.
    auto run = std::make_unique<SpawnRun>(kSpawnCount);
    g_spawn_run.store(run.get(), std::memory_order_release);
    troupe::bench::TrimHeap();
    const int64_t rss_before = troupe::bench::ResidentBytes();
    const troupe::PoolCounters pool_before = UserPool(*system);
    state.ResumeTiming();

    if (external) {
      for (uint64_t i = 0; i < kSpawnCount; ++i) {
        if (system->Register(std::make_unique<IdleActor>()).IsEmpty()) {
          SpawnFailed(run.get());
          break;
        }
      }
    } else {
      system->Send(spawner, std::make_unique<EvStart>(kSpawnCount, nullptr));
    }
    if (!Await(state, run->completion, system, "BM_Spawn")) {
      (void)run.release();
      return;
    }

    state.PauseTiming();
    const int64_t rss_after = troupe::bench::ResidentBytes();
    ReportPool(state, pool_before, UserPool(*system), static_cast<int64_t>(kSpawnCount));
    const bool failed = run->failed.load(std::memory_order_acquire);
    system->Stop();  // destroys every actor
    g_spawn_run.store(nullptr, std::memory_order_release);
    system.reset();
    run.reset();
    troupe::bench::TrimHeap();
    if (failed) {
      state.SkipWithError("BM_Spawn: Register returned an empty id (see the log)");
      return;
    }
    if (rss_before < 0 || rss_after < 0) {
      state.SkipWithError("BM_Spawn: cannot read /proc/self/statm");
      return;
    }
    bytes_sum += static_cast<double>(rss_after - rss_before) / static_cast<double>(kSpawnCount);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kSpawnCount));
  state.counters["bytes_per_actor"] =
      benchmark::Counter(bytes_sum, benchmark::Counter::kAvgIterations);
  state.counters["actors"] = static_cast<double>(kSpawnCount);
}
BENCHMARK(BM_Spawn)
    ->ArgNames({"external", "workers"})
    ->ArgsProduct({{0, 1}, WorkerCounts()})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- ring ----------------------------------------------------------------------------------------

// One member of the ring: passes every token on to its successor until the token's hops run out.
// On EvStart{n}: launches a token of n hops (the first one to the successor).
class RingMember : public troupe::Actor {
 public:
  // `next` is the successor; the last member built gets it later through EvSetNext.
  explicit RingMember(troupe::ActorId next) : Actor(&RingMember::StateWork), next_(next) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvToken: {
        auto* token = ev->Get<EvToken>();
        if (token->hops == 0) {
          token->completion->Arrive();  // the token is freed with `ev`
        } else {
          --token->hops;
          Forward(next_, ev);
        }
        break;
      }
        TROUPE_HFUNC(EvStart, HandleStart);
        TROUPE_HFUNC(EvSetNext, HandleSetNext);
      default:
        Unhandled(ev);
    }
  }

  void HandleStart(troupe::EventPtr<EvStart> ev) {
    const uint64_t hops = ev.Get()->count;
    if (hops == 0) {
      ev.Get()->completion->Arrive();
      return;
    }
    Send(next_, std::make_unique<EvToken>(hops - 1, std::move(ev.Get()->completion)));
  }

  void HandleSetNext(troupe::EventPtr<EvSetNext> ev) {
    next_ = ev.Get()->next;
    ev.Get()->completion->Arrive();
  }

  troupe::ActorId next_;
};

// Hops/s of `tokens` tokens circulating at once around a ring of kRingSize actors; one item is
// one hop (one Forward to the successor and its dispatch). The batch is split evenly over the
// tokens, which start evenly spaced around the ring (one at each member when tokens = kRingSize).
void BM_Ring(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(1));
  if (system == nullptr) {
    return;
  }
  // Built last to first, so that each member knows its successor; the ring is closed below.
  std::vector<troupe::ActorId> ring(kRingSize);
  for (int i = kRingSize - 1; i >= 0; --i) {
    ring[i] = system->Register(
        std::make_unique<RingMember>(i + 1 < kRingSize ? ring[i + 1] : troupe::ActorId()));
    if (ring[i].IsEmpty()) {
      state.SkipWithError("BM_Ring: Register returned an empty id (see the log)");
      return;
    }
  }
  auto closed = std::make_shared<Completion>(1);
  system->Send(ring[kRingSize - 1], std::make_unique<EvSetNext>(ring[0], closed));
  if (!Await(state, *closed, system, "BM_Ring (closing the ring)")) {
    return;
  }
  std::vector<troupe::ActorId> starters;
  starters.reserve(tokens);
  for (int i = 0; i < tokens; ++i) {
    starters.push_back(ring[static_cast<size_t>(i) * kRingSize / tokens]);
  }
  RunSplitBatches(state, system, starters, "BM_Ring");
}
BENCHMARK(BM_Ring)
    ->ArgNames({"tokens", "workers"})
    ->ArgsProduct({{1, kRingSize}, WorkerCounts()})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- skynet --------------------------------------------------------------------------------------

// One skynet run: the root's result, written by the root before it arrives at `completion`.
struct SkynetRun {
  uint64_t sum = 0;
  bool ok = false;
  Completion completion{1};
};

// A skynet node over the leaf ordinals [first, first + size). A leaf (size 1) replies its ordinal
// to its parent; an inner node spawns kSkynetFanOut children over equal parts of its range and
// replies the sum of theirs. Either passes away once it has replied. The root has no parent and
// reports to `run` instead.
class SkynetNode : public troupe::Actor {
 public:
  SkynetNode(troupe::ActorId parent, uint64_t first, uint64_t size,
             std::shared_ptr<SkynetRun> run = nullptr)
      : Actor(&SkynetNode::StateWork),
        parent_(parent),
        first_(first),
        size_(size),
        run_(std::move(run)) {}

 private:
  void Bootstrap() override {
    if (size_ == 1) {
      Reply(first_, true);
      return;
    }
    const uint64_t part = size_ / kSkynetFanOut;
    for (uint64_t i = 0; i < kSkynetFanOut; ++i) {
      if (Register(std::make_unique<SkynetNode>(SelfId(), first_ + i * part, part)).IsEmpty()) {
        ok_ = false;  // its reply will never come: count it as a failed one
        ++replies_;
      }
    }
    if (replies_ == kSkynetFanOut) {
      Reply(sum_, ok_);
    }
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvSum: {
        const auto* reply = ev->Get<EvSum>();
        sum_ += reply->sum;
        ok_ = ok_ && reply->ok;
        if (++replies_ == kSkynetFanOut) {
          Reply(sum_, ok_);
        }
        break;
      }
      default:
        Unhandled(ev);
    }
  }

  void Reply(uint64_t sum, bool ok) {
    if (run_ != nullptr) {
      run_->sum = sum;
      run_->ok = ok;
      run_->completion.Arrive();
    } else {
      Send(parent_, std::make_unique<EvSum>(sum, ok));
    }
    PassAway();
  }

  const troupe::ActorId parent_;
  const uint64_t first_;
  const uint64_t size_;
  uint64_t sum_ = 0;
  uint64_t replies_ = 0;
  bool ok_ = true;
  const std::shared_ptr<SkynetRun> run_;  // the root's only
};

// One whole skynet run per iteration: kSkynetActors actors spawned (from the root, registered by
// the benchmark thread, down to the leaves), kSkynetActors - 1 replies, every actor gone at the
// end; ms per run and actors_per_s. activations_per_item counts per actor, not per run.
void BM_Skynet(benchmark::State& state) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem(state, state.range(0));
  if (system == nullptr) {
    return;
  }
  const troupe::PoolCounters before = UserPool(*system);
  for (auto _ : state) {
    // Shared with the root, so that a run abandoned on timeout leaves no dangling pointer.
    auto run = std::make_shared<SkynetRun>();
    if (system->Register(std::make_unique<SkynetNode>(troupe::ActorId(), 0, kSkynetLeaves, run))
            .IsEmpty()) {
      state.SkipWithError("BM_Skynet: Register returned an empty id (see the log)");
      return;
    }
    if (!Await(state, run->completion, system, "BM_Skynet")) {
      return;
    }
    if (!run->ok) {
      state.SkipWithError("BM_Skynet: Register returned an empty id (see the log)");
      return;
    }
    if (run->sum != kSkynetSum) {
      state.SkipWithError(
          absl::StrCat("BM_Skynet: sum ", run->sum, ", expected ", kSkynetSum).c_str());
      return;
    }
  }
  const auto actors = static_cast<int64_t>(kSkynetActors) * state.iterations();
  state.counters["actors_per_s"] =
      benchmark::Counter(static_cast<double>(actors), benchmark::Counter::kIsRate);
  ReportPool(state, before, UserPool(*system), actors);
}
BENCHMARK(BM_Skynet)
    ->ArgName("workers")
    ->ArgsProduct({WorkerCounts()})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace
