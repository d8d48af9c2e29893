// SPDX-License-Identifier: Apache-2.0
//
// The interconnect against misconfigured peers and overload, under the deterministic runtime over
// pipes: limits agreed at the handshake, refusals both sides can read (logged once, counted,
// redialled with backoff), failed connections that must not become a reconnect storm, the bytes
// held per peer and the control events that pass them, certificates that must name the node, and
// events sent around a peer's restart.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/testing/pipe_network.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect {
namespace {

using testing::TestRuntime;
using testutil::EvIcPing;
using testutil::EvIcPong;

size_t CountLines(const CapturingLogSink& sink, std::string_view needle) {
  size_t count = 0;
  for (const std::string& line : sink.Lines()) {
    count += line.find(needle) != std::string::npos ? 1 : 0;
  }
  return count;
}

int64_t Refusals(TestRuntime& rt, NodeId node, const char* direction) {
  return rt.node(node)
      .metrics()
      .Value("troupe_interconnect_refusals_total", {{"direction", direction}})
      .value_or(-1);
}

// Pings node `to`'s echo service from an edge actor of `from` and waits for the pong.
bool PingPong(TestRuntime& rt, NodeId from, NodeId to, uint64_t seq) {
  const ActorId edge = rt.AllocateEdgeActor(from);
  auto ping = std::make_unique<EvIcPing>();
  ping->record.set_seq(seq);
  rt.Send(std::make_unique<EventHandle>(ServiceId("echo", to), edge, std::move(ping)));
  auto pong = rt.GrabEdgeEvent<EvIcPong>(edge, Within(absl::Seconds(5)));
  return pong && pong->record.seq() == seq;
}

// Hardening, mismatched limits: node 1 takes 8 MiB events, node 2 only 4 KiB. An event node 2
// cannot take is refused at node 1 with kTooLarge; the session stays up and nothing is redialled.
TEST(HardeningTest, MismatchedLimitsRefuseTheEventAtTheSender) {
  PipeCluster cluster(2, 1, nullptr, absl::Microseconds(50), {},
                      [](NodeId node, proto::InterconnectConfig& ic) {
                        ic.set_max_event_size(node == 1 ? 8u << 20 : 4096);
                      });
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  const ActorId edge = rt.AllocateEdgeActor(1);
  rt.Send(std::make_unique<EventHandle>(ServiceId("echo", 2), edge,
                                        testutil::MakeData(1, 512 << 10), kTrackDelivery, 7));
  auto undelivered = rt.GrabEdgeEvent<EvUndelivered>(edge, Within(absl::Seconds(2)));
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kTooLarge)
      << UndeliveredReasonName(undelivered->reason);
  EXPECT_EQ(undelivered.handle().cookie(), 7u);
  // Small events still flow, on the same connection, for a while.
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(PingPong(rt, 1, 2, seq)) << seq;
  }
  rt.AdvanceTime(absl::Seconds(3));
  ASSERT_TRUE(PingPong(rt, 1, 2, 4));
  EXPECT_EQ(cluster.Session(1, 2).connections, 1u) << "no reconnect storm";
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u);
  EXPECT_EQ(cluster.Session(1, 2).protocol_errors, 0u);
  EXPECT_EQ(cluster.Session(2, 1).protocol_errors, 0u);
  EXPECT_EQ(cluster.Session(1, 2).held_bytes, 0u) << "the refused event gave its budget back";
}

