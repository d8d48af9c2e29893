// SPDX-License-Identifier: Apache-2.0
//
// sharding_bench: sharded entities (node/sharding.h) on three nodes in one process, joined by the
// interconnect over loopback TCP. Sharding membership is a StaticNameservice per node (nodes 1
// and 2 host at first; BM_ShardJoinHandoff adds node 3); the interconnect's own table lists all
// three, so sessions are up before any timing starts.
//
// What is measured (wall clock, UseRealTime):
//   - BM_ShardSendLocal    a driver on node 1 streams events to 64 entities owned by node 1
//                          (window of 1024; each entity answers every event): events/s through
//                          the region's first hop (the event is moved, not serialized).
//   - BM_ShardSendRemote   the same to 64 entities owned by node 2: node 1's region serializes
//                          the event into an envelope, node 2's region delivers it, the answer
//                          goes straight back to the driver.
//   - BM_ShardActivations  one event to each of 10,000 new keys owned by node 1 per iteration:
//                          entities created (factory, Register, Watch, Load) per second.
//   - BM_ShardJoinHandoff  10,000 live entities on nodes 1 and 2; node 3 joins: the time until
//                          every region runs under the new view (moved entities stopped with
//                          Save, barrier complete: handoff_ms), and until one event to each of the
//                          10,000 keys was answered by its owner under the new view (total).
// Excluded: set-up of the nodes and of the entities before the join (outside the timed region).
// Each node runs one User and one IC worker; the box has two vCPUs for six workers, so the
// figures are what a 2-core box carries, not a per-core best.
//
//   build/release/bench/node/sharding_bench

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "bench/interconnect/session_bench.pb.h"
#include "bench/node/loopback_cluster.h"
#include "interconnect/interconnect.h"
#include "interconnect/testing/free_ports.h"
#include "node/sharding.h"

namespace troupe::node {
namespace {

enum : EventType {
  kEvShardBenchWork = EventSpaceBegin(kUserEventSpace + 41),
  kEvShardBenchDone,
  kEvShardBenchEnd,
};
static_assert(InEventSpace(kEvShardBenchEnd - 1, kUserEventSpace + 41));

struct EvShardBenchWork final : EventPB<EvShardBenchWork, bench::Blob, kEvShardBenchWork> {};
struct EvShardBenchDone final : EventPB<EvShardBenchDone, bench::Credit, kEvShardBenchDone> {};

constexpr char kBenchKind[] = "bench";
constexpr NodeId kBenchNodes = 3;

// Counts and answers every event; saves and loads its count to nowhere (the hooks' cost only).
class BenchEntity final : public ShardedEntity {
 public:
  BenchEntity() : ShardedEntity(&BenchEntity::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvShardBenchWork) {
      auto done = std::make_unique<EvShardBenchDone>();
      done->record.set_count(++count_);
      Reply(ev, std::move(done));
    } else {
      Unhandled(ev);
    }
  }
  uint64_t count_ = 0;
};

// Sends `count` events over `keys` (round robin) with at most `window` unanswered, then notifies.
class Driver final : public Actor {
 public:
  Driver(std::vector<std::string> keys, uint64_t count, uint64_t window, Notification* done)
      : Actor(&Driver::StateWork),
        keys_(std::move(keys)),
        count_(count),
        window_(window),
        done_(done) {}

 private:
  void Bootstrap() override {
    while (sent_ < count_ && sent_ < window_) {
      SendOne();
    }
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvShardBenchDone && ev->type() != kEvUndelivered) {
      Unhandled(ev);
      return;
    }
    ++received_;
    if (sent_ < count_) {
      SendOne();
    }
    if (received_ == count_) {
      done_->Notify();
      PassAway();
    }
  }
  void SendOne() {
    auto work = std::make_unique<EvShardBenchWork>();
    work->record.set_seq(sent_);
    SendToEntity(*this, kBenchKind, keys_[sent_ % keys_.size()], std::move(work), kTrackDelivery,
                 sent_);
    ++sent_;
  }

  std::vector<std::string> keys_;
  uint64_t count_;
  uint64_t window_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
  Notification* done_;
};

