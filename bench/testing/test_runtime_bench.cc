// SPDX-License-Identifier: Apache-2.0
//
// test_runtime_bench: how fast the deterministic test runtime (troupe::testing) runs actors, and
// how far it scales in nodes.
//
// What is measured: simulated steps per second of real time on the benchmark thread.
//   - BM_SimPingPong/nodes:1   two actors on one node bounce a ball (a new event per hop): mailbox
//                              push, the seeded pick among ready mailboxes, dispatch.
//   - BM_SimPingPong/nodes:2   the pair sits on two nodes: every hop is also serialized into a
//                              simulated link, delivered by a step of its own and parsed lazily.
//   - BM_SimTimers             an actor that wakes itself after 1 ms of simulated time: the timer
//                              map, the clock jump and the delivery of the wakeup.
//   - BM_SimRing/nodes:N       one actor per node; a protobuf token goes round the ring of all N
//                              nodes kRingLaps times, every hop crossing nodes.
//   - BM_SimRandomPairs/nodes:N  every node's actor asks the actors of kPairFanOut other nodes,
//                              drawn with a seeded generator, and each answers; the next round
//                              starts when all answers are in, kPairRounds rounds.
//   - BM_SimNodes/nodes:N/small:S  the N-node runtime with one idle actor per node and no traffic,
//                              with the default node config or a small one (S=1).
// The scaling benchmarks (N = 100 and 1,000) report setup_s (constructing the runtime,
// registering one actor per node and bootstrapping them) and node_bytes (RSS growth from before
// construction to after setup, per node; /proc/self/statm, heap trimmed first); with traffic also
// steps_per_s, cross_node_per_s (events handled that crossed nodes), node_bytes_after (the RSS
// growth after the traffic, per node) and done (the share of the planned traffic that ran: it
// stops after kTrafficBudgetS of wall time, or TROUPE_BENCH_BUDGET_S). Their time is the wall time
// of the traffic alone (manual time; BM_SimNodes: of the setup). Why: deterministic tests replay
// many seeds; their cost per event decides how many seeds a test can afford, and the cost per node
// how large a simulated cluster can be. Excluded from the time: creating the runtime and its nodes,
// registering the actors, destroying it all.
//
//   build/release/bench/testing/test_runtime_bench
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/log.h"
#include "actors/testing/test_runtime.h"
#include "bench/process_memory.h"
#include "bench/sanitized.h"
#include "bench/testing/bench_events.pb.h"

namespace troupe::testing {
namespace {

enum : EventType {
  kEvBall = EventSpaceBegin(kUserEventSpace + 7),
  kEvStart,
  kEvRequest,
  kEvReply,
};
// Protobuf events, so they may cross nodes.
struct EvBall final : EventPB<EvBall, bench::Ball, kEvBall> {};
struct EvStart final : EventPB<EvStart, bench::Ball, kEvStart> {};
struct EvRequest final : EventPB<EvRequest, bench::Ball, kEvRequest> {};
struct EvReply final : EventPB<EvReply, bench::Ball, kEvReply> {};

// Bounces every EvBall back to its sender until `remaining` reaches zero.
class Player : public Actor {
 public:
  explicit Player(int64_t* remaining) : Actor(&Player::StateWork), remaining_(remaining) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBall && --*remaining_ > 0) {
      Send(ev->sender(), std::make_unique<EvBall>());
    }
  }
  int64_t* remaining_;
};

void BM_SimPingPong(benchmark::State& state) {
  const auto nodes = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    TestRuntime runtime({.nodes = nodes, .seed = 1, .trace_capacity = 0});
    int64_t remaining = 100'000;
    const ActorId a = runtime.Register(std::make_unique<Player>(&remaining), 1);
    const ActorId b = runtime.Register(std::make_unique<Player>(&remaining), nodes);
    runtime.DispatchEvents();
    const uint64_t before = runtime.steps();
    state.ResumeTiming();
    runtime.Send(b, std::make_unique<EvBall>(), a);
    runtime.DispatchEvents({.max_events = 10'000'000});
    state.PauseTiming();
    state.counters["steps"] += static_cast<double>(runtime.steps() - before);
    if (remaining != 0) {
      state.SkipWithError("the ball stopped early");
    }
    state.ResumeTiming();
  }
  state.counters["steps"] =
      benchmark::Counter(state.counters["steps"], benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimPingPong)->ArgName("nodes")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// Wakes itself `remaining` times, 1 ms of simulated time apart.
