// SPDX-License-Identifier: Apache-2.0
//
// A node leaving the cluster, step by step under the deterministic runtime: its peers stop
// sending and refuse new events at once, what they sent before is handled and answered, the
// goodbye ends their session as left (no dead-peer timeout), and a reply the leaving node sends
// after its goodbye is refused where it is sent. Interconnect::Drain drives the same steps from a
// plain thread (node_test.cc, over TCP); here the test sends the proxies the events Drain sends.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/internal/events.h"
#include "interconnect/protocol.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect {
namespace {

using testing::TestRuntime;
using testutil::EvIcPing;
using testutil::EvIcPong;

constexpr absl::Duration kWork = absl::Milliseconds(20);

// Answers each EvIcPing with an EvIcPong kWork later (a timer, as a handler that awaits
// something would), and counts what happened to its replies.
class SlowEcho final : public Actor {
 public:
  struct Log {
    uint64_t pings = 0;
    uint64_t refused_replies = 0;
  };
  explicit SlowEcho(Log* log) : Actor(&SlowEcho::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcPing, HandlePing);
      TROUPE_HFUNC(EvWakeup, HandleWakeup);
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      default:
        Unhandled(ev);
    }
  }
  void HandlePing(EventPtr<EvIcPing> ev) {
    ++log_->pings;
    asker_ = ev->sender();
    cookie_ = ev->cookie();
    ScheduleWakeup(kWork, 0);
  }
  void HandleWakeup(EventPtr<EvWakeup> /*ev*/) {
    Send(asker_, std::make_unique<EvIcPong>(), kTrackDelivery, cookie_);
  }
  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    if (ev.Get()->reason == UndeliveredReason::kShutdown) {
      ++log_->refused_replies;
    }
  }

  Log* log_;
  ActorId asker_;
  uint64_t cookie_ = 0;
};

// Watches `target` from its Bootstrap and forwards its EvTerminated to `edge`.
class WatchToEdge final : public Actor {
 public:
  WatchToEdge(ActorId target, ActorId edge)
      : Actor(&WatchToEdge::StateWork), target_(target), edge_(edge) {}

 private:
  void Bootstrap() override { Watch(target_); }
  TROUPE_STATE(StateWork) {
    if (ev->type() == EvTerminated::kEventType) {
      Forward(edge_, ev);
    }
  }
  const ActorId target_;
  const ActorId edge_;
};

// Sends node `node`'s proxy for `peer` an internal event, as Interconnect::Drain does.
void ToProxy(TestRuntime& rt, NodeId node, NodeId peer, std::unique_ptr<EventBase> event) {
  rt.Send(std::make_unique<EventHandle>(ServiceId(absl::StrCat("ic/", peer), node), ActorId(),
                                        std::move(event)),
          node);
}

struct LeaveFixture {
  // `protocols[node]`: what node announces (PipeCluster).
  explicit LeaveFixture(std::vector<ProtocolRange> protocols = {})
      : cluster(2, 1, nullptr, absl::Microseconds(50), {}, nullptr, std::move(protocols)) {
    EXPECT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
    slow = rt.Register(std::make_unique<SlowEcho>(&log), 2);
    client = rt.AllocateEdgeActor(1);
    watcher_edge = rt.AllocateEdgeActor(1);
    rt.Register(std::make_unique<WatchToEdge>(slow, watcher_edge), 1);
  }
  // The client asks node 2's slow echo, tracked and subscribed to the session.
  void Ask(uint64_t cookie) {
    rt.Send(std::make_unique<EventHandle>(slow, client, std::make_unique<EvIcPing>(),
                                          kTrackDelivery | kSubscribeOnSession, cookie));
  }
  // The client asks (cookie 1) and the session is up; returns once node 2's work began.
  ::testing::AssertionResult AskAndWaitForTheWork() {
    Ask(1);
    if (!rt.GrabEdgeEvent<EvNodeConnected>(client, Within(absl::Seconds(1)))) {
      return ::testing::AssertionFailure() << "no session";
    }
    if (!rt.DispatchUntil([&] { return log.pings == 1; }, Within(absl::Seconds(1)))) {
      return ::testing::AssertionFailure() << "the request never reached node 2";
    }
    return ::testing::AssertionSuccess();
  }

  PipeCluster cluster;
  TestRuntime& rt = *cluster.runtime;
  SlowEcho::Log log;
  ActorId slow;
  ActorId client;
  // Gets the EvTerminated of a watch on `slow` from node 1.
  ActorId watcher_edge;
};

