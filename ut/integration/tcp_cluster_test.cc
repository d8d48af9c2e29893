// SPDX-License-Identifier: Apache-2.0
//
// Several nodes in one process, each a real ActorSystem with its Interconnect over loopback TCP:
// remote send and reply, services, ordering under load, cut/stall/blackhole through a relay,
// peers killed and restarted, refused handshakes, garbage on the port, oversized events and
// backpressure. Every wait is bounded.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "interconnect/interconnect.h"
#include "interconnect/tcp_transport.h"
#include "ut/actors/test_util.h"
#include "ut/integration/fault_proxy.h"
#include "ut/integration/socket_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::interconnect {
namespace {

using testutil::EvIcPing;
using testutil::EvIcPong;
using testutil::Inbox;
using testutil::PeerClosesAfter;
using testutil::Received;
using testutil::Recorder;

constexpr ActorId kEcho = ServiceId("echo");

struct ClusterNode {
  std::unique_ptr<ActorSystem> system;
  std::unique_ptr<Interconnect> ic;
  void Stop() {
    ic.reset();
    if (system != nullptr) {
      system->Stop();
    }
    system.reset();
  }
};

// A cluster of nodes 1..n on 127.0.0.1. `views[i]` optionally overrides the port node i+1 uses to
// reach a peer (to put a FaultProxy between them).
class TcpCluster {
 public:
  explicit TcpCluster(uint32_t nodes,
                      std::function<void(proto::InterconnectConfig&)> tune = nullptr)
      : tune_(std::move(tune)), ports_(nodes) {
    nodes_.resize(nodes + 1);
  }
  ~TcpCluster() {
    for (ClusterNode& node : nodes_) {
      node.Stop();
    }
  }
  TcpCluster(const TcpCluster&) = delete;
  TcpCluster& operator=(const TcpCluster&) = delete;
  TcpCluster(TcpCluster&&) = delete;
  TcpCluster& operator=(TcpCluster&&) = delete;

  uint16_t port(NodeId node) const { return ports_.port(node); }
  // From now on `node` reaches `peer` at `port` (takes effect when `node` starts).
  void Redirect(NodeId node, NodeId peer, uint16_t port) { ports_.Redirect(node, peer, port); }

  proto::ActorSystemConfig ConfigFor(NodeId node, const std::string& cluster = "test") const {
    proto::ActorSystemConfig config = ports_.ConfigFor(node, cluster);
    for (const auto& [name, threads] : {std::pair{"User", 1}, std::pair{"IC", 1}}) {
      proto::PoolConfig* pool = config.add_pools();
      pool->set_name(name);
      pool->set_threads(threads);
      pool->set_spin_time_us(5);
    }
    // A generous timeout: on a loaded 2-core box (sanitizers, parallel builds) a busy node may not
    // answer for a second, and a session that dies drops untracked events by contract. Tests of
    // the timeout itself shorten it.
    config.mutable_interconnect()->set_dead_peer_timeout_ms(10000);
    if (tune_) {
      tune_(*config.mutable_interconnect());
    }
    return config;
  }

  void Start(NodeId node, const std::string& cluster = "test") {
    ClusterNode& n = nodes_[node];
    n.system = testutil::MakeSystem(ConfigFor(node, cluster));
    ASSERT_NE(n.system, nullptr);
    ASSERT_TRUE(
        n.system->RegisterService(kEcho, n.system->Register(std::make_unique<testutil::Echo>()))
            .ok());
    absl::StatusOr<std::unique_ptr<Interconnect>> ic = Interconnect::Start(n.system.get());
    ASSERT_TRUE(ic.ok()) << ic.status();
    n.ic = std::move(*ic);
  }
  void StartAll() {
    for (NodeId node = 1; node < nodes_.size(); ++node) {
      Start(node);
    }
  }
  void Kill(NodeId node) { nodes_[node].Stop(); }

  ActorSystem& system(NodeId node) { return *nodes_[node].system; }
  Interconnect& ic(NodeId node) { return *nodes_[node].ic; }

  SessionCounters Session(NodeId node, NodeId peer) const {
    for (const SessionCounters& counters : nodes_[node].ic->Counters()) {
      if (counters.peer == peer) {
        return counters;
      }
    }
    return {};
  }
  bool WaitConnected(NodeId a, NodeId b, absl::Duration timeout = absl::Seconds(10)) const {
    return testutil::Eventually([&] { return Session(a, b).connected && Session(b, a).connected; },
                                timeout);
  }

