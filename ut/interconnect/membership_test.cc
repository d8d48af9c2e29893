// SPDX-License-Identifier: Apache-2.0
//
// The nameservice seam under the deterministic runtime: a node that joins the table of a running
// cluster gets sessions (from the watch, or from the first event routed to it), a node that is not
// a member is refused both ways, the peer table only grows, a node that leaves the table is gone
// (and found again when it comes back), and a client node that never listens is reached over the
// connections it dials.
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/testing/pipe_network.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect {
namespace {

using testing::DispatchOptions;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::EvIcPing;
using testutil::EvIcPong;

NodeEndpoint Endpoint(NodeId node) {
  return {.node = node, .host = "node", .port = static_cast<uint16_t>(7000 + node)};
}

DispatchOptions Within(absl::Duration time) { return {.max_time = time}; }

// A nameservice that never tells anyone it changed: a new member is found only when asked.
class QuietNameservice final : public Nameservice {
 public:
  explicit QuietNameservice(std::vector<NodeEndpoint> members) : table_(members) {}
  std::optional<NodeEndpoint> Resolve(NodeId node) const override { return table_.Resolve(node); }
  std::vector<NodeEndpoint> Members() const override { return table_.Members(); }
  NameserviceWatch Watch(std::function<void()> /*on_change*/) override { return {}; }
  void Set(const NodeEndpoint& endpoint) { table_.Set(endpoint); }

 private:
  StaticNameservice table_;
};

// Sends a tracked ping from an edge actor of `from` to echo@`to` and returns what came back.
EventHandlePtr Ping(PipeCluster& cluster, NodeId from, NodeId to) {
  TestRuntime& rt = *cluster.runtime;
  const ActorId edge = rt.AllocateEdgeActor(from);
  rt.Send(std::make_unique<EventHandle>(ServiceId("echo", to), edge, std::make_unique<EvIcPing>(),
                                        kTrackDelivery));
  return rt.GrabEdgeEvent(edge, std::nullopt, Within(absl::Seconds(5)));
}

// A cluster of nodes 1..names.size()-1, each asking its own nameservice.
std::unique_ptr<PipeCluster> Cluster(std::vector<std::shared_ptr<Nameservice>> names) {
  const auto nodes = static_cast<uint32_t>(names.size() - 1);
  return std::make_unique<PipeCluster>(nodes, 1, nullptr, absl::Microseconds(50), std::move(names));
}

std::shared_ptr<StaticNameservice> Table(std::vector<NodeId> nodes) {
  std::vector<NodeEndpoint> members;
  for (const NodeId node : nodes) {
    members.push_back(Endpoint(node));
  }
  return std::make_shared<StaticNameservice>(members);
}

TEST(MembershipTest, ANodeThatJoinsTheTableGetsSessionsWithoutARestart) {
  auto names1 = Table({1, 2});
  auto names2 = Table({1, 2});
  auto names3 = Table({1, 2, 3});
  auto cluster = Cluster({nullptr, names1, names2, names3});
  TestRuntime& rt = *cluster->runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2); }, Within(absl::Seconds(5))));
  EXPECT_FALSE(cluster->HasSession(1, 3)) << "node 1 does not know node 3 yet";

  EventHandlePtr refused = Ping(*cluster, 1, 3);
  ASSERT_NE(refused, nullptr);
  ASSERT_EQ(refused->type(), kEvUndelivered);
  EXPECT_EQ(refused->Get<EvUndelivered>()->reason, UndeliveredReason::kNoRoute);

  names1->Set(Endpoint(3));  // node 3 joins: the watch opens a proxy, which dials (1 < 3)
  names2->Set(Endpoint(3));
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 3) && cluster->Up(2, 3); },
                               Within(absl::Seconds(5))));
  for (const NodeId from : {1u, 2u}) {
    EventHandlePtr pong = Ping(*cluster, from, 3);
    ASSERT_NE(pong, nullptr);
    EXPECT_EQ(pong->type(), EvIcPong::kEventType) << pong->ToString();
  }
  EXPECT_EQ(cluster->Session(1, 3).sessions, 1u);
  EXPECT_EQ(cluster->Session(1, 2).sessions, 1u) << "the running session was not disturbed";
}

TEST(MembershipTest, AMemberFoundOnlyByRoutingGetsAProxyOnTheFirstEvent) {
  auto names1 = std::make_shared<QuietNameservice>(std::vector<NodeEndpoint>{Endpoint(1)});
  auto names2 = Table({1, 2});
  auto cluster = Cluster({nullptr, names1, names2});
  TestRuntime& rt = *cluster->runtime;
  rt.DispatchEvents(Within(absl::Milliseconds(300)));
  EXPECT_TRUE(cluster->ics[1]->Counters().empty()) << "node 1 has no peer yet";

  names1->Set(Endpoint(2));  // nobody is told; the first event routed to node 2 finds it
  EventHandlePtr pong = Ping(*cluster, 1, 2);
  ASSERT_NE(pong, nullptr);
  EXPECT_EQ(pong->type(), EvIcPong::kEventType) << pong->ToString();
  ASSERT_TRUE(cluster->HasSession(1, 2));
  EXPECT_TRUE(cluster->Session(1, 2).up);
}

