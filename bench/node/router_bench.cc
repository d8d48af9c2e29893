// SPDX-License-Identifier: Apache-2.0
//
// router_bench: events per second through a troupe::node::Router of 8 workers (node/router.h).
//
// What is measured (wall clock, UseRealTime): a plain thread of node 1 streams 64-byte EventPB
// events to the router on node 1, keeping at most 4096 sent and not yet handled (the workers count
// what they handle in a shared atomic); items/s is events handled per second.
//   - BM_RouterLocal/policy:P      the 8 workers on node 1 (P: 0 round-robin, 1 smallest
//                                  mailbox, 2 consistent hash by a key in the event).
//   - BM_DirectLocal               no router: the thread sends to the 8 workers in turn itself,
//                                  the baseline the router's hop adds to.
//   - BM_RouterRemote/policy:P     the 8 workers on node 2, joined to node 1 by the interconnect
//                                  over loopback TCP (P as above, except 1: smallest mailbox is
//                                  probe-driven there).
//   - BM_DirectRemote              no router, workers on node 2.
// Why: a router is one actor every event passes through, so its cost per event bounds the group's
// throughput; these figures say how far below a direct send that bound is, locally and with the
// workers one network hop away (where the router also keeps a record per event and probes).
// probes_per_event: the probes the router sent through the workers' mailboxes per event (remote
// workers only: each answered probe retires the records of the events before it).
// Excluded: starting nodes and sessions, registering the router and workers (outside the timing).
// Each node runs User and IC pools of one worker each, so the box's two vCPUs are shared by the
// sending thread, the router, the workers and (remote) the proxies and Asio threads.
//
//   build/release/bench/node/router_bench

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "bench/interconnect/session_bench.pb.h"
#include "bench/node/loopback_cluster.h"
#include "interconnect/interconnect.h"
#include "interconnect/testing/free_ports.h"
#include "node/router.h"

