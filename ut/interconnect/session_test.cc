// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's proxies and sessions under the deterministic runtime: real protocol code
// (handshake, frames, resend, heartbeats, backpressure) over an in-memory network whose faults
// the tests pull, in simulated time, replayable by seed.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/internal/stream.h"
#include "interconnect/testing/pipe_network.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect {
namespace {

using internal::HeldCharge;

using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::EvIcData;
using testutil::EvIcPing;
using testutil::EvIcPong;

TEST(SessionTest, RemoteSendAndReplyThroughServiceId) {
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  for (const NodeId from : {1u, 2u}) {
    const NodeId to = 3 - from;
    const ActorId edge = rt.AllocateEdgeActor(from);
    auto ping = std::make_unique<EvIcPing>();
    ping->record.set_seq(from);
    ping->record.set_text("hello");
    rt.Send(
        std::make_unique<EventHandle>(ServiceId("echo", to), edge, std::move(ping), kNoFlags, 77));
    auto pong = rt.GrabEdgeEvent<EvIcPong>(edge, Within(absl::Seconds(1)));
    ASSERT_TRUE(pong);
    EXPECT_EQ(pong->record.seq(), from);
    EXPECT_EQ(pong->record.text(), "hello");
    EXPECT_EQ(pong.handle().cookie(), 77u);
    EXPECT_EQ(pong.handle().sender().node_id(), to) << "the reply comes from the echo actor";
  }
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u);
  EXPECT_GE(cluster.Session(1, 2).events_sent, 1u);
  EXPECT_GE(cluster.Session(2, 1).events_received, 1u);
}

TEST(SessionTest, EventsWaitWhileTheSessionIsEstablished) {
  PipeCluster cluster(3);
  TestRuntime& rt = *cluster.runtime;
  // No dispatch yet: no connection exists when these are sent.
  const ActorId edge = rt.AllocateEdgeActor(3);
  for (uint64_t i = 1; i <= 5; ++i) {
    auto ping = std::make_unique<EvIcPing>();
    ping->record.set_seq(i);
    rt.Send(std::make_unique<EventHandle>(ServiceId("echo", 1), edge, std::move(ping)));
  }
  for (uint64_t i = 1; i <= 5; ++i) {
    auto pong = rt.GrabEdgeEvent<EvIcPong>(edge, Within(absl::Seconds(2)));
    ASSERT_TRUE(pong) << i;
    EXPECT_EQ(pong->record.seq(), i);
  }
}

TEST(SessionTest, RoutingErrorsAreReportedToTheSender) {
  PipeCluster cluster(2, 1, [](proto::InterconnectConfig& ic) { ic.set_max_event_size(1024); });
  TestRuntime& rt = *cluster.runtime;
  const ActorId edge = rt.AllocateEdgeActor(1);
  auto expect_undelivered = [&](std::unique_ptr<EventBase> event, const ActorId& to,
                                UndeliveredReason reason) {
    rt.Send(std::make_unique<EventHandle>(to, edge, std::move(event), kTrackDelivery, 5));
    auto undelivered = rt.GrabEdgeEvent<EvUndelivered>(edge, Within(absl::Seconds(1)));
    ASSERT_TRUE(undelivered);
    EXPECT_EQ(undelivered->reason, reason) << UndeliveredReasonName(undelivered->reason);
  };
  expect_undelivered(testutil::MakeData(1), ServiceId("echo", 9), UndeliveredReason::kNoRoute);
  expect_undelivered(std::make_unique<EvWakeup>(), ServiceId("echo", 2),
                     UndeliveredReason::kNotSerializable);
  expect_undelivered(testutil::MakeData(1, 4000), ServiceId("echo", 2),
                     UndeliveredReason::kTooLarge);
  // The session is unharmed: a ping still comes back.
  auto ping = std::make_unique<EvIcPing>();
  ping->record.set_seq(9);
  rt.Send(std::make_unique<EventHandle>(ServiceId("echo", 2), edge, std::move(ping)));
  EXPECT_TRUE(rt.GrabEdgeEvent<EvIcPong>(edge, Within(absl::Seconds(2))));
}