 private:
  std::function<void(proto::InterconnectConfig&)> tune_;
  testutil::LoopbackPorts ports_;
  std::vector<ClusterNode> nodes_;
};

std::unique_ptr<EvIcPing> Ping(uint64_t seq) {
  auto ping = std::make_unique<EvIcPing>();
  ping->record.set_seq(seq);
  return ping;
}

TEST(TcpClusterTest, SendAndReplyThroughServicesOfThreeNodes) {
  TcpCluster cluster(3);
  cluster.StartAll();
  Inbox inbox;
  const ActorId me = cluster.system(2).Register(std::make_unique<Recorder>(&inbox));
  cluster.system(2).Send(ServiceId("echo", 1), Ping(1), kTrackDelivery, 11, me);
  cluster.system(2).Send(ServiceId("echo", 3), Ping(3), kTrackDelivery, 33, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong, 2));
  std::vector<uint64_t> cookies;
  for (const Received& pong : inbox.OfType(testutil::kEvIcPong)) {
    cookies.push_back(pong.cookie);
    EXPECT_EQ(pong.sender.node_id(), pong.cookie / 11) << "answered by the echo of that node";
  }
  std::sort(cookies.begin(), cookies.end());
  EXPECT_EQ(cookies, (std::vector<uint64_t>{11, 33}));
  EXPECT_TRUE(inbox.OfType(kEvUndelivered).empty());
  EXPECT_TRUE(cluster.WaitConnected(1, 3));
}

TEST(TcpClusterTest, OrderingUnderLoadFromSeveralSenders) {
  TcpCluster cluster(3);
  cluster.StartAll();
  testutil::SequenceLog log;
  const uint64_t kCount = testutil::Scaled(20000, 2000);
  const ActorId receiver =
      cluster.system(2).Register(std::make_unique<testutil::SequenceChecker>(&log));
  for (const NodeId from : {1u, 1u, 3u, 3u}) {
    cluster.system(from).Register(
        std::make_unique<testutil::SequenceSender>(receiver, kCount, 500, 64));
  }
  ASSERT_TRUE(testutil::Eventually([&] { return log.total() >= 4 * kCount; }, absl::Seconds(60)))
      << log.Summary();
  EXPECT_EQ(log.in_order(), 4 * kCount) << log.Summary();
  for (const NodeId from : {1u, 3u}) {
    EXPECT_EQ(cluster.Session(2, from).sessions, 1u) << "no session died under load";
    EXPECT_EQ(cluster.Session(2, from).protocol_errors, 0u);
  }
}

// The same guarantees when the sockets are served by a thread of the transport's own
// (interconnect.io_thread) rather than by the IC pool's workers (the default).
TEST(TcpClusterTest, OrderingUnderLoadWithTheIoOnAThreadOfItsOwn) {
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) { ic.set_io_thread(true); });
  cluster.StartAll();
  testutil::SequenceLog log;
  const uint64_t kCount = testutil::Scaled(20000, 2000);
  const ActorId receiver =
      cluster.system(2).Register(std::make_unique<testutil::SequenceChecker>(&log));
  for (int sender = 0; sender < 2; ++sender) {
    cluster.system(1).Register(
        std::make_unique<testutil::SequenceSender>(receiver, kCount, 500, 64));
  }
  ASSERT_TRUE(testutil::Eventually([&] { return log.total() >= 2 * kCount; }, absl::Seconds(60)))
      << log.Summary();
  EXPECT_EQ(log.in_order(), 2 * kCount) << log.Summary();
  EXPECT_EQ(cluster.Session(2, 1).sessions, 1u);
  EXPECT_EQ(cluster.Session(2, 1).protocol_errors, 0u);
}

TEST(TcpClusterTest, CutsAndStallsThroughARelayLoseNothing) {
  TcpCluster cluster(2);
  testutil::FaultProxy relay(cluster.port(2));
  cluster.Redirect(1, 2, relay.port());
  cluster.StartAll();
  ASSERT_TRUE(cluster.WaitConnected(1, 2));
  testutil::SequenceLog log;
  const uint64_t kCount = testutil::Scaled(30000, 4000);
  const ActorId receiver =
      cluster.system(2).Register(std::make_unique<testutil::SequenceChecker>(&log));
  cluster.system(1).Register(
      std::make_unique<testutil::SequenceSender>(receiver, kCount, 200, 100));
  for (int round = 1; round <= 6; ++round) {
    ASSERT_TRUE(
        testutil::Eventually([&] { return log.total() >= round * kCount / 8; }, absl::Seconds(30)))
        << log.Summary();
    if (round % 2 == 0) {
      relay.Stall();
      absl::SleepFor(absl::Milliseconds(200));
      relay.Resume();
    } else {
      relay.Cut();
    }
  }
  ASSERT_TRUE(testutil::Eventually([&] { return log.total() >= kCount; }, absl::Seconds(60)))
      << log.Summary();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(log.total(), kCount) << log.Summary();
  EXPECT_EQ(log.in_order(), kCount) << log.Summary();
  EXPECT_EQ(relay.cuts(), 3u);
  EXPECT_GE(relay.accepted(), 4u) << "node 1 redialled after every cut";
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u) << "the session outlived its connections";
}

