// SPDX-License-Identifier: Apache-2.0
//
// etcd as operators deploy it, with real etcd processes on loopback (/usr/bin/etcd, Debian's
// etcd-server): a three-member cluster whose member a node uses is killed (the node keeps its
// lease and follows the table through another member; a list whose first endpoint is dead works
// from the start), etcd over TLS with client certificates (scripts/make-test-certs.sh --etcd:
// the right certificate joins, a missing or foreign one or an untrusted server fails at once
// with the reason), and an advertised port that is not the listen port (the others dial it
// through a loopback relay, as through a NAT; with a static table, interconnect.listen moves the
// bind while the others dial the table's entry). Every process is started by the test and ended by
// its pid; every wait is bounded.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/log.h"
#include "interconnect/testing/free_ports.h"
#include "node/etcd_nameservice.h"
#include "node/internal/etcd_client.h"
#include "node/node.h"
#include "ut/integration/etcd_server.h"
#include "ut/integration/fault_proxy.h"
#include "ut/interconnect/ic_test_util.h"

// A namespace of its own: the unity build puts this file next to others with helpers of the same
// names.
namespace troupe::interconnect::etcd_ops {
namespace {

using node::EtcdNameservice;
using node::Node;
using testutil::EtcdServer;
using testutil::Eventually;
using testutil::kEtcdBinary;

#define TROUPE_REQUIRE_ETCD()                                                        \
  if (::access(std::string(kEtcdBinary).c_str(), X_OK) != 0) {                       \
    GTEST_FAIL() << "no etcd: install Debian's etcd-server (scripts/setup.sh does)"; \
  }

// A node of cluster `cluster` with membership in etcd at `endpoints`.
proto::ActorSystemConfig EtcdNodeConfig(const std::string& cluster,
                                        const std::vector<std::string>& endpoints) {
  proto::ActorSystemConfig config;
  config.mutable_scheduler()->set_resolution_us(1000);
  proto::InterconnectConfig& ic = *config.mutable_interconnect();
  ic.set_cluster_id(cluster);
  ic.set_heartbeat_interval_ms(100);
  proto::EtcdConfig& etcd = *ic.mutable_etcd();
  for (const std::string& endpoint : endpoints) {
    etcd.add_endpoints(endpoint);
  }
  etcd.set_lease_ttl_s(2);
  etcd.set_connect_timeout_ms(5000);
  return config;
}

std::unique_ptr<Node> StartNode(const proto::ActorSystemConfig& config) {
  absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(config);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? std::move(*node) : nullptr;
}

bool Knows(Node& node, NodeId peer) {
  return node.interconnect()->nameservice()->Resolve(peer).has_value();
}

// Waits until `node` knows `peer` from etcd and has a session with it.
bool Connected(Node& node, NodeId peer) {
  if (!Eventually([&] { return Knows(node, peer); }, absl::Seconds(10))) {
    ADD_FAILURE() << "node " << node.id() << " never learned of node " << peer;
    return false;
  }
  const absl::Status up = node.WaitForPeer(peer, absl::Seconds(10));
  EXPECT_TRUE(up.ok()) << up;
  return up.ok();
}

// -- several endpoints ------------------------------------------------------------------------

TEST(EtcdFailoverTest, ANodeKeepsItsLeaseAndFollowsTheTableWhenItsMemberDies) {
  TROUPE_REQUIRE_ETCD();
  std::vector<std::unique_ptr<EtcdServer>> members;
  for (const char* name : {"a", "b", "c"}) {
    members.push_back(std::make_unique<EtcdServer>(name));
  }
  const std::string cluster = EtcdServer::Cluster(members);
  for (const std::unique_ptr<EtcdServer>& member : members) {
    member->Launch(cluster);
  }
  for (const std::unique_ptr<EtcdServer>& member : members) {
    ASSERT_TRUE(member->WaitServing());
  }
  EtcdServer& a = *members[0];
  const std::string b = members[1]->endpoint();
  const std::string c = members[2]->endpoint();
  CapturingLogSink logs;
  std::unique_ptr<Node> first = StartNode(EtcdNodeConfig("failover", {a.endpoint(), b, c}));
  std::unique_ptr<Node> second = StartNode(EtcdNodeConfig("failover", {b, c}));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(Connected(*first, second->id()));
  ASSERT_TRUE(Connected(*second, first->id()));

  a.Kill();
  // The lease is 2 s: had the first node kept calling the dead member, it would be gone from the
  // second node's table within about 2 s.
  const absl::Time killed = absl::Now();
  while (absl::Now() - killed < absl::Seconds(4)) {
    ASSERT_TRUE(Knows(*second, first->id()))
        << "node " << first->id() << " left the table "
        << absl::FormatDuration(absl::Now() - killed) << " after its etcd member died";
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto* names = dynamic_cast<EtcdNameservice*>(first->interconnect()->nameservice().get());
  ASSERT_NE(names, nullptr);
  EXPECT_TRUE(names->reachable());

  // A list whose first endpoint is dead works from the start; and the first node sees the newcomer
  // through the member it moved to.
  const absl::Time starting = absl::Now();
  std::unique_ptr<Node> third = StartNode(EtcdNodeConfig("failover", {a.endpoint(), b, c}));
  ASSERT_NE(third, nullptr);
  const absl::Duration start = absl::Now() - starting;
  EXPECT_LT(start, absl::Seconds(3));
  ASSERT_TRUE(Connected(*first, third->id()));
  ASSERT_TRUE(Connected(*third, first->id()));
  const NodeId gone = second->id();
  second->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(Eventually([&] { return !Knows(*first, gone); }, absl::Seconds(5)))
      << "the first node follows the table through its new member";

  // Once per node that used the dead member: the first node (its lease, watch and writes share
  // one choice) and the third (at its start).
  const std::vector<std::string> switches =
      logs.LinesWith(absl::StrCat("etcd at ", a.endpoint(), " did not answer"));
  EXPECT_EQ(switches.size(), 2u) << absl::StrJoin(switches, "\n");
  for (const std::string& line : switches) {
    EXPECT_TRUE(absl::StrContains(line, absl::StrCat("moving to ", b))) << line;
  }
  std::printf("node start with a dead first endpoint: %s\n", absl::FormatDuration(start).c_str());
}

TEST(EtcdFailoverTest, AMemberThatHangsIsLeftBeforeTheLeaseExpires) {
  TROUPE_REQUIRE_ETCD();
  EtcdServer etcd("hang");
  ASSERT_TRUE(etcd.Start());
  // The first endpoint is a relay to the same etcd that can swallow every byte while its
  // connections stay up: a member that hangs instead of refusing.
  testutil::FaultProxy relay(etcd.client_port());
  const std::string hung = absl::StrCat("http://127.0.0.1:", relay.port());
  proto::ActorSystemConfig config = EtcdNodeConfig("hang", {hung, etcd.endpoint()});
  config.mutable_interconnect()->mutable_etcd()->set_lease_ttl_s(3);
  std::unique_ptr<Node> first = StartNode(config);
  std::unique_ptr<Node> second = StartNode(EtcdNodeConfig("hang", {etcd.endpoint()}));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(Connected(*second, first->id()));
  ASSERT_TRUE(Connected(*first, second->id()));

  relay.Blackhole(true);
  const absl::Time hanging = absl::Now();
  while (absl::Now() - hanging < absl::Seconds(5)) {
    ASSERT_TRUE(Knows(*second, first->id()))
        << "node " << first->id() << " lost its 3 s lease "
        << absl::FormatDuration(absl::Now() - hanging) << " after its member hung";
    absl::SleepFor(absl::Milliseconds(50));
  }
  // The watch left the hung member with the other calls (it would wait 30 s for news there).
  std::unique_ptr<Node> third = StartNode(EtcdNodeConfig("hang", {etcd.endpoint()}));
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(Eventually([&] { return Knows(*first, third->id()); }, absl::Seconds(5)));
  relay.Blackhole(false);
}

// -- TLS ----------------------------------------------------------------------------------------

// Certificates of scripts/make-test-certs.sh --etcd --foreign-ca, made once for the suite.
class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::access(std::string(kEtcdBinary).c_str(), X_OK) != 0 ||
        std::system("command -v openssl >/dev/null 2>&1") != 0) {
      return;  // SetUp fails every test with the reason
    }
    std::string dir = (std::filesystem::temp_directory_path() / "troupe-etcd-tls-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) {
      return;
    }
    certs = new std::string(dir);
    const std::string command =
        absl::StrCat("bash ", TROUPE_MAKE_TEST_CERTS, " --etcd --foreign-ca ", dir, " >/dev/null");
    if (std::system(command.c_str()) != 0) {
      return;
    }
    etcd = new EtcdServer("tls", EtcdServer::Tls{.ca_file = Path("ca.crt"),
                                                 .cert_file = Path("etcd-server.crt"),
                                                 .key_file = Path("etcd-server.key"),
                                                 .client = {.ca_file = Path("ca.crt"),
                                                            .cert_file = Path("etcd-client.crt"),
                                                            .key_file = Path("etcd-client.key")}});
    if (!etcd->Start()) {
      delete etcd;
      etcd = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete etcd;
    etcd = nullptr;
    if (certs != nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(*certs, ignored);
      delete certs;
      certs = nullptr;
    }
  }
  void SetUp() override {
    ASSERT_NE(etcd, nullptr) << "no etcd over TLS: it needs /usr/bin/etcd and the openssl CLI "
                                "(scripts/setup.sh installs both)";
  }