// Three nodes over loopback TCP, each with a region of kBenchKind; nodes 1 and 2 host.
class Cluster {
 public:
  Cluster() {
    absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(kBenchNodes);
    Check(ports.status());
    for (NodeId node = 1; node <= kBenchNodes; ++node) {
      const proto::ActorSystemConfig config =
          bench_util::LoopbackNodeConfig(node, *ports, "shard-bench", /*spin_us=*/50);
      auto system = ActorSystem::Create(config);
      Check(system.status());
      systems_[node - 1] = std::move(*system);
      auto started = interconnect::Interconnect::Start(systems_[node - 1].get(), {});
      Check(started.status());
      ics_[node - 1] = std::move(*started);
      names_[node - 1] = std::make_shared<interconnect::StaticNameservice>();
      for (NodeId host = 1; host <= 2; ++host) {
        names_[node - 1]->Set(Endpoint(host));
      }
      ShardingOptions options;
      options.passivate_after = absl::ZeroDuration();
      Check(StartShardRegion(
                *systems_[node - 1], kBenchKind, names_[node - 1],
                [](std::string_view) { return std::make_unique<BenchEntity>(); }, options)
                .status());
    }
    for (NodeId node = 1; node <= kBenchNodes; ++node) {
      Check(ics_[node - 1]->WaitForPeers(absl::Seconds(10)));
    }
    WaitActive(2);
  }
  ~Cluster() {
    for (NodeId node = 1; node <= kBenchNodes; ++node) {
      ics_[node - 1].reset();
      systems_[node - 1]->Stop();
    }
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  Cluster(Cluster&&) = delete;
  Cluster& operator=(Cluster&&) = delete;

  static void Check(const absl::Status& status) { bench_util::CheckOrAbort(status); }
  static interconnect::NodeEndpoint Endpoint(NodeId node) {
    return {.node = node, .host = "127.0.0.1", .port = 1, .client = false, .monitoring_port = 0};
  }

  ActorSystem& node(NodeId node) { return *systems_[node - 1]; }

  // Adds node 3 to every node's sharding table.
  void Join() {
    for (auto& names : names_) {
      names->Set(Endpoint(3));
    }
  }

  // Waits until every region runs under a complete barrier with `hosts` hosts.
  void WaitActive(int hosts) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (NodeId node = 1; node <= kBenchNodes; ++node) {
      while (true) {
        absl::StatusOr<proto::ShardStats> stats =
            GetShardStats(*systems_[node - 1], kBenchKind, absl::Seconds(5));
        Check(stats.status());
        if (stats->active() && stats->buffered() == 0 && stats->hosts_size() == hosts) {
          break;
        }
        if (absl::Now() > deadline) {
          Check(absl::DeadlineExceededError("the regions did not become active"));
        }
        absl::SleepFor(absl::Microseconds(200));
      }
    }
  }

  // Streams `count` events from node 1 over `keys` and waits for every answer.
  void Stream(const std::vector<std::string>& keys, uint64_t count, uint64_t window) {
    Notification done;
    systems_[0]->Register(std::make_unique<Driver>(keys, count, window, &done));
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(120))) {
      Check(absl::DeadlineExceededError("the driver did not finish"));
    }
  }

 private:
  std::array<std::unique_ptr<ActorSystem>, kBenchNodes> systems_;
  std::array<std::unique_ptr<interconnect::Interconnect>, kBenchNodes> ics_;
  std::array<std::shared_ptr<interconnect::StaticNameservice>, kBenchNodes> names_;
};

// `count` keys with prefix `prefix` owned by `owner` among hosts 1 and 2.
std::vector<std::string> KeysOwnedBy(NodeId owner, size_t count, const std::string& prefix) {
  const std::vector<ShardHost> hosts = {{.node = 1, .weight = 1}, {.node = 2, .weight = 1}};
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.size() < count; ++i) {
    std::string key = absl::StrCat(prefix, i);
    if (ShardOwner(key, hosts) == owner) {
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

void SendTo(benchmark::State& state, NodeId owner) {
  Cluster cluster;
  const std::vector<std::string> keys = KeysOwnedBy(owner, 64, "s");
  cluster.Stream(keys, 1024, 1024);  // creates the entities outside the timed region
  constexpr uint64_t kPerIteration = 20000;
  for (auto _ : state) {
    cluster.Stream(keys, kPerIteration, 1024);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPerIteration));
}

void BM_ShardSendLocal(benchmark::State& state) { SendTo(state, 1); }
BENCHMARK(BM_ShardSendLocal)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ShardSendRemote(benchmark::State& state) { SendTo(state, 2); }
BENCHMARK(BM_ShardSendRemote)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ShardActivations(benchmark::State& state) {
  Cluster cluster;
  constexpr size_t kKeys = 10000;
  int round = 0;
  for (auto _ : state) {
    const std::vector<std::string> keys = KeysOwnedBy(1, kKeys, absl::StrCat("a", round++, "-"));
    const absl::Time start = absl::Now();
    cluster.Stream(keys, kKeys, 1024);
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kKeys));
}
BENCHMARK(BM_ShardActivations)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_ShardJoinHandoff(benchmark::State& state) {
  constexpr size_t kKeys = 10000;
  double handoff_ms = 0;
  double moved = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto cluster = std::make_unique<Cluster>();
    std::vector<std::string> keys;
    for (size_t i = 0; i < kKeys; ++i) {
      keys.push_back(absl::StrCat("h", i));
    }
    cluster->Stream(keys, kKeys, 1024);
    state.ResumeTiming();
    const absl::Time start = absl::Now();
    cluster->Join();
    cluster->WaitActive(3);
    handoff_ms += absl::ToDoubleMilliseconds(absl::Now() - start);
    cluster->Stream(keys, kKeys, 1024);
    state.PauseTiming();
    absl::StatusOr<proto::ShardStats> third =
        GetShardStats(cluster->node(3), kBenchKind, absl::Seconds(5));
    Cluster::Check(third.status());
    moved += static_cast<double>(third->live());
    cluster.reset();
    state.ResumeTiming();
  }
  state.counters["handoff_ms"] = benchmark::Counter(handoff_ms / state.iterations());
  state.counters["moved_keys"] = benchmark::Counter(moved / state.iterations());
}
BENCHMARK(BM_ShardJoinHandoff)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace troupe::node

BENCHMARK_MAIN();