TEST(TcpClusterTest, BlackholedPeerIsDeclaredDeadAndANewSessionFollows) {
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) {
    ic.set_heartbeat_interval_ms(50);
    ic.set_dead_peer_timeout_ms(500);
  });
  testutil::FaultProxy relay(cluster.port(2));
  cluster.Redirect(1, 2, relay.port());
  cluster.StartAll();
  Inbox inbox;
  const ActorId me = cluster.system(1).Register(std::make_unique<Recorder>(&inbox));
  cluster.system(1).Send(ServiceId("echo", 2), Ping(1), kSubscribeOnSession, 1, me);
  ASSERT_TRUE(inbox.WaitForType(kEvNodeConnected));
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong));
  relay.Blackhole(true);
  const absl::Time start = absl::Now();
  cluster.system(1).Send(ServiceId("echo", 2), Ping(2), kTrackDelivery | kGenerateUnsureUndelivered,
                         2, me);
  ASSERT_TRUE(inbox.WaitForType(kEvNodeDisconnected));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << "detected within the timeout (+ slack)";
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered));
  const Received lost = inbox.OfType(kEvUndelivered)[0];
  EXPECT_EQ(lost.reason, UndeliveredReason::kDisconnected);
  EXPECT_TRUE(lost.unsure) << "it was written into the black hole";
  EXPECT_EQ(lost.undelivered_cookie, 2u);
  relay.Blackhole(false);
  cluster.system(1).Send(ServiceId("echo", 2), Ping(3), kSubscribeOnSession, 3, me);
  ASSERT_TRUE(inbox.WaitForType(kEvNodeConnected, 2));
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong, 2));
  EXPECT_EQ(cluster.Session(1, 2).sessions, 2u);
}

TEST(TcpClusterTest, KilledPeerReportsEventsAndARestartedPeerGetsANewSession) {
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) {
    ic.set_heartbeat_interval_ms(50);
    ic.set_dead_peer_timeout_ms(600);
  });
  cluster.StartAll();
  Inbox inbox;
  const ActorId me = cluster.system(1).Register(std::make_unique<Recorder>(&inbox));
  cluster.system(1).Send(ServiceId("echo", 2), Ping(1), kSubscribeOnSession, 1, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong));
  const uint64_t first_incarnation = cluster.ic(2).incarnation();
  cluster.Kill(2);
  cluster.system(1).Send(ServiceId("echo", 2), Ping(2), kTrackDelivery, 2, me);
  ASSERT_TRUE(inbox.WaitForType(kEvNodeDisconnected));
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered));
  EXPECT_EQ(inbox.OfType(kEvUndelivered)[0].reason, UndeliveredReason::kDisconnected);
  EXPECT_EQ(inbox.OfType(kEvUndelivered)[0].undelivered_cookie, 2u);

  cluster.Start(2);
  EXPECT_NE(cluster.ic(2).incarnation(), first_incarnation);
  cluster.system(1).Send(ServiceId("echo", 2), Ping(3), kSubscribeOnSession, 3, me);
  ASSERT_TRUE(inbox.WaitForType(kEvNodeConnected, 2));
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong, 2));
  EXPECT_EQ(cluster.Session(1, 2).sessions, 2u);
}

// The peer restarts before the old session timed out: the handshake shows a new incarnation,
// the old session ends at once and its in-flight events are reported.
TEST(TcpClusterTest, QuickRestartEndsTheOldSessionAndReportsItsInFlightEvents) {
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) { ic.set_dead_peer_timeout_ms(20000); });
  testutil::FaultProxy relay(cluster.port(2));
  cluster.Redirect(1, 2, relay.port());
  cluster.StartAll();
  Inbox inbox;
  const ActorId me = cluster.system(1).Register(std::make_unique<Recorder>(&inbox));
  cluster.system(1).Send(ServiceId("echo", 2), Ping(1), kSubscribeOnSession, 1, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong));
  relay.Stall();
  for (uint64_t i = 10; i < 15; ++i) {
    cluster.system(1).Send(ServiceId("echo", 2), Ping(i),
                           kTrackDelivery | kGenerateUnsureUndelivered, i, me);
  }
  ASSERT_TRUE(testutil::Eventually([&] { return cluster.Session(1, 2).unacked_bytes > 0; },
                                   absl::Seconds(10)));
  cluster.Kill(2);
  cluster.Start(2);
  relay.Resume();
  relay.Cut();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(inbox.WaitForType(kEvNodeDisconnected));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "well before the 20 s timeout";
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered, 5));
  for (const Received& lost : inbox.OfType(kEvUndelivered)) {
    EXPECT_EQ(lost.reason, UndeliveredReason::kDisconnected);
    EXPECT_TRUE(lost.unsure);
  }
  cluster.system(1).Send(ServiceId("echo", 2), Ping(20), kNoFlags, 20, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong, 2));
}