namespace troupe::node {
namespace {

enum : EventType {
  kEvRouterBenchJob = EventSpaceBegin(kUserEventSpace + 41),
  kEvRouterBenchEnd,
};
static_assert(InEventSpace(kEvRouterBenchEnd - 1, kUserEventSpace + 41));

struct EvRouterBenchJob final : EventPB<EvRouterBenchJob, bench::Blob, kEvRouterBenchJob> {};

constexpr int kWorkers = 8;
constexpr int64_t kWindow = 4096;
constexpr int64_t kEventsPerIteration = 200'000;

// Counts the jobs it handles.
class RouterBenchWorker final : public Actor {
 public:
  explicit RouterBenchWorker(std::atomic<int64_t>* handled)
      : Actor(&RouterBenchWorker::StateWork), handled_(handled) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvRouterBenchJob) {
      // relaxed: a count the sending thread polls; no data is published through it.
      handled_->fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Unhandled(ev);
  }
  std::atomic<int64_t>* handled_;
};

// One node, or two joined over loopback TCP.
class RouterBenchCluster {
 public:
  explicit RouterBenchCluster(int nodes) {
    std::vector<uint16_t> ports;
    if (nodes > 1) {
      absl::StatusOr<std::vector<uint16_t>> free = interconnect::FreeLoopbackPorts(nodes);
      bench_util::CheckOrAbort(free.status());
      ports = *free;
    }
    for (int i = 0; i < nodes; ++i) {
      const proto::ActorSystemConfig config = bench_util::LoopbackNodeConfig(
          static_cast<NodeId>(i + 1), ports, "router-bench", /*spin_us=*/50);
      auto system = ActorSystem::Create(config);
      bench_util::CheckOrAbort(system.status());
      systems_.push_back(std::move(*system));
      if (nodes > 1) {
        auto started = interconnect::Interconnect::Start(systems_.back().get());
        bench_util::CheckOrAbort(started.status());
        ics_.push_back(std::move(*started));
      }
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (const auto& ic : ics_) {
      while (!ic->Counters()[0].connected) {
        if (absl::Now() > deadline) {
          std::fprintf(stderr, "router_bench: the nodes did not connect\n");
          std::abort();
        }
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
  }
  ~RouterBenchCluster() {
    for (size_t i = 0; i < systems_.size(); ++i) {
      if (i < ics_.size()) {
        ics_[i].reset();
      }
      systems_[i]->Stop();
    }
  }
  RouterBenchCluster(const RouterBenchCluster&) = delete;
  RouterBenchCluster& operator=(const RouterBenchCluster&) = delete;
  RouterBenchCluster(RouterBenchCluster&&) = delete;
  RouterBenchCluster& operator=(RouterBenchCluster&&) = delete;

  ActorSystem& node(NodeId node) { return *systems_[node - 1]; }

 private:
  std::vector<std::unique_ptr<ActorSystem>> systems_;
  std::vector<std::unique_ptr<interconnect::Interconnect>> ics_;
};

RoutingPolicy PolicyOf(int64_t arg) {
  switch (arg) {
    case 1:
      return RoutingPolicy::kSmallestMailbox;
    case 2:
      return RoutingPolicy::kConsistentHash;
    default:
      return RoutingPolicy::kRoundRobin;
  }
}

// Streams kEventsPerIteration events per iteration from this thread, each to `target(i)`, with at
// most kWindow not yet handled.
template <typename Target>
void Stream(benchmark::State& state, ActorSystem& from, const std::atomic<int64_t>& handled,
            Target target) {
  int64_t sent = 0;
  const std::string data(48, 'x');  // 64 bytes on the wire with the seq and the key
  for (auto _ : state) {
    const int64_t end = sent + kEventsPerIteration;
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (sent < end) {
      // relaxed: see RouterBenchWorker.
      if (sent - handled.load(std::memory_order_relaxed) >= kWindow) {
        if (absl::Now() > deadline) {
          state.SkipWithError("the workers stopped handling events");
          return;
        }
        std::this_thread::yield();
        continue;
      }
      auto job = std::make_unique<EvRouterBenchJob>();
      job->record.set_seq(static_cast<uint64_t>(sent));
      job->record.set_data(data);
      from.Send(target(sent), std::move(job));
      ++sent;
    }
    while (handled.load(std::memory_order_relaxed) < sent) {
      if (absl::Now() > deadline) {
        state.SkipWithError("the workers stopped handling events");
        return;
      }
      std::this_thread::yield();
    }
  }
  state.SetItemsProcessed(sent);
}

void RunRouter(benchmark::State& state, int nodes) {
  RouterBenchCluster cluster(nodes);
  std::atomic<int64_t> handled{0};
  const auto worker_node = static_cast<NodeId>(nodes);
  RouterOptions options;
  options.policy = PolicyOf(state.range(0));
  options.key = [](EventHandle& ev) -> std::optional<std::string> {
    const auto* job = ev.Get<EvRouterBenchJob>();
    return job == nullptr ? std::nullopt
                          : std::optional<std::string>(absl::StrCat(job->record.seq() % 1024));
  };
  for (int i = 0; i < kWorkers; ++i) {
    options.members.push_back(
        cluster.node(worker_node).Register(std::make_unique<RouterBenchWorker>(&handled)));
  }
  const ActorId router = cluster.node(1).Register(std::make_unique<Router>(std::move(options)));
  const uint64_t before = cluster.node(worker_node).Counters().undelivered_events;
  Stream(state, cluster.node(1), handled, [&router](int64_t) { return router; });
  // Each answered probe is one undelivered event on the workers' node (none when they are local).
  const uint64_t probes = cluster.node(worker_node).Counters().undelivered_events - before;
  state.counters["probes_per_event"] =
      static_cast<double>(probes) / static_cast<double>(std::max<int64_t>(1, handled.load()));
}

void RunDirect(benchmark::State& state, int nodes) {
  RouterBenchCluster cluster(nodes);
  std::atomic<int64_t> handled{0};
  std::array<ActorId, kWorkers> workers;
  for (ActorId& worker : workers) {
    worker = cluster.node(static_cast<NodeId>(nodes))
                 .Register(std::make_unique<RouterBenchWorker>(&handled));
  }
  Stream(state, cluster.node(1), handled,
         [&workers](int64_t i) { return workers[static_cast<size_t>(i % kWorkers)]; });
}

void BM_RouterLocal(benchmark::State& state) { RunRouter(state, 1); }
void BM_DirectLocal(benchmark::State& state) { RunDirect(state, 1); }
void BM_RouterRemote(benchmark::State& state) { RunRouter(state, 2); }
void BM_DirectRemote(benchmark::State& state) { RunDirect(state, 2); }

BENCHMARK(BM_RouterLocal)
    ->ArgName("policy")
    ->DenseRange(0, 2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DirectLocal)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RouterRemote)
    ->ArgName("policy")
    ->DenseRange(0, 2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DirectRemote)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace troupe::node
