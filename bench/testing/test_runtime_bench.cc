// SPDX-License-Identifier: Apache-2.0
//
// test_runtime_bench: how fast the deterministic test runtime (troupe::testing) runs actors.
//
// What is measured: simulated steps per second of real time on the benchmark thread.
//   - BM_SimPingPong/nodes:1   two actors on one node bounce a ball (a new event per hop): mailbox
//                              push, the seeded pick among ready mailboxes, dispatch.
//   - BM_SimPingPong/nodes:2   the pair sits on two nodes: every hop is also serialized into a
//                              simulated link, delivered by a step of its own and parsed lazily.
//   - BM_SimTimers             an actor that wakes itself after 1 ms of simulated time: the timer
//                              map, the clock jump and the delivery of the wakeup.
// Why: deterministic tests replay many seeds; their cost per event decides how many seeds a test
// can afford. Excluded: creating the runtime and its nodes, registering the actors.
//
//   build/release/bench/testing/test_runtime_bench
#include <memory>

#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/testing/test_runtime.h"
#include "bench/testing/bench_events.pb.h"

namespace troupe::testing {
namespace {

enum : EventType { kEvBall = EventSpaceBegin(kUserEventSpace + 7) };
// A protobuf event, so it may cross nodes.
struct EvBall final : EventPB<EvBall, bench::Ball, kEvBall> {};

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

}  // namespace
}  // namespace troupe::testing
