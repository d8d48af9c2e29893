// SPDX-License-Identifier: Apache-2.0
//
// Membership in a real etcd (EtcdNameservice through troupe::node::Node, over loopback TCP): ids
// handed out by etcd, nodes that find each other with no static table, a client node that only
// dials, a node that dies and leaves when its lease expires, etcd going down and coming back, and
// two clusters sharing one etcd. The suite starts its own etcd (/usr/bin/etcd, Debian's
// etcd-server, which scripts/setup.sh installs) on free loopback ports with a temporary data
// directory, and stops it and removes the directory at the end. Every wait is bounded.
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/log.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/testing/free_ports.h"
#include "node/etcd_nameservice.h"
#include "node/internal/etcd_client.h"
#include "node/monitoring.h"
#include "node/node.h"
#include "ut/integration/etcd_server.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::interconnect {
namespace {

using node::Node;
using node::NodeOptions;
using node::internal::EtcdClient;
using testutil::EtcdServer;
using testutil::Eventually;
using testutil::kEtcdBinary;
using testutil::kSink;
using testutil::StartSink;

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::access(std::string(kEtcdBinary).c_str(), X_OK) != 0) {
      return;  // SetUp fails every test with the reason
    }
    shared_etcd = new EtcdServer();
    if (!shared_etcd->Start()) {
      delete shared_etcd;
      shared_etcd = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete shared_etcd;
    shared_etcd = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(shared_etcd, nullptr)
        << "no etcd: install Debian's etcd-server (scripts/setup.sh does)";
  }

  // A node of cluster `cluster` with membership in the suite's etcd; `client` only dials.
  static proto::ActorSystemConfig Config(const std::string& cluster, bool client = false) {
    proto::ActorSystemConfig config;
    config.mutable_scheduler()->set_resolution_us(1000);
    proto::InterconnectConfig& ic = *config.mutable_interconnect();
    ic.set_cluster_id(cluster);
    ic.set_heartbeat_interval_ms(100);
    ic.mutable_etcd()->set_endpoint(shared_etcd->endpoint());
    ic.mutable_etcd()->set_lease_ttl_s(2);
    if (client) {
      ic.mutable_listen()->set_client(true);
    }
    return config;
  }

  // Starts a node with a sink counting into `received`.
  static std::unique_ptr<Node> Start(const proto::ActorSystemConfig& config,
                                     std::atomic<uint64_t>* received) {
    NodeOptions options;
    options.on_system_start = [received](ActorSystem& system) {
      absl::StatusOr<ActorId> sink =
          system.TryRegister(std::make_unique<testutil::DataCounter>(received));
      return sink.ok() ? system.RegisterService(kSink, *sink) : sink.status();
    };
    absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(config, std::move(options));
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? std::move(*node) : nullptr;
  }

  // Waits until `node` knows `peer` from etcd (its watch may lag a start) and has a session with
  // it.
  static bool Connected(Node& node, NodeId peer) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    if (!Eventually([&] { return node.interconnect()->nameservice()->Resolve(peer).has_value(); },
                    absl::Seconds(10))) {
      ADD_FAILURE() << "node " << node.id() << " never learned of node " << peer;
      return false;
    }
    absl::Status up = node.WaitForPeer(peer, deadline - absl::Now());
    EXPECT_TRUE(up.ok()) << up;
    return up.ok();
  }

  // Sends one event from `from` to the sink of node `to`.
  static void SendData(Node& from, NodeId to, uint64_t seq) {
    from.system().Send(ServiceId(kSink.ServiceName(), to), testutil::MakeData(seq));
  }

  static EtcdServer* shared_etcd;
};

EtcdServer* EtcdTest::shared_etcd = nullptr;