// Case 3: nodes of different clusters. The acceptor tells the dialler why; both log it once
// (with the remote address) however often the dialler tries; the dialler backs off; every
// refusal is counted.
TEST(HardeningTest, RefusalsAreReadBothSidesLoggedOnceAndBackedOff) {
  CapturingLogSink sink;
  PipeCluster cluster(
      2, 1, [](proto::InterconnectConfig& ic) { ic.set_max_redial_delay_ms(1600); },
      absl::Microseconds(50), {},
      [](NodeId node, proto::InterconnectConfig& ic) {
        ic.set_cluster_id(node == 1 ? "blue" : "green");
      });
  TestRuntime& rt = *cluster.runtime;
  rt.AdvanceTime(absl::Seconds(10));
  const std::string why = "node 1 belongs to cluster \"blue\"; this node belongs to \"green\"";
  EXPECT_EQ(CountLines(sink, absl::StrCat("refused incoming connection from pipe-from-node1:")),
            1u);
  EXPECT_EQ(CountLines(sink, absl::StrCat("(node 1): ", why)), 1u);
  EXPECT_EQ(CountLines(sink, absl::StrCat("node 2 at node:7002: it refused the connection: ", why)),
            1u)
      << "the dialler learns the acceptor's reason";
  const int64_t refused = Refusals(rt, 2, "incoming");
  // Pauses of 0.1, 0.2, 0.4, 0.8 and then 1.6 s: about 9 tries in 10 s (not 100, one a tick).
  EXPECT_GE(refused, 4);
  EXPECT_LE(refused, 10);
  EXPECT_EQ(Refusals(rt, 1, "outgoing"), refused);
  EXPECT_EQ(static_cast<int64_t>(cluster.Session(1, 2).refusals), refused);
  EXPECT_FALSE(cluster.Session(1, 2).up);
}

// A node whose certificate names another node is refused, with the reason on both sides; nodes
// whose certificates match their ids connect.
TEST(HardeningTest, ANodeCannotClaimAnotherNodesCertificate) {
  CapturingLogSink sink;
  std::unique_ptr<PipeCluster> cluster;
  PipeNetwork* network = nullptr;
  cluster = std::make_unique<PipeCluster>(3, 1, nullptr, absl::Microseconds(50));
  network = &cluster->network;
  TestRuntime& rt = *cluster->runtime;
  network->SetCertificate(&rt.node(1), 3);  // node 1 holds node 3's certificate
  network->SetCertificate(&rt.node(2), 2);
  network->SetCertificate(&rt.node(3), 3);
  rt.AdvanceTime(absl::Seconds(2));
  EXPECT_FALSE(cluster->Session(1, 2).up);
  EXPECT_TRUE(sink.Contains("(node 1): node 1 presented a certificate for node 3"));
  EXPECT_TRUE(
      sink.Contains("it refused the connection: node 1 presented a certificate for node 3"));
  EXPECT_GE(Refusals(rt, 2, "incoming"), 1);
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster->Up(2, 3); }, Within(absl::Seconds(5))));
  EXPECT_TRUE(PingPong(rt, 2, 3, 1));
}

// A transport that refuses the peer's credentials (TLS: an unknown CA) is a refusal on both
// sides, counted and backed off, not a network fault redialled at once.
TEST(HardeningTest, UnauthenticatedConnectionsAreRefusals) {
  CapturingLogSink sink;
  PipeCluster cluster(2, 1,
                      [](proto::InterconnectConfig& ic) { ic.set_max_redial_delay_ms(1600); });
  TestRuntime& rt = *cluster.runtime;
  cluster.network.SetCertificate(&rt.node(2), 2);  // node 1 has none
  rt.AdvanceTime(absl::Seconds(10));
  EXPECT_EQ(CountLines(sink, "TLS: a peer presented no trusted certificate"), 2u)
      << "once per side";
  EXPECT_GE(Refusals(rt, 1, "outgoing"), 4);
  EXPECT_LE(Refusals(rt, 1, "outgoing"), 10);
  EXPECT_EQ(Refusals(rt, 2, "incoming"), Refusals(rt, 1, "outgoing"));
}

// A transport that refuses the dialler's credentials reports the connection down before the
// accepting side has asked who it was: the refusal line still names the remote address.
TEST(HardeningTest, AnUnauthenticatedIncomingConnectionIsNamedByItsAddress) {
  CapturingLogSink sink;
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  cluster.network.SetCertificate(&rt.node(2), 2);  // node 1 has none
  rt.AdvanceTime(absl::Seconds(1));
  const std::vector<std::string> lines = sink.LinesWith("refused incoming connection from");
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines) {
    EXPECT_NE(line.find("refused incoming connection from pipe-from-node1:"), std::string::npos)
        << line;
  }
}

