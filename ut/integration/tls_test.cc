// SPDX-License-Identifier: Apache-2.0
//
// Mutual TLS between nodes on 127.0.0.1 (interconnect/tls_transport.h). The suite makes a test CA
// and certificates once, with scripts/make-test-certs.sh in a temporary directory: nodes 1-3, an
// expired node-1 certificate, a foreign CA with its own node certificates, and a certificate that
// names no node.
//   - TlsTransportTest: the transport alone with Collector actors: bytes both ways (written before
//     the handshake too), Peer() with the certified node, and refusals with their reasons on both
//     ends (foreign CA, expired, no node, a plain TCP peer), bad files naming the option.
//   - TlsClusterTest: two nodes with their Interconnect over TLS: events both ways; a foreign CA,
//     an expired certificate and a node impersonating another are refused, the reason logged on
//     both sides, and no event crosses.
// Every wait has a deadline; the "nothing arrives" checks listen for kQuiet.
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/interconnect.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/tls_transport.h"
#include "interconnect/transport.h"
#include "proto/config.pb.h"
#include "ut/actors/test_util.h"
#include "ut/integration/transport_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::interconnect {
namespace {

using testutil::EvIcPing;
using testutil::Inbox;
using testutil::Recorder;

// How long a "nothing arrives" check listens.
constexpr absl::Duration kQuiet = absl::Milliseconds(500);

// The certificates of the whole suite, made once.
class Certs {
 public:
  // Makes them (once); false when the openssl CLI is missing.
  static bool Make() {
    static const bool made = [] {
      if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
        return false;
      }
      std::string dir = (std::filesystem::temp_directory_path() / "troupe-tls-XXXXXX").string();
      if (::mkdtemp(dir.data()) == nullptr) {
        ADD_FAILURE() << "mkdtemp failed";
        return false;
      }
      Dir() = dir;
      const std::string command =
          absl::StrCat("bash ", TROUPE_MAKE_TEST_CERTS, " --expired 1 --foreign-ca --nameless ",
                       dir, " 1 2 3 >/dev/null");
      EXPECT_EQ(std::system(command.c_str()), 0) << command;
      return true;
    }();
    return made;
  }
  static void Remove() {
    if (!Dir().empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(Dir(), ignored);
    }
  }
  static std::string Path(const std::string& file) { return absl::StrCat(Dir(), "/", file); }
  // The options of certificate `name` (e.g. "node1", "foreign-node2") trusting `ca`.
  static TlsTransportOptions Options(const std::string& name, const std::string& ca = "ca") {
    return {.ca_file = Path(ca + ".crt"),
            .cert_file = Path(name + ".crt"),
            .key_file = Path(name + ".key")};
  }

 private:
  static std::string& Dir() {
    static std::string dir;
    return dir;
  }
};

class CertsEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { Certs::Remove(); }
};
const ::testing::Environment* const kCertsEnvironment =
    ::testing::AddGlobalTestEnvironment(new CertsEnvironment);

#define TROUPE_REQUIRE_CERTS()                                                   \
  if (!Certs::Make()) {                                                          \
    GTEST_SKIP() << "the openssl CLI is missing (scripts/setup.sh installs it)"; \
  }

// -- the transport alone ----------------------------------------------------------------------

