// SPDX-License-Identifier: Apache-2.0
//
// The examples of the node layer's headers (node/) and of interconnect/config.h, compiled and
// run: each region between `[doc-example: <header>]` and `[end doc-example]` is the header's
// "Example:" block word for word (scripts/check-doc-examples.sh). Nodes are real, on 127.0.0.1
// with free ports. The etcd example is compiled only: it needs etcd members at 10.0.0.9-10, and
// ut/integration's etcd tests run the same calls against an etcd of their own.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/substitute.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/testing/actors.h"
#include "interconnect/config.h"
#include "interconnect/interconnect.h"
#include "interconnect/protocol.h"
#include "interconnect/testing/free_ports.h"
#include "node/config.h"
#include "node/etcd_nameservice.h"
#include "node/monitoring.h"
#include "node/node.h"
#include "ut/actors/test_events.pb.h"

namespace troupe {

enum : EventType {
  kEvNodePing = EventSpaceBegin(kUserEventSpace + 9),
};
struct EvPing : EventPB<EvPing, ut::TestPayload, kEvNodePing> {};

// interconnect/config.h: a program that checks the interconnect section itself.
absl::Status CheckInterconnectSection(const proto::ActorSystemConfig& config) {
  // clang-format off
  // [doc-example: interconnect/config.h]
  if (absl::Status s = troupe::interconnect::ValidateConfig(config.interconnect()); !s.ok()) {
    return s;
  }
  const proto::InterconnectConfig full =
      troupe::interconnect::WithDefaults(config.interconnect());
  // [end doc-example]
  // clang-format on
  return full.heartbeat_interval_ms() > 0 ? absl::OkStatus()
                                          : absl::InternalError("no default heartbeat");
}

namespace node {

// node/etcd_nameservice.h: what Node::Start does with `interconnect.etcd` (compiled only).
absl::Status JoinThroughEtcd(proto::ActorSystemConfig& config) {
  // clang-format off
  // [doc-example: node/etcd_nameservice.h]
  auto names = EtcdNameservice::Connect({.endpoints = {"http://10.0.0.9:2379",
                                                       "http://10.0.0.10:2379"},
                                         .cluster_id = "shop",
                                         .local = {.host = "0.0.0.0", .port = 0},
                                         .advertise_host = "10.0.0.7"});
  if (!names.ok()) return names.status();
  absl::StatusOr<NodeId> id = (*names)->Join(0);  // a fresh id
  if (!id.ok()) return id.status();
  config.set_node_id(*id);
  auto system = ActorSystem::Create(config);
  if (!system.ok()) return system.status();
  auto ic = interconnect::Interconnect::Start(system->get(), {.nameservice = *names});
  // [end doc-example]
  // clang-format on
  return ic.status();
}

namespace {

// node/monitoring.h: a status page and /metrics for a system of one's own.
absl::Status ServeMonitoring(const std::unique_ptr<ActorSystem>& system) {
  // clang-format off
  // [doc-example: node/monitoring.h]
  proto::MonitoringConfig config;
  config.set_port(9464);
  absl::StatusOr<std::unique_ptr<MonitoringServer>> server =
      MonitoringServer::Start(system.get(), config);
  // curl http://127.0.0.1:9464/metrics
  // [end doc-example]
  // clang-format on
  if (!server.ok()) {
    return server.status();
  }
  return (*server)->port() == 9464 ? absl::OkStatus() : absl::InternalError("another port");
}

// node/config.h: a node started from its config file.
int StartFromFile() {
  // clang-format off
  // [doc-example: node/config.h]
  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::node::LoadConfigFile("node.conf");
  if (!config.ok()) { std::cerr << config.status() << "\n"; return 3; }
  auto node = troupe::node::Node::Start(*config);
  // [end doc-example]
  // clang-format on
  if (!node.ok()) {
    return 1;
  }
  return (*node)->Shutdown(absl::Seconds(1)).flushed ? 0 : 1;
}

// node/node.h: a client that waits for its server, sends, and leaves nothing behind.
int RunClient(const proto::ActorSystemConfig& config) {
  // clang-format off
  // [doc-example: node/node.h]
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node = troupe::node::Node::Start(config);
  if (!node.ok()) { std::cerr << node.status() << "\n"; return 2; }
  if (absl::Status up = (*node)->WaitForPeer(1, absl::Seconds(10)); !up.ok()) {
    std::cerr << up << "\n";   // kDeadlineExceeded says why: unreachable, refused, no route
    return 1;
  }
  (*node)->system().Send(troupe::ServiceId("echo", 1), std::make_unique<EvPing>());
  troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(5));
  return report.flushed ? 0 : 1;
  // [end doc-example]
  // clang-format on
}

// interconnect/protocol.h: the options of a node that plays the next release.
NodeOptions NextRelease() {
  // clang-format off
  // [doc-example: interconnect/protocol.h]
  troupe::node::NodeOptions options;
  options.interconnect.protocol = troupe::interconnect::ProtocolRange{
      .oldest = 3, .newest = 4, .features = {"leave"}};
  // [end doc-example]
  // clang-format on
  return options;
}

// A two-node static table on free loopback ports, cluster "shop".
proto::ActorSystemConfig TwoNodeConfig(NodeId self, const std::vector<uint16_t>& ports) {
  proto::ActorSystemConfig config;
  config.set_node_id(self);
  config.mutable_interconnect()->set_cluster_id("shop");
  for (NodeId id = 1; id <= 2; ++id) {
    proto::NodeAddress& entry = *config.mutable_interconnect()->add_nodes();
    entry.set_node_id(id);
    entry.set_host("127.0.0.1");
    entry.set_port(ports[id - 1]);
  }
  return config;
}

TEST(NodeExamplesTest, TheInterconnectSectionIsCheckedAndFilled) {
  proto::ActorSystemConfig config;
  EXPECT_TRUE(CheckInterconnectSection(config).ok());
  config.mutable_interconnect()->add_nodes()->set_node_id(1);
  const absl::Status bad = CheckInterconnectSection(config);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("interconnect.nodes[0]"), std::string::npos) << bad;
}

TEST(NodeExamplesTest, MonitoringServesOrNamesTheAddressInUse) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = ActorSystem::Create({});
  ASSERT_TRUE(system.ok()) << system.status();
  const absl::Status served = ServeMonitoring(*system);
  // Port 9464 is the example's; on a host where something else holds it, the error names it.
  if (!served.ok()) {
    EXPECT_EQ(served.code(), absl::StatusCode::kUnavailable) << served;
    EXPECT_NE(served.message().find("9464"), std::string::npos) << served;
  }
}