TEST(LeaveTest, ARequestTheLeavingNodeAcceptedIsAnsweredAndNewOnesAreRefusedAtOnce) {
  LeaveFixture f;
  TestRuntime& rt = f.rt;
  ASSERT_TRUE(f.AskAndWaitForTheWork());
  // 5 ms into the 20 ms of work, node 2 starts leaving.
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(5)));
  ToProxy(rt, 2, 1, std::make_unique<internal::EvLeave>());
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(1)));  // the notice crosses (50 µs each way)

  // Node 1 now refuses new events for node 2 at once, without sending them.
  const absl::Time asked = rt.Now();
  f.Ask(2);
  auto refused = rt.GrabEdgeEvent<EvUndelivered>(f.client, Within(absl::Seconds(1)));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->reason, UndeliveredReason::kShutdown);
  EXPECT_FALSE(refused->unsure) << "it was never sent";
  EXPECT_EQ(refused.handle().cookie(), 2u);
  EXPECT_LT(rt.Now() - asked, absl::Milliseconds(1));

  // The request node 2 accepted before is answered: the reply goes out while it leaves.
  auto pong = rt.GrabEdgeEvent<EvIcPong>(f.client, Within(absl::Seconds(1)));
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong.handle().cookie(), 1u);
  EXPECT_EQ(f.log.pings, 1u) << "the refused request never reached node 2";

  // Once node 1 acknowledged the reply (Drain waits for that too), the goodbye ends node 1's
  // session at once, as left: no dead-peer timeout (1 s).
  ASSERT_TRUE(rt.DispatchUntil([&] { return f.cluster.Session(2, 1).unacked_bytes == 0; },
                               Within(absl::Seconds(1))));
  const absl::Time goodbye = rt.Now();
  ToProxy(rt, 2, 1, std::make_unique<internal::EvCloseSession>(nullptr));
  auto disconnected = rt.GrabEdgeEvent<EvNodeDisconnected>(f.client, Within(absl::Seconds(5)));
  ASSERT_TRUE(disconnected);
  EXPECT_EQ(disconnected->node, 2u);
  EXPECT_TRUE(disconnected->left) << "it left, it was not lost";
  EXPECT_LT(rt.Now() - goodbye, absl::Milliseconds(5));
  auto terminated = rt.GrabEdgeEvent<EvTerminated>(f.watcher_edge, Within(absl::Milliseconds(5)));
  ASSERT_TRUE(terminated);
  EXPECT_EQ(terminated->reason(), TerminationReason::kNodeLeft);
  EXPECT_FALSE(f.cluster.Session(1, 2).up);

  // Later events for the node that left are refused at once too.
  f.Ask(3);
  auto later = rt.GrabEdgeEvent<EvUndelivered>(f.client, Within(absl::Milliseconds(100)));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->reason, UndeliveredReason::kShutdown);
  EXPECT_EQ(f.log.refused_replies, 0u);
}

TEST(LeaveTest, AGoodbyeBeforeTheWorkIsDoneRefusesTheLateReplyWhereItIsSent) {
  LeaveFixture f;
  TestRuntime& rt = f.rt;
  ASSERT_TRUE(f.AskAndWaitForTheWork());
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(5)));
  // A deadline shorter than the work: node 2 leaves and says goodbye 5 ms in.
  ToProxy(rt, 2, 1, std::make_unique<internal::EvLeave>());
  ToProxy(rt, 2, 1, std::make_unique<internal::EvCloseSession>(nullptr));
  auto disconnected = rt.GrabEdgeEvent<EvNodeDisconnected>(f.client, Within(absl::Seconds(5)));
  ASSERT_TRUE(disconnected) << "the requester learns that the session ended, at once";
  // The reply comes after the goodbye: node 2 refuses it, reported to the actor that sent it.
  ASSERT_TRUE(rt.DispatchUntil([&] { return f.log.refused_replies == 1; },
                               Within(absl::Milliseconds(100))));
  EXPECT_TRUE(rt.AdvanceTime(absl::Milliseconds(50)));
  for (const EventHandlePtr& ev : rt.TakeEdgeEvents(f.client)) {
    EXPECT_NE(ev->type(), EvIcPong::kEventType) << "no reply crosses after the goodbye";
  }
}