  static std::string Path(const std::string& file) { return absl::StrCat(*certs, "/", file); }

  // A node of `cluster` over TLS, trusting `ca` and presenting `client` (empty: no certificate).
  static proto::ActorSystemConfig Config(const std::string& cluster, const std::string& client,
                                         const std::string& ca = "ca") {
    proto::ActorSystemConfig config = EtcdNodeConfig(cluster, {etcd->endpoint()});
    proto::EtcdTlsConfig& tls = *config.mutable_interconnect()->mutable_etcd()->mutable_tls();
    tls.set_ca_file(Path(ca + ".crt"));
    if (!client.empty()) {
      tls.set_cert_file(Path(client + ".crt"));
      tls.set_key_file(Path(client + ".key"));
    }
    return config;
  }

  // Starts a node that must fail: returns its status, and checks that it failed soon.
  static absl::Status Refused(proto::ActorSystemConfig config) {
    config.mutable_interconnect()->mutable_etcd()->set_connect_timeout_ms(2000);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(config);
    const absl::Duration took = absl::Now() - start;
    EXPECT_FALSE(node.ok()) << "a node joined that should not have";
    EXPECT_LT(took, absl::Seconds(4)) << "no hang: connect_timeout_ms is 2 s";
    return node.ok() ? absl::OkStatus() : node.status();
  }

