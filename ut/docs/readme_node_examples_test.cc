// SPDX-License-Identifier: Apache-2.0
//
// The README's examples of several nodes, compiled and run: each region between
// `[doc-example: README.md]` and `[end doc-example]` is a README block word for word
// (scripts/check-doc-examples.sh). The nodes are real, on 127.0.0.1 with free ports, and read the
// config files the README names from a temporary working directory.
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
#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/config.h"
#include "actors/events.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/testing/free_ports.h"
#include "node/config.h"
#include "node/node.h"
#include "ut/actors/test_events.pb.h"

namespace {

enum : troupe::EventType {
  kEvPing = troupe::EventSpaceBegin(troupe::kUserEventSpace + 8),
  kEvOrder,
  kEvMembersChanged,
};
struct EvPing : troupe::EventPB<EvPing, troupe::ut::TestPayload, kEvPing> {};
struct EvOrder : troupe::EventPB<EvOrder, troupe::ut::TestPayload, kEvOrder> {};
struct EvMembersChanged : troupe::EventLocal<EvMembersChanged, kEvMembersChanged> {};

using Echo = troupe::testing::Echo<EvPing>;

// Runs the test in a fresh temporary directory (the README's config files are relative paths) and
// picks two free loopback ports for nodes 1 and 2.
class ReadmeNodeExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "troupe-readme-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    previous_ = std::filesystem::current_path();
    std::filesystem::current_path(directory_);
    absl::StatusOr<std::vector<uint16_t>> ports = troupe::interconnect::FreeLoopbackPorts(2);
    ASSERT_TRUE(ports.ok()) << ports.status();
    ports_ = *ports;
  }
  void TearDown() override {
    std::filesystem::current_path(previous_);
    std::filesystem::remove_all(directory_);
  }

  // Writes `file`: node `node` of a two-node table on 127.0.0.1, cluster "shop".
  void WriteConfig(const std::string& file, troupe::NodeId node, bool with_table = true) const {
    std::ofstream out(file);
    out << "node_id: " << node << "\ninterconnect {\n  cluster_id: \"shop\"\n";
    for (troupe::NodeId id = 1; with_table && id <= 2; ++id) {
      out << absl::Substitute("  nodes { node_id: $0 host: \"127.0.0.1\" port: $1 }\n", id,
                              ports_[id - 1]);
    }
    if (!with_table) {
      out << absl::Substitute("  nodes { node_id: 1 host: \"127.0.0.1\" port: $0 }\n", ports_[0]);
    }
    out << "}\n";
  }

  std::filesystem::path directory_;
  std::filesystem::path previous_;
  std::vector<uint16_t> ports_;
};

TEST_F(ReadmeNodeExamplesTest, NodeStartsFromItsConfigFile) {
  WriteConfig("node1.conf", 1);
  // clang-format off
  // [doc-example: README.md]
  auto system = troupe::ActorSystem::Create(*troupe::LoadConfigFile("node1.conf"));
  // Checks the interconnect section (a bad field fails the start naming it); destroy before the
  // system.
  auto ic = troupe::interconnect::Interconnect::Start(system->get());
  // [end doc-example]
  // clang-format on
  ASSERT_TRUE(system.ok()) << system.status();
  ASSERT_TRUE(ic.ok()) << ic.status();
  EXPECT_EQ((*system)->node_id(), 1u);
}

// Sends one tracked ping to node 2's echo service and counts what comes back.
class Client final : public troupe::Actor {
 public:
  explicit Client(int* pongs) : Actor(&Client::StateWork), pongs_(pongs) {}

 private:
  void Bootstrap() override {
    // clang-format off
    // [doc-example: README.md]
    Send(troupe::ServiceId("echo", 2), std::make_unique<EvPing>(),
         troupe::kTrackDelivery | troupe::kSubscribeOnSession);
    // [end doc-example]
    // clang-format on
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvPing) {
      ++*pongs_;
    }
  }

  int* pongs_;
};

TEST(ReadmeSendToAnotherNodeTest, ServiceOnAnotherNodeAnswers) {
  troupe::testing::TestRuntime runtime({.nodes = 2});
  troupe::ActorId echo = runtime.Register(std::make_unique<Echo>(), /*node=*/2);
  ASSERT_TRUE(runtime.node(2).RegisterService(troupe::ServiceId("echo"), echo).ok());
  int pongs = 0;
  runtime.Register(std::make_unique<Client>(&pongs), /*node=*/1);
  runtime.DispatchEvents();
  EXPECT_EQ(pongs, 1);
}

