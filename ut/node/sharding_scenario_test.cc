// SPDX-License-Identifier: Apache-2.0
//
// Sharded entities under churn, over many seeds: tracked events to many keys from every node while
// nodes join, leave gracefully and die. Checked at every start (no second live incarnation while
// the tables agree) and at the end: no event handled twice, every event of a surviving sender
// handled or reported unless it was sent before a node died, per-(key, sender) order.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "node/sharding.h"
#include "ut/node/sharding_test_util.h"

namespace troupe::node::sharding_test {
namespace {

constexpr uint32_t kScenarioNodes = 5;
constexpr int kScenarioKeys = 40;

struct ScenarioResult {
  uint64_t sent = 0;
  uint64_t handled = 0;
  uint64_t reported = 0;
  uint64_t lost = 0;
  int joins = 0;
  int leaves = 0;
  int kills = 0;
};

ScenarioResult RunScenario(uint64_t seed) {
  ShardingOptions options = ShardCluster::Defaults();
  options.passivate_after = absl::Milliseconds(300);
  ShardCluster cluster(kScenarioNodes, {1, 2, 3}, seed, options);
  testing::TestRuntime& runtime = cluster.runtime();
  World& world = cluster.world();
  std::mt19937_64 random(seed);
  auto chance = [&](int percent) { return static_cast<int>(random() % 100) < percent; };

  std::set<NodeId> members = {1, 2, 3};
  std::set<NodeId> spare = {4, 5};
  std::set<NodeId> killed;
  NodeId leaving = 0;
  ActorId leave_edge;
  // A killed node leaves the tables some time after it died (failure detection).
  NodeId dying = 0;
  absl::Time remove_at;
  absl::Time last_kill = absl::InfinitePast();
  ScenarioResult result;
  uint64_t seq = 0;

  for (int tick = 0; tick < 300; ++tick) {
    // Traffic: a few events from random live nodes to random keys.
    for (int i = 0; i < 3; ++i) {
      const NodeId from = 1 + static_cast<NodeId>(random() % kScenarioNodes);
      if (killed.contains(from)) {
        continue;
      }
      cluster.SendWork(from, absl::StrCat("k", random() % kScenarioKeys), ++seq);
    }
    // Membership changes, at most one under way at a time.
    if (leaving == 0 && dying == 0 && tick > 20 && tick < 250 && chance(4)) {
      const int what = static_cast<int>(random() % 3);
      if (what == 0 && !spare.empty()) {
        const NodeId node = *spare.begin();
        spare.erase(node);
        members.insert(node);
        cluster.Join(node);
        ++result.joins;
      } else if (members.size() > 2) {
        auto it = members.begin();
        std::advance(it, static_cast<long>(random() % members.size()));
        const NodeId node = *it;
        if (what == 1) {
          leaving = node;
          leave_edge = runtime.AllocateEdgeActor(node);
          runtime.Send(ShardRegionId(kKind, node), std::make_unique<EvShardLeave>(), leave_edge);
          ++result.leaves;
        } else {
          members.erase(node);
          killed.insert(node);
          runtime.KillNode(node);
          last_kill = runtime.Now();
          dying = node;
          remove_at = runtime.Now() + absl::Milliseconds(random() % 200);
          ++result.kills;
        }
      }
    }
    if (dying != 0 && runtime.Now() >= remove_at) {
      cluster.Remove(dying);
      dying = 0;
    }
    if (leaving != 0 && runtime.EdgeEventCount(leave_edge) > 0) {
      // Left: it goes from the tables, then its process ends.
      members.erase(leaving);
      killed.insert(leaving);
      cluster.Remove(leaving);
      runtime.KillNode(leaving);
      last_kill = std::max(last_kill, runtime.Now());
      leaving = 0;
    }
    if (!runtime.AdvanceTime(absl::Milliseconds(10))) {
      ADD_FAILURE() << "seed " << seed << ": dispatch bound hit";
      return result;
    }
  }
  if (dying != 0) {
    cluster.Remove(dying);
  }
  // Let everything settle: barriers, hand-offs, replies, passivations.
  EXPECT_TRUE(runtime.AdvanceTime(absl::Seconds(3)));
  if (leaving != 0) {
    EXPECT_GT(runtime.EdgeEventCount(leave_edge), 0u) << "seed " << seed << ": leave unanswered";
  }

  for (uint64_t s = 1; s <= seq; ++s) {
    const auto sent = world.sent.find(s);
    if (sent == world.sent.end()) {
      continue;  // its sender's node died before it sent
    }
    ++result.sent;
    const int handled = world.handled[s];
    const int reported = world.reported[s];
    EXPECT_LE(handled, 1) << "seed " << seed << ": seq " << s << " handled twice";
    EXPECT_LE(handled + (reported > 0 ? 1 : 0), 1)
        << "seed " << seed << ": seq " << s << " handled and reported";
    result.handled += handled;
    result.reported += reported > 0 ? 1 : 0;
    if (killed.contains(sent->second.node) || handled > 0 || reported > 0) {
      continue;
    }
    ++result.lost;
    EXPECT_LE(sent->second.at, last_kill)
        << "seed " << seed << ": seq " << s << " to " << sent->second.key
        << " lost with no node dying after it was sent";
  }
  EXPECT_EQ(world.order_violations, 0u) << "seed " << seed;
  EXPECT_EQ(world.double_incarnations, 0u) << "seed " << seed;
  return result;
}

TEST(ShardingScenarioTest, ChurnKeepsEveryEventAccountedFor) {
  ScenarioResult total;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const ScenarioResult one = RunScenario(seed);
    total.sent += one.sent;
    total.handled += one.handled;
    total.reported += one.reported;
    total.lost += one.lost;
    total.joins += one.joins;
    total.leaves += one.leaves;
    total.kills += one.kills;
    if (::testing::Test::HasFailure()) {
      break;
    }
  }
  // The runs must have exercised what they claim to.
  EXPECT_GT(total.joins, 5);
  EXPECT_GT(total.leaves, 5);
  EXPECT_GT(total.kills, 5);
  EXPECT_GT(total.handled, total.sent * 9 / 10);
  std::cout << "sent " << total.sent << " handled " << total.handled << " reported "
            << total.reported << " lost " << total.lost << " joins " << total.joins << " leaves "
            << total.leaves << " kills " << total.kills << "\n";
}

}  // namespace
}  // namespace troupe::node::sharding_test
