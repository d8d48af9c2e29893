// SPDX-License-Identifier: Apache-2.0
//
// troupe::node::Node leaving over loopback TCP: a request the leaving node accepted is answered
// before it goes, its peers hear of the leaving at once (not after dead_peer_timeout, 1 s here),
// and under a steady load every request is answered or reported to its sender, none silently
// lost. The steps themselves are tested deterministically in ut/interconnect/leave_test.cc.
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "node/node.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using node::Node;
using testutil::Eventually;
using testutil::EvIcPing;
using testutil::EvIcPong;
using testutil::StartNode;

constexpr ActorId kSlow = ServiceId("slow");
constexpr ActorId kEchoService = ServiceId("echo");

// Takes `work` in its handler (a blocking call), then answers.
class SlowServer final : public Actor {
 public:
  SlowServer(absl::Duration work, std::atomic<uint64_t>* started)
      : Actor(&SlowServer::StateWork), work_(work), started_(started) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcPing, HandlePing);
      default:
        Unhandled(ev);
    }
  }
  void HandlePing(EventPtr<EvIcPing> ev) {
    started_->fetch_add(1);
    absl::SleepFor(work_);
    Send(ev->sender(), std::make_unique<EvIcPong>(), kNoFlags, ev->cookie());
  }

  const absl::Duration work_;
  std::atomic<uint64_t>* started_;
};

// What a Requester learned.
struct RequestLog {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> reported{0};
  std::atomic<bool> disconnected{false};
  // The session ended because the node left (EvNodeDisconnected::left).
  std::atomic<bool> left{false};
  std::atomic<int64_t> disconnected_at_ns{0};
  uint64_t outstanding() const { return sent.load() - answered.load() - reported.load(); }
};

// Keeps `window` tracked requests in flight to `target` (each subscribed to the session) until
// `max` were sent or the session ends; counts answers and reports.
class Requester final : public Actor {
 public:
  Requester(ActorId target, uint64_t window, uint64_t max, RequestLog* log)
      : Actor(&Requester::StateWork), target_(target), window_(window), max_(max), log_(log) {}

 private:
  void Bootstrap() override {
    for (uint64_t i = 0; i < window_; ++i) {
      Ask();
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case EvIcPong::kEventType:
        log_->answered.fetch_add(1);
        Ask();
        break;
      case EvUndelivered::kEventType:
        log_->reported.fetch_add(1);
        break;
      case EvNodeDisconnected::kEventType:
        log_->left.store(ev->Get<EvNodeDisconnected>()->left);
        if (!log_->disconnected.exchange(true)) {
          log_->disconnected_at_ns.store(absl::ToUnixNanos(absl::Now()));
        }
        break;
      default:
        break;
    }
  }
  void Ask() {
    if (log_->disconnected.load() || log_->sent.load() >= max_) {
      return;
    }
    const uint64_t cookie = log_->sent.fetch_add(1) + 1;
    Send(target_, std::make_unique<EvIcPing>(), kTrackDelivery | kSubscribeOnSession, cookie);
  }

  const ActorId target_;
  const uint64_t window_;
  const uint64_t max_;
  RequestLog* log_;
};

struct TwoNodes {
  TwoNodes() {
    client = StartNode(ports.ConfigFor(1, "leave"));
    server = StartNode(ports.ConfigFor(2, "leave"));
    EXPECT_NE(client, nullptr);
    EXPECT_NE(server, nullptr);
    if (client != nullptr) {
      EXPECT_TRUE(client->WaitForPeer(2, absl::Seconds(30)).ok());
    }
  }
  testutil::LoopbackPorts ports{2};
  std::unique_ptr<Node> client;
  std::unique_ptr<Node> server;
};

TEST(NodeLeaveTest, ARequestInProgressIsAnsweredBeforeTheNodeLeaves) {
  TwoNodes nodes;
  ASSERT_NE(nodes.server, nullptr);
  std::atomic<uint64_t> started{0};
  ActorSystem& server = nodes.server->system();
  ASSERT_TRUE(server
                  .RegisterService(kSlow, server.Register(std::make_unique<SlowServer>(
                                              absl::Milliseconds(20), &started)))
                  .ok());
  RequestLog log;
  nodes.client->system().Register(
      std::make_unique<Requester>(ServiceId("slow", 2), /*window=*/1, /*max=*/1, &log));
  ASSERT_TRUE(Eventually([&] { return started.load() == 1; }, absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(5));  // 5 ms into the 20 ms of work
  const absl::Time shutdown = absl::Now();
  const Node::ShutdownReport report = nodes.server->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(report.flushed);
  EXPECT_TRUE(report.quiet);
  EXPECT_EQ(report.reported, 0u);
  ASSERT_TRUE(Eventually([&] { return log.outstanding() == 0; }, absl::Seconds(10)));
  EXPECT_EQ(log.answered.load(), 1u) << "the reply went out before the node left";
  EXPECT_EQ(log.reported.load(), 0u);
  ASSERT_TRUE(Eventually([&] { return log.disconnected.load(); }, absl::Seconds(10)));
  const absl::Duration notice = absl::FromUnixNanos(log.disconnected_at_ns.load()) - shutdown;
  EXPECT_LT(notice, absl::Milliseconds(900)) << "the peer heard goodbye, not the 1 s timeout";
  EXPECT_TRUE(log.left.load());
  RecordProperty("notice_us", static_cast<int>(absl::ToInt64Microseconds(notice)));
}

TEST(NodeLeaveTest, UnderLoadEveryRequestIsAnsweredOrReported) {
  TwoNodes nodes;
  ASSERT_NE(nodes.server, nullptr);
  ActorSystem& server = nodes.server->system();
  ASSERT_TRUE(
      server.RegisterService(kEchoService, server.Register(std::make_unique<testutil::Echo>()))
          .ok());
  RequestLog log;
  constexpr uint64_t kMax = 2'000'000;  // bounds the loop; the shutdown comes long before
  nodes.client->system().Register(
      std::make_unique<Requester>(ServiceId("echo", 2), /*window=*/512, kMax, &log));
  ASSERT_TRUE(Eventually([&] { return log.answered.load() >= 5000; }, absl::Seconds(30)));
  const absl::Time shutdown = absl::Now();
  const Node::ShutdownReport report = nodes.server->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(report.quiet);
  ASSERT_TRUE(Eventually([&] { return log.disconnected.load(); }, absl::Seconds(10)));
  ASSERT_TRUE(Eventually([&] { return log.outstanding() == 0; }, absl::Seconds(10)))
      << log.outstanding() << " requests neither answered nor reported (sent " << log.sent.load()
      << ", answered " << log.answered.load() << ", reported " << log.reported.load() << ")";
  EXPECT_LT(log.sent.load(), kMax);
  const absl::Duration notice = absl::FromUnixNanos(log.disconnected_at_ns.load()) - shutdown;
  EXPECT_LT(notice, absl::Milliseconds(900)) << "the peer heard goodbye, not the 1 s timeout";
  EXPECT_TRUE(log.left.load());
  RecordProperty("answered", static_cast<int>(log.answered.load()));
  RecordProperty("reported", static_cast<int>(log.reported.load()));
  RecordProperty("notice_us", static_cast<int>(absl::ToInt64Microseconds(notice)));
}

}  // namespace
}  // namespace troupe