// Cuts every connection again and again while two senders stream: the receivers see every
// event once, in order (over several seeds).
// No head-of-line blocking: actor A on node 1 sends a 4 MiB event, then actor B 20 small ones, then
// A one more, all to one actor on node 2. B's ride between the chunks of A's and arrive first; A's
// large event arrives whole and once, and still before A's next one.
TEST(SessionTest, SmallEventsOvertakeALargeOneOnTheSameSession) {
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  const ActorId a = rt.AllocateEdgeActor(1);
  const ActorId b = rt.AllocateEdgeActor(1);
  const ActorId to = rt.AllocateEdgeActor(2);
  constexpr size_t kLarge = size_t{4} << 20;
  rt.Send(std::make_unique<EventHandle>(to, a, testutil::MakeData(1, kLarge)));
  std::vector<uint64_t> expected;
  for (uint64_t i = 100; i < 120; ++i) {
    rt.Send(std::make_unique<EventHandle>(to, b, testutil::MakeData(i)));
    expected.push_back(i);
  }
  rt.Send(std::make_unique<EventHandle>(to, a, testutil::MakeData(2)));
  expected.push_back(1);
  expected.push_back(2);
  std::vector<uint64_t> arrived;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto got = rt.GrabEdgeEvent<EvIcData>(to, Within(absl::Seconds(5)));
    ASSERT_TRUE(got) << "event " << i;
    arrived.push_back(got->record.seq());
    if (got->record.seq() == 1) {
      EXPECT_EQ(got->record.text().size(), kLarge) << "whole";
      EXPECT_EQ(got.handle().sender(), a);
    }
  }
  EXPECT_EQ(arrived, expected);
  rt.AdvanceTime(absl::Milliseconds(100));
  EXPECT_EQ(cluster.Session(1, 2).events_sent, 22u);
  EXPECT_EQ(cluster.Session(2, 1).events_received, 22u) << "once";
}

TEST(SessionTest, ConnectionCutsLoseAndDuplicateNothing) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    // 2 ms each way: with a batch sent every millisecond, every cut catches frames in flight.
    PipeCluster cluster(3, seed, nullptr, absl::Milliseconds(2));
    TestRuntime& rt = *cluster.runtime;
    testutil::SequenceLog log;
    constexpr uint64_t kCount = 3000;
    const ActorId receiver2 = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
    const ActorId receiver3 = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 3);
    rt.Register(std::make_unique<testutil::SequenceSender>(receiver2, kCount, 50), 1);
    rt.Register(std::make_unique<testutil::SequenceSender>(receiver3, kCount, 50), 1);
    rt.Register(std::make_unique<testutil::SequenceSender>(receiver2, kCount, 50), 3);
    // And large events, cut into chunks: a cut catches some half sent.
    constexpr uint64_t kLarge = 40;
    rt.Register(std::make_unique<testutil::SequenceSender>(receiver2, kLarge, 1, 150 << 10), 1);
    for (int cut = 1; cut <= 12; ++cut) {
      const uint64_t target = cut * 3 * kCount / 14;
      ASSERT_TRUE(
          rt.DispatchUntil([&] { return log.total() >= target; }, Within(absl::Seconds(30))))
          << log.Summary();
      cluster.CutAll();
    }
    ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() >= 3 * kCount + kLarge; },
                                 Within(absl::Seconds(60))))
        << log.Summary();
    rt.AdvanceTime(absl::Milliseconds(500));
    EXPECT_EQ(log.total(), 3 * kCount + kLarge) << log.Summary();
    EXPECT_EQ(log.in_order(), 3 * kCount + kLarge) << log.Summary();
    EXPECT_EQ(log.gaps(), 0u);
    EXPECT_EQ(log.duplicates_or_reordered(), 0u);
    EXPECT_EQ(cluster.Session(1, 2).sessions, 1u) << "cuts do not end the session";
    EXPECT_GT(cluster.Session(1, 2).connections, 5u);
    uint64_t resent = 0;
    for (NodeId node = 1; node <= 3; ++node) {
      for (const SessionCounters& s : cluster.ics[node]->Counters()) {
        resent += s.frames_resent;
      }
    }
    EXPECT_GT(resent, 0u) << "the cuts caught frames in flight";
  }
}

TEST(SessionTest, CorruptBytesCloseTheConnectionAndTheSessionRecovers) {
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  CapturingLogSink logs;
  testutil::SequenceLog log;
  const ActorId receiver = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  rt.Register(std::make_unique<testutil::SequenceSender>(receiver, 1000, 20), 1);
  // Large events too: the corrupted write may be a chunk's.
  rt.Register(std::make_unique<testutil::SequenceSender>(receiver, 30, 1, 100 << 10), 1);
  ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() >= 200; }, Within(absl::Seconds(5))));
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.CorruptNextWrite(id);
  }
  ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() >= 1030; }, Within(absl::Seconds(30))))
      << log.Summary();
  EXPECT_EQ(log.in_order(), 1030u) << log.Summary();
  EXPECT_GE(cluster.Session(1, 2).protocol_errors + cluster.Session(2, 1).protocol_errors, 1u);
  EXPECT_TRUE(logs.Contains("checksum")) << "the reason is logged";
  EXPECT_EQ(cluster.Session(1, 2).sessions, 1u);
}

