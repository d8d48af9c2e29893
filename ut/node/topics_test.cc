// SPDX-License-Identifier: Apache-2.0
//
// Topics (node/topics.h) on TestRuntime: three nodes over the simulated interconnect, a topic
// registry on each with a StaticNameservice of its own as membership, which the tests change.
// Seeds are fixed; links have latency and jitter, so interleavings differ from seed to seed.
#include "node/topics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/nameservice.h"
#include "ut/actors/test_events.pb.h"
#include "ut/node/topics_test_util.h"

namespace troupe::node {
namespace {

using interconnect::NodeEndpoint;
using interconnect::StaticNameservice;
using testing::DispatchResult;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testing::Verdict;
using topics_testing::EvDo;
using topics_testing::EvGo;
using topics_testing::EvNews;
using topics_testing::kEvNews;
using topics_testing::Publisher;
using topics_testing::ReceivedInOrder;
using topics_testing::Subscriber;
using topics_testing::TopicsEntry;
using topics_testing::TopicsLog;
using Kind = TopicsEntry::Kind;

constexpr uint32_t kNodes = 3;

NodeEndpoint TopicsEndpoint(NodeId node, bool client = false) {
  return {.node = node,
          .host = "127.0.0.1",
          .port = static_cast<uint16_t>(client ? 0 : 19000 + node),
          .client = client,
          .monitoring_port = 0};
}

class TopicsTest : public ::testing::Test {
 protected:
  // Starts kNodes nodes, each with a registry whose membership lists every node (unless
  // `without_registry` names it: that node runs none).
  void Start(uint64_t seed, NodeId without_registry = 0) {
    runtime_.reset();
    for (NodeId node = 1; node <= kNodes; ++node) {
      std::vector<NodeEndpoint> members;
      for (NodeId member = 1; member <= kNodes; ++member) {
        members.push_back(TopicsEndpoint(member));
      }
      names_[node] = std::make_shared<StaticNameservice>(members);
    }
    TestRuntimeOptions options;
    options.nodes = kNodes;
    options.seed = seed;
    options.latency = absl::Milliseconds(1);
    options.jitter = absl::Milliseconds(3);
    options.on_node_start = [this, without_registry](TestRuntime& runtime, NodeId node) {
      if (node != without_registry) {
        const absl::Status registered = RegisterTopics(runtime.node(node), names_[node]);
        ASSERT_TRUE(registered.ok()) << registered;
      }
    };
    runtime_ = std::make_unique<TestRuntime>(std::move(options));
  }

  // Registers a Subscriber of `topics` on `node`.
  ActorId Subscribe(NodeId node, std::vector<std::string> topics) {
    return runtime_->Register(std::make_unique<Subscriber>(&log_, std::move(topics)), node);
  }

  // Dispatches until `count` acks of `kind` are logged in all.
  void WaitForAcks(Kind kind, size_t count) {
    ASSERT_TRUE(runtime_->DispatchUntil([&] { return log_.Count(kind) >= count; }));
  }

  // Tells `subscriber` to act, from its own node (EvDo is local).
  void Tell(const ActorId& subscriber, EvDo::Action action, const std::string& topic) {
    runtime_->Send(
        std::make_unique<EventHandle>(subscriber, ActorId(), std::make_unique<EvDo>(action, topic)),
        subscriber.node_id());
  }

  // Makes `node` a member of nobody's table but its own (it left), or a member again.
  void SetMember(NodeId node, bool member) {
    for (NodeId other = 1; other <= kNodes; ++other) {
      if (other == node) {
        continue;
      }
      if (member) {
        names_[other]->Set(TopicsEndpoint(node));
      } else {
        names_[other]->Remove(node);
      }
    }
  }

  // Counts the events that leave their node, by type, from now on.
  std::shared_ptr<std::map<EventType, uint64_t>> CountCrossings() {
    auto counts = std::make_shared<std::map<EventType, uint64_t>>();
    runtime_->AddObserver([counts](NodeId node, EventHandle& ev) {
      const NodeId to = ev.recipient().node_id();
      if (to != 0 && to != node) {
        ++(*counts)[ev.type()];
      }
      return Verdict::Pass();
    });
    return counts;
  }

  // Returns the dead letters of EvNews counted on `node`.
  uint64_t NewsDeadLetters(NodeId node) {
    uint64_t count = 0;
    for (const DeadLetterCount& dead : runtime_->node(node).DeadLetterCounts()) {
      count += dead.type == kEvNews ? dead.count : 0;
    }
    return count;
  }