class Ticker : public Actor {
 public:
  explicit Ticker(int64_t* remaining) : Actor(&Ticker::StateWork), remaining_(remaining) {}
  void Bootstrap() override { ScheduleWakeup(absl::Milliseconds(1)); }

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvWakeup && --*remaining_ > 0) {
      ScheduleWakeup(absl::Milliseconds(1));
    }
  }
  int64_t* remaining_;
};

void BM_SimTimers(benchmark::State& state) {
  for (auto _ : state) {
    TestRuntime runtime({.seed = 1, .trace_capacity = 0});
    int64_t remaining = 100'000;
    runtime.Register(std::make_unique<Ticker>(&remaining));
    runtime.DispatchEvents({.max_events = 10'000'000, .max_time = absl::Hours(1)});
    if (remaining != 0) {
      state.SkipWithError("the ticker stopped early");
    }
  }
  state.SetItemsProcessed(state.iterations() * 100'000);
}
BENCHMARK(BM_SimTimers)->Unit(benchmark::kMillisecond);

// -- many nodes ---------------------------------------------------------------------------------

#if defined(TROUPE_BENCH_SANITIZED)
constexpr int64_t kFewNodes = 20;
constexpr int64_t kManyNodes = 100;
#else
constexpr int64_t kFewNodes = 100;
constexpr int64_t kManyNodes = 1000;
#endif
// Laps of the ring token.
constexpr int64_t kRingLaps = 20;
// Requests each node's actor sends per round, and rounds.
constexpr int kPairFanOut = 4;
constexpr int kPairRounds = 2;
// Wall time the traffic of a scaling benchmark may take, in seconds: kTrafficBudgetS, or
// TROUPE_BENCH_BUDGET_S from the environment. Every step of the runtime scans all N² links while
// an event is on one (SimNetwork::DueCount), milliseconds per step at 1,000 nodes, so there the
// planned traffic stops after the budget; the counter `done` says how much of it ran.
constexpr double kTrafficBudgetS = 2.0;

double TrafficBudgetS() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read on the benchmark's thread; nothing calls setenv.
  const char* env = std::getenv("TROUPE_BENCH_BUDGET_S");
  double budget = kTrafficBudgetS;
  if (env != nullptr && !absl::SimpleAtod(env, &budget)) {
    budget = kTrafficBudgetS;
  }
  return budget;
}

// Resident set size of this process in bytes, after returning freed heap memory to the system so
// the figure does not hide reusable free space.
int64_t TrimmedResidentBytes() {
  bench::TrimHeap();
  return bench::ResidentBytes();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What one run of a scaling benchmark adds to its counters.
struct ScaleRun {
  double setup_s = 0;
  double rss_built = 0;  // RSS growth from before the runtime to after setup
  double rss_after = 0;  // the same after the traffic
  double steps = 0;
  double cross_node = 0;
  double done = 0;  // share of the planned traffic that ran within the budget
};

// Builds an N-node runtime with `register_actors` (one actor per node) and bootstraps them,
// measuring the time and the RSS growth.
std::unique_ptr<TestRuntime> BuildRuntime(uint32_t nodes, const proto::ActorSystemConfig& config,
                                          const std::function<void(TestRuntime&)>& register_actors,
                                          int64_t* rss_before, ScaleRun* run) {
  // When the budget cuts the traffic, the events left on links are dead letters at teardown, each
  // logged at info: warnings only, process-wide (the teardown runs on the benchmark's thread).
  SetLogLevel(LogLevel::kWarn);
  *rss_before = TrimmedResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  auto runtime = std::make_unique<TestRuntime>(
      TestRuntimeOptions{.nodes = nodes, .seed = 1, .config = config, .trace_capacity = 0});
  register_actors(*runtime);
  runtime->DispatchEvents();
  run->setup_s = SecondsSince(start);
  run->rss_built = static_cast<double>(TrimmedResidentBytes() - *rss_before);
  return runtime;
}

// Dispatches until nothing is left to do (true) or TrafficBudgetS() of wall time has passed.
bool DispatchWithinBudget(TestRuntime& runtime) {
  const double budget = TrafficBudgetS();
  const auto start = std::chrono::steady_clock::now();
  while (SecondsSince(start) < budget) {
    if (runtime.DispatchEvents({.max_events = 16}) != DispatchResult::kEventLimit) {
      return true;
    }
  }
  return false;
}

// Sets the setup counters from the sums of every iteration's run.
void ReportSetup(benchmark::State& state, uint32_t nodes, const ScaleRun& sum) {
  using benchmark::Counter;
  state.counters["setup_s"] = Counter(sum.setup_s, Counter::kAvgIterations);
  state.counters["node_bytes"] = Counter(sum.rss_built / static_cast<double>(nodes),
                                         Counter::kAvgIterations, Counter::OneK::kIs1024);
}

// Sets the setup and traffic counters from the sums of every iteration's run.
void ReportTraffic(benchmark::State& state, uint32_t nodes, const ScaleRun& sum) {
  using benchmark::Counter;
  ReportSetup(state, nodes, sum);
  state.counters["steps_per_s"] = Counter(sum.steps, Counter::kIsRate);
  state.counters["cross_node_per_s"] = Counter(sum.cross_node, Counter::kIsRate);
  state.counters["done"] = Counter(sum.done, Counter::kAvgIterations);
  state.counters["node_bytes_after"] = Counter(sum.rss_after / static_cast<double>(nodes),
                                               Counter::kAvgIterations, Counter::OneK::kIs1024);
}

void AddRun(ScaleRun& sum, const ScaleRun& run) {
  sum.setup_s += run.setup_s;
  sum.rss_built += run.rss_built;
  sum.rss_after += run.rss_after;
  sum.steps += run.steps;
  sum.cross_node += run.cross_node;
  sum.done += run.done;
}

// Passes the token to the next member of the ring until `remaining` reaches zero.
class RingMember : public Actor {
 public:
  RingMember(const std::vector<ActorId>* ring, size_t index, int64_t* remaining)
      : Actor(&RingMember::StateWork), ring_(ring), index_(index), remaining_(remaining) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBall && --*remaining_ > 0) {
      Send((*ring_)[(index_ + 1) % ring_->size()], std::make_unique<EvBall>());
    }
  }
  const std::vector<ActorId>* ring_;
  size_t index_;
  int64_t* remaining_;
};

