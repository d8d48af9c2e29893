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
  // Saves take a while in half of the runs, so that hand-offs overlap with traffic.
  world.save_delay = seed % 2 == 0 ? absl::Milliseconds(15) : absl::ZeroDuration();
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
  // Table changes reach the nodes one by one, up to 40 ms apart in half of the runs (views
  // disagree meanwhile), at once in the others.
  struct TableChange {
    absl::Time at;
    NodeId table = 0;
    NodeId node = 0;
    bool add = false;
  };
  std::vector<TableChange> changes;
  const bool staggered = seed % 4 < 2;
  auto change_tables = [&](NodeId node, bool add) {
    for (NodeId table = 1; table <= kScenarioNodes; ++table) {
      const absl::Duration lag = staggered ? absl::Milliseconds(static_cast<int64_t>(random() % 40))
                                           : absl::ZeroDuration();
      changes.push_back({.at = runtime.Now() + lag, .table = table, .node = node, .add = add});
    }
  };
  auto apply_due = [&](bool all) {
    for (auto it = changes.begin(); it != changes.end();) {
      if (all || it->at <= runtime.Now()) {
        if (it->add) {
          cluster.names(it->table).Set(ShardCluster::Endpoint(it->node));
        } else {
          cluster.names(it->table).Remove(it->node);
        }
        it = changes.erase(it);
      } else {
        ++it;
      }
    }
  };

  for (int tick = 0; tick < 3000; ++tick) {
    // Traffic, one event a millisecond from a random live node; half of it to five hot keys, so
    // that one sender's events to one key are often under way across a change.
    {
      const NodeId from = 1 + static_cast<NodeId>(random() % kScenarioNodes);
      const uint64_t key = chance(50) ? random() % 5 : random() % kScenarioKeys;
      if (!killed.contains(from)) {
        cluster.SendWork(from, absl::StrCat("k", key), ++seq);
      }
    }
    // Membership changes, at most one under way at a time.
    if (leaving == 0 && dying == 0 && changes.empty() && tick > 200 && tick < 2500 && chance(1) &&
        chance(40)) {
      const int what = static_cast<int>(random() % 3);
      if (what == 0 && !spare.empty()) {
        const NodeId node = *spare.begin();
        spare.erase(node);
        members.insert(node);
        change_tables(node, /*add=*/true);
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
      change_tables(dying, /*add=*/false);
      dying = 0;
    }
    if (leaving != 0 && runtime.EdgeEventCount(leave_edge) > 0) {
      // Left: it goes from the tables, then its process ends.
      members.erase(leaving);
      killed.insert(leaving);
      change_tables(leaving, /*add=*/false);
      runtime.KillNode(leaving);
      last_kill = std::max(last_kill, runtime.Now());
      leaving = 0;
    }
    apply_due(/*all=*/false);
    if (!runtime.AdvanceTime(absl::Milliseconds(1))) {
      ADD_FAILURE() << "seed " << seed << ": dispatch bound hit";
      return result;
    }
  }
  if (dying != 0) {
    change_tables(dying, /*add=*/false);
  }
  apply_due(/*all=*/true);
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
  for (uint64_t seed = 1; seed <= 50; ++seed) {
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
