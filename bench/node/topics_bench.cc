// SPDX-License-Identifier: Apache-2.0
//
// topics_bench: publish fan-out (node/topics.h) to 1,000 subscribers spread over three nodes in
// one process, joined by the interconnect over loopback TCP (troupe::node::Node with a static
// node table, StartNodeWithTopics).
//
// What is measured (wall clock, UseRealTime):
//   - BM_TopicFanout/nodes:N      the benchmark thread publishes 64-byte EvBenchNews to one topic
//                                 on node 1 (Topics::Publish from outside an actor), keeping at
//                                 most 64 publishes unfinished (a publish is finished when every
//                                 subscriber has handled it); 1,000 subscribers sit on N nodes
//                                 (N = 1: all on node 1, no copy crosses a link; N = 3: 334 on
//                                 node 1, 333 on each other node). items/s = publishes/s;
//                                 deliveries/s = subscriber deliveries; wire_bytes_per_publish =
//                                 bytes node 1 wrote to its peers per publish (one copy per node).
//   - BM_DirectFanout/nodes:N     the baseline without topics: the benchmark thread sends each
//                                 publish to every subscriber itself, one event per subscriber
//                                 (so 667 of the 1,000 copies cross links at N = 3).
// Why: a topic's promise is one copy per node on the wire with fan-out at the receiving node;
// this shows what that costs per publish and what it saves against sending to each subscriber.
// Excluded: starting the nodes, subscribing (outside the timed region). Each node runs User and IC
// pools of one worker each: six workers on a 2-vCPU box, so the figures are what such a box
// carries, not what three machines would.
//
//   build/release/bench/node/topics_bench

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "bench/node/loopback_cluster.h"
#include "bench/node/topics_bench.pb.h"
#include "interconnect/testing/free_ports.h"
#include "node/node.h"
#include "node/topics.h"

namespace troupe::node {
namespace {

enum : EventType {
  kEvBenchNews = EventSpaceBegin(kUserEventSpace + 62),
  kEvTopicsBenchEnd,
};
static_assert(InEventSpace(kEvTopicsBenchEnd - 1, kUserEventSpace + 62));

struct EvBenchNews final : EventPB<EvBenchNews, bench::TopicNews, kEvBenchNews> {};

constexpr int kSubscribers = 1000;
constexpr uint64_t kWindow = 64;
constexpr char kTopic[] = "bench";

// Counts what it receives; subscribes at bootstrap when `subscribe`.
class CountingSubscriber final : public Actor {
 public:
  CountingSubscriber(std::atomic<uint64_t>* delivered, std::atomic<uint64_t>* subscribed,
                     bool subscribe)
      : Actor(&CountingSubscriber::StateWork),
        delivered_(delivered),
        subscribed_(subscribed),
        subscribe_(subscribe) {}

 private:
  void Bootstrap() override {
    if (subscribe_) {
      (void)Topics::Subscribe(*this, kTopic);
    } else {
      subscribed_->fetch_add(1, std::memory_order_relaxed);
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvBenchNews:
        // Relaxed: the benchmark thread only waits for the count to reach a figure.
        delivered_->fetch_add(1, std::memory_order_relaxed);
        break;
      case kEvTopicSubscribed:
        subscribed_->fetch_add(1, std::memory_order_relaxed);
        break;
      default:
        Unhandled(ev);
    }
  }

  std::atomic<uint64_t>* delivered_;
  std::atomic<uint64_t>* subscribed_;
  bool subscribe_;
};

// Three nodes over loopback TCP, each with a topic registry, and 1,000 subscribers on the first
// `spread` of them.
class TopicCluster {
 public:
  TopicCluster(int spread, bool subscribe) {
    absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(3);
    Check(ports.status());
    for (NodeId node = 1; node <= 3; ++node) {
      const proto::ActorSystemConfig config =
          bench_util::LoopbackNodeConfig(node, *ports, "topics-bench", /*spin_us=*/20);
      absl::StatusOr<std::unique_ptr<Node>> started = StartNodeWithTopics(config);
      Check(started.status());
      nodes_[node - 1] = std::move(*started);
    }
    for (const std::unique_ptr<Node>& node : nodes_) {
      Check(node->WaitForPeers(absl::Seconds(10)));
    }
    for (int i = 0; i < kSubscribers; ++i) {
      Node& node = *nodes_[i % spread];
      subscribers_.push_back(node.system().Register(
          std::make_unique<CountingSubscriber>(&delivered_, &subscribed_, subscribe)));
    }
    WaitFor(subscribed_, kSubscribers);
  }
  ~TopicCluster() {
    for (std::unique_ptr<Node>& node : nodes_) {
      node->Shutdown(absl::Seconds(1));
    }
  }
  TopicCluster(const TopicCluster&) = delete;
  TopicCluster& operator=(const TopicCluster&) = delete;
  TopicCluster(TopicCluster&&) = delete;
  TopicCluster& operator=(TopicCluster&&) = delete;

