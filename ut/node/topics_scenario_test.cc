// SPDX-License-Identifier: Apache-2.0
//
// Topics (node/topics.h) under churn on TestRuntime: three nodes, a publisher and three
// subscribers on each, every publish tracked, while links are partitioned and healed and node 3
// is killed and restarted (its new subscribers join again). Over many seeds it checks what the
// header promises:
//   - a subscriber gets each publisher's events at most once and in publish order;
//   - a subscriber that lived through the run misses a publish only when the publisher was told
//     that the copy to the subscriber's node was lost (one report per lost copy and node);
//   - with the faults healed, every publish reaches every live subscriber.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/nameservice.h"
#include "node/topics.h"
#include "ut/node/topics_test_util.h"

namespace troupe::node::topics_scenario {
namespace {

using interconnect::NodeEndpoint;
using interconnect::StaticNameservice;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using topics_testing::EvGo;
using topics_testing::Publisher;
using topics_testing::Subscriber;
using topics_testing::TopicsEntry;
using topics_testing::TopicsLog;
using Kind = TopicsEntry::Kind;

constexpr NodeId kScenarioNodes = 3;
constexpr int kSubscribersPerNode = 3;
constexpr int kRounds = 60;

NodeEndpoint ScenarioEndpoint(NodeId node) {
  return {.node = node,
          .host = "127.0.0.1",
          .port = static_cast<uint16_t>(19100 + node),
          .client = false,
          .monitoring_port = 0};
}

struct ScenarioRun {
  std::unique_ptr<TestRuntime> runtime;
  TopicsLog log;
  std::map<NodeId, std::shared_ptr<StaticNameservice>> names;
  std::map<NodeId, ActorId> publishers;
  // Subscribers that lived from the first publish to the end (nodes 1 and 2).
  std::vector<ActorId> survivors;
  // Every subscriber, including node 3's of each incarnation.
  std::vector<ActorId> all;
  // Node 3's subscribers of its current incarnation.
  std::vector<ActorId> node3;
  // Publishes each publisher made.
  std::map<ActorId, uint64_t> published;
};

void StartRun(uint64_t seed, ScenarioRun& run) {
  for (NodeId node = 1; node <= kScenarioNodes; ++node) {
    std::vector<NodeEndpoint> members;
    for (NodeId member = 1; member <= kScenarioNodes; ++member) {
      members.push_back(ScenarioEndpoint(member));
    }
    run.names[node] = std::make_shared<StaticNameservice>(members);
  }
  TestRuntimeOptions options;
  options.nodes = kScenarioNodes;
  options.seed = seed;
  options.latency = absl::Milliseconds(1);
  options.jitter = absl::Milliseconds(2);
  options.on_node_start = [&run](TestRuntime& runtime, NodeId node) {
    const absl::Status registered = RegisterTopics(runtime.node(node), run.names[node]);
    ASSERT_TRUE(registered.ok()) << registered;
  };
  run.runtime = std::make_unique<TestRuntime>(std::move(options));
}

// Subscribers and a publisher on `node`; returns the subscribers.
std::vector<ActorId> Populate(ScenarioRun& run, NodeId node) {
  std::vector<ActorId> subscribers;
  for (int i = 0; i < kSubscribersPerNode; ++i) {
    subscribers.push_back(run.runtime->Register(
        std::make_unique<Subscriber>(&run.log, std::vector<std::string>{"t"}), node));
  }
  run.publishers[node] = run.runtime->Register(std::make_unique<Publisher>(&run.log), node);
  run.all.insert(run.all.end(), subscribers.begin(), subscribers.end());
  return subscribers;
}

// Tells `publisher` to publish `count` tracked events, from its own node (a cut link must not
// lose the order itself).
void Tell(ScenarioRun& run, const ActorId& publisher, uint64_t count) {
  run.runtime->Send(
      std::make_unique<EventHandle>(publisher, ActorId(), std::make_unique<EvGo>("t", count, true)),
      publisher.node_id());
}

// Copies of `publisher`'s publishes reported lost to `node`.
uint64_t ReportedLost(const ScenarioRun& run, const ActorId& publisher, NodeId node) {
  uint64_t lost = 0;
  for (const TopicsEntry& entry : run.log.Of(publisher, Kind::kUndelivered)) {
    lost += entry.lost_node == node ? 1 : 0;
  }
  return lost;
}

TEST(TopicsScenarioTest, ChurnKeepsEachPublishOnceInOrderOrReported) {
  uint64_t faults = 0;
  uint64_t reports = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    ScenarioRun run;
    StartRun(seed, run);
    for (NodeId node = 1; node <= kScenarioNodes; ++node) {
      const std::vector<ActorId> subscribers = Populate(run, node);
      if (node != 3) {
        run.survivors.insert(run.survivors.end(), subscribers.begin(), subscribers.end());
      } else {
        run.node3 = subscribers;
      }
    }
    ASSERT_TRUE(run.runtime->DispatchUntil(
        [&] { return run.log.Count(Kind::kSubscribed) == run.all.size(); }));

    std::mt19937_64 rng(seed);
    bool node3_dead = false;
    std::set<std::pair<NodeId, NodeId>> cut;
    for (int round = 0; round < kRounds; ++round) {
      for (const auto& [node, publisher] : run.publishers) {
        if (node == 3 && node3_dead) {
          continue;
        }
        const uint64_t count = 1 + rng() % 3;
        Tell(run, publisher, count);
        run.published[publisher] += count;
      }
      switch (rng() % 8) {
        case 0: {  // cut a link
          const NodeId a = 1 + static_cast<NodeId>(rng() % kScenarioNodes);
          const NodeId b = 1 + static_cast<NodeId>((a + rng() % 2) % kScenarioNodes);
          if (a != b && !cut.contains({std::min(a, b), std::max(a, b)})) {
            run.runtime->Partition(a, b);
            cut.insert({std::min(a, b), std::max(a, b)});
            ++faults;
          }
          break;
        }
        case 1:  // heal every link
          run.runtime->HealAll();
          cut.clear();
          break;
        case 2:  // node 3 dies, or comes back with new subscribers
          if (!node3_dead) {
            run.runtime->KillNode(3);
            node3_dead = true;
            ++faults;
          } else {
            run.runtime->RestartNode(3);
            node3_dead = false;
            run.node3 = Populate(run, 3);
          }
          break;
        default:
          break;
      }
      ASSERT_TRUE(run.runtime->AdvanceTime(absl::Milliseconds(1 + rng() % 5)));
    }
    // Healed, and node 3 up: the last publishes reach every live subscriber.
    run.runtime->HealAll();
    if (node3_dead) {
      run.runtime->RestartNode(3);
      run.node3 = Populate(run, 3);
    }
    run.runtime->DispatchEvents();
    ASSERT_TRUE(run.runtime->DispatchUntil(
        [&] { return run.log.Count(Kind::kSubscribed) == run.all.size(); }));
    for (const auto& [node, publisher] : run.publishers) {
      Tell(run, publisher, 1);
      run.published[publisher] += 1;
    }
    run.runtime->DispatchEvents();

    // At most once, in each publisher's order, for every subscriber of every incarnation.
    for (const ActorId& subscriber : run.all) {
      std::map<ActorId, int64_t> last;
      for (const TopicsEntry& entry : run.log.Of(subscriber, Kind::kNews)) {
        auto [it, first] = last.emplace(entry.publisher, static_cast<int64_t>(entry.seq));
        if (!first) {
          ASSERT_GT(static_cast<int64_t>(entry.seq), it->second)
              << subscriber << " got seq " << entry.seq << " of " << entry.publisher
              << " again or out of order";
          it->second = static_cast<int64_t>(entry.seq);
        }
      }
    }
    // A survivor misses only what its node was reported to have lost, and gets the last publish
    // of every publisher still running.
    for (const ActorId& subscriber : run.survivors) {
      std::map<ActorId, uint64_t> got;
      std::map<ActorId, uint64_t> last;
      for (const TopicsEntry& entry : run.log.Of(subscriber, Kind::kNews)) {
        ++got[entry.publisher];
        last[entry.publisher] = entry.seq;
      }
      for (const auto& [node, publisher] : run.publishers) {
        if (node == 3) {
          continue;  // node 3's publishers changed with its incarnations
        }
        const uint64_t missed = run.published[publisher] - got[publisher];
        const uint64_t lost = ReportedLost(run, publisher, subscriber.node_id());
        reports += lost;
        EXPECT_LE(missed, lost) << subscriber << " missed " << missed << " of " << publisher
                                << "'s publishes; " << lost << " copies reported lost";
        EXPECT_EQ(last[publisher], run.published[publisher] - 1)
            << subscriber << " did not get " << publisher << "'s last publish";
      }
    }
    // The subscribers of node 3's last incarnation get the last publish of nodes 1 and 2.
    for (const ActorId& subscriber : run.node3) {
      for (NodeId node = 1; node <= 2; ++node) {
        const ActorId& publisher = run.publishers[node];
        bool got_last = false;
        for (const TopicsEntry& entry : run.log.Of(subscriber, Kind::kNews)) {
          got_last = got_last ||
                     (entry.publisher == publisher && entry.seq == run.published[publisher] - 1);
        }
        EXPECT_TRUE(got_last) << subscriber << " missed the last publish of " << publisher;
      }
    }
  }
  EXPECT_GT(faults, 50u) << "the scenario must exercise faults";
  EXPECT_GT(reports, 0u) << "and some copies must be lost and reported";
}

}  // namespace
}  // namespace troupe::node::topics_scenario