// Nodes of different clusters: the node that refuses the dialler says so when asked why there is
// no session, naming the refusal (not "it has not dialled").
TEST(HardeningTest, WaitForPeerNamesAnIncomingRefusal) {
  CapturingLogSink sink;
  PipeCluster cluster(2, 1, nullptr, absl::Microseconds(50), {},
                      [](NodeId node, proto::InterconnectConfig& ic) {
                        ic.set_cluster_id(node == 1 ? "blue" : "green");
                      });
  TestRuntime& rt = *cluster.runtime;
  rt.AdvanceTime(absl::Seconds(2));
  ASSERT_GE(Refusals(rt, 2, "incoming"), 1);
  const absl::Status status = cluster.ics[2]->WaitForPeer(1, absl::ZeroDuration());
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "node 1 dialled this node from pipe-from-node1:"))
      << status;
  EXPECT_TRUE(absl::StrContains(
      status.message(),
      "and was refused: node 1 belongs to cluster \"blue\"; this node belongs to \"green\" at "))
      << status;
  // The dialler names the refusal it was told.
  const absl::Status dialler = cluster.ics[1]->WaitForPeer(2, absl::ZeroDuration());
  EXPECT_TRUE(absl::StrContains(dialler.message(), "it refused the connection: node 1 belongs"))
      << dialler;
}

// The handshake actors end once their connections are handed over; their timeouts fire later,
// into nobody. Those wake-ups are the runtime's own: no dead letters in a healthy run.
TEST(HardeningTest, HandshakeTimersAfterTheHandshakeAreNoDeadLetters) {
  CapturingLogSink sink;
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  rt.AdvanceTime(absl::Seconds(10));  // past the handshake timeout (dead_peer_timeout, 3 s)
  ASSERT_TRUE(cluster.Up(1, 2));
  int64_t notices = 0;
  for (NodeId node : {1u, 2u}) {
    notices += rt.node(node).metrics().Sum("troupe_dropped_notices_total");
    EXPECT_TRUE(rt.node(node).DeadLetterCounts().empty()) << "node " << node;
  }
  EXPECT_GE(notices, 2) << "a timer of each side's handshake actor fired after it ended";
  EXPECT_EQ(CountLines(sink, "dead letter"), 0u) << sink.LinesWith("dead letter").front();
}