TEST(TcpClusterTest, WrongClusterIsRefusedWithAReason) {
  CapturingLogSink logs;
  TcpCluster cluster(2);
  cluster.Start(1);
  cluster.Start(2, "other-cluster");
  ASSERT_TRUE(
      testutil::Eventually([&] { return logs.Contains("belongs to cluster"); }, absl::Seconds(10)));
  EXPECT_FALSE(cluster.Session(1, 2).up);
  EXPECT_FALSE(cluster.Session(2, 1).up);
}

TEST(TcpClusterTest, GarbageOnThePortClosesThatConnectionOnly) {
  CapturingLogSink logs;
  TcpCluster cluster(2);
  cluster.StartAll();
  ASSERT_TRUE(cluster.WaitConnected(1, 2));
  EXPECT_TRUE(PeerClosesAfter(cluster.port(2), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(PeerClosesAfter(cluster.port(2), std::string(10000, '\xff')));
  EXPECT_TRUE(logs.Contains("refused incoming connection"));
  Inbox inbox;
  const ActorId me = cluster.system(1).Register(std::make_unique<Recorder>(&inbox));
  cluster.system(1).Send(ServiceId("echo", 2), Ping(1), kNoFlags, 1, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong));
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u) << "the session was never disturbed";
}

TEST(TcpClusterTest, OversizedEventIsRefusedAndTheSessionGoesOn) {
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) { ic.set_max_event_size(64 * 1024); });
  cluster.StartAll();
  Inbox inbox;
  const ActorId me = cluster.system(1).Register(std::make_unique<Recorder>(&inbox));
  auto big = std::make_unique<EvIcPing>();
  big->record.set_text(std::string(100 * 1024, 'b'));
  cluster.system(1).Send(ServiceId("echo", 2), std::move(big), kTrackDelivery, 1, me);
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered));
  EXPECT_EQ(inbox.OfType(kEvUndelivered)[0].reason, UndeliveredReason::kTooLarge);
  auto fits = std::make_unique<EvIcPing>();
  fits->record.set_text(std::string(60 * 1024, 'f'));
  cluster.system(1).Send(ServiceId("echo", 2), std::move(fits), kTrackDelivery, 2, me);
  ASSERT_TRUE(inbox.WaitForType(testutil::kEvIcPong));
  EXPECT_EQ(inbox.OfType(kEvUndelivered).size(), 1u);
}

TEST(TcpClusterTest, StalledReceiverKeepsUnacknowledgedBytesBounded) {
  constexpr uint64_t kLimit = 256 * 1024;
  TcpCluster cluster(2, [](proto::InterconnectConfig& ic) {
    ic.set_max_unacked_bytes(kLimit);
    ic.set_dead_peer_timeout_ms(20000);
  });
  testutil::FaultProxy relay(cluster.port(2));
  cluster.Redirect(1, 2, relay.port());
  cluster.StartAll();
  ASSERT_TRUE(cluster.WaitConnected(1, 2));
  testutil::SequenceLog log;
  constexpr uint64_t kCount = 2000;  // 2000 × 16 KiB = 32 MiB, 128 times the limit
  const ActorId receiver =
      cluster.system(2).Register(std::make_unique<testutil::SequenceChecker>(&log));
  relay.Stall();
  cluster.system(1).Register(
      std::make_unique<testutil::SequenceSender>(receiver, kCount, kCount, 16 * 1024));
  ASSERT_TRUE(testutil::Eventually(
      [&] { return cluster.Session(1, 2).queued_events + log.total() >= kCount / 2; },
      absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));
  const SessionCounters stalled = cluster.Session(1, 2);
  EXPECT_LE(stalled.unacked_bytes, kLimit + (256u << 10) + 16 * 1024) << "limit plus one frame";
  EXPECT_GT(stalled.queued_events, kCount / 2) << "the rest waits in the proxy";
  EXPECT_GE(stalled.backpressure_stalls, 1u);
  relay.Resume();
  ASSERT_TRUE(testutil::Eventually([&] { return log.total() >= kCount; }, absl::Seconds(60)))
      << log.Summary();
  EXPECT_EQ(log.in_order(), kCount);
}

}  // namespace
}  // namespace troupe::interconnect