TEST(NodeExamplesTest, ANodeStartsFromItsConfigFile) {
  std::string pattern = (std::filesystem::temp_directory_path() / "troupe-node-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(pattern);
  std::ofstream("node.conf") << "node_id: 1\n";
  EXPECT_EQ(StartFromFile(), 0);
  std::ofstream("node.conf") << "node_id: 1\nmonitoring { port: 70000 }\n";
  EXPECT_EQ(StartFromFile(), 3);
  std::filesystem::current_path(previous);
  std::filesystem::remove_all(pattern);
}

TEST(NodeExamplesTest, AClientWaitsForItsServerSendsAndStops) {
  absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(2);
  ASSERT_TRUE(ports.ok()) << ports.status();
  testing::Inbox pings;
  NodeOptions options;
  options.on_system_start = [&pings](ActorSystem& system) {
    const ActorId echo = system.Register(std::make_unique<testing::Recorder<>>(&pings));
    return system.RegisterService(ServiceId("echo"), echo);
  };
  absl::StatusOr<std::unique_ptr<Node>> server =
      Node::Start(TwoNodeConfig(1, *ports), std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(RunClient(TwoNodeConfig(2, *ports)), 0);
  EXPECT_TRUE(pings.WaitForType(kEvNodePing, 1, absl::Seconds(10)));
  (*server)->Shutdown(absl::Seconds(1));
}

TEST(NodeExamplesTest, ANodeOfTheNextReleaseTalksToThisOneInItsVersion) {
  absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(2);
  ASSERT_TRUE(ports.ok()) << ports.status();
  absl::StatusOr<std::unique_ptr<Node>> one = Node::Start(TwoNodeConfig(1, *ports));
  absl::StatusOr<std::unique_ptr<Node>> two = Node::Start(TwoNodeConfig(2, *ports), NextRelease());
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE((*one)->WaitForPeer(2, absl::Seconds(10)).ok());
  const std::vector<interconnect::SessionCounters> sessions = (*one)->interconnect()->Counters();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].protocol_version, 3u);
  (*two)->Shutdown(absl::Seconds(1));
  (*one)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace node
}  // namespace troupe