TEST_F(EtcdTest, NodesGetIdsFromEtcdAndFindEachOther) {
  std::atomic<uint64_t> received1{0};
  std::atomic<uint64_t> received2{0};
  std::unique_ptr<Node> first = Start(Config("join"), &received1);
  ASSERT_NE(first, nullptr);
  const absl::Time started = absl::Now();
  std::unique_ptr<Node> second = Start(Config("join"), &received2);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->id(), 1u) << "ids start at 1 in a new cluster";
  EXPECT_EQ(second->id(), 2u);
  ASSERT_TRUE(Connected(*second, first->id()));
  SendData(*second, first->id(), 1);
  ASSERT_TRUE(Eventually([&] { return received1.load() == 1; }, absl::Seconds(10)));
  std::printf(
      "join to first event: %s (Node::Start of the joining node to its first event "
      "handled by the other)\n",
      absl::FormatDuration(absl::Now() - started).c_str());
  ASSERT_TRUE(Connected(*first, second->id()));
  SendData(*first, second->id(), 1);
  ASSERT_TRUE(Eventually([&] { return received2.load() == 1; }, absl::Seconds(10)));

  // A clean stop leaves at once: the other sees it long before the lease (2 s) would expire.
  const NodeId gone = second->id();
  const absl::Time stop = absl::Now();
  second->Shutdown(absl::Seconds(2));
  ASSERT_TRUE(Eventually([&] { return !first->interconnect()->nameservice()->Resolve(gone); },
                         absl::Seconds(5)));
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2));
  std::unique_ptr<Node> third = Start(Config("join"), &received2);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->id(), 3u) << "an id handed out is not handed out again";
}

// A node with a monitoring server publishes its port in its record; the other's status page links
// to that node's page.
TEST_F(EtcdTest, ANodePublishesItsMonitoringPortAndTheOthersLinkToItsPage) {
  std::atomic<uint64_t> received1{0};
  std::atomic<uint64_t> received2{0};
  proto::ActorSystemConfig monitored = Config("monitored");
  monitored.mutable_monitoring()->set_port(0);
  std::unique_ptr<Node> first = Start(monitored, &received1);
  ASSERT_NE(first, nullptr);
  std::unique_ptr<Node> second = Start(monitored, &received2);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(Connected(*first, second->id()));
  const std::optional<interconnect::NodeEndpoint> published =
      first->interconnect()->nameservice()->Resolve(second->id());
  ASSERT_TRUE(published.has_value());
  EXPECT_EQ(published->monitoring_port, second->monitoring()->port());
  httplib::Client client(first->monitoring()->url());
  client.set_read_timeout(10, 0);
  const httplib::Result page = client.Get("/");
  ASSERT_TRUE(page);
  const std::string link =
      absl::StrCat("http://", published->host, ":", second->monitoring()->port(), "/");
  EXPECT_NE(page->body.find("<a href=\"" + link + "\">"), std::string::npos) << page->body;
}

TEST_F(EtcdTest, ATakenIdIsRefusedAndTwoClusterIdsShareOneEtcd) {
  std::atomic<uint64_t> received{0};
  proto::ActorSystemConfig config = Config("shared-a");
  config.set_node_id(7);
  std::unique_ptr<Node> a7 = Start(config, &received);
  ASSERT_NE(a7, nullptr);
  EXPECT_EQ(a7->id(), 7u);
  absl::StatusOr<std::unique_ptr<Node>> again = Node::Start(config);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("node 7 is already a member"), std::string::npos)
      << again.status();

  proto::ActorSystemConfig other = Config("shared-b");
  other.set_node_id(7);
  std::unique_ptr<Node> b7 = Start(other, &received);
  ASSERT_NE(b7, nullptr) << "another cluster id is another table";
  std::unique_ptr<Node> b_next = Start(Config("shared-b"), &received);
  ASSERT_NE(b_next, nullptr);
  EXPECT_EQ(b_next->id(), 1u) << "each cluster hands out its own ids";
  ASSERT_TRUE(Eventually([&] { return b7->interconnect()->nameservice()->Members().size() == 2; },
                         absl::Seconds(5)));
  EXPECT_EQ(a7->interconnect()->nameservice()->Members().size(), 1u)
      << "cluster shared-a does not see shared-b's nodes";
}