  static std::string* certs;
  static EtcdServer* etcd;
};

std::string* EtcdTlsTest::certs = nullptr;
EtcdServer* EtcdTlsTest::etcd = nullptr;

TEST_F(EtcdTlsTest, NodesWithTheRightClientCertificateJoinAndFollowEachOther) {
  std::unique_ptr<Node> first = StartNode(Config("tls", "etcd-client"));
  std::unique_ptr<Node> second = StartNode(Config("tls", "etcd-client"));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->id(), 1u);
  EXPECT_EQ(second->id(), 2u);
  ASSERT_TRUE(Connected(*first, second->id())) << "the watch works over TLS";
  ASSERT_TRUE(Connected(*second, first->id()));
  const NodeId gone = second->id();
  second->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(Eventually([&] { return !Knows(*first, gone); }, absl::Seconds(5)));
}

TEST_F(EtcdTlsTest, AMissingOrForeignClientCertificateOrAnUntrustedServerFailsWithTheReason) {
  // Over TLS 1.3 the client's handshake ends before etcd checks its certificate: the refusal
  // shows as a broken connection (kUnavailable, with a hint) or as etcd's alert.
  const absl::Status none = Refused(Config("tls-refused", ""));
  EXPECT_TRUE(absl::IsUnavailable(none) || absl::IsUnauthenticated(none)) << none;
  EXPECT_TRUE(absl::StrContains(none.message(), etcd->endpoint())) << none;
  EXPECT_TRUE(absl::StrContains(none.message(), "certificate")) << none;
  std::printf("no client certificate: %s\n", std::string(none.message()).c_str());

  const absl::Status foreign = Refused(Config("tls-refused", "foreign-etcd-client"));
  EXPECT_TRUE(absl::IsUnavailable(foreign) || absl::IsUnauthenticated(foreign)) << foreign;
  EXPECT_TRUE(absl::StrContains(foreign.message(), "certificate")) << foreign;
  std::printf("a foreign client certificate: %s\n", std::string(foreign.message()).c_str());

  // The node trusts another CA than the one that signed etcd's certificate.
  const absl::Status untrusted = Refused(Config("tls-refused", "etcd-client", "foreign-ca"));
  EXPECT_TRUE(absl::IsUnauthenticated(untrusted)) << untrusted;
  EXPECT_TRUE(absl::StrContains(untrusted.message(), "certificate")) << untrusted;
  std::printf("an untrusted server: %s\n", std::string(untrusted.message()).c_str());
}

