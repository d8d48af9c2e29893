// SPDX-License-Identifier: Apache-2.0
//
// The usage examples of the public headers of interconnect/ and interconnect/testing/, compiled
// and run on 127.0.0.1. Each region between `[doc-example: <header>]` and `[end doc-example]` is
// the header's "Example:" block word for word (scripts/check-doc-examples.sh); around it is what
// the example leaves out and a test of what the header says it does.
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/testing/free_ports.h"
#include "interconnect/testing/pipe_network.h"
#include "interconnect/tls_transport.h"
#include "interconnect/transport.h"
#include "proto/config.pb.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::interconnect {
namespace {

enum : EventType { kEvPing = EventSpaceBegin(kUserEventSpace + 11) };
struct EvPing : EventPB<EvPing, ut::TestPayload, kEvPing> {};

// A node's config: `self` and, when given, `others` in a table on 127.0.0.1 with free ports.
proto::ActorSystemConfig NodeConfig(NodeId self, const std::vector<NodeId>& members) {
  proto::ActorSystemConfig config;
  config.set_node_id(self);
  config.mutable_interconnect()->set_cluster_id("docs");
  absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(members.size());
  EXPECT_TRUE(ports.ok()) << ports.status();
  for (size_t i = 0; ports.ok() && i < members.size(); ++i) {
    proto::NodeAddress* entry = config.mutable_interconnect()->add_nodes();
    entry->set_node_id(members[i]);
    entry->set_host("127.0.0.1");
    entry->set_port((*ports)[i]);
  }
  return config;
}

// -- interconnect/interconnect.h ------------------------------------------------------------------

// The example as a program's body: 0 when the node and its interconnect started.
int RunNodeWithInterconnect(const proto::ActorSystemConfig& config) {
  // clang-format off
  // [doc-example: interconnect/interconnect.h]
  auto system = troupe::ActorSystem::Create(config);          // config.interconnect() filled
  auto ic = troupe::interconnect::Interconnect::Start(system->get());
  if (!ic.ok()) { std::cerr << ic.status(); return 1; }
  (*system)->Send(troupe::ServiceId("echo", /*node=*/2), std::make_unique<EvPing>());
  // [end doc-example]
  // clang-format on
  return 0;
}

TEST(InterconnectExamplesTest, InterconnectStartsNextToTheSystem) {
  EXPECT_EQ(RunNodeWithInterconnect(NodeConfig(1, {1, 2})), 0);
}

// -- interconnect/nameservice.h -------------------------------------------------------------------

TEST(InterconnectExamplesTest, StaticNameserviceTakesANodeWhileRunning) {
  // Node 5: node 4, which joins, has the lower id and dials it (nothing dials 10.0.0.4).
  const proto::ActorSystemConfig config = NodeConfig(5, {5});
  absl::StatusOr<std::unique_ptr<ActorSystem>> created = ActorSystem::Create(config);
  ASSERT_TRUE(created.ok()) << created.status();
  ActorSystem* system = created->get();
  // clang-format off
  // [doc-example: interconnect/nameservice.h]
  std::shared_ptr<troupe::interconnect::StaticNameservice> names =
      troupe::interconnect::StaticNameservice::FromConfig(config.interconnect());
  auto ic = troupe::interconnect::Interconnect::Start(system, {.nameservice = names});
  names->Set({.node = 4, .host = "10.0.0.4", .port = 19001});  // node 4 joins
  // [end doc-example]
  // clang-format on
  ASSERT_TRUE(ic.ok()) << ic.status();
  std::optional<NodeEndpoint> four = names->Resolve(4);
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->host, "10.0.0.4");
}

// -- interconnect/tcp_transport.h -----------------------------------------------------------------

// The example as a function's body: it listens, dials its own listener, writes and shuts down.
absl::Status TcpRoundTrip(const std::unique_ptr<ActorSystem>& system, const ActorId& acceptor,
                          const ActorId& owner, const ActorId& late_owner,
                          const std::string& frame) {
  // clang-format off
  // [doc-example: interconnect/tcp_transport.h]
  absl::StatusOr<std::unique_ptr<Transport>> tcp = MakeTcpTransport(system.get());
  if (!tcp.ok()) { return tcp.status(); }
  absl::StatusOr<uint16_t> port = (*tcp)->Listen("127.0.0.1", 0, acceptor);
  ConnectionId id = (*tcp)->Connect("127.0.0.1", *port, owner);  // owner gets EvConnectionUp
  (*tcp)->Write(id, frame);
  (*tcp)->Shutdown();  // before the ActorSystem goes away
  // [end doc-example]
  // clang-format on
  if (!port.ok()) {
    return port.status();
  }
  if (*port == 0) {
    return absl::InternalError("port 0 listens on a free port and returns it");
  }
  // Shutdown closed everything: a later call is a no-op and reports nothing to its owner.
  (*tcp)->Connect("127.0.0.1", *port, late_owner);
  return absl::OkStatus();
}