void BM_SimRing(benchmark::State& state) {
  const auto nodes = static_cast<uint32_t>(state.range(0));
  const int64_t hops = kRingLaps * nodes;
  ScaleRun sum;
  for (auto _ : state) {
    ScaleRun run;
    int64_t rss_before = 0;
    std::vector<ActorId> ring;
    int64_t remaining = hops;
    std::unique_ptr<TestRuntime> runtime = BuildRuntime(
        nodes, {},
        [&](TestRuntime& rt) {
          for (NodeId node = 1; node <= nodes; ++node) {
            ring.push_back(
                rt.Register(std::make_unique<RingMember>(&ring, node - 1, &remaining), node));
          }
        },
        &rss_before, &run);
    const uint64_t steps_before = runtime->steps();
    const auto start = std::chrono::steady_clock::now();
    // From the last member: the first hop crosses nodes too.
    runtime->Send(ring.front(), std::make_unique<EvBall>(), ring.back());
    const bool finished = DispatchWithinBudget(*runtime);
    state.SetIterationTime(SecondsSince(start));
    run.steps = static_cast<double>(runtime->steps() - steps_before);
    run.cross_node = static_cast<double>(hops - remaining);
    run.done = run.cross_node / static_cast<double>(hops);
    run.rss_after = static_cast<double>(TrimmedResidentBytes() - rss_before);
    if (finished && remaining != 0) {
      state.SkipWithError("the token stopped early");
    }
    runtime.reset();
    AddRun(sum, run);
  }
  ReportTraffic(state, nodes, sum);
}
BENCHMARK(BM_SimRing)
    ->ArgName("nodes")
    ->Arg(kFewNodes)
    ->Arg(kManyNodes)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// What every PairPeer of a run saw.
struct PairTally {
  uint64_t cross_node = 0;
  uint64_t rounds_done = 0;
  absl::flat_hash_set<std::pair<NodeId, NodeId>> sessions;  // pairs of nodes that talked
};

// On EvStart, asks the actors of its first kPairFanOut target nodes at once; when every answer is
// in, asks the next kPairFanOut, kPairRounds rounds in all. Answers every EvRequest with an
// EvReply.
class PairPeer : public Actor {
 public:
  // `peers` maps a node id to its PairPeer (complete before the first EvStart).
  PairPeer(const std::vector<ActorId>* peers, std::vector<NodeId> targets, PairTally* tally)
      : Actor(&PairPeer::StateWork), peers_(peers), targets_(std::move(targets)), tally_(tally) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvStart:
        AskRound();
        break;
      case kEvRequest:
        ++tally_->cross_node;
        Send(ev->sender(), std::make_unique<EvReply>());
        break;
      case kEvReply:
        ++tally_->cross_node;
        if (--awaiting_ == 0) {
          ++tally_->rounds_done;
          AskRound();
        }
        break;
      default:
        break;
    }
  }

  void AskRound() {
    const NodeId self = SelfId().node_id();
    for (int i = 0; i < kPairFanOut && next_ < targets_.size(); ++i) {
      const NodeId peer = targets_[next_++];
      tally_->sessions.insert({std::min(self, peer), std::max(self, peer)});
      Send((*peers_)[peer], std::make_unique<EvRequest>());
      ++awaiting_;
    }
  }

  const std::vector<ActorId>* peers_;
  std::vector<NodeId> targets_;
  PairTally* tally_;
  size_t next_ = 0;
  int awaiting_ = 0;
};