  std::map<NodeId, std::shared_ptr<StaticNameservice>> names_;
  TopicsLog log_;
  std::unique_ptr<TestRuntime> runtime_;
};

// Six publishers (two per node) publish 20 events each to "t" while twelve subscribers (four per
// node) listen: every subscriber gets every event once, each publisher's in order; a subscriber
// of another topic gets nothing.
TEST_F(TopicsTest, EverySubscriberGetsEveryPublishOnceInEachPublishersOrder) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    log_.Clear();
    Start(seed);
    std::vector<ActorId> subscribers;
    std::vector<ActorId> publishers;
    for (NodeId node = 1; node <= kNodes; ++node) {
      for (int i = 0; i < 4; ++i) {
        subscribers.push_back(Subscribe(node, {"t"}));
      }
      for (int i = 0; i < 2; ++i) {
        publishers.push_back(runtime_->Register(std::make_unique<Publisher>(&log_), node));
      }
    }
    const ActorId other = Subscribe(2, {"other"});
    WaitForAcks(Kind::kSubscribed, subscribers.size() + 1);
    constexpr uint64_t kPerPublisher = 20;
    std::map<ActorId, uint64_t> expected;
    for (const ActorId& publisher : publishers) {
      runtime_->Send(publisher, std::make_unique<EvGo>("t", kPerPublisher));
      expected[publisher] = kPerPublisher;
    }
    EXPECT_EQ(runtime_->DispatchEvents(), DispatchResult::kIdle);
    for (const ActorId& subscriber : subscribers) {
      EXPECT_TRUE(ReceivedInOrder(log_, subscriber, expected));
    }
    EXPECT_TRUE(log_.Of(other, Kind::kNews).empty());
    EXPECT_EQ(log_.Count(Kind::kUndelivered), 0u);
  }
}

// Ten subscribers per node: a publish crosses each link once (EvTopicCopy), the published event
// itself never does.
TEST_F(TopicsTest, OneCopyPerNodeCrossesTheWire) {
  Start(11);
  for (NodeId node = 1; node <= kNodes; ++node) {
    for (int i = 0; i < 10; ++i) {
      Subscribe(node, {"t"});
    }
  }
  const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  WaitForAcks(Kind::kSubscribed, 3 * 10);
  const auto crossings = CountCrossings();
  constexpr uint64_t kPublishes = 7;
  runtime_->Send(publisher, std::make_unique<EvGo>("t", kPublishes));
  runtime_->DispatchEvents();
  EXPECT_EQ(log_.Count(Kind::kNews), kPublishes * 3 * 10);
  EXPECT_EQ(*crossings, (std::map<EventType, uint64_t>{{kEvTopicCopy, kPublishes * (kNodes - 1)}}))
      << "one copy per publish and other node, and nothing else";
}

// A subscriber on node 3 tells publishers on every node to publish as soon as its subscription
// is acknowledged: each of those publishes reaches it.
TEST_F(TopicsTest, APublishMadeAfterTheAckReachesTheSubscriber) {
  for (uint64_t seed = 20; seed < 30; ++seed) {
    SCOPED_TRACE(seed);
    log_.Clear();
    Start(seed);
    std::vector<ActorId> publishers;
    for (NodeId node = 1; node <= kNodes; ++node) {
      publishers.push_back(runtime_->Register(std::make_unique<Publisher>(&log_), node));
    }
    const ActorId subscriber = runtime_->Register(
        std::make_unique<Subscriber>(&log_, std::vector<std::string>{"t"}, publishers, "t"), 3);
    runtime_->DispatchEvents();
    std::map<ActorId, uint64_t> expected;
    for (const ActorId& publisher : publishers) {
      expected[publisher] = 1;
    }
    EXPECT_TRUE(ReceivedInOrder(log_, subscriber, expected));
  }
}

// A subscriber that ends is dropped by its registry: later publishes leave no dead letter for it,
// and the others still get them.
TEST_F(TopicsTest, ASubscriberThatEndsIsRemoved) {
  Start(31);
  const ActorId leaving = Subscribe(2, {"t", "u"});
  const ActorId staying = Subscribe(2, {"t"});
  const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  WaitForAcks(Kind::kSubscribed, 3);
  Tell(leaving, EvDo::Action::kEnd, "");
  runtime_->DispatchEvents();
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 5));
  runtime_->Send(publisher, std::make_unique<EvGo>("u", 5));
  runtime_->DispatchEvents();
  EXPECT_TRUE(log_.Of(leaving, Kind::kNews).empty());
  EXPECT_TRUE(ReceivedInOrder(log_, staying, {{publisher, 5}}));
  EXPECT_EQ(NewsDeadLetters(2), 0u);
  EXPECT_EQ(NewsDeadLetters(1), 0u);
}