  Node& node(NodeId node) { return *nodes_[node - 1]; }
  const std::vector<ActorId>& subscribers() const { return subscribers_; }
  std::atomic<uint64_t>& delivered() { return delivered_; }
  // Bytes node 1 has written to its peers.
  uint64_t BytesWritten() const {
    uint64_t bytes = 0;
    for (const interconnect::SessionCounters& session : nodes_[0]->interconnect()->Counters()) {
      bytes += session.bytes_written;
    }
    return bytes;
  }

  // Waits until `counter` reaches `target`; aborts after a minute (a lost event).
  static void WaitFor(const std::atomic<uint64_t>& counter, uint64_t target) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (counter.load(std::memory_order_relaxed) < target) {
      if (absl::Now() > deadline) {
        std::fprintf(stderr, "topics_bench: stuck at %llu of %llu\n",
                     static_cast<unsigned long long>(counter.load()),
                     static_cast<unsigned long long>(target));
        std::abort();
      }
      absl::SleepFor(absl::Microseconds(20));
    }
  }

 private:
  static void Check(const absl::Status& status) { bench_util::CheckOrAbort(status); }

  std::array<std::unique_ptr<Node>, 3> nodes_;
  std::vector<ActorId> subscribers_;
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> subscribed_{0};
};

std::unique_ptr<EvBenchNews> MakeNews(uint64_t seq) {
  auto news = std::make_unique<EvBenchNews>();
  news->record.set_seq(seq);
  news->record.set_data(std::string(64, 'x'));
  return news;
}

// Runs the window loop: `publish(seq)` makes one publish reach every subscriber.
template <typename PublishFn>
void RunFanout(benchmark::State& state, TopicCluster& cluster, PublishFn publish) {
  std::atomic<uint64_t>& delivered = cluster.delivered();
  const uint64_t delivered_before = delivered.load();
  const uint64_t bytes_before = cluster.BytesWritten();
  uint64_t published = 0;
  for (auto _ : state) {
    publish(published++);
    if (published % kWindow == 0) {
      TopicCluster::WaitFor(delivered, delivered_before + (published - kWindow) * kSubscribers);
    }
  }
  TopicCluster::WaitFor(delivered, delivered_before + published * kSubscribers);
  state.SetItemsProcessed(static_cast<int64_t>(published));
  state.counters["deliveries/s"] = benchmark::Counter(static_cast<double>(published) * kSubscribers,
                                                      benchmark::Counter::kIsRate);
  state.counters["wire_bytes_per_publish"] =
      static_cast<double>(cluster.BytesWritten() - bytes_before) / static_cast<double>(published);
}

void BM_TopicFanout(benchmark::State& state) {
  TopicCluster cluster(static_cast<int>(state.range(0)), /*subscribe=*/true);
  ActorSystem& system = cluster.node(1).system();
  RunFanout(state, cluster, [&](uint64_t seq) {
    if (!Topics::Publish(system, kTopic, MakeNews(seq)).ok()) {
      std::abort();
    }
  });
}
BENCHMARK(BM_TopicFanout)
    ->ArgName("nodes")
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_DirectFanout(benchmark::State& state) {
  TopicCluster cluster(static_cast<int>(state.range(0)), /*subscribe=*/false);
  ActorSystem& system = cluster.node(1).system();
  const std::vector<ActorId>& subscribers = cluster.subscribers();
  RunFanout(state, cluster, [&](uint64_t seq) {
    for (const ActorId& subscriber : subscribers) {
      system.Send(subscriber, MakeNews(seq));
    }
  });
}
BENCHMARK(BM_DirectFanout)
    ->ArgName("nodes")
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace troupe::node