// One ActorSystem with two TLS transports (or one TLS and one TCP) and a Collector for each.
class TlsTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TROUPE_REQUIRE_CERTS();
    system_ = testutil::MakeSystem();
    ASSERT_NE(system_, nullptr);
    server_owner_ = system_->Register(std::make_unique<Collector>(&server_log_));
    client_owner_ = system_->Register(std::make_unique<Collector>(&client_log_));
  }
  void TearDown() override {
    for (std::unique_ptr<Transport>* transport : {&client_, &server_}) {
      if (*transport != nullptr) {
        (*transport)->Shutdown();
      }
    }
    if (system_ != nullptr) {
      system_->Stop();
    }
  }

  // Starts the server transport with `server` and listens on a free port.
  void Serve(const TlsTransportOptions& server) {
    absl::StatusOr<std::unique_ptr<Transport>> made = MakeTlsTransport(system_.get(), server);
    ASSERT_TRUE(made.ok()) << made.status();
    server_ = std::move(*made);
    absl::StatusOr<uint16_t> port = server_->Listen("127.0.0.1", 0, server_owner_);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  // Connects a client transport made with `client` (TCP when nullopt) and writes `hello`.
  ConnectionId Dial(const std::optional<TlsTransportOptions>& client, const std::string& hello) {
    if (client.has_value()) {
      absl::StatusOr<std::unique_ptr<Transport>> made = MakeTlsTransport(system_.get(), *client);
      EXPECT_TRUE(made.ok()) << made.status();
      if (made.ok()) {
        client_ = std::move(*made);
      }
    } else {
      absl::StatusOr<std::unique_ptr<Transport>> made = MakeTcpTransport(system_.get());
      EXPECT_TRUE(made.ok()) << made.status();
      if (made.ok()) {
        client_ = std::move(*made);
      }
    }
    if (client_ == nullptr) {
      return 0;
    }
    const ConnectionId id = client_->Connect("127.0.0.1", port_, client_owner_);
    client_->Write(id, hello);  // queued until the handshake is done
    return id;
  }
  // Expects both ends to be refused: EvConnectionUp, then EvConnectionDown with kUnauthenticated
  // and a reason containing `server_reason` / `client_reason` (empty: any). No bytes cross.
  void ExpectRefused(const std::string& server_reason, const std::string& client_reason) {
    Expect(server_log_, kEvConnectionUp);
    const Seen server_down = Expect(server_log_, kEvConnectionDown);
    EXPECT_EQ(server_down.reason.code(), absl::StatusCode::kUnauthenticated) << server_down.reason;
    EXPECT_TRUE(absl::StartsWith(server_down.reason.message(), "TLS: ")) << server_down.reason;
    EXPECT_TRUE(absl::StrContains(server_down.reason.message(), server_reason))
        << server_down.reason;
    Expect(client_log_, kEvConnectionUp);
    const Seen client_down = Expect(client_log_, kEvConnectionDown);
    EXPECT_EQ(client_down.reason.code(), absl::StatusCode::kUnauthenticated) << client_down.reason;
    EXPECT_TRUE(absl::StrContains(client_down.reason.message(), client_reason))
        << client_down.reason;
    EXPECT_FALSE(server_log_.Next(kQuiet).has_value()) << "nothing after EvConnectionDown";
    EXPECT_FALSE(client_log_.Next(kQuiet).has_value());
  }

  std::unique_ptr<ActorSystem> system_;
  EventLog server_log_;
  EventLog client_log_;
  ActorId server_owner_;
  ActorId client_owner_;
  std::unique_ptr<Transport> server_;
  std::unique_ptr<Transport> client_;
  uint16_t port_ = 0;
};

TEST_F(TlsTransportTest, CarriesBytesBothWaysAndReportsTheCertifiedNodes) {
  Serve(Certs::Options("node2"));
  const ConnectionId client = Dial(Certs::Options("node1"), "hello ");
  client_->Write(client, "over TLS");
  EXPECT_EQ(Expect(client_log_, kEvConnectionUp).connection, client);
  const ConnectionId server = Expect(server_log_, kEvConnectionUp).connection;
  EXPECT_EQ(ReadBytes(server_log_, server, 14), "hello over TLS");
  const PeerInfo client_seen = server_->Peer(server);
  EXPECT_EQ(client_seen.certified_node, std::optional<NodeId>(1));
  EXPECT_TRUE(absl::StartsWith(client_seen.address, "127.0.0.1:")) << client_seen.address;

  // Many writes in a row are coalesced and arrive complete and in order.
  std::string bulk;
  for (int i = 0; bulk.size() < (size_t{1} << 20); ++i) {
    const std::string piece = absl::StrCat(i, ",");
    bulk += piece;
    server_->Write(server, piece);
  }
  EXPECT_EQ(ReadBytes(client_log_, client, bulk.size()), bulk);
  EXPECT_EQ(client_->Peer(client).certified_node, std::optional<NodeId>(2));
  EXPECT_EQ(client_->Peer(client).address, absl::StrCat("127.0.0.1:", port_));

  client_->Close(client);
  const Seen down = Expect(server_log_, kEvConnectionDown);
  EXPECT_EQ(down.reason.code(), absl::StatusCode::kUnavailable) << down.reason;
  EXPECT_EQ(down.reason.message(), "connection closed by the peer");
  EXPECT_FALSE(client_log_.Next(kQuiet).has_value()) << "Close tells its own owner nothing";
  EXPECT_EQ(server_->Peer(server).certified_node, std::nullopt) << "forgotten once down";
}

