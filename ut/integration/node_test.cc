// SPDX-License-Identifier: Apache-2.0
//
// troupe::node::Node over loopback TCP: waiting for peers (from a thread and from an actor), the
// log line of a peer never reached, the graceful shutdown (no loss with time enough, exact
// reports without), and the abort that catches an ActorSystem destroyed before its Interconnect.
#include "node/node.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "interconnect/interconnect.h"
#include "ut/integration/fault_proxy.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using node::Node;
using testutil::Eventually;
using testutil::StartNode;
using testutil::StartSink;

// What a TrackedSender learned.
struct SenderLog {
  std::atomic<bool> sent{false};
  std::atomic<uint64_t> shutdown{0};
  std::atomic<uint64_t> unsure{0};
  std::atomic<uint64_t> other{0};
};

// Sends `count` tracked EvIcData to `target` in its Bootstrap, then counts the reports.
class TrackedSender final : public Actor {
 public:
  TrackedSender(ActorId target, uint64_t count, SenderLog* log)
      : Actor(&TrackedSender::StateWork), target_(target), count_(count), log_(log) {}

 private:
  void Bootstrap() override {
    for (uint64_t i = 1; i <= count_; ++i) {
      Send(target_, testutil::MakeData(i), kTrackDelivery);
    }
    log_->sent.store(true);
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      default:
        Unhandled(ev);
    }
  }
  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    if (ev.Get()->reason != UndeliveredReason::kShutdown) {
      log_->other.fetch_add(1);
      return;
    }
    log_->shutdown.fetch_add(1);
    if (ev.Get()->unsure) {
      log_->unsure.fetch_add(1);
    }
  }

  ActorId target_;
  uint64_t count_;
  SenderLog* log_;
};

// Subscribes to the session with `peer` in its Bootstrap and records what it hears.
class SessionWaiter final : public Actor {
 public:
  SessionWaiter(interconnect::Interconnect* ic, NodeId peer, std::atomic<int>* connected,
                std::atomic<int>* disconnected)
      : Actor(&SessionWaiter::StateWork),
        ic_(ic),
        peer_(peer),
        connected_(connected),
        disconnected_(disconnected) {}

 private:
  void Bootstrap() override { EXPECT_TRUE(ic_->SubscribeSession(peer_, SelfId()).ok()); }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_CFUNC(kEvNodeConnected, Connected);
      TROUPE_CFUNC(kEvNodeDisconnected, Disconnected);
      default:
        Unhandled(ev);
    }
  }

  void Connected() { connected_->fetch_add(1); }
  void Disconnected() { disconnected_->fetch_add(1); }

  interconnect::Interconnect* ic_;
  NodeId peer_;
  std::atomic<int>* connected_;
  std::atomic<int>* disconnected_;
};

TEST(NodeTest, PeersWaitForEachOtherFromThreadsAndActors) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(ports.ConfigFor(1, "test"));
  std::unique_ptr<Node> two = StartNode(ports.ConfigFor(2, "test"));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  EXPECT_TRUE(one->WaitForPeer(2, absl::Seconds(30)).ok());
  EXPECT_TRUE(two->WaitForPeers(absl::Seconds(30)).ok());
  EXPECT_TRUE(one->WaitForPeer(1, absl::ZeroDuration()).ok()) << "a node reaches itself";
  EXPECT_EQ(one->WaitForPeer(7, absl::Seconds(1)).code(), absl::StatusCode::kNotFound);

  std::atomic<int> connected{0};
  std::atomic<int> disconnected{0};
  one->system().Register(
      std::make_unique<SessionWaiter>(one->interconnect(), 2, &connected, &disconnected));
  EXPECT_TRUE(Eventually([&] { return connected.load() == 1; }, absl::Seconds(30)));
  EXPECT_EQ(disconnected.load(), 0);
  EXPECT_EQ(one->interconnect()->SubscribeSession(1, ActorId()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(one->interconnect()->SubscribeSession(7, ActorId(1, 0, 1, 0)).code(),
            absl::StatusCode::kNotFound);

  // The subscriber hears that the session ends when its peer's node shuts down... after the
  // dead-peer timeout at most; here the peer's connection resets at once.
  two->Shutdown(absl::Seconds(5));
  EXPECT_TRUE(Eventually([&] { return disconnected.load() == 1; }, absl::Seconds(30)));
}

TEST(NodeTest, WaitingForAPeerThatNeverAnswersSaysSo) {
  testutil::LoopbackPorts ports(2);
  proto::ActorSystemConfig config = ports.ConfigFor(1, "test");
  config.mutable_interconnect()->set_dead_peer_timeout_ms(300);
  CapturingLogSink log;
  std::unique_ptr<Node> one = StartNode(config);
  ASSERT_NE(one, nullptr);
  // Long enough for a refused dial to be seen even on a loaded box (ASan, parallel tests): the
  // status then says why, not only that it is still dialling.
  const absl::Status waited = one->WaitForPeer(2, absl::Seconds(2));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(waited.message().find("no session with node 2"), std::string::npos) << waited;
  EXPECT_NE(waited.message().find("unreachable"), std::string::npos) << waited;

  // An event waits for the session for dead_peer_timeout; the log must not speak of a session
  // that "ended" when none ever existed.
  SenderLog sender;
  one->system().Register(std::make_unique<TrackedSender>(ServiceId("sink", 2), 1, &sender));
  EXPECT_TRUE(Eventually([&] { return sender.other.load() == 1; }, absl::Seconds(30)));
  // The proxy reports the event before it writes the line: wait for the line too.
  EXPECT_TRUE(
      Eventually([&] { return log.Contains("no session with node 2: never connected, tried for"); },
                 absl::Seconds(10)));
  EXPECT_FALSE(log.Contains("session with node 2 ended"));
}

TEST(NodeTest, ShutdownDeliversEverythingWhenTheTimeoutAllows) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(ports.ConfigFor(1, "test"));
  std::unique_ptr<Node> two = StartNode(ports.ConfigFor(2, "test"));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  std::atomic<uint64_t> received{0};
  ASSERT_TRUE(StartSink(*two, &received).ok());
  ASSERT_TRUE(one->WaitForPeer(2, absl::Seconds(30)).ok());

  constexpr uint64_t kEvents = 5000;
  SenderLog sender;
  one->system().Register(std::make_unique<TrackedSender>(ServiceId("sink", 2), kEvents, &sender));
  ASSERT_TRUE(Eventually([&] { return sender.sent.load(); }, absl::Seconds(30)));
  const Node::ShutdownReport report = one->Shutdown(absl::Seconds(60));
  EXPECT_TRUE(report.flushed);
  EXPECT_EQ(report.reported, 0u);
  EXPECT_TRUE(Eventually([&] { return received.load() == kEvents; }, absl::Seconds(30)))
      << received.load();
  EXPECT_EQ(sender.shutdown.load() + sender.other.load(), 0u);
  EXPECT_EQ(one->Shutdown(absl::Seconds(1)).reported, 0u) << "idempotent";
}