TEST_F(EtcdTest, AClientNodeOnlyDialsAndIsReachedOverItsConnection) {
  std::atomic<uint64_t> server_received{0};
  std::atomic<uint64_t> client_received{0};
  std::unique_ptr<Node> server = Start(Config("clients"), &server_received);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Node> client = Start(Config("clients", /*client=*/true), &client_received);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->interconnect()->port(), 0) << "a client listens nowhere";
  std::optional<NodeEndpoint> seen;
  ASSERT_TRUE(Eventually(
      [&] {
        seen = server->interconnect()->nameservice()->Resolve(client->id());
        return seen.has_value();
      },
      absl::Seconds(5)));
  EXPECT_TRUE(seen->client);
  ASSERT_TRUE(Connected(*client, server->id()));
  ASSERT_TRUE(Connected(*server, client->id()));
  SendData(*client, server->id(), 1);
  SendData(*server, client->id(), 1);
  EXPECT_TRUE(Eventually([&] { return server_received.load() == 1 && client_received.load() == 1; },
                         absl::Seconds(10)));
}

TEST_F(EtcdTest, ANodeThatDiesLeavesWhenItsLeaseExpires) {
  std::atomic<uint64_t> received{0};
  proto::ActorSystemConfig config = Config("expiry");
  // Only the lease can end the session quickly: the dead-peer timeout is a minute.
  config.mutable_interconnect()->set_dead_peer_timeout_ms(60'000);
  std::unique_ptr<Node> survivor = Start(config, &received);
  ASSERT_NE(survivor, nullptr);
  // The dying node is a plain EtcdNameservice that joins, announces an address and then stops
  // renewing without revoking: a process that died, as far as etcd can tell.
  auto dying = std::make_unique<EtcdClient>(shared_etcd->endpoint(), absl::Seconds(2));
  absl::StatusOr<int64_t> lease = dying->Grant(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(dying
                  ->Put("/troupe/expiry/nodes/9",
                        R"({"announced":true,"host":"127.0.0.1","port":1})", *lease)
                  .ok());
  const std::shared_ptr<Nameservice>& names = survivor->interconnect()->nameservice();
  ASSERT_TRUE(Eventually([&] { return names->Resolve(9).has_value(); }, absl::Seconds(5)));
  const absl::Time last_renewal = absl::Now();
  ASSERT_TRUE(Eventually([&] { return !names->Resolve(9).has_value(); }, absl::Seconds(10)))
      << "the record of a node that stopped renewing outlives its lease";
  const absl::Duration after = absl::Now() - last_renewal;
  EXPECT_GE(after, absl::Seconds(1)) << "not before the lease";
  std::printf("a dead node left %s after its last renewal (lease 2 s)\n",
              absl::FormatDuration(after).c_str());
}

TEST_F(EtcdTest, NodesKeepTheirTableWhileEtcdIsDownAndConvergeWhenItIsBack) {
  std::atomic<uint64_t> received1{0};
  std::atomic<uint64_t> received2{0};
  CapturingLogSink logs;
  std::unique_ptr<Node> first = Start(Config("outage"), &received1);
  std::unique_ptr<Node> second = Start(Config("outage"), &received2);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(Connected(*first, second->id()));

  shared_etcd->Stop();
  ASSERT_TRUE(Eventually([&] { return logs.Contains("unreachable"); }, absl::Seconds(10)));
  EXPECT_TRUE(logs.Contains("keeping the last table (2 members)")) << "logged once per node";
  SendData(*first, second->id(), 1);
  SendData(*second, first->id(), 1);
  EXPECT_TRUE(
      Eventually([&] { return received1.load() == 1 && received2.load() == 1; }, absl::Seconds(10)))
      << "the nodes go on talking without etcd";
  EXPECT_EQ(first->interconnect()->nameservice()->Members().size(), 2u);

  ASSERT_TRUE(shared_etcd->Start());  // the same data: the records are there, their leases renewed
  ASSERT_TRUE(Eventually([&] { return logs.Contains("answers again"); }, absl::Seconds(10)));
  std::atomic<uint64_t> received3{0};
  std::unique_ptr<Node> third = Start(Config("outage"), &received3);
  ASSERT_NE(third, nullptr);
  for (Node* node : {first.get(), second.get()}) {
    EXPECT_TRUE(Connected(*node, third->id()))
        << "node " << node->id() << " follows the table again";
  }
  SendData(*third, first->id(), 2);
  EXPECT_TRUE(Eventually([&] { return received1.load() == 2; }, absl::Seconds(10)));
}

}  // namespace
}  // namespace troupe::interconnect