// The server's I/O runs on the system's pool (IoPoller), the client's on a thread of its own:
// Writes from four threads at once encrypt and send on those threads, while the other side
// decrypts; every record arrives whole and in its writer's order, both ways.
TEST_F(TlsTransportTest, KeepsEachWriteWholeWithConcurrentWritersOnThePoolsWorkers) {
  TlsTransportOptions server = Certs::Options("node2");
  server.tcp.io_pool = system_->config().default_pool();
  Serve(server);
  const ConnectionId client = Dial(Certs::Options("node1"), "hello");
  ASSERT_EQ(Expect(client_log_, kEvConnectionUp).connection, client);
  const ConnectionId accepted = Expect(server_log_, kEvConnectionUp).connection;
  ASSERT_EQ(ReadBytes(server_log_, accepted, 5), "hello");
  ExpectWholeWritesFromConcurrentWriters(*client_, client, server_log_, accepted);
  ExpectWholeWritesFromConcurrentWriters(*server_, accepted, client_log_, client);
}

TEST_F(TlsTransportTest, RefusesACertificateThatNamesNoNode) {
  Serve(Certs::Options("node2"));
  Dial(Certs::Options("nameless"), "hello");
  ExpectRefused(
      "TLS: the peer's certificate names no Troupe node (expected DNS:node<N> or CN=node<N>)",
      "TLS: ");
}

TEST_F(TlsTransportTest, ADiallerRefusesAServerCertificateThatNamesNoNode) {
  Serve(Certs::Options("nameless"));
  Dial(Certs::Options("node1"), "hello");
  ExpectRefused("TLS: ", "TLS: the peer's certificate names no Troupe node");
}

TEST_F(TlsTransportTest, RefusesAPeerOfAForeignCaOnBothEnds) {
  Serve(Certs::Options("node2"));
  Dial(Certs::Options("foreign-node1", "foreign-ca"), "hello");
  // The dialler checks the server's certificate first; the server hears its alert.
  ExpectRefused("TLS: tlsv1 alert unknown ca",
                "TLS: certificate verify failed: unable to get local issuer certificate");
}

TEST_F(TlsTransportTest, RefusesAnExpiredClientCertificate) {
  Serve(Certs::Options("node2"));
  Dial(Certs::Options("expired-node1"), "hello");
  // TLS 1.3: the client's handshake is done before the server checks its certificate, so the
  // refusal reaches the client as an alert on its first read.
  ExpectRefused("TLS: certificate verify failed: certificate has expired",
                "TLS: sslv3 alert certificate expired");
}

TEST_F(TlsTransportTest, RefusesAPlainTcpPeer) {
  Serve(Certs::Options("node2"));
  Dial(std::nullopt, std::string(64, 'x'));
  Expect(server_log_, kEvConnectionUp);
  const Seen server_down = Expect(server_log_, kEvConnectionDown);
  EXPECT_EQ(server_down.reason.code(), absl::StatusCode::kUnauthenticated) << server_down.reason;
  EXPECT_TRUE(absl::StartsWith(server_down.reason.message(), "TLS: ")) << server_down.reason;
  Expect(client_log_, kEvConnectionUp);
  std::optional<Seen> seen = client_log_.Next();
  while (seen.has_value() && seen->type == kEvBytesReceived) {
    seen = client_log_.Next();  // an alert record, maybe
  }
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->type, kEvConnectionDown);
  EXPECT_EQ(seen->reason.code(), absl::StatusCode::kUnavailable) << seen->reason;
}

TEST_F(TlsTransportTest, BadFilesNameTheOption) {
  auto error = [&](TlsTransportOptions options) {
    absl::StatusOr<std::unique_ptr<Transport>> made = MakeTlsTransport(system_.get(), options);
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << made.status();
    return std::string(made.status().message());
  };
  TlsTransportOptions missing = Certs::Options("node1");
  missing.cert_file = "/nonexistent/node1.crt";
  EXPECT_EQ(error(missing),
            "cert_file: cannot read /nonexistent/node1.crt: No such file or directory");
  TlsTransportOptions directory = Certs::Options("node1");
  directory.ca_file = std::filesystem::temp_directory_path().string();
  EXPECT_TRUE(absl::StrContains(error(directory), "ca_file: cannot read")) << error(directory);
  TlsTransportOptions not_pem = Certs::Options("node1");
  not_pem.ca_file = TROUPE_MAKE_TEST_CERTS;
  EXPECT_TRUE(absl::StartsWith(error(not_pem), "ca_file: cannot load ")) << error(not_pem);
  TlsTransportOptions wrong_key = Certs::Options("node1");
  wrong_key.key_file = Certs::Path("node2.key");
  EXPECT_TRUE(absl::StrContains(error(wrong_key), "is not the key of cert_file"))
      << error(wrong_key);
  TlsTransportOptions other_node = Certs::Options("node1");
  other_node.node = 2;
  EXPECT_TRUE(absl::StrContains(error(other_node), "names node 1, not this node (2)"))
      << error(other_node);
  TlsTransportOptions nameless = Certs::Options("nameless");
  nameless.node = 1;
  EXPECT_TRUE(absl::StrContains(error(nameless), "names no Troupe node")) << error(nameless);
}