// A stalled link: the sender keeps at most max_unacked_bytes (plus one frame) in flight and the
// rest waits in its queue; when the link moves again everything arrives.
TEST(SessionTest, BackpressureBoundsUnacknowledgedBytes) {
  constexpr uint64_t kLimit = 64 * 1024;
  PipeCluster cluster(2, 1, [](proto::InterconnectConfig& ic) {
    ic.set_max_unacked_bytes(kLimit);
    ic.set_dead_peer_timeout_ms(5000);
  });
  TestRuntime& rt = *cluster.runtime;
  testutil::SequenceLog log;
  const ActorId receiver = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Stall(id);
  }
  constexpr uint64_t kCount = 400;  // 400 × 4 KiB = 1.6 MiB, 25 times the limit
  rt.Register(std::make_unique<testutil::SequenceSender>(receiver, kCount, 40, 4096), 1);
  constexpr uint64_t kLarge = 10;  // and 10 × 100 KiB in chunks
  rt.Register(std::make_unique<testutil::SequenceSender>(receiver, kLarge, 1, 100 << 10), 1);
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Session(1, 2).backpressure_stalls > 0; },
                               Within(absl::Seconds(1))));
  rt.AdvanceTime(absl::Seconds(1));
  const SessionCounters stalled = cluster.Session(1, 2);
  EXPECT_LE(stalled.unacked_bytes, kLimit + (256u << 10) + 64 * 1024);
  EXPECT_GT(stalled.queued_events, 0u) << "the rest waits in the proxy";
  EXPECT_EQ(log.total(), 0u);
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Resume(id);
  }
  ASSERT_TRUE(
      rt.DispatchUntil([&] { return log.total() >= kCount + kLarge; }, Within(absl::Seconds(10))))
      << log.Summary();
  EXPECT_EQ(log.in_order(), kCount + kLarge);
  EXPECT_EQ(cluster.Session(1, 2).queued_events, 0u);
}

// The state of a WindowSender, shared with the test (TestRuntime: one thread).
struct WindowState {
  uint64_t sent = 0;
  uint64_t acked = 0;
  uint64_t out_of_order = 0;
  uint64_t overloaded = 0;
  uint64_t undelivered = 0;
};

// A sender like troupe_loadgen's: EvIcData 1..count of `payload` bytes to `target`, at most
// `window` of them not acknowledged by the receiving application (an EvIcPong per event), a new
// one as soon as an acknowledgement comes; tracked, so a refusal comes back as EvUndelivered.
class WindowSender final : public Actor {
 public:
  WindowSender(ActorId target, uint64_t count, uint64_t window, size_t payload, WindowState* state)
      : Actor(&WindowSender::StateWork),
        target_(target),
        count_(count),
        window_(window),
        payload_(payload),
        state_(state) {}

 private:
  void Bootstrap() override { Fill(); }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcPong, HandleAck);
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      default:
        Unhandled(ev);
    }
  }
  void Fill() {
    while (state_->sent < count_ && state_->sent - state_->acked < window_) {
      ++state_->sent;
      Send(target_, testutil::MakeData(state_->sent, payload_), kTrackDelivery, state_->sent);
    }
  }
  void HandleAck(EventPtr<EvIcPong> ev) {
    state_->out_of_order += ev.Get()->record.seq() == state_->acked + 1 ? 0 : 1;
    ++state_->acked;
    Fill();
  }
  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    ++state_->undelivered;
    state_->overloaded += ev.Get()->reason == UndeliveredReason::kOverloaded ? 1 : 0;
    ++state_->acked;  // resolved: the window moves on, as the load generator's does
    Fill();
  }

  const ActorId target_;
  const uint64_t count_;
  const uint64_t window_;
  const size_t payload_;
  WindowState* const state_;
};