// Unsubscribing while a publisher streams: the subscriber gets a prefix of the stream, all of it
// before its EvTopicUnsubscribed, and nothing after; its other topic goes on.
TEST_F(TopicsTest, UnsubscribeEndsDeliveryAtItsAck) {
  for (uint64_t seed = 40; seed < 45; ++seed) {
    SCOPED_TRACE(seed);
    log_.Clear();
    Start(seed);
    const ActorId subscriber = Subscribe(2, {"t", "u"});
    const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
    WaitForAcks(Kind::kSubscribed, 2);
    runtime_->Send(publisher, std::make_unique<EvGo>("t", 30));
    ASSERT_TRUE(runtime_->DispatchUntil([&] { return log_.Count(Kind::kNews) >= 5; }));
    Tell(subscriber, EvDo::Action::kUnsubscribe, "t");
    runtime_->DispatchEvents();
    runtime_->Send(publisher, std::make_unique<EvGo>("t", 5));
    runtime_->Send(publisher, std::make_unique<EvGo>("u", 3));
    runtime_->DispatchEvents();
    bool acked = false;
    uint64_t next = 0;
    std::vector<uint64_t> u_seqs;
    for (const TopicsEntry& entry : log_.Entries()) {
      if (entry.kind == Kind::kUnsubscribed) {
        acked = true;
      } else if (entry.kind == Kind::kNews && entry.topic == "t") {
        EXPECT_FALSE(acked) << "seq " << entry.seq << " came after the unsubscribe's ack";
        EXPECT_EQ(entry.seq, next++) << "a gap or a repeat";
      } else if (entry.kind == Kind::kNews) {
        u_seqs.push_back(entry.seq);
      }
    }
    EXPECT_TRUE(acked);
    EXPECT_GE(next, 5u);
    EXPECT_LT(next, 30u) << "the unsubscribe came mid-stream";
    EXPECT_EQ(u_seqs, (std::vector<uint64_t>{35, 36, 37}));
  }
}

// Node 3 dies with subscribers: a tracked publish reports the copy it lost to node 3, the others
// get every publish once; once node 3 is out of the membership nothing is sent to it; its new
// incarnation's subscriber gets only what is published after it subscribed.
TEST_F(TopicsTest, AKilledNodesSubscribersGetNothingAndNothingIsDeliveredTwice) {
  Start(51);
  std::vector<ActorId> survivors;
  for (NodeId node = 1; node <= 2; ++node) {
    survivors.push_back(Subscribe(node, {"t"}));
    survivors.push_back(Subscribe(node, {"t"}));
  }
  const ActorId doomed = Subscribe(3, {"t"});
  const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  const ActorId second = runtime_->Register(std::make_unique<Publisher>(&log_), 2);
  WaitForAcks(Kind::kSubscribed, 5);
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 3, /*track=*/true));
  runtime_->DispatchEvents();
  EXPECT_TRUE(ReceivedInOrder(log_, doomed, {{publisher, 3}}));

  runtime_->KillNode(3);
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 4, /*track=*/true));
  runtime_->Send(second, std::make_unique<EvGo>("t", 2));
  runtime_->DispatchEvents();
  std::multiset<NodeId> lost;
  for (const TopicsEntry& entry : log_.Of(publisher, Kind::kUndelivered)) {
    EXPECT_EQ(entry.reason, UndeliveredReason::kDisconnected);
    lost.insert(entry.lost_node);
  }
  EXPECT_EQ(lost, (std::multiset<NodeId>{3, 3, 3, 3})) << "one report per tracked publish";

  SetMember(3, false);  // node 3 left
  const auto crossings = CountCrossings();
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 2, /*track=*/true));
  runtime_->DispatchEvents();
  EXPECT_EQ((*crossings)[kEvTopicCopy], 2u) << "to node 2 only";
  EXPECT_EQ(log_.Of(publisher, Kind::kUndelivered).size(), 4u) << "nothing lost any more";

  runtime_->RestartNode(3);
  SetMember(3, true);
  const ActorId reborn = Subscribe(3, {"t"});
  WaitForAcks(Kind::kSubscribed, 6);
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 1));
  runtime_->DispatchEvents();

  for (const ActorId& survivor : survivors) {
    EXPECT_TRUE(ReceivedInOrder(log_, survivor, {{publisher, 3 + 4 + 2 + 1}, {second, 2}}));
  }
  EXPECT_TRUE(ReceivedInOrder(log_, doomed, {{publisher, 3}})) << "nothing after its death";
  EXPECT_TRUE(ReceivedInOrder(log_, reborn, {{publisher, 1}}, {{publisher, 9}}));
}