// -- two nodes with their interconnects -------------------------------------------------------

// Forwards to a TLS transport and remembers every connection written to, so the test can ask
// Peer() about the connections the interconnect uses.
class SpyTransport final : public Transport {
 public:
  explicit SpyTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port,
                                  const ActorId& acceptor) override {
    return inner_->Listen(host, port, acceptor);
  }
  ConnectionId Connect(const std::string& host, uint16_t port, const ActorId& owner) override {
    return inner_->Connect(host, port, owner);
  }
  void SetOwner(ConnectionId connection, const ActorId& owner) override {
    inner_->SetOwner(connection, owner);
  }
  void Write(ConnectionId connection, std::string bytes) override {
    {
      troupe::MutexLock lock(&mu_);
      written_.insert(connection);
    }
    inner_->Write(connection, std::move(bytes));
  }
  void Close(ConnectionId connection) override { inner_->Close(connection); }
  PeerInfo Peer(ConnectionId connection) const override { return inner_->Peer(connection); }
  void Shutdown() override { inner_->Shutdown(); }

  // Returns the certified nodes of the open connections written to.
  std::set<NodeId> CertifiedPeers() const {
    std::set<ConnectionId> written;
    {
      troupe::MutexLock lock(&mu_);
      written = written_;
    }
    std::set<NodeId> nodes;
    for (const ConnectionId id : written) {
      if (std::optional<NodeId> node = inner_->Peer(id).certified_node) {
        nodes.insert(*node);
      }
    }
    return nodes;
  }

 private:
  const std::unique_ptr<Transport> inner_;
  mutable troupe::Mutex mu_;
  std::set<ConnectionId> written_ ABSL_GUARDED_BY(mu_);
};

struct Node {
  std::unique_ptr<ActorSystem> system;
  std::shared_ptr<SpyTransport> spy;
  std::unique_ptr<Interconnect> ic;
};

class TlsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { TROUPE_REQUIRE_CERTS(); }
  void TearDown() override {
    for (Node& node : nodes_) {
      node.ic.reset();
      if (node.system != nullptr) {
        node.system->Stop();
      }
    }
  }

  proto::ActorSystemConfig ConfigFor(NodeId node, const TlsTransportOptions& tls) const {
    proto::ActorSystemConfig config = ports_.ConfigFor(node, "tls");
    for (const char* name : {"User", "IC"}) {
      proto::PoolConfig* pool = config.add_pools();
      pool->set_name(name);
      pool->set_threads(1);
      pool->set_spin_time_us(5);
    }
    config.mutable_interconnect()->set_dead_peer_timeout_ms(10000);
    proto::TlsConfig& files = *config.mutable_interconnect()->mutable_tls();
    files.set_ca_file(tls.ca_file);
    files.set_cert_file(tls.cert_file);
    files.set_key_file(tls.key_file);
    return config;
  }

  // Starts `node` with the TLS files of `tls`. With `spy`, the interconnect gets a TLS transport
  // of those files (made here, so no check that the certificate names this node) behind a
  // SpyTransport; without, it makes its own from the config.
  void Start(NodeId node, const TlsTransportOptions& tls, bool spy = false) {
    Node& n = nodes_[node - 1];
    n.system = testutil::MakeSystem(ConfigFor(node, tls));
    ASSERT_NE(n.system, nullptr);
    ASSERT_TRUE(n.system
                    ->RegisterService(ServiceId("echo"),
                                      n.system->Register(std::make_unique<testutil::Echo>()))
                    .ok());
    InterconnectOptions options;
    if (spy) {
      absl::StatusOr<std::unique_ptr<Transport>> made = MakeTlsTransport(n.system.get(), tls);
      ASSERT_TRUE(made.ok()) << made.status();
      n.spy = std::make_shared<SpyTransport>(std::move(*made));
      options.transport = n.spy;
    }
    absl::StatusOr<std::unique_ptr<Interconnect>> ic = Interconnect::Start(n.system.get(), options);
    ASSERT_TRUE(ic.ok()) << ic.status();
    n.ic = std::move(*ic);
  }

  ActorSystem& system(NodeId node) { return *nodes_[node - 1].system; }
  SessionCounters Session(NodeId node, NodeId peer) const {
    for (const SessionCounters& counters : nodes_[node - 1].ic->Counters()) {
      if (counters.peer == peer) {
        return counters;
      }
    }
    return {};
  }

  // Sends a ping from node `from` to the echo of node `to`; true when its pong comes back within
  // `timeout`.
  bool PingPong(NodeId from, NodeId to, absl::Duration timeout) {
    // The recorder lives until its node stops, so its inbox lives as long as the test.
    Inbox& inbox = *inboxes_.emplace_back(std::make_unique<Inbox>());
    const ActorId me = system(from).Register(std::make_unique<Recorder>(&inbox));
    auto ping = std::make_unique<EvIcPing>();
    ping->record.set_seq(from * 10 + to);
    system(from).Send(ServiceId("echo", to), std::move(ping), kNoFlags, 7, me);
    return inbox.WaitForType(testutil::kEvIcPong, 1, timeout);
  }

  // Expects node 1 and node 2 never to connect, `reasons` to be logged (by either side) and no
  // event to cross.
  void ExpectRefused(CapturingLogSink& sink, const std::vector<std::string>& reasons) {
    for (const std::string& reason : reasons) {
      EXPECT_TRUE(testutil::Eventually([&] { return sink.Contains(reason); }, kWait))
          << "no log line contains \"" << reason << "\"; the log:\n"
          << absl::StrJoin(sink.Lines(), "\n");
    }
    EXPECT_FALSE(PingPong(1, 2, kQuiet)) << "an event crossed";
    EXPECT_FALSE(PingPong(2, 1, kQuiet)) << "an event crossed";
    EXPECT_FALSE(Session(1, 2).connected);
    EXPECT_FALSE(Session(2, 1).connected);
    EXPECT_EQ(Session(1, 2).events_received + Session(2, 1).events_received, 0u);
  }

  testutil::LoopbackPorts ports_{2};
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<Node> nodes_ = std::vector<Node>(2);
};

TEST_F(TlsClusterTest, TwoNodesExchangeEventsBothWays) {
  Start(1, Certs::Options("node1"), /*spy=*/true);
  Start(2, Certs::Options("node2"));
  EXPECT_TRUE(PingPong(1, 2, kWait));
  EXPECT_TRUE(PingPong(2, 1, kWait));
  EXPECT_TRUE(Session(1, 2).connected);
  EXPECT_EQ(nodes_[0].spy->CertifiedPeers(), std::set<NodeId>{2});
}

TEST_F(TlsClusterTest, ANodeOfAForeignCaIsRefusedWithTheReasonOnBothSides) {
  CapturingLogSink sink;
  Start(1, Certs::Options("node1"));
  Start(2, Certs::Options("foreign-node2", "foreign-ca"));
  // Node 1 dials: it refuses node 2's certificate, and node 2 hears why from the alert.
  ExpectRefused(sink, {"certificate verify failed: unable to get local issuer certificate",
                       "tlsv1 alert unknown ca"});
}

TEST_F(TlsClusterTest, AnExpiredCertificateIsRefusedWithTheReasonOnBothSides) {
  CapturingLogSink sink;
  Start(1, Certs::Options("expired-node1"));
  Start(2, Certs::Options("node2"));
  ExpectRefused(
      sink, {"certificate verify failed: certificate has expired", "alert certificate expired"});
}

TEST_F(TlsClusterTest, ANodeClaimingAnotherNodesIdIsRefused) {
  CapturingLogSink sink;
  Start(1, Certs::Options("node1"));
  // Node 3's valid certificate on the node that says it is node 2 in the handshake.
  Start(2, Certs::Options("node3"), /*spy=*/true);
  // Node 1 dials, sees node 3's certificate and node 2's hello (the handshake's check).
  ExpectRefused(sink, {"a certificate for node 3"});
}