// A connection that fails every time it carries frames (here: a bit flipped in its first write)
// must not turn into a loop: the dialler pauses longer after each failure and the fifth failure
// in a row ends the session, reporting what it held.
TEST(HardeningTest, RepeatedFailuresEndTheSessionInsteadOfLooping) {
  CapturingLogSink sink;
  PipeCluster cluster(2, 1, [](proto::InterconnectConfig& ic) {
    ic.set_max_redial_delay_ms(3200);
    ic.set_dead_peer_timeout_ms(60'000);  // only the failure count may end the session
  });
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  const ActorId edge = rt.AllocateEdgeActor(1);
  const ActorId sink_actor = rt.AllocateEdgeActor(2);
  std::vector<ConnectionId> seen = cluster.network.ConnectionIds();
  // Every new connection gets its first write after the handshake corrupted (on both ends).
  auto corrupt_new = [&] {
    for (const ConnectionId id : cluster.network.ConnectionIds()) {
      if (std::find(seen.begin(), seen.end(), id) == seen.end()) {
        seen.push_back(id);
        cluster.network.CorruptNextWrite(id, /*skip=*/1);
      }
    }
  };
  for (const ConnectionId id : seen) {
    cluster.network.CorruptNextWrite(id);  // up already: its next frame
  }
  rt.Send(
      std::make_unique<EventHandle>(sink_actor, edge, testutil::MakeData(1), kTrackDelivery, 1));
  // When each new connection came up (each after a failure).
  std::vector<absl::Time> failures;
  uint64_t connections = cluster.Session(1, 2).connections;
  const absl::Time start = rt.Now();
  while (rt.Now() - start < absl::Seconds(30) && cluster.Session(1, 2).up) {
    rt.DispatchUntil(
        [&] {
          corrupt_new();
          return cluster.Session(1, 2).connections != connections || !cluster.Session(1, 2).up;
        },
        Within(absl::Seconds(30)));
    if (cluster.Session(1, 2).connections != connections) {
      connections = cluster.Session(1, 2).connections;
      failures.push_back(rt.Now());
    }
  }
  auto undelivered = rt.GrabEdgeEvent<EvUndelivered>(edge, Within(absl::Seconds(5)));
  ASSERT_TRUE(undelivered) << "the session ended and reported the event it held";
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
  EXPECT_LE(cluster.Session(1, 2).connections, 6u) << "a handful of tries, not a storm";
  ASSERT_GE(failures.size(), 3u);
  for (size_t i = 2; i < failures.size(); ++i) {
    EXPECT_GT(failures[i] - failures[i - 1], failures[i - 1] - failures[i - 2])
        << "the pauses grow (" << i << ")";
  }
  EXPECT_TRUE(sink.Contains("ended: 5 connections in a row failed (last: frame "));
  EXPECT_EQ(CountLines(sink, "closing the connection to node 2: "), 1u)
      << "the protocol error is logged when its streak starts, not at every try";
  // The next session is clean.
  seen = cluster.network.ConnectionIds();
  rt.AdvanceTime(absl::Seconds(4));  // the last pause
  seen = cluster.network.ConnectionIds();
  ASSERT_TRUE(PingPong(rt, 1, 2, 9));
}

// Case 2: the bytes held for a peer are bounded. With the peer's link stalled, senders offer
// far more than max_queued_bytes: what does not fit is refused at once with kOverloaded, the
// held bytes never pass the bound, and once the link flows again every admitted event arrives.
// Links whose budget a test can spend: 1 MiB unacknowledged, 4 MiB held per peer, and a dead-peer
// timeout that outlasts the test.
constexpr uint64_t kUnacked = 1u << 20;
constexpr uint64_t kQueued = 4u << 20;
void SmallBudget(proto::InterconnectConfig& ic) {
  ic.set_max_unacked_bytes(kUnacked);
  ic.set_max_event_size(1u << 20);
  ic.set_max_queued_bytes(kQueued);
  ic.set_dead_peer_timeout_ms(60'000);
}

TEST(HardeningTest, HeldBytesPerPeerAreBoundedAndOverloadIsReported) {
  PipeCluster cluster(2, 1, SmallBudget);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  testutil::SequenceLog log;
  const ActorId receiver = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Stall(id);
  }
  const ActorId edge = rt.AllocateEdgeActor(1);
  constexpr uint64_t kEvents = 1024;  // 64 MiB of 64 KiB events: 16x the bound
  uint64_t peak = 0;
  for (uint64_t seq = 1; seq <= kEvents; ++seq) {
    rt.Send(std::make_unique<EventHandle>(receiver, edge, testutil::MakeData(seq, 64 << 10),
                                          kTrackDelivery, seq));
    if (seq % 16 == 0) {
      rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(1)));
      peak = std::max(peak, cluster.Session(1, 2).held_bytes);
    }
  }
  rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(100)));
  const SessionCounters stalled = cluster.Session(1, 2);
  peak = std::max(peak, stalled.held_bytes);
  EXPECT_LE(peak, kQueued - kUnacked) << "the router admits up to the bound less the unacked copy";
  EXPECT_GE(peak, kQueued / 2) << "and uses most of it";
  EXPECT_GT(stalled.overloaded, kEvents / 2);
  uint64_t overloaded = 0;
  for (const EventHandlePtr& ev : rt.TakeEdgeEvents(edge)) {
    const auto* undelivered = ev->Get<EvUndelivered>();
    ASSERT_NE(undelivered, nullptr);
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kOverloaded);
    ++overloaded;
  }
  EXPECT_EQ(overloaded, stalled.overloaded) << "every refused event was reported to its sender";
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Resume(id);
  }
  ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() == kEvents - overloaded; },
                               Within(absl::Seconds(30))))
      << log.Summary();
  EXPECT_EQ(log.gaps(), overloaded > 0 ? log.gaps() : 0u);
  EXPECT_EQ(log.duplicates_or_reordered(), 0u);
  rt.AdvanceTime(absl::Milliseconds(500));
  EXPECT_EQ(cluster.Session(1, 2).held_bytes, 0u) << "everything acknowledged gave its bytes back";
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u);
}