// A node whose registry is missing loses the copies sent to it; a tracked publisher hears of each
// (kUnknownService) and the other nodes' subscribers are served.
TEST_F(TopicsTest, ATrackedPublishReportsTheNodesItMissed) {
  Start(61, /*without_registry=*/2);
  const ActorId subscriber = Subscribe(3, {"t"});
  const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  WaitForAcks(Kind::kSubscribed, 1);
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 2, /*track=*/true));
  runtime_->DispatchEvents();
  EXPECT_TRUE(ReceivedInOrder(log_, subscriber, {{publisher, 2}}));
  const std::vector<TopicsEntry> lost = log_.Of(publisher, Kind::kUndelivered);
  ASSERT_EQ(lost.size(), 2u);
  for (const TopicsEntry& entry : lost) {
    EXPECT_EQ(entry.lost_node, 2u);
    EXPECT_EQ(entry.reason, UndeliveredReason::kUnknownService);
  }
}

// A registry awaiting its membership records subscriptions and holds its node's publishes, in
// order, until it is given one; then they go out to every node.
TEST_F(TopicsTest, PublishesWaitForTheMembership) {
  Start(71, /*without_registry=*/1);
  ASSERT_TRUE(RegisterTopicsAwaitingMembership(runtime_->node(1)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(RegisterTopicsAwaitingMembership(runtime_->node(1))));
  const ActorId local = Subscribe(1, {"t"});
  const ActorId remote = Subscribe(2, {"t"});
  const ActorId publisher = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  const ActorId other = runtime_->Register(std::make_unique<Publisher>(&log_), 2);
  WaitForAcks(Kind::kSubscribed, 2);
  runtime_->Send(publisher, std::make_unique<EvGo>("t", 3));
  runtime_->Send(other, std::make_unique<EvGo>("t", 2));
  runtime_->DispatchEvents();
  EXPECT_EQ(log_.Of(remote, Kind::kNews).size(), 2u) << "node 2's publishes are not held";
  EXPECT_TRUE(ReceivedInOrder(log_, local, {{other, 2}})) << "node 1's are";
  ASSERT_TRUE(SetTopicsMembership(runtime_->node(1), names_[1]).ok());
  runtime_->DispatchEvents();
  EXPECT_TRUE(ReceivedInOrder(log_, local, {{publisher, 3}, {other, 2}}));
  EXPECT_TRUE(ReceivedInOrder(log_, remote, {{publisher, 3}, {other, 2}}));
}

// A client's registry skips the other clients (no session joins two clients); a listening
// member's reaches them all.
TEST_F(TopicsTest, AClientsPublishSkipsTheOtherClients) {
  Start(81);
  for (NodeId node = 1; node <= kNodes; ++node) {
    names_[node]->Set(TopicsEndpoint(2, /*client=*/true));
    names_[node]->Set(TopicsEndpoint(3, /*client=*/true));
  }
  std::vector<ActorId> subscribers;
  for (NodeId node = 1; node <= kNodes; ++node) {
    subscribers.push_back(Subscribe(node, {"t"}));
  }
  const ActorId on_client = runtime_->Register(std::make_unique<Publisher>(&log_), 3);
  const ActorId on_member = runtime_->Register(std::make_unique<Publisher>(&log_), 1);
  WaitForAcks(Kind::kSubscribed, 3);
  const auto crossings = CountCrossings();
  runtime_->Send(on_client, std::make_unique<EvGo>("t", 2));
  runtime_->Send(on_member, std::make_unique<EvGo>("t", 2));
  runtime_->DispatchEvents();
  EXPECT_EQ((*crossings)[kEvTopicCopy], 2u + 4u);
  EXPECT_TRUE(ReceivedInOrder(log_, subscribers[0], {{on_client, 2}, {on_member, 2}}));
  EXPECT_TRUE(ReceivedInOrder(log_, subscribers[1], {{on_member, 2}})) << "client 2";
  EXPECT_TRUE(ReceivedInOrder(log_, subscribers[2], {{on_client, 2}, {on_member, 2}}));
}

enum : EventType {
  kEvTick = EventSpaceBegin(kUserEventSpace + 63),
  kEvQuote,
  kEvTraderEnd,
};
static_assert(InEventSpace(kEvTraderEnd - 1, kUserEventSpace + 63));
struct EvTick final : EventPB<EvTick, ut::TestPayload, kEvTick> {};
struct EvQuote final : EventPB<EvQuote, ut::TestPayload, kEvQuote> {};

// The header's example, run: subscribes at bootstrap, publishes a quote per tick, keeps quotes.
class Trader final : public Actor {
 public:
  explicit Trader(std::vector<uint64_t>* quotes) : Actor(&Trader::StateWork), quotes_(quotes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvTick, HandleTick);
      TROUPE_HFUNC(EvQuote, HandleQuote);
      TROUPE_IGNORE(kEvTopicSubscribed);
      default:
        Unhandled(ev);
    }
  }

  // clang-format off
  // [doc-example: node/topics.h]
  void Bootstrap() override {
    // EvTopicSubscribed{"prices"} comes back; every publish to "prices" made after it comes too.
    (void)troupe::node::Topics::Subscribe(*this, "prices");
  }
  void HandleTick(troupe::EventPtr<EvTick> ev) {
    auto quote = std::make_unique<EvQuote>();
    quote->record.set_seq(ev.Get()->record.seq());
    (void)troupe::node::Topics::Publish(*this, "prices", std::move(quote));
  }
  void HandleQuote(troupe::EventPtr<EvQuote> ev) {  // ev->sender(): the publisher
    quotes_->push_back(ev.Get()->record.seq());
  }
  // [end doc-example]
  // clang-format on

  std::vector<uint64_t>* quotes_;
};