TEST(MembershipTest, ANodeOutsideTheAcceptorsTableIsRefused) {
  auto names1 = Table({1, 2});
  auto names2 = Table({2});  // node 2 does not count node 1 as a member
  auto cluster = Cluster({nullptr, names1, names2});
  TestRuntime& rt = *cluster->runtime;
  CapturingLogSink logs;
  rt.DispatchEvents(Within(absl::Seconds(1)));
  EXPECT_TRUE(logs.Contains("is not another node of this cluster's table"));
  ASSERT_TRUE(cluster->HasSession(1, 2));
  EXPECT_FALSE(cluster->Session(1, 2).connected);
  EXPECT_FALSE(cluster->Session(1, 2).up) << "no session with a node that refuses us";

  names2->Set(Endpoint(1));  // admitted: the next dial goes through
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2); }, Within(absl::Seconds(5))));
}

TEST(MembershipTest, ANodeThatLeavesTheTableIsGoneUntilItComesBack) {
  auto names1 = Table({1, 2});
  auto names2 = Table({1, 2});
  auto cluster = Cluster({nullptr, names1, names2});
  TestRuntime& rt = *cluster->runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2); }, Within(absl::Seconds(5))));
  const ActorId subscriber = rt.AllocateEdgeActor(1);
  ASSERT_TRUE(cluster->ics[1]->SubscribeSession(2, subscriber).ok());
  ASSERT_TRUE(rt.GrabEdgeEvent<EvNodeConnected>(subscriber, Within(absl::Seconds(1))));

  CapturingLogSink logs;
  names1->Remove(2);  // node 2 leaves node 1's table (its lease expired, say)
  auto lost = rt.GrabEdgeEvent<EvNodeDisconnected>(subscriber, Within(absl::Seconds(1)));
  ASSERT_TRUE(lost) << "the session ended at once, not after the dead-peer timeout";
  EXPECT_EQ(lost->node, 2u);
  EXPECT_TRUE(logs.Contains("node 2 left the cluster"));
  EXPECT_FALSE(cluster->Session(1, 2).up);
  EventHandlePtr refused = Ping(*cluster, 1, 2);
  ASSERT_NE(refused, nullptr);
  ASSERT_EQ(refused->type(), kEvUndelivered);
  EXPECT_EQ(refused->Get<EvUndelivered>()->reason, UndeliveredReason::kNoRoute);
  rt.DispatchEvents(Within(absl::Seconds(2)));
  EXPECT_FALSE(cluster->Session(1, 2).connected) << "node 2's dials are refused meanwhile";

  names1->Set(Endpoint(2));  // back: dialled again, a new session
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2); }, Within(absl::Seconds(5))));
  EventHandlePtr pong = Ping(*cluster, 1, 2);
  ASSERT_NE(pong, nullptr);
  EXPECT_EQ(pong->type(), EvIcPong::kEventType) << pong->ToString();
}

// Node 2 leaves node 1's table while node 1's dial to it is in its handshake, and comes back
// after that handshake ended: node 1 dials again and the session comes up. (The scenario runner
// found it: a dial that completed while its peer was out of the table was closed but still
// counted as in progress, so node 1 never dialled again.)
TEST(MembershipTest, ANodeThatLeavesDuringADialIsDialledWhenItComesBack) {
  auto names1 = Table({1, 2});
  auto names2 = Table({1, 2});
  auto cluster = Cluster({nullptr, names1, names2});
  TestRuntime& rt = *cluster->runtime;
  // Node 1's proxy dials at its first step; its handshake needs a round trip (100 us).
  rt.DispatchEvents({.max_time = absl::Microseconds(20), .jump_timers = false});
  names1->Remove(2);
  rt.DispatchEvents(Within(absl::Milliseconds(300)));
  EXPECT_FALSE(cluster->Session(1, 2).up);
  names1->Set(Endpoint(2));
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2); }, Within(absl::Seconds(5))));
}

TEST(MembershipTest, AClientNodeDialsAndIsReachedOverItsOwnConnection) {
  // Node 1 is a client: it has no address and never listens; node 2 (higher id) would otherwise
  // be the one waiting to be dialled.
  const NodeEndpoint client{.node = 1, .host = "", .port = 0, .client = true};
  auto names1 = std::make_shared<StaticNameservice>(std::vector<NodeEndpoint>{client, Endpoint(2)});
  auto names2 = std::make_shared<StaticNameservice>(std::vector<NodeEndpoint>{client, Endpoint(2)});
  auto cluster = Cluster({nullptr, names1, names2});
  TestRuntime& rt = *cluster->runtime;
  EXPECT_EQ(cluster->ics[1]->port(), 0) << "a client listens nowhere";
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(1, 2) && cluster->Up(2, 1); },
                               Within(absl::Seconds(5))));
  for (const auto& [from, to] : {std::pair<NodeId, NodeId>{1, 2}, {2, 1}}) {
    EventHandlePtr pong = Ping(*cluster, from, to);
    ASSERT_NE(pong, nullptr);
    EXPECT_EQ(pong->type(), EvIcPong::kEventType) << from << "->" << to << ": " << pong->ToString();
  }
  EXPECT_EQ(cluster->Session(1, 2).connections, 1u) << "one connection, dialled by the client";
}

}  // namespace
}  // namespace troupe::interconnect