void BM_SimRandomPairs(benchmark::State& state) {
  const auto nodes = static_cast<uint32_t>(state.range(0));
  const double rounds = static_cast<double>(nodes) * kPairRounds;
  ScaleRun sum;
  double sessions = 0;
  for (auto _ : state) {
    ScaleRun run;
    int64_t rss_before = 0;
    std::vector<ActorId> peers(nodes + 1);  // index = node id
    PairTally tally;
    std::unique_ptr<TestRuntime> runtime = BuildRuntime(
        nodes, {},
        [&](TestRuntime& rt) {
          std::mt19937_64 rng(1);
          std::uniform_int_distribution<NodeId> other(1, nodes - 1);
          for (NodeId node = 1; node <= nodes; ++node) {
            std::vector<NodeId> targets;
            for (int i = 0; i < kPairFanOut * kPairRounds; ++i) {
              const NodeId peer = other(rng);
              targets.push_back(peer >= node ? peer + 1 : peer);  // any node but this one
            }
            peers[node] =
                rt.Register(std::make_unique<PairPeer>(&peers, std::move(targets), &tally), node);
          }
        },
        &rss_before, &run);
    const uint64_t steps_before = runtime->steps();
    const auto start = std::chrono::steady_clock::now();
    for (NodeId node = 1; node <= nodes; ++node) {
      runtime->Send(std::make_unique<EventHandle>(peers[node], ActorId(),
                                                  std::make_unique<EvStart>(), kNoFlags, 0),
                    node);
    }
    const bool finished = DispatchWithinBudget(*runtime);
    state.SetIterationTime(SecondsSince(start));
    run.steps = static_cast<double>(runtime->steps() - steps_before);
    run.cross_node = static_cast<double>(tally.cross_node);
    run.done = static_cast<double>(tally.rounds_done) / rounds;
    run.rss_after = static_cast<double>(TrimmedResidentBytes() - rss_before);
    sessions += static_cast<double>(tally.sessions.size());
    if (finished && static_cast<double>(tally.rounds_done) != rounds) {
      state.SkipWithError("a round did not finish");
    }
    runtime.reset();
    AddRun(sum, run);
  }
  ReportTraffic(state, nodes, sum);
  state.counters["sessions"] = benchmark::Counter(sessions, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_SimRandomPairs)
    ->ArgName("nodes")
    ->Arg(kFewNodes)
    ->Arg(kManyNodes)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Builds the N-node runtime with one idle actor per node and no traffic: setup time and RSS per
// node, with the default node config (small:0: System, User, Batch, IC pools, 4096 services) or a
// small one (small:1: one pool, 16 services, 4096 mailboxes).
void BM_SimNodes(benchmark::State& state) {
  const auto nodes = static_cast<uint32_t>(state.range(0));
  proto::ActorSystemConfig config;
  if (state.range(1) != 0) {
    config.add_pools()->set_name("User");
    config.set_max_services(16);
    config.set_max_mailboxes(4096);
  }
  ScaleRun sum;
  for (auto _ : state) {
    ScaleRun run;
    int64_t rss_before = 0;
    int64_t remaining = 0;
    std::vector<ActorId> ring;
    std::unique_ptr<TestRuntime> runtime = BuildRuntime(
        nodes, config,
        [&](TestRuntime& rt) {
          for (NodeId node = 1; node <= nodes; ++node) {
            ring.push_back(
                rt.Register(std::make_unique<RingMember>(&ring, node - 1, &remaining), node));
          }
        },
        &rss_before, &run);
    state.SetIterationTime(run.setup_s);
    runtime.reset();
    AddRun(sum, run);
  }
  ReportSetup(state, nodes, sum);
}
BENCHMARK(BM_SimNodes)
    ->ArgNames({"nodes", "small"})
    ->ArgsProduct({{kFewNodes, kManyNodes}, {0, 1}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace troupe::testing