// Watches `target` in Bootstrap and forwards its EvTerminated to `report_to`.
class WatchForwarder final : public Actor {
 public:
  WatchForwarder(ActorId target, ActorId report_to)
      : Actor(&WatchForwarder::StateWork), target_(target), report_to_(report_to) {}

 private:
  void Bootstrap() override { Watch(target_); }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvTerminated) {
      Forward(report_to_, ev);
    } else {
      Unhandled(ev);
    }
  }

  ActorId target_;
  ActorId report_to_;
};

// The runtime's control events pass a spent byte budget (router.h): with the links stalled and
// both nodes' budgets for each other full of data, a watched actor on node 2 that ends still
// reaches its watcher on node 1 (kStopped), and a watch node 1 asks for then still reaches its
// target on node 2 (kStopped later, not kNodeLost at once). Neither is refused, and their bytes
// are charged and given back like any event's.
TEST(HardeningTest, ControlEventsPassASpentBudget) {
  PipeCluster cluster(2, 1, SmallBudget);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  testutil::SequenceLog log;
  const ActorId sink_one = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 1);
  const ActorId sink_two = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  const ActorId ended = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  const ActorId watched_late = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  const ActorId report = rt.AllocateEdgeActor(1);
  rt.Register(std::make_unique<WatchForwarder>(ended, report), 1);
  rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(100)));  // the watch is in

  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Stall(id);
  }
  const ActorId edge_one = rt.AllocateEdgeActor(1);
  const ActorId edge_two = rt.AllocateEdgeActor(2);
  for (uint64_t seq = 1; seq <= 128; ++seq) {  // 8 MiB each way: twice the budget
    rt.Send(std::make_unique<EventHandle>(sink_two, edge_one, testutil::MakeData(seq, 64 << 10)));
    rt.Send(std::make_unique<EventHandle>(sink_one, edge_two, testutil::MakeData(seq, 64 << 10)));
    if (seq % 16 == 0) {
      rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(1)));
    }
  }
  // What is left of each budget is less than a 64 KiB event; tiny events (a smaller body than a
  // control event's) take it until one is refused.
  auto top_up = [&](NodeId from, const ActorId& sender, const ActorId& to) {
    const uint64_t before = cluster.Session(from, to.node_id()).overloaded;
    for (uint64_t seq = 1; seq <= 4096; ++seq) {
      rt.Send(std::make_unique<EventHandle>(to, sender, testutil::MakeData(seq)));
      if (cluster.Session(from, to.node_id()).overloaded > before) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(top_up(1, edge_one, sink_two)) << "node 1's budget for node 2 is spent";
  ASSERT_TRUE(top_up(2, edge_two, sink_one)) << "node 2's budget for node 1 is spent";
  const uint64_t refused_one = cluster.Session(1, 2).overloaded;
  const uint64_t refused_two = cluster.Session(2, 1).overloaded;

  rt.Send(std::make_unique<EventHandle>(ended, ActorId(), std::make_unique<EvPoison>()), 2);
  rt.Register(std::make_unique<WatchForwarder>(watched_late, report), 1);
  rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(100)));
  EXPECT_EQ(cluster.Session(1, 2).overloaded, refused_one) << "the EvWatch was admitted";
  EXPECT_EQ(cluster.Session(2, 1).overloaded, refused_two) << "the EvTerminated was admitted";
  EXPECT_TRUE(rt.TakeEdgeEvents(report).empty()) << "nothing came back while the links stall";

  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Resume(id);
  }
  const auto first = rt.GrabEdgeEvent<EvTerminated>(report, Within(absl::Seconds(30)));
  ASSERT_TRUE(first) << "the watcher heard that its target ended";
  EXPECT_EQ(first->target(), ended);
  EXPECT_EQ(first->reason(), TerminationReason::kStopped);
  rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(100)));  // the late watch is in
  EXPECT_TRUE(rt.TakeEdgeEvents(report).empty()) << "the late watch did not end at once";
  rt.Send(std::make_unique<EventHandle>(watched_late, ActorId(), std::make_unique<EvPoison>()), 2);
  const auto second = rt.GrabEdgeEvent<EvTerminated>(report, Within(absl::Seconds(30)));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->target(), watched_late);
  EXPECT_EQ(second->reason(), TerminationReason::kStopped);
  rt.AdvanceTime(absl::Milliseconds(500));
  EXPECT_EQ(cluster.Session(1, 2).held_bytes, 0u) << "every charge was given back";
  EXPECT_EQ(cluster.Session(2, 1).held_bytes, 0u) << "every charge was given back";
}

