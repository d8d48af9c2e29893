// SPDX-License-Identifier: Apache-2.0
//
// Topics (node/topics.h) over loopback TCP with membership in a real etcd: three
// troupe::node::Node started with StartNodeWithTopics, subscribers on each, publishers on two.
// The suite starts its own etcd (/usr/bin/etcd, as etcd_test.cc does) on free loopback ports and
// removes it at the end. Every wait is bounded.
#include "node/topics.h"

#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "node/node.h"
#include "ut/integration/etcd_server.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/node/topics_test_util.h"

namespace troupe::node {
namespace {

using topics_testing::EvGo;
using topics_testing::Publisher;
using topics_testing::ReceivedInOrder;
using topics_testing::Subscriber;
using topics_testing::TopicsEntry;
using topics_testing::TopicsLog;
using Kind = TopicsEntry::Kind;

class TopicsClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::access(std::string(troupe::testutil::kEtcdBinary).c_str(), X_OK) != 0) {
      return;  // SetUp fails every test with the reason
    }
    etcd = new troupe::testutil::EtcdServer("troupe-topics");
    if (!etcd->Start()) {
      delete etcd;
      etcd = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete etcd;
    etcd = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(etcd, nullptr) << "no etcd: install Debian's etcd-server (scripts/setup.sh does)";
  }

  static proto::ActorSystemConfig Config(const std::string& cluster) {
    proto::ActorSystemConfig config;
    config.mutable_scheduler()->set_resolution_us(1000);
    proto::InterconnectConfig& ic = *config.mutable_interconnect();
    ic.set_cluster_id(cluster);
    ic.set_heartbeat_interval_ms(100);
    ic.mutable_etcd()->set_endpoint(etcd->endpoint());
    ic.mutable_etcd()->set_lease_ttl_s(2);
    return config;
  }

  // Waits until every node knows every other from etcd and has a session with it.
  static bool AllConnected(const std::vector<std::unique_ptr<Node>>& nodes) {
    for (const std::unique_ptr<Node>& node : nodes) {
      for (const std::unique_ptr<Node>& peer : nodes) {
        if (!troupe::testutil::Eventually(
                [&] {
                  return node->interconnect()->nameservice()->Resolve(peer->id()).has_value();
                },
                absl::Seconds(10))) {
          ADD_FAILURE() << "node " << node->id() << " never learned of node " << peer->id();
          return false;
        }
      }
      if (absl::Status up = node->WaitForPeers(absl::Seconds(10)); !up.ok()) {
        ADD_FAILURE() << up;
        return false;
      }
    }
    return true;
  }

  static troupe::testutil::EtcdServer* etcd;
};

troupe::testutil::EtcdServer* TopicsClusterTest::etcd = nullptr;

TEST_F(TopicsClusterTest, EverySubscriberGetsEveryPublishOnceInOrderAndALeavingNodeIsDropped) {
  TopicsLog log;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Node>> node = StartNodeWithTopics(Config("topics"));
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  ASSERT_TRUE(AllConnected(nodes));
  std::map<NodeId, std::vector<ActorId>> subscribers;
  for (const std::unique_ptr<Node>& node : nodes) {
    for (int i = 0; i < 2; ++i) {
      subscribers[node->id()].push_back(node->system().Register(
          std::make_unique<Subscriber>(&log, std::vector<std::string>{"t"})));
    }
  }
  ASSERT_TRUE(log.WaitForCount(Kind::kSubscribed, 6, absl::Seconds(10)));
  const ActorId first = nodes[0]->system().Register(std::make_unique<Publisher>(&log));
  const ActorId second = nodes[1]->system().Register(std::make_unique<Publisher>(&log));
  constexpr uint64_t kPerPublisher = 200;
  nodes[0]->system().Send(first, std::make_unique<EvGo>("t", kPerPublisher, /*track=*/true));
  nodes[1]->system().Send(second, std::make_unique<EvGo>("t", kPerPublisher, /*track=*/true));
  ASSERT_TRUE(log.WaitForCount(Kind::kNews, 6 * 2 * kPerPublisher, absl::Seconds(20)));
  for (const auto& [node, actors] : subscribers) {
    for (const ActorId& subscriber : actors) {
      EXPECT_TRUE(
          ReceivedInOrder(log, subscriber, {{first, kPerPublisher}, {second, kPerPublisher}}))
          << "on node " << node;
    }
  }

  // Node 3 leaves: the others drop it from their membership, so their publishes go to the two of
  // them only (a tracked copy to a node that left would come back undelivered).
  const NodeId leaving = nodes[2]->id();
  nodes[2]->Shutdown(absl::Seconds(5));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(troupe::testutil::Eventually(
        [&] { return !nodes[i]->interconnect()->nameservice()->Resolve(leaving).has_value(); },
        absl::Seconds(10)));
  }
  nodes[0]->system().Send(first, std::make_unique<EvGo>("t", 10, /*track=*/true));
  ASSERT_TRUE(log.WaitForCount(Kind::kNews, 6 * 2 * kPerPublisher + 4 * 10, absl::Seconds(20)));
  nodes[0]->Shutdown(absl::Seconds(5));
  nodes[1]->Shutdown(absl::Seconds(5));
  for (const auto& [node, actors] : subscribers) {
    for (const ActorId& subscriber : actors) {
      const uint64_t from_first = node == leaving ? kPerPublisher : kPerPublisher + 10;
      EXPECT_TRUE(ReceivedInOrder(log, subscriber, {{first, from_first}, {second, kPerPublisher}}))
          << "on node " << node;
    }
  }
  EXPECT_EQ(log.Count(Kind::kUndelivered), 0u) << "no copy was lost, none went to node " << leaving;
}

}  // namespace
}  // namespace troupe::node