TEST_F(EtcdTlsTest, BadTlsFieldsAreRefusedBeforeEtcdIsAsked) {
  proto::ActorSystemConfig missing = Config("tls-bad", "etcd-client");
  missing.mutable_interconnect()->mutable_etcd()->mutable_tls()->set_key_file(Path("none.key"));
  absl::Status status = Refused(missing);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "interconnect.etcd.tls.key_file: cannot read"))
      << status;

  proto::ActorSystemConfig plain = Config("tls-bad", "etcd-client");
  plain.mutable_interconnect()->mutable_etcd()->set_endpoints(
      0, absl::StrCat("http://", etcd->endpoint().substr(8)));
  status = Refused(plain);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "interconnect.etcd.tls: set, but")) << status;

  // A key that is not the certificate's: the client cannot be made, and says which files.
  proto::ActorSystemConfig mismatched = Config("tls-bad", "etcd-client");
  mismatched.mutable_interconnect()->mutable_etcd()->mutable_tls()->set_key_file(
      Path("etcd-server.key"));
  status = Refused(mismatched);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "interconnect.etcd.tls")) << status;
}

// -- the advertised address -------------------------------------------------------------------

TEST(EtcdAdvertiseTest, TheOthersDialTheAdvertisedPortNotTheListenPort) {
  TROUPE_REQUIRE_ETCD();
  EtcdServer etcd("advertise");
  ASSERT_TRUE(etcd.Start());
  std::unique_ptr<Node> first = StartNode(EtcdNodeConfig("advertise", {etcd.endpoint()}));
  ASSERT_NE(first, nullptr);

  // The second node listens on a fixed port and is reached through a relay on another, as
  // through a NAT; it has the higher id, so the first node dials it.
  absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  testutil::FaultProxy relay((*ports)[0]);
  proto::ActorSystemConfig config = EtcdNodeConfig("advertise", {etcd.endpoint()});
  proto::InterconnectConfig& ic = *config.mutable_interconnect();
  ic.mutable_listen()->set_host("127.0.0.1");
  ic.mutable_listen()->set_port((*ports)[0]);
  ic.mutable_advertise()->set_host("127.0.0.1");
  ic.mutable_advertise()->set_port(relay.port());
  std::unique_ptr<Node> second = StartNode(config);
  ASSERT_NE(second, nullptr);
  ASSERT_GT(second->id(), first->id());
  EXPECT_EQ(second->interconnect()->port(), (*ports)[0]);

  ASSERT_TRUE(Connected(*first, second->id()));
  const std::optional<NodeEndpoint> seen =
      first->interconnect()->nameservice()->Resolve(second->id());
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->host, "127.0.0.1");
  EXPECT_EQ(seen->port, relay.port()) << "the record in etcd has the advertised port";
  EXPECT_GE(relay.accepted(), 1u) << "the session came through the advertised port";

  // The record as etcd has it.
  node::internal::EtcdClient reader(etcd.endpoint(), absl::Seconds(2));
  absl::StatusOr<proto::etcd::RangeResponse> record =
      reader.Range(absl::StrCat("/troupe/advertise/nodes/", second->id()));
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->kvs_size(), 1);
  EXPECT_TRUE(absl::StrContains(record->kvs(0).value(), absl::StrCat(relay.port())))
      << record->kvs(0).value();
}

// With a static table the entry is what the others dial; interconnect.listen moves the bind.
TEST(StaticListenTest, ANodeBindsItsListenAddressWhileTheOthersDialItsEntry) {
  absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(2);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const uint16_t first_port = (*ports)[0];
  const uint16_t bound = (*ports)[1];
  testutil::FaultProxy relay(bound);
  proto::ActorSystemConfig config;
  config.mutable_scheduler()->set_resolution_us(1000);
  proto::InterconnectConfig& ic = *config.mutable_interconnect();
  ic.set_heartbeat_interval_ms(100);
  for (const auto& [id, port] : {std::pair<NodeId, uint16_t>{1, first_port}, {2, relay.port()}}) {
    proto::NodeAddress& entry = *ic.add_nodes();
    entry.set_node_id(id);
    entry.set_host("127.0.0.1");
    entry.set_port(port);
  }
  config.set_node_id(1);
  std::unique_ptr<Node> first = StartNode(config);
  config.set_node_id(2);
  ic.mutable_listen()->set_host("127.0.0.1");
  ic.mutable_listen()->set_port(bound);
  std::unique_ptr<Node> second = StartNode(config);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->interconnect()->port(), bound);
  const absl::Status up = first->WaitForPeer(2, absl::Seconds(10));
  ASSERT_TRUE(up.ok()) << up;
  EXPECT_GE(relay.accepted(), 1u) << "node 1 dialled node 2's entry, the relay";
}

}  // namespace
}  // namespace troupe::interconnect::etcd_ops