// Answers every EvIcData with an EvIcPong of the same sequence number: the application's ack.
class Acker final : public Actor {
 public:
  Acker() : Actor(&Acker::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcData, HandleData);
      default:
        Unhandled(ev);
    }
  }
  void HandleData(EventPtr<EvIcData> ev) {
    auto ack = std::make_unique<EvIcPong>();
    ack->record.set_seq(ev.Get()->record.seq());
    Send(ev->sender(), std::move(ack));
  }
};

// A sender that keeps a window of events unacknowledged at the application level, like
// troupe_loadgen --payload=65536 --window=512 (32 MiB in flight, within the 48 MiB the router
// admits by default), is never refused: by the time an acknowledgement reaches the sender, the
// events it acknowledges no longer count against the peer's budget, so a refill of the window
// finds room. The runtime runs one handler at a time, so here the sender cannot refill while the
// proxy is still reading the batch that carried its acks; on real threads it does. The observer
// therefore checks the bytes held for the peer at the moment each ack is handed to the sender:
// never more than the events the sender still has outstanding (what a refill at once would find).
TEST(SessionTest, WindowedSenderWithinTheBudgetIsNeverRefused) {
  constexpr uint64_t kWindow = 512;
  constexpr size_t kPayload = 64 << 10;
  constexpr uint64_t kCount = 3 * kWindow;
  PipeCluster cluster(2);  // default limits: max_queued_bytes 64 MiB, max_unacked_bytes 16 MiB
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  // What one data event is charged (the largest sequence number encodes longest).
  EventHandle sample(ActorId(), ActorId(), testutil::MakeData(kCount, kPayload));
  ASSERT_TRUE(sample.Serialize().ok());
  const uint64_t charge = HeldCharge(sample);
  ASSERT_LE(kWindow * charge, (64u << 20) - (16u << 20)) << "the window fits the budget";

  const ActorId acker = rt.Register(std::make_unique<Acker>(), 2);
  WindowState state;
  ActorId sender;
  uint64_t handed = 0;        // acks handed to the sender so far
  uint64_t worst_excess = 0;  // held bytes beyond the sender's outstanding events, at a hand-off
  uint64_t excess_at = 0;     // the ack it was seen at
  uint64_t peak = 0;
  const testing::ObserverId observer = rt.AddObserver([&](NodeId node, EventHandle& ev) {
    if (node != 1) {
      return testing::Verdict::Pass();
    }
    const uint64_t held = cluster.Session(1, 2).held_bytes;
    peak = std::max(peak, held);
    if (ev.type() == EvIcPong::kEventType && ev.recipient() == sender) {
      ++handed;
      const uint64_t outstanding = (state.sent - handed) * charge;
      if (held > outstanding && held - outstanding > worst_excess) {
        worst_excess = held - outstanding;
        excess_at = handed;
      }
    }
    return testing::Verdict::Pass();
  });
  sender = rt.Register(std::make_unique<WindowSender>(acker, kCount, kWindow, kPayload, &state), 1);
  // A socket read returns whatever the peer wrote since the last one, several writes at once
  // when the reader is behind. Here each side reads once a millisecond: the connection is held
  // and let go between milliseconds, so the peer's acknowledgement of the frames it read and its
  // application's acks arrive in one batch.
  auto stall = [&] {
    for (const ConnectionId id : cluster.network.ConnectionIds()) {
      cluster.network.Stall(id);
    }
  };
  stall();
  for (int round = 0; round < 10'000 && state.acked < kCount; ++round) {
    for (const ConnectionId id : cluster.network.ConnectionIds()) {
      cluster.network.Resume(id);  // what was written meanwhile leaves as one delivery
    }
    stall();
    rt.DispatchUntil([] { return false; }, Within(absl::Milliseconds(1)));
  }
  ASSERT_EQ(state.acked, kCount);
  rt.RemoveObserver(observer);
  EXPECT_EQ(state.overloaded, 0u);
  EXPECT_EQ(state.undelivered, 0u);
  EXPECT_EQ(cluster.Session(1, 2).overloaded, 0u);
  EXPECT_EQ(state.out_of_order, 0u);
  EXPECT_EQ(worst_excess, 0u) << "ack " << excess_at
                              << " reached the sender while the peer's budget still held "
                              << worst_excess << " bytes (" << worst_excess / charge
                              << " events) of what the sender had seen acknowledged";
  EXPECT_LE(peak, kWindow * charge) << "never more than the window is held";
  EXPECT_GE(peak, kWindow * charge / 2) << "and the window was in flight";
  rt.AdvanceTime(absl::Milliseconds(500));
  EXPECT_EQ(cluster.Session(1, 2).held_bytes, 0u);
}