TEST(InterconnectExamplesTest, TcpTransportConnectsToItsOwnListener) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> created =
      ActorSystem::Create(proto::ActorSystemConfig());
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<ActorSystem> system = std::move(*created);
  testing::Inbox accepted;
  testing::Inbox dialled;
  testing::Inbox dialled_late;
  ActorId acceptor = system->Register(std::make_unique<testing::Recorder<>>(&accepted));
  ActorId owner = system->Register(std::make_unique<testing::Recorder<>>(&dialled));
  ActorId late_owner = system->Register(std::make_unique<testing::Recorder<>>(&dialled_late));
  const std::string frame = "not a frame: the transport carries bytes";
  absl::Status status = TcpRoundTrip(system, acceptor, owner, late_owner, frame);
  ASSERT_TRUE(status.ok()) << status;
  // The first connection may come up before Shutdown closes it (loopback connects fast), and
  // then its owner hears nothing more: at most one EvConnectionUp and never an EvConnectionDown.
  // A Connect after Shutdown never comes up and reports nothing at all.
  EXPECT_FALSE(dialled_late.WaitFor(
      [](const std::vector<testing::Received>& events) { return !events.empty(); },
      absl::Milliseconds(200)))
      << "a Connect after Shutdown is a no-op";
  EXPECT_LE(dialled.OfType(kEvConnectionUp).size(), 1u);
  EXPECT_TRUE(dialled.OfType(kEvConnectionDown).empty())
      << "Shutdown closes the connection without telling its own owner";
}

// -- interconnect/testing/free_ports.h ------------------------------------------------------------

absl::Status PickTwoPorts() {
  // clang-format off
  // [doc-example: interconnect/testing/free_ports.h]
  absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(2);
  if (!ports.ok()) { return ports.status(); }
  // node 1 listens on 127.0.0.1:(*ports)[0], node 2 on 127.0.0.1:(*ports)[1]
  // [end doc-example]
  // clang-format on
  if (ports->size() != 2 || (*ports)[0] == (*ports)[1]) {
    return absl::InternalError("expected two distinct ports");
  }
  return absl::OkStatus();
}

TEST(InterconnectExamplesTest, FreeLoopbackPortsGivesDistinctPorts) {
  absl::Status status = PickTwoPorts();
  EXPECT_TRUE(status.ok()) << status;
}

// -- interconnect/tls_transport.h -----------------------------------------------------------------

// The example as a function's body, in a directory holding ca.crt and node1's certificate.
absl::Status StartTls(const std::unique_ptr<ActorSystem>& system, const ActorId& acceptor,
                      const ActorId& owner, const std::string& frame) {
  // clang-format off
  // [doc-example: interconnect/tls_transport.h]
  absl::StatusOr<std::unique_ptr<Transport>> tls = MakeTlsTransport(
      system.get(), {.ca_file = "ca.crt", .cert_file = "node1.crt", .key_file = "node1.key"});
  if (!tls.ok()) { return tls.status(); }                // names the file at fault
  absl::StatusOr<uint16_t> port = (*tls)->Listen("127.0.0.1", 0, acceptor);
  ConnectionId id = (*tls)->Connect("127.0.0.1", *port, owner);  // owner gets EvConnectionUp
  (*tls)->Write(id, frame);                               // sent once the handshake is done
  (*tls)->Shutdown();                                     // before the ActorSystem goes away
  // [end doc-example]
  // clang-format on
  return port.status();
}

TEST(InterconnectExamplesTest, TlsTransportStartsFromCertificateFiles) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl CLI is needed to make the test certificates";
  }
  std::string directory = (std::filesystem::temp_directory_path() / "troupe-doc-XXXXXX").string();
  ASSERT_NE(mkdtemp(directory.data()), nullptr);
  ASSERT_EQ(
      std::system(
          absl::StrCat("bash ", TROUPE_MAKE_TEST_CERTS, " ", directory, " 1 >/dev/null").c_str()),
      0);
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(directory);
  absl::StatusOr<std::unique_ptr<ActorSystem>> created =
      ActorSystem::Create(proto::ActorSystemConfig());
  ASSERT_TRUE(created.ok()) << created.status();
  testing::Inbox inbox;
  ActorId recorder = (*created)->Register(std::make_unique<testing::Recorder<>>(&inbox));
  EXPECT_TRUE(StartTls(*created, recorder, recorder, "bytes").ok());
  std::filesystem::remove("node1.key");
  absl::Status missing = StartTls(*created, recorder, recorder, "bytes");
  EXPECT_NE(missing.message().find("node1.key"), std::string::npos) << missing;
  std::filesystem::current_path(previous);
  std::filesystem::remove_all(directory);
}

// -- interconnect/testing/pipe_network.h ----------------------------------------------------------

TEST(InterconnectExamplesTest, PipeNetworkCutsAConnection) {
  const proto::ActorSystemConfig config = NodeConfig(0, {1, 2});
  // clang-format off
  // [doc-example: interconnect/testing/pipe_network.h]
  // config.interconnect() lists nodes 1 and 2. The network outlives the nodes that use it.
  troupe::interconnect::PipeNetwork network(absl::Milliseconds(1));  // of simulated time
  troupe::testing::TestRuntime runtime(
      {.nodes = 2, .config = config, .simulated_interconnect = false});
  std::vector<std::unique_ptr<troupe::interconnect::Interconnect>> ics;  // before the runtime
  for (troupe::NodeId node : {1u, 2u}) {
    troupe::ActorSystem* system = &runtime.node(node);
    ics.push_back(*troupe::interconnect::Interconnect::Start(
        system, {.transport = network.TransportFor(system), .incarnation = node}));
  }
  runtime.DispatchUntil([&] { return !network.ConnectionIds().empty(); });
  network.Cut(network.ConnectionIds().front());  // both ends see EvConnectionDown
  // [end doc-example]
  // clang-format on
  // The session outlives the cut connection: the dialler connects again and the session is up.
  auto connected = [&] {
    for (const SessionCounters& session : ics[0]->Counters()) {
      if (session.peer == 2 && session.up && session.connected) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(runtime.DispatchUntil(connected));
}

}  // namespace
}  // namespace troupe::interconnect