TEST(LeaveTest, TwoNodesLeavingAtOnceRefuseEachOthersNewEvents) {
  LeaveFixture f;
  TestRuntime& rt = f.rt;
  ASSERT_TRUE(f.AskAndWaitForTheWork());
  ToProxy(rt, 1, 2, std::make_unique<internal::EvLeave>());
  ToProxy(rt, 2, 1, std::make_unique<internal::EvLeave>());
  // Each refuses new events for the other: node 2's reply, sent after node 1's notice came, is
  // refused where it is sent (never sent, so never half-delivered).
  ASSERT_TRUE(rt.DispatchUntil([&] { return f.log.refused_replies == 1; },
                               Within(absl::Milliseconds(100))));
  ToProxy(rt, 1, 2, std::make_unique<internal::EvCloseSession>(nullptr));
  ToProxy(rt, 2, 1, std::make_unique<internal::EvCloseSession>(nullptr));
  ASSERT_TRUE(rt.GrabEdgeEvent<EvNodeDisconnected>(f.client, Within(absl::Milliseconds(10))));
  for (const EventHandlePtr& ev : rt.TakeEdgeEvents(f.client)) {
    EXPECT_NE(ev->type(), EvIcPong::kEventType);
  }
}

TEST(LeaveTest, APeerWithoutTheLeaveFeatureGetsTheRepliesAndLearnsOfTheCloseAsALoss) {
  // Node 2 plays a release without the leaving frames: it announces no features.
  LeaveFixture f({{}, {}, ProtocolRange{.features = {}}});
  TestRuntime& rt = f.rt;
  ASSERT_TRUE(f.AskAndWaitForTheWork());
  EXPECT_EQ(f.cluster.Session(1, 2).protocol_version, kNewestProtocolVersion);
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(5)));
  ToProxy(rt, 2, 1, std::make_unique<internal::EvLeave>());
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(1)));
  // The request it accepted is answered; no notice went out, so node 1 still sends to it, and
  // node 2 still handles and answers.
  auto first = rt.GrabEdgeEvent<EvIcPong>(f.client, Within(absl::Seconds(1)));
  ASSERT_TRUE(first);
  EXPECT_EQ(first.handle().cookie(), 1u);
  f.Ask(2);
  auto second = rt.GrabEdgeEvent<EvIcPong>(f.client, Within(absl::Seconds(1)));
  ASSERT_TRUE(second) << "node 1 refused it: it heard of a leaving it cannot have been told of";
  EXPECT_EQ(second.handle().cookie(), 2u);
  // The close is no goodbye: node 1 learns of it when the dead-peer timeout (1 s) expires, as a
  // node lost.
  ASSERT_TRUE(rt.DispatchUntil([&] { return f.cluster.Session(2, 1).unacked_bytes == 0; },
                               Within(absl::Seconds(1))));
  const absl::Time closed = rt.Now();
  ToProxy(rt, 2, 1, std::make_unique<internal::EvCloseSession>(nullptr));
  auto disconnected = rt.GrabEdgeEvent<EvNodeDisconnected>(f.client, Within(absl::Seconds(5)));
  ASSERT_TRUE(disconnected);
  EXPECT_FALSE(disconnected->left);
  EXPECT_GE(rt.Now() - closed, absl::Milliseconds(900));
  auto terminated = rt.GrabEdgeEvent<EvTerminated>(f.watcher_edge, Within(absl::Seconds(1)));
  ASSERT_TRUE(terminated);
  EXPECT_NE(terminated->reason(), TerminationReason::kNodeLeft);
  EXPECT_EQ(f.log.refused_replies, 0u);
}

TEST(LeaveTest, ANodeBackFromALeaveIsDialledAtOnceNotAtTheNextHeartbeat) {
  // The default heartbeat (500 ms): the dialling side's ticks are that far apart.
  PipeCluster cluster(2, 1, [](proto::InterconnectConfig& config) {
    config.set_heartbeat_interval_ms(500);
    config.set_dead_peer_timeout_ms(5000);
  });
  TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));
  // Node 2 leaves (node 1 dials it: the lower id dials), lingers 30 ms as a process does while
  // it stops, and its next incarnation starts 30 ms later: a rolling restart.
  ToProxy(rt, 2, 1, std::make_unique<internal::EvLeave>());
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(1)));
  ToProxy(rt, 2, 1, std::make_unique<internal::EvCloseSession>(nullptr));
  ASSERT_TRUE(
      rt.DispatchUntil([&] { return !cluster.Session(1, 2).up; }, Within(absl::Milliseconds(10))));
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(30)));
  cluster.ics[2].reset();
  rt.KillNode(2);
  ASSERT_TRUE(rt.AdvanceTime(absl::Milliseconds(30)));
  rt.RestartNode(2);
  const absl::Time restarted = rt.Now();
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(2))));
  EXPECT_LT(rt.Now() - restarted, absl::Milliseconds(150))
      << "node 1 waited for a heartbeat tick to dial the new incarnation";
  EXPECT_EQ(cluster.Session(1, 2).sessions, 2u);
}

}  // namespace
}  // namespace troupe::interconnect