TEST(NodeTest, ShutdownReportsExactlyWhatItCouldNotDeliver) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> two = StartNode(ports.ConfigFor(2, "test"));
  ASSERT_NE(two, nullptr);
  std::atomic<uint64_t> received{0};
  ASSERT_TRUE(StartSink(*two, &received).ok());
  // Node 1 reaches node 2 through a relay that will drop every byte: events sent then are never
  // acknowledged.
  testutil::FaultProxy relay(ports.port(2));
  ports.Redirect(1, 2, relay.port());
  std::unique_ptr<Node> one = StartNode(ports.ConfigFor(1, "test"));
  ASSERT_NE(one, nullptr);
  ASSERT_TRUE(one->WaitForPeer(2, absl::Seconds(30)).ok());

  constexpr uint64_t kDelivered = 100;
  SenderLog first;
  one->system().Register(std::make_unique<TrackedSender>(ServiceId("sink", 2), kDelivered, &first));
  ASSERT_TRUE(Eventually([&] { return received.load() == kDelivered; }, absl::Seconds(30)));
  ASSERT_TRUE(Eventually([&] { return one->interconnect()->Counters().front().unacked_bytes == 0; },
                         absl::Seconds(30)));

  relay.Blackhole(true);
  constexpr uint64_t kStuck = 300;
  SenderLog second;
  one->system().Register(std::make_unique<TrackedSender>(ServiceId("sink", 2), kStuck, &second));
  ASSERT_TRUE(Eventually([&] { return second.sent.load(); }, absl::Seconds(30)));
  // Shorter than the dead-peer timeout (1 s): the session is alive, its events unacknowledged.
  const Node::ShutdownReport report = one->Shutdown(absl::Milliseconds(300));
  EXPECT_FALSE(report.flushed);
  EXPECT_EQ(report.reported, kStuck);
  EXPECT_EQ(second.shutdown.load(), kStuck) << "every tracked event is reported, before Stop";
  EXPECT_GT(second.unsure.load(), 0u) << "those sent and not acknowledged are marked unsure";
  EXPECT_EQ(second.other.load(), 0u);
  EXPECT_EQ(first.shutdown.load() + first.other.load(), 0u);
  EXPECT_EQ(received.load(), kDelivered);
}

TEST(NodeTest, ANodeWithoutATableHasNoInterconnect) {
  proto::ActorSystemConfig config;
  config.set_node_id(3);
  std::unique_ptr<Node> node = StartNode(config);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->interconnect(), nullptr);
  EXPECT_EQ(node->id(), 3u);
  EXPECT_TRUE(node->WaitForPeers(absl::Seconds(1)).ok());
  EXPECT_EQ(node->WaitForPeer(1, absl::Seconds(1)).code(), absl::StatusCode::kFailedPrecondition);
  const Node::ShutdownReport report = node->Shutdown(absl::Seconds(1));
  EXPECT_TRUE(report.flushed);
}

TEST(NodeTest, ABadConfigNamesTheField) {
  proto::ActorSystemConfig config;
  config.add_pools()->set_threads(0);
  absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(config);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(node.status().message().find("pools"), std::string::npos) << node.status();
}

TEST(NodeDeathTest, DestroyingTheSystemBeforeItsInterconnectAbortsWithTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testutil::LoopbackPorts ports(1);
  EXPECT_DEATH(
      {
        auto system = ActorSystem::Create(ports.ConfigFor(1, "test"));
        auto ic = interconnect::Interconnect::Start(system->get());
        system->reset();
      },
      "destroyed while the Interconnect of node 1 still uses it: destroy it first");
}

}  // namespace
}  // namespace troupe