// A peer that goes silent (bytes vanish, the connection seems up) is declared dead after the
// timeout: subscribers hear NodeDisconnected, in-flight tracked events are reported unsure and
// queued ones certain; the next session works.
TEST(SessionTest, SilentPeerEndsTheSessionAndReportsEvents) {
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  const ActorId edge = rt.AllocateEdgeActor(1);
  testutil::SequenceLog log;
  const ActorId receiver = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
  rt.Send(std::make_unique<EventHandle>(receiver, edge, testutil::MakeData(1),
                                        kSubscribeOnSession | kTrackDelivery));
  ASSERT_TRUE(rt.GrabEdgeEvent<EvNodeConnected>(edge, Within(absl::Seconds(5))));
  ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() == 1; }, Within(absl::Seconds(1))));
  for (const ConnectionId id : cluster.network.ConnectionIds()) {
    cluster.network.Blackhole(id);
  }
  const absl::Time blackholed = rt.Now();
  for (uint64_t seq = 2; seq <= 6; ++seq) {
    rt.Send(std::make_unique<EventHandle>(receiver, edge, testutil::MakeData(seq),
                                          kTrackDelivery | kGenerateUnsureUndelivered, seq));
  }
  auto disconnected = rt.GrabEdgeEvent<EvNodeDisconnected>(edge, Within(absl::Seconds(5)));
  ASSERT_TRUE(disconnected);
  EXPECT_EQ(disconnected->node, 2u);
  const absl::Duration detection = rt.Now() - blackholed;
  EXPECT_LE(detection, absl::Milliseconds(1000 + 2 * 100)) << "timeout plus a heartbeat tick";
  uint64_t unsure = 0;
  for (uint64_t i = 0; i < 5; ++i) {
    auto undelivered = rt.GrabEdgeEvent<EvUndelivered>(edge, Within(absl::Seconds(1)));
    ASSERT_TRUE(undelivered) << i;
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
    unsure += undelivered->unsure ? 1 : 0;
  }
  EXPECT_EQ(unsure, 5u) << "all five were sent into the black hole, none acknowledged";
  EXPECT_EQ(log.total(), 1u);
  // A new session replaces the dead one (both sides timed out: new streams).
  rt.Send(
      std::make_unique<EventHandle>(receiver, edge, testutil::MakeData(7), kSubscribeOnSession));
  ASSERT_TRUE(rt.GrabEdgeEvent<EvNodeConnected>(edge, Within(absl::Seconds(5))));
  ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() == 2; }, Within(absl::Seconds(5))));
  EXPECT_EQ(cluster.Session(1, 2).sessions, 2u);
}

TEST(SessionTest, UnreachablePeerReportsQueuedEventsAfterTheTimeout) {
  PipeCluster cluster(2);
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  cluster.ics[2].reset();  // node 2's interconnect goes away: nothing answers any more
  const ActorId edge = rt.AllocateEdgeActor(1);
  rt.Send(std::make_unique<EventHandle>(ServiceId("echo", 2), edge, testutil::MakeData(1),
                                        kTrackDelivery | kSubscribeOnSession));
  auto undelivered = rt.GrabEdgeEvent<EvUndelivered>(edge, Within(absl::Seconds(5)));
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
  EXPECT_FALSE(undelivered->unsure) << "it never left node 1";
  EXPECT_TRUE(rt.GrabEdgeEvent<EvNodeConnected>(edge, Within(absl::Seconds(1))))
      << "the session was still alive when the event was sent";
  EXPECT_TRUE(rt.GrabEdgeEvent<EvNodeDisconnected>(edge, Within(absl::Seconds(1))));
}

TEST(SessionTest, SameSeedSameTrace) {
  std::array<uint64_t, 2> fingerprints = {0, 0};
  for (uint64_t& fingerprint : fingerprints) {
    PipeCluster cluster(2, 42);
    TestRuntime& rt = *cluster.runtime;
    testutil::SequenceLog log;
    const ActorId receiver = rt.Register(std::make_unique<testutil::SequenceChecker>(&log), 2);
    rt.Register(std::make_unique<testutil::SequenceSender>(receiver, 500, 25), 1);
    ASSERT_TRUE(rt.DispatchUntil([&] { return log.total() >= 500; }, Within(absl::Seconds(10))));
    fingerprint = rt.TraceFingerprint();
  }
  EXPECT_EQ(fingerprints[0], fingerprints[1]);
}

}  // namespace
}  // namespace troupe::interconnect