TEST_F(ReadmeNodeExamplesTest, WatchHearsOfAMemberThatJoins) {
  WriteConfig("orders.conf", 1, /*with_table=*/false);
  absl::StatusOr<troupe::proto::ActorSystemConfig> config = troupe::LoadConfigFile("orders.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<troupe::interconnect::StaticNameservice> table =
      troupe::interconnect::StaticNameservice::FromConfig(config->interconnect());
  troupe::testing::Inbox inbox;
  troupe::ActorId tracker;
  troupe::node::NodeOptions options;
  options.interconnect.nameservice = table;
  options.on_system_start = [&](troupe::ActorSystem& system) {
    tracker = system.Register(std::make_unique<troupe::testing::Recorder<>>(&inbox));
    return absl::OkStatus();
  };

  // clang-format off
  // [doc-example: README.md]
  auto node = troupe::node::Node::Start(*troupe::node::LoadConfigFile("orders.conf"),
                                        std::move(options));
  const auto& names = (*node)->interconnect()->nameservice();   // Members(), Resolve(node)
  troupe::interconnect::NameserviceWatch watch = names->Watch([&] {
    // After each change, on the nameservice's thread: must not block. Hand it to an actor.
    (*node)->system().Send(tracker, std::make_unique<EvMembersChanged>());
  });                                                          // destroy before the node
  // [end doc-example]
  // clang-format on

  ASSERT_TRUE(node.ok()) << node.status();
  table->Set({.node = 2, .host = "127.0.0.1", .port = ports_[1]});  // node 2 joins
  EXPECT_TRUE(inbox.WaitForType(kEvMembersChanged, 1, absl::Seconds(10)));
  watch = {};
  (*node)->Shutdown(absl::Seconds(1));
}

// Node 2 of the README's "Embedding a node in a service": serves "echo", waits for node 1, sends
// it an order and shuts down. Returns the example's exit status (0 when it ran to the end).
int RunNode2() {
  // clang-format off
  // [doc-example: README.md]
  troupe::node::NodeOptions options;
  options.on_system_start = [](troupe::ActorSystem& system) -> absl::Status {
    absl::StatusOr<troupe::ActorId> echo = system.TryRegister(std::make_unique<Echo>());
    if (!echo.ok()) return echo.status();            // kResourceExhausted: raise max_mailboxes
    return system.RegisterService(troupe::ServiceId("echo"), *echo);
  };
  auto node = troupe::node::Node::Start(*troupe::node::LoadConfigFile("node2.conf"),
                                        std::move(options));
  if (!node.ok()) { std::cerr << node.status() << "\n"; return 2; }   // names the field at fault

  // Wait for the peer instead of retrying: OK, or kDeadlineExceeded saying why (unreachable,
  // refused and why, never connected).
  if (absl::Status up = (*node)->WaitForPeer(1, absl::Seconds(10)); !up.ok()) { std::cerr << up << "\n"; return 1; }
  (*node)->system().Send(troupe::ServiceId("orders", 1), std::make_unique<EvOrder>());

  // Leave, then stop: the peers hear that this node leaves and stop sending it new events (they
  // are refused at once with Undelivered{kShutdown}); within 5 s, what they sent before is handled,
  // the replies go out and every event held for a peer is acknowledged; then the peers hear
  // goodbye and end their sessions at once. What the 5 s could not finish is reported
  // Undelivered{kShutdown} (unsure when in flight) to tracking senders, who handle it before the
  // system stops. Nothing is freed unreported.
  troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(5));
  // [end doc-example]
  // clang-format on
  return report.flushed ? 0 : 1;
}

TEST_F(ReadmeNodeExamplesTest, EmbeddedNodeServesWaitsSendsAndStops) {
  WriteConfig("node1.conf", 1);
  WriteConfig("node2.conf", 2);
  troupe::testing::Inbox orders;
  troupe::node::NodeOptions options;
  options.on_system_start = [&orders](troupe::ActorSystem& system) {
    troupe::ActorId book = system.Register(std::make_unique<troupe::testing::Recorder<>>(&orders));
    return system.RegisterService(troupe::ServiceId("orders"), book);
  };
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node1 =
      troupe::node::Node::Start(*troupe::node::LoadConfigFile("node1.conf"), std::move(options));
  ASSERT_TRUE(node1.ok()) << node1.status();

  EXPECT_EQ(RunNode2(), 0);
  EXPECT_TRUE(orders.WaitForType(kEvOrder, 1, absl::Seconds(10)));
  (*node1)->Shutdown(absl::Seconds(1));
}

}  // namespace