TEST_F(TopicsTest, TheHeadersExampleRuns) {
  Start(101);
  std::vector<uint64_t> first;
  std::vector<uint64_t> second;
  const ActorId trader = runtime_->Register(std::make_unique<Trader>(&first), 1);
  runtime_->Register(std::make_unique<Trader>(&second), 3);
  runtime_->DispatchEvents();
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    auto tick = std::make_unique<EvTick>();
    tick->record.set_seq(seq);
    runtime_->Send(trader, std::move(tick));
  }
  runtime_->DispatchEvents();
  EXPECT_EQ(first, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(second, (std::vector<uint64_t>{1, 2, 3}));
}

// The helpers refuse what cannot work, a subscriber on a node without a registry hears so, and a
// registry refuses a subscriber of another node.
TEST_F(TopicsTest, RefusalsSayWhy) {
  Start(91, /*without_registry=*/3);
  const ActorId subscriber = Subscribe(1, {});
  runtime_->DispatchEvents();
  Subscriber unregistered(&log_, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(Topics::Subscribe(unregistered, "t")));
  EXPECT_TRUE(absl::IsInvalidArgument(Topics::Publish(runtime_->node(1), "", nullptr)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Topics::Publish(runtime_->node(1), "t", std::make_unique<EvDo>(EvDo::Action::kEnd, ""))));
  EXPECT_TRUE(absl::IsFailedPrecondition(SetTopicsMembership(runtime_->node(3), nullptr)));
  const ActorId stranded = Subscribe(3, {"t"});
  runtime_->DispatchEvents();
  const std::vector<TopicsEntry> unanswered = log_.Of(stranded, Kind::kUndelivered);
  ASSERT_EQ(unanswered.size(), 1u) << "node 3 runs no registry";
  EXPECT_EQ(unanswered[0].reason, UndeliveredReason::kUnknownService);
  EXPECT_EQ(unanswered[0].seq, kEvTopicSubscribe);

  const ActorId edge = runtime_->AllocateEdgeActor(1);
  runtime_->Send(Topics::ServiceOn(2), std::make_unique<EvTopicSubscribe>("t"), edge);
  auto refused = runtime_->GrabEdgeEvent<EvTopicSubscribed>(edge);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->ok());
  EXPECT_NE(refused->error().find("subscribe at your own node's registry"), std::string::npos)
      << refused->error();
  runtime_->Send(Topics::kService, std::make_unique<EvTopicSubscribe>(""), edge);
  auto empty = runtime_->GrabEdgeEvent<EvTopicSubscribed>(edge);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->error(), "the topic is empty");
  EXPECT_TRUE(log_.Of(subscriber, Kind::kSubscribed).empty());
}

}  // namespace
}  // namespace troupe::node