// Hardening, a restarted peer: node 2 is killed and restarted while node 1 keeps sending untracked
// pings to its echo service. Pings written into the dead connection cannot be known delivered: they
// are reported when node 1 learns of the restart (counted as dropped, untracked). Pings node 1
// still held when it learned were never sent: they go to the new incarnation and are answered.
// Every ping is answered or counted; none is lost without a trace.
TEST(HardeningTest, EventsAroundAPeerRestartAreDeliveredOrCounted) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    PipeCluster cluster(2, seed, nullptr, absl::Milliseconds(1));
    TestRuntime& rt = *cluster.runtime;
    ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
    const ActorId edge = rt.AllocateEdgeActor(1);
    uint64_t sent = 0;
    auto send = [&] {
      auto ping = std::make_unique<EvIcPing>();
      ping->record.set_seq(++sent);
      rt.Send(std::make_unique<EventHandle>(ServiceId("echo", 2), edge, std::move(ping)));
    };
    uint64_t answered = 0;
    auto drain = [&](absl::Duration within) {
      rt.DispatchUntil([] { return false; }, Within(within));
      for (const EventHandlePtr& ev : rt.TakeEdgeEvents(edge)) {
        answered += ev->type() == EvIcPong::kEventType ? 1 : 0;
      }
    };
    // Untracked pings that cannot be delivered are dropped: counted, and logged at debug level.
    CapturingLogSink sink;
    SetLogLevel(LogLevel::kDebug, LogComponent::kActors);
    const std::string ping_dropped =
        absl::StrFormat("dropped (disconnected): event 0x%08x", EvIcPing::kEventType);
    for (int i = 0; i < 20; ++i) {
      send();
    }
    drain(absl::Milliseconds(50));
    ASSERT_EQ(answered, sent);
    cluster.ics[2].reset();
    rt.KillNode(2);
    // Sent as node 1 learns that the connection is gone (some are written into it, the rest
    // queue), while node 2 is dead, and as it comes back.
    for (uint64_t i = 0; i < 10 + seed; ++i) {
      send();
      rt.DispatchUntil([] { return false; }, Within(absl::Microseconds(100 * seed)));
    }
    rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(200)));
    const uint64_t while_dead = sent;
    rt.RestartNode(2);
    SetLogLevel(LogLevel::kDebug, LogComponent::kActors);  // a node's start sets its config's
    for (int step = 0; step < 20; ++step) {
      send();
      rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(5)));
    }
    drain(absl::Seconds(2));
    rt.AdvanceTime(absl::Seconds(2));
    drain(absl::Milliseconds(100));
    SetLogLevel(LogLevel::kInfo, LogComponent::kActors);
    const uint64_t dropped = CountLines(sink, ping_dropped);
    EXPECT_EQ(answered + dropped, sent) << "answered " << answered << ", dropped " << dropped;
    EXPECT_GT(answered, while_dead)
        << "pings queued while node 2 was dead reach its new incarnation";
    EXPECT_LE(dropped, 10u + seed) << "only pings sent before node 1 saw the connection go";
  }
}

}  // namespace
}  // namespace troupe::interconnect