// Blocks its pool's thread on EvKick until `release` is notified (bounded by kWait), after
// notifying `blocking`.
class PoolBlocker final : public Actor {
 public:
  PoolBlocker(absl::Notification* blocking, absl::Notification* release)
      : Actor(&PoolBlocker::StateWork), blocking_(blocking), release_(release) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == testutil::kEvKick) {
      blocking_->Notify();
      release_->WaitForNotificationWithTimeout(kWait);
      return;
    }
    Unhandled(ev);
  }

  absl::Notification* const blocking_;
  absl::Notification* const release_;
};

// A TLS handshake that fails on an accepted connection can end it before the accepting side's
// handshake actor has asked the transport who it was (here forced: node 2's interconnect pool is
// held until the transport has closed and forgotten the connection). The refusal line still
// names the remote end.
TEST_F(TlsClusterTest, ARefusedIncomingTlsConnectionIsNamedByItsAddress) {
  CapturingLogSink sink;
  Start(2, Certs::Options("foreign-node2", "foreign-ca"), /*spy=*/true);
  absl::Notification blocking;
  absl::Notification release;
  const absl::StatusOr<uint32_t> ic_pool = system(2).PoolIndex("IC");
  ASSERT_TRUE(ic_pool.ok()) << ic_pool.status();
  const ActorId blocker =
      system(2).Register(std::make_unique<PoolBlocker>(&blocking, &release), {.pool = *ic_pool});
  system(2).Send(blocker, std::make_unique<testutil::EvKick>());
  ASSERT_TRUE(blocking.WaitForNotificationWithTimeout(kWait));
  // Node 1 dials; node 2's TLS handshake refuses node 1's certificate (of a CA node 2 does not
  // trust) and the alert tells node 1. Node 2's first connection (id 1: it dials nobody) is then
  // closed and forgotten by its transport, while its listener has not even seen it come up.
  Start(1, Certs::Options("node1"));
  const bool dialler_refused =
      testutil::Eventually([&] { return !sink.LinesWith("node 2 at 127.0.0.1:").empty(); }, kWait);
  const bool forgotten =
      testutil::Eventually([&] { return nodes_[1].spy->Peer(1).address.empty(); }, kWait);
  release.Notify();
  ASSERT_TRUE(dialler_refused) << absl::StrJoin(sink.Lines(), "\n");
  ASSERT_TRUE(forgotten);
  ASSERT_TRUE(testutil::Eventually(
      [&] { return !sink.LinesWith("refused incoming connection from").empty(); }, kWait))
      << absl::StrJoin(sink.Lines(), "\n");
  // "... from 127.0.0.1:<port>: TLS: ..."
  const std::string_view from = "refused incoming connection from 127.0.0.1:";
  for (const std::string& line : sink.LinesWith("refused incoming connection from")) {
    const size_t at = line.find(from);
    ASSERT_NE(at, std::string::npos) << line;
    const size_t port = at + from.size();
    const size_t end = line.find_first_not_of("0123456789", port);
    EXPECT_GT(end, port) << line;
    EXPECT_EQ(line.compare(end, 7, ": TLS: "), 0) << line;
  }
}

TEST(TlsConfigTest, ABadFileFailsTheStartNamingTheField) {
  TROUPE_REQUIRE_CERTS();
  testutil::LoopbackPorts ports(1);
  proto::ActorSystemConfig config = ports.ConfigFor(1, "tls");
  proto::TlsConfig& tls = *config.mutable_interconnect()->mutable_tls();
  tls.set_ca_file(Certs::Path("ca.crt"));
  tls.set_cert_file("/nonexistent/node1.crt");
  tls.set_key_file(Certs::Path("node1.key"));
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem(config);
  ASSERT_NE(system, nullptr);
  absl::StatusOr<std::unique_ptr<Interconnect>> ic = Interconnect::Start(system.get());
  EXPECT_EQ(ic.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ic.status().message(),
            "interconnect.tls.cert_file: cannot read /nonexistent/node1.crt: No such file or "
            "directory");
  tls.set_cert_file(Certs::Path("node2.crt"));
  tls.set_key_file(Certs::Path("node2.key"));
  std::unique_ptr<ActorSystem> other = testutil::MakeSystem(config);
  ASSERT_NE(other, nullptr);
  ic = Interconnect::Start(other.get());
  EXPECT_TRUE(absl::StrContains(ic.status().message(), "names node 2, not this node (1)"))
      << ic.status();
  system->Stop();
  other->Stop();
}

}  // namespace
}  // namespace troupe::interconnect
