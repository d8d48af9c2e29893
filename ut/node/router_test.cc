// SPDX-License-Identifier: Apache-2.0
//
// node/router.h on TestRuntime: each policy's choice of member, members on other nodes, asks
// through a router, members that end or whose node dies (every event handled once or reported),
// membership changes at run time, the empty router, and the race-prone paths over many seeds.
#include "node/router.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/node_hooks.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_events.pb.h"

// A namespace of its own: in a unity build this file shares a translation unit with the other
// node tests, whose helpers may have the same names.
namespace troupe::node::router_test {
namespace {

using ::troupe::testing::DispatchOptions;
using ::troupe::testing::DispatchResult;
using ::troupe::testing::TestRuntime;

enum : EventType {
  kEvRouterTestJob = EventSpaceBegin(kUserEventSpace) + 0x700,
  kEvRouterTestDone,
  kEvRouterTestLocal,
  kEvRouterTestTick,
  kEvRouterTestOrder,
};

// A job: `seq` identifies it, `text` is its consistent-hashing key.
struct EvRouterTestJob final : EventPB<EvRouterTestJob, ut::TestPayload, kEvRouterTestJob> {
  EvRouterTestJob() = default;
  EvRouterTestJob(uint64_t seq, std::string key) {
    record.set_seq(seq);
    record.set_text(std::move(key));
  }
};
struct EvRouterTestDone final : EventPB<EvRouterTestDone, ut::TestPayload, kEvRouterTestDone> {};
// The header example's order: its `text` is the user it belongs to.
struct EvOrder final : EventPB<EvOrder, ut::TestPayload, kEvRouterTestOrder> {
  EvOrder() = default;
  explicit EvOrder(std::string user) { record.set_text(std::move(user)); }
};
struct EvRouterTestLocal final : EventLocal<EvRouterTestLocal, kEvRouterTestLocal> {};
struct EvRouterTestTick final : EventLocal<EvRouterTestTick, kEvRouterTestTick> {};

// What the workers did, kept by the test (it outlives nodes that are killed).
struct RouterTally {
  std::map<uint64_t, int> handled;                     // seq -> times handled
  std::map<ActorId, std::vector<uint64_t>> by_member;  // member -> seqs in handling order
  std::map<std::string, std::set<ActorId>> by_key;     // key -> members that handled it
};

// Handles jobs: counts them, replies EvRouterTestDone (seq, and its own id in `values` is not
// needed: the reply's sender says who), and ends after `stop_after` jobs (0: never).
class RouterTestWorker final : public Actor {
 public:
  explicit RouterTestWorker(RouterTally* tally, uint32_t stop_after = 0)
      : Actor(&RouterTestWorker::StateWork), tally_(tally), stop_after_(stop_after) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvRouterTestJob, Handle);
      TROUPE_HFUNC(EvOrder, HandleOrder);
      TROUPE_IGNORE(kEvRouterTestLocal);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvRouterTestJob> ev) {
    const uint64_t seq = ev.Get()->record.seq();
    ++tally_->handled[seq];
    tally_->by_member[SelfId()].push_back(seq);
    tally_->by_key[ev.Get()->record.text()].insert(SelfId());
    auto done = std::make_unique<EvRouterTestDone>();
    done->record.set_seq(seq);
    Reply(ev, std::move(done));
    if (stop_after_ != 0 && ++jobs_ == stop_after_) {
      PassAway();
    }
  }

  void HandleOrder(EventPtr<EvOrder> ev) {
    tally_->by_key[ev.Get()->record.text()].insert(SelfId());
  }

  RouterTally* tally_;
  uint32_t stop_after_;
  uint32_t jobs_ = 0;
};

// Keeps its own mailbox busy: every tick sends the next one, until `stop` is set.
class RouterTestLooper final : public Actor {
 public:
  explicit RouterTestLooper(const bool* stop) : Actor(&RouterTestLooper::StateWork), stop_(stop) {}

 private:
  void Bootstrap() override { Send(SelfId(), std::make_unique<EvRouterTestTick>()); }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvRouterTestTick) {
      if (!*stop_) {
        Send(SelfId(), std::make_unique<EvRouterTestTick>());
      }
      return;
    }
    Unhandled(ev);
  }
  const bool* stop_;
};

// Asks `router` once in Bootstrap and keeps the outcome.
class RouterTestAsker final : public Actor {
 public:
  RouterTestAsker(ActorId router, std::optional<absl::StatusOr<uint64_t>>* result)
      : Actor(&RouterTestAsker::StateWork), router_(router), result_(result) {}

 private:
  void Bootstrap() override {
    Ask<EvRouterTestDone>(router_, std::make_unique<EvRouterTestJob>(42, "ask"), absl::Seconds(5),
                          [this](AskResult<EvRouterTestDone> done) {
                            if (done.ok()) {
                              *result_ = (*done)->record.seq();
                            } else {
                              *result_ = done.status();
                            }
                          });
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  ActorId router_;
  std::optional<absl::StatusOr<uint64_t>>* result_;
};

RouterKey RouterTestKey() {
  return [](EventHandle& ev) -> std::optional<std::string> {
    const auto* job = ev.Get<EvRouterTestJob>();
    if (job == nullptr) {
      return std::nullopt;
    }
    return job->record.text();
  };
}

ActorId RegisterRouter(TestRuntime& runtime, RoutingPolicy policy, std::vector<ActorId> members,
                       NodeId node = 1) {
  RouterOptions options;
  options.policy = policy;
  options.members = std::move(members);
  if (policy == RoutingPolicy::kConsistentHash) {
    options.key = RouterTestKey();
  }
  return runtime.Register(std::make_unique<Router>(std::move(options)), node);
}

std::vector<ActorId> Workers(TestRuntime& runtime, RouterTally* tally, NodeId node, int count) {
  std::vector<ActorId> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    ids.push_back(runtime.Register(std::make_unique<RouterTestWorker>(tally), node));
  }
  return ids;
}

// The router's members, asked from an edge actor on node 1.
std::vector<ActorId> MembersOf(TestRuntime& runtime, const ActorId& router) {
  const ActorId edge = runtime.AllocateEdgeActor(1);
  runtime.Send(router, std::make_unique<EvRouterGetMembers>(), edge, kNoFlags, 7);
  auto members = runtime.GrabEdgeEvent<EvRouterMembers>(edge);
  if (!members) {
    return {};
  }
  EXPECT_EQ(members.handle().cookie(), 7u);
  return members->members();
}

// Takes every EvUndelivered the edge holds: seq (its cookie) -> (reason, unsure).
std::multimap<uint64_t, std::pair<UndeliveredReason, bool>> Reports(TestRuntime& runtime,
                                                                    const ActorId& edge) {
  std::multimap<uint64_t, std::pair<UndeliveredReason, bool>> reports;
  for (EventHandlePtr& ev : runtime.TakeEdgeEvents(edge)) {
    if (const auto* lost = ev->Get<EvUndelivered>(); lost != nullptr) {
      reports.emplace(lost->cookie, std::pair{lost->reason, lost->unsure});
    }
  }
  return reports;
}

// Returns how many jobs `node` counted as dead letters (the router reported them all instead).
uint64_t JobDeadLetters(TestRuntime& runtime, NodeId node) {
  uint64_t dead = 0;
  for (const DeadLetterCount& count : runtime.node(node).DeadLetterCounts()) {
    dead += count.type == kEvRouterTestJob ? count.count : 0;
  }
  return dead;
}

// Sends jobs 1..count, tracked, with the seq as cookie, from `edge` to `router`.
void SendJobs(TestRuntime& runtime, const ActorId& router, const ActorId& edge, uint64_t count,
              uint64_t first = 1) {
  for (uint64_t seq = first; seq < first + count; ++seq) {
    runtime.Send(router, std::make_unique<EvRouterTestJob>(seq, absl::StrCat("k", seq)), edge,
                 kTrackDelivery, seq);
  }
}

// -- policies -----------------------------------------------------------------------------------

TEST(RouterTest, RoundRobinRotatesExactlyInTheOrderMembersWereAdded) {
  TestRuntime runtime({.nodes = 1});
  RouterTally tally;
  const std::vector<ActorId> members = Workers(runtime, &tally, 1, 3);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, members);
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 9);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(tally.by_member[members[0]], (std::vector<uint64_t>{1, 4, 7}));
  EXPECT_EQ(tally.by_member[members[1]], (std::vector<uint64_t>{2, 5, 8}));
  EXPECT_EQ(tally.by_member[members[2]], (std::vector<uint64_t>{3, 6, 9}));
}

TEST(RouterTest, RoundRobinOverRemoteMembersRotatesAndRepliesReachTheSender) {
  TestRuntime runtime({.nodes = 3});
  RouterTally tally;
  std::vector<ActorId> members = Workers(runtime, &tally, 2, 2);
  members.push_back(runtime.Register(std::make_unique<RouterTestWorker>(&tally), 3));
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, members);
  const ActorId edge =
      runtime.AllocateEdgeActor(3);  // a sender on yet another node than the router
  SendJobs(runtime, router, edge, 6);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(tally.by_member[members[0]], (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(tally.by_member[members[1]], (std::vector<uint64_t>{2, 5}));
  EXPECT_EQ(tally.by_member[members[2]], (std::vector<uint64_t>{3, 6}));
  // Each reply comes straight from the worker, with the request's cookie.
  std::map<uint64_t, ActorId> replied;
  for (EventHandlePtr& ev : runtime.TakeEdgeEvents(edge)) {
    const auto* done = ev->Get<EvRouterTestDone>();
    ASSERT_NE(done, nullptr) << ev->ToString();
    EXPECT_EQ(ev->cookie(), done->record.seq());
    replied[done->record.seq()] = ev->sender();
  }
  ASSERT_EQ(replied.size(), 6u);
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    EXPECT_EQ(replied[seq], members[(seq - 1) % 3]) << seq;
  }
}

TEST(RouterTest, AnAskThroughTheRouterIsAnsweredByTheWorker) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  const ActorId router =
      RegisterRouter(runtime, RoutingPolicy::kRoundRobin, Workers(runtime, &tally, 2, 2));
  std::optional<absl::StatusOr<uint64_t>> local_result;
  std::optional<absl::StatusOr<uint64_t>> remote_result;
  runtime.Register(std::make_unique<RouterTestAsker>(router, &local_result), 1);
  runtime.Register(std::make_unique<RouterTestAsker>(router, &remote_result), 2);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(local_result.has_value());
  ASSERT_TRUE(local_result->ok()) << local_result->status();
  EXPECT_EQ(**local_result, 42u);
  ASSERT_TRUE(remote_result.has_value());
  ASSERT_TRUE(remote_result->ok()) << remote_result->status();
  EXPECT_EQ(**remote_result, 42u);
  EXPECT_EQ(tally.handled[42], 2);
}

// Sends every key of 0..keys-1 `rounds` times; returns key -> the one member that handled it.
std::map<std::string, ActorId> OwnersAfter(TestRuntime& runtime, RouterTally& tally,
                                           const ActorId& router, int keys, int rounds) {
  tally.by_key.clear();
  const ActorId edge = runtime.AllocateEdgeActor(1);
  for (int round = 0; round < rounds; ++round) {
    for (int key = 0; key < keys; ++key) {
      runtime.Send(router, std::make_unique<EvRouterTestJob>(key, absl::StrCat("user-", key)),
                   edge);
    }
  }
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  std::map<std::string, ActorId> owners;
  for (const auto& [key, handlers] : tally.by_key) {
    EXPECT_EQ(handlers.size(), 1u) << key << " went to more than one member";
    owners[key] = *handlers.begin();
  }
  EXPECT_EQ(owners.size(), static_cast<size_t>(keys));
  return owners;
}

TEST(RouterTest, ConsistentHashSendsAKeyToOneMemberAndARemovalMovesOnlyItsKeys) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  std::vector<ActorId> members = Workers(runtime, &tally, 1, 3);
  members.push_back(runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2));
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kConsistentHash, members);
  const std::map<std::string, ActorId> before = OwnersAfter(runtime, tally, router, 200, 3);
  std::map<ActorId, int> load;
  for (const auto& [key, owner] : before) {
    ++load[owner];
  }
  ASSERT_EQ(load.size(), 4u) << "200 keys over 4 members x 64 points leave none empty";

  const ActorId leaving = members[1];
  runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{leaving}));
  const std::map<std::string, ActorId> after = OwnersAfter(runtime, tally, router, 200, 1);
  for (const auto& [key, owner] : before) {
    if (owner == leaving) {
      EXPECT_NE(after.at(key), leaving) << key;
    } else {
      EXPECT_EQ(after.at(key), owner) << key << " moved though its member stayed";
    }
  }

  // Back again: it takes exactly its old keys back, and no others move.
  runtime.Send(router, std::make_unique<EvRouterAdd>(std::vector<ActorId>{leaving}));
  EXPECT_EQ(OwnersAfter(runtime, tally, router, 200, 1), before);
}

TEST(RouterTest, ConsistentHashGivesTheSameMappingOnEveryNodeWhateverTheOrderOfMembers) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  std::vector<ActorId> members = Workers(runtime, &tally, 1, 2);
  for (const ActorId& id : Workers(runtime, &tally, 2, 2)) {
    members.push_back(id);
  }
  const ActorId on_one = RegisterRouter(runtime, RoutingPolicy::kConsistentHash, members, 1);
  const std::map<std::string, ActorId> first = OwnersAfter(runtime, tally, on_one, 100, 1);
  std::vector<ActorId> reversed(members.rbegin(), members.rend());
  const ActorId on_two = RegisterRouter(runtime, RoutingPolicy::kConsistentHash, reversed, 2);
  EXPECT_EQ(OwnersAfter(runtime, tally, on_two, 100, 1), first);
}

TEST(RouterTest, BroadcastGivesEveryMemberEachEventExactlyOnce) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  std::vector<ActorId> members = Workers(runtime, &tally, 1, 2);
  members.push_back(runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2));
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kBroadcast, members);
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 5);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  for (const ActorId& member : members) {
    EXPECT_EQ(tally.by_member[member], (std::vector<uint64_t>{1, 2, 3, 4, 5})) << member;
  }
  // Copies are made from bytes: a local event cannot be broadcast, and says so.
  runtime.Send(router, std::make_unique<EvRouterTestLocal>(), edge, kTrackDelivery, 99);
  auto refused = runtime.GrabEdgeEvent<EvUndelivered>(
      edge, [](const EvUndelivered& lost, auto&) { return lost.cookie == 99; });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->reason, UndeliveredReason::kNotSerializable);
}

TEST(RouterTest, IsMailboxIdleSeesQueuedEventsOfLocalActorsOnly) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  const ActorId worker = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId remote = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ActorSystem& node = runtime.node(1);
  EXPECT_EQ(IsMailboxIdle(node, worker), std::optional<bool>(true));
  runtime.Send(worker, std::make_unique<EvRouterTestJob>(1, "a"));
  EXPECT_EQ(IsMailboxIdle(node, worker), std::optional<bool>(false));  // queued, not handled
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(IsMailboxIdle(node, worker), std::optional<bool>(true));
  EXPECT_EQ(IsMailboxIdle(node, remote), std::nullopt);
  EXPECT_EQ(IsMailboxIdle(node, ActorId()), std::nullopt);
  EXPECT_EQ(IsMailboxIdle(node, ServiceId("svc")), std::nullopt);
}

TEST(RouterTest, SmallestMailboxPrefersTheIdleMember) {
  TestRuntime runtime({.nodes = 1});
  RouterTally tally;
  bool stop = false;
  // The looper's mailbox is never idle (a job routed to it would be dropped: it has no handler).
  const ActorId idle = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kSmallestMailbox, {idle});
  // Bootstrapped and the router's watch handled: the worker's mailbox is idle. (Before, it held
  // the watch, and a tie with the looper would go round-robin.)
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  const ActorId looper = runtime.Register(std::make_unique<RouterTestLooper>(&stop), 1);
  const ActorId edge = runtime.AllocateEdgeActor(1);
  runtime.Send(router, std::make_unique<EvRouterAdd>(std::vector<ActorId>{looper}), edge);
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    runtime.Send(router, std::make_unique<EvRouterTestJob>(seq, "x"), edge);
    ASSERT_TRUE(runtime.DispatchUntil(
        [&] { return tally.handled[seq] == 1; },
        DispatchOptions{.max_events = 10'000, .max_time = absl::Seconds(10), .jump_timers = true}));
  }
  EXPECT_EQ(tally.by_member[idle].size(), 10u);
  EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{idle, looper}));
  stop = true;
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
}

TEST(RouterTest, SmallestMailboxSpreadsABurstOverRemoteMembersByEventsNotSeenHandled) {
  TestRuntime runtime({.nodes = 2, .latency = absl::Milliseconds(1)});
  RouterTally tally;
  const std::vector<ActorId> members = Workers(runtime, &tally, 2, 4);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kSmallestMailbox, members);
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 40);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  // Nothing is seen handled within the burst (the link takes 1 ms), so the router spreads it
  // evenly: each member's count of events not seen handled differs by at most one at any time.
  for (const ActorId& member : members) {
    EXPECT_EQ(tally.by_member[member].size(), 10u) << member;
  }
  EXPECT_TRUE(Reports(runtime, edge).empty());
}

TEST(RouterTest, TheHeaderExampleRoutesAnOrderByItsUser) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  ActorSystem* system = &runtime.node(1);
  const ActorId worker_a = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId worker_b = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId worker_c = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId worker_on_node_2 = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
  // clang-format off
  // [doc-example: node/router.h]
  troupe::node::RouterOptions options;
  options.policy = troupe::node::RoutingPolicy::kConsistentHash;
  options.key = [](troupe::EventHandle& ev) -> std::optional<std::string> {
    const auto* order = ev.Get<EvOrder>();   // parses an order that came from another node
    return order == nullptr ? std::nullopt : std::optional<std::string>(order->record.text());
  };
  options.members = {worker_a, worker_b, worker_on_node_2};
  troupe::ActorId orders = system->Register(std::make_unique<troupe::node::Router>(options));
  system->Send(orders, std::make_unique<EvOrder>("alice"));   // to the member owning "alice"
  system->Send(orders, std::make_unique<troupe::node::EvRouterAdd>(
                           std::vector<troupe::ActorId>{worker_c}));
  // [end doc-example]
  // clang-format on
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(tally.by_key["alice"].size(), 1u);
  EXPECT_EQ(MembersOf(runtime, orders),
            (std::vector<ActorId>{worker_a, worker_b, worker_on_node_2, worker_c}));
}

// -- membership ---------------------------------------------------------------------------------

TEST(RouterTest, MembersAreAddedAndRemovedAtRunTimeFromAnyNode) {
  TestRuntime runtime({.nodes = 2});
  RouterTally tally;
  const std::vector<ActorId> workers = Workers(runtime, &tally, 2, 3);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {workers[0]});
  const ActorId remote_edge = runtime.AllocateEdgeActor(2);
  runtime.Send(router,
               std::make_unique<EvRouterAdd>(
                   std::vector<ActorId>{workers[1], workers[2], workers[1], ActorId()}),
               remote_edge);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);  // the ask below has another sender
  EXPECT_EQ(MembersOf(runtime, router), workers);
  runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{workers[0]}),
               remote_edge);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{workers[1], workers[2]}));
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 4);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(tally.by_member[workers[0]].empty());
  EXPECT_EQ(tally.by_member[workers[1]], (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(tally.by_member[workers[2]], (std::vector<uint64_t>{2, 4}));
}

TEST(RouterTest, AnEmptyRouterReportsToATrackingSenderAndDeadLettersTheRest) {
  TestRuntime runtime({.nodes = 1});
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {});
  const ActorId edge = runtime.AllocateEdgeActor(1);
  runtime.Send(router, std::make_unique<EvRouterTestJob>(1, "a"), edge, kTrackDelivery, 5);
  auto lost = runtime.GrabEdgeEvent<EvUndelivered>(edge);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->reason, UndeliveredReason::kNoRoute);
  EXPECT_EQ(lost->cookie, 5u);
  EXPECT_EQ(lost.handle().sender(), router);

  runtime.Send(router, std::make_unique<EvRouterTestJob>(2, "b"), edge);  // untracked
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  uint64_t dead = 0;
  for (const DeadLetterCount& count : runtime.node(1).DeadLetterCounts()) {
    if (count.type == kEvRouterTestJob && count.reason == UndeliveredReason::kNoRoute) {
      dead += count.count;
    }
  }
  EXPECT_EQ(dead, 1u);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u);
}

// -- members that end ---------------------------------------------------------------------------

// Every seq in 1..count handled exactly once, or reported; `unsure_ok`: a seq may be both, when
// reported unsure. Returns how many were reported.
size_t ExpectEachHandledOnceOrReported(
    const RouterTally& tally,
    const std::multimap<uint64_t, std::pair<UndeliveredReason, bool>>& reports, uint64_t count) {
  size_t reported = 0;
  for (uint64_t seq = 1; seq <= count; ++seq) {
    const auto found = tally.handled.find(seq);
    const int handled = found == tally.handled.end() ? 0 : found->second;
    const size_t times_reported = reports.count(seq);
    EXPECT_LE(handled, 1) << "seq " << seq << " handled twice";
    EXPECT_LE(times_reported, 1u) << "seq " << seq << " reported twice";
    EXPECT_GE(handled + times_reported, 1u) << "seq " << seq << " neither handled nor reported";
    if (handled == 1 && times_reported == 1) {
      EXPECT_TRUE(reports.find(seq)->second.second) << "seq " << seq << " handled, reported sure";
    }
    reported += times_reported;
  }
  EXPECT_EQ(reports.size(), reported) << "a report for an event never sent";
  return reported;
}

TEST(RouterTest, ALocalMemberThatEndsMidStreamHasItsEventsReRoutedNotLost) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 1, .seed = seed});
    RouterTally tally;
    std::vector<ActorId> members = Workers(runtime, &tally, 1, 2);
    const ActorId quitter =
        runtime.Register(std::make_unique<RouterTestWorker>(&tally, /*stop_after=*/3), 1);
    members.push_back(quitter);
    const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, members);
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 30);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    // Local: certain, so re-routed; every job handled exactly once, nothing reported.
    EXPECT_EQ(ExpectEachHandledOnceOrReported(tally, Reports(runtime, edge), 30), 0u);
    EXPECT_EQ(tally.by_member[quitter].size(), 3u);
    EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{members[0], members[1]}));
  }
}

TEST(RouterTest, TheLastLocalMemberEndingLeavesItsEventsReportedAsByAnEmptyRouter) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 1, .seed = seed});
    RouterTally tally;
    const ActorId only =
        runtime.Register(std::make_unique<RouterTestWorker>(&tally, /*stop_after=*/3), 1);
    const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {only});
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 10);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    const auto reports = Reports(runtime, edge);
    EXPECT_EQ(ExpectEachHandledOnceOrReported(tally, reports, 10), 7u);
    for (const auto& [seq, report] : reports) {
      EXPECT_EQ(report.first, UndeliveredReason::kNoRoute) << seq;
      EXPECT_FALSE(report.second) << seq;
    }
  }
}

TEST(RouterTest, ABroadcastCopyALocalMemberNeverHandledIsReportedNotGivenToAnother) {
  TestRuntime runtime({.nodes = 1});
  RouterTally tally;
  const ActorId steady = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 1);
  const ActorId quitter =
      runtime.Register(std::make_unique<RouterTestWorker>(&tally, /*stop_after=*/2), 1);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kBroadcast, {steady, quitter});
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 6);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(tally.by_member[steady], (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tally.by_member[quitter], (std::vector<uint64_t>{1, 2}));
  // Jobs 3..6 reached the quitter's mailbox after it ended or sat in it: one sure report each
  // (none for a copy routed after the router dropped it: that one was never sent).
  const auto reports = Reports(runtime, edge);
  for (const auto& [seq, report] : reports) {
    EXPECT_GE(seq, 3u);
    EXPECT_EQ(report.first, UndeliveredReason::kActorNotFound) << seq;
    EXPECT_FALSE(report.second) << seq;
  }
  for (uint64_t seq = 3; seq <= 6; ++seq) {
    EXPECT_LE(reports.count(seq), 1u) << seq;
  }
}

TEST(RouterTest, AMemberThatNoLongerExistsIsDroppedNotFoundAndItsEventsReportedSure) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 2, .seed = seed, .latency = absl::Microseconds(100)});
    RouterTally tally;
    const ActorId gone = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
    runtime.Send(gone, std::make_unique<EvPoison>());
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    const ActorId alive = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
    const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {gone, alive});
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 10);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    const auto reports = Reports(runtime, edge);
    EXPECT_GE(ExpectEachHandledOnceOrReported(tally, reports, 10), 1u);
    for (const auto& [seq, report] : reports) {
      EXPECT_FALSE(report.second) << seq << ": routed after the watch found no actor";
    }
    EXPECT_EQ(JobDeadLetters(runtime, 1), 0u);
    EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{alive}));
  }
}

TEST(RouterTest, ARemovedMembersRefusedProbeIsSentAgainSoItIsForgotten) {
  TestRuntime runtime({.nodes = 2, .latency = absl::Microseconds(100)});
  RouterTally tally;
  const ActorId leaving = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {leaving});
  int refused = 0;
  runtime.AddObserver([&refused](NodeId, EventHandle& ev) {
    if (ev.type() == kEvRouterProbe && refused == 0) {
      ++refused;
      return testing::Verdict::Drop(UndeliveredReason::kOverloaded);
    }
    return testing::Verdict::Pass();
  });
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 3);
  runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{leaving}), edge);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(tally.by_member[leaving].size(), 3u);
  // Seen handled by the second probe, so forgotten: its end reports nothing.
  runtime.Send(leaving, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(Reports(runtime, edge).empty());
}

TEST(RouterTest, AMemberAddedBackWhileItsEventsAreOutstandingIsAMemberAgain) {
  TestRuntime runtime({.nodes = 2, .latency = absl::Microseconds(100)});
  RouterTally tally;
  const std::vector<ActorId> members = Workers(runtime, &tally, 2, 2);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, members);
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 4);
  runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{members[0]}), edge);
  runtime.Send(router, std::make_unique<EvRouterAdd>(std::vector<ActorId>{members[0]}), edge);
  SendJobs(runtime, router, edge, 4, /*first=*/5);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(Reports(runtime, edge).empty());
  EXPECT_EQ(tally.by_member[members[0]].size() + tally.by_member[members[1]].size(), 8u);
  EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{members[1], members[0]}));
  // Still watched: its end now reports nothing (all seen handled) and drops it.
  runtime.Send(members[0], std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{members[1]}));
}

TEST(RouterTest, ARemoteMemberThatEndsMidStreamHasItsEventsReportedUnsure) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 2, .seed = seed, .latency = absl::Microseconds(seed * 10)});
    RouterTally tally;
    std::vector<ActorId> members = Workers(runtime, &tally, 2, 2);
    const ActorId quitter =
        runtime.Register(std::make_unique<RouterTestWorker>(&tally, /*stop_after=*/3), 2);
    members.push_back(quitter);
    const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, members);
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 30);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    const auto reports = Reports(runtime, edge);
    const size_t reported = ExpectEachHandledOnceOrReported(tally, reports, 30);
    EXPECT_GE(reported, 1u) << "the quitter had 10 jobs and handled 3";
    // What its node sent back after its end reached a live forward target, not the dead letters.
    EXPECT_EQ(JobDeadLetters(runtime, 1), 0u);
    for (const auto& [seq, report] : reports) {
      EXPECT_TRUE(report.second) << seq;
      EXPECT_EQ(report.first, UndeliveredReason::kActorNotFound) << seq;
    }
    EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{members[0], members[1]}));
  }
}

TEST(RouterTest, AMemberWhoseNodeIsKilledIsDroppedAndItsEventsReported) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 3, .seed = seed, .latency = absl::Microseconds(50)});
    RouterTally tally;
    const std::vector<ActorId> doomed = Workers(runtime, &tally, 2, 2);
    const std::vector<ActorId> safe = Workers(runtime, &tally, 3, 1);
    const ActorId router =
        RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {doomed[0], safe[0], doomed[1]});
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 60);
    // Kill node 2 part-way: some of its jobs handled, some queued there, some on the link.
    ASSERT_TRUE(runtime.DispatchUntil(
        [&] {
          return tally.by_member[doomed[0]].size() + tally.by_member[doomed[1]].size() >=
                 4 + seed % 5;
        },
        DispatchOptions{
            .max_events = 100'000, .max_time = absl::Seconds(10), .jump_timers = true}));
    runtime.KillNode(2);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    const auto reports = Reports(runtime, edge);
    EXPECT_GE(ExpectEachHandledOnceOrReported(tally, reports, 60), 1u);
    for (const auto& [seq, report] : reports) {
      EXPECT_EQ(report.first, UndeliveredReason::kDisconnected) << seq;
      EXPECT_TRUE(report.second) << seq;
    }
    EXPECT_GE(tally.by_member[safe[0]].size(), 20u);
    EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{safe[0]}));
  }
}

TEST(RouterTest, APartitionReportsEachInFlightEventOnceThoughBothTheLinkAndTheWatchSeeIt) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 2, .seed = seed, .latency = absl::Microseconds(100)});
    RouterTally tally;
    const std::vector<ActorId> remote = Workers(runtime, &tally, 2, 2);
    const std::vector<ActorId> local = Workers(runtime, &tally, 1, 1);
    const ActorId router =
        RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {remote[0], local[0], remote[1]});
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 30);
    ASSERT_TRUE(runtime.DispatchUntil(
        [&] { return tally.by_member[local[0]].size() >= 1 + seed % 7; },
        DispatchOptions{
            .max_events = 100'000, .max_time = absl::Seconds(10), .jump_timers = true}));
    runtime.Partition(1, 2);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    ExpectEachHandledOnceOrReported(tally, Reports(runtime, edge), 30);
    EXPECT_EQ(MembersOf(runtime, router), (std::vector<ActorId>{local[0]}));
  }
}

TEST(RouterTest, ARemovedRemoteMemberStaysAccountedForUntilItsEventsAreSeenHandled) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    TestRuntime runtime({.nodes = 3, .seed = seed, .latency = absl::Microseconds(100)});
    RouterTally tally;
    const ActorId leaving = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
    const ActorId staying = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 3);
    const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {leaving, staying});
    const ActorId edge = runtime.AllocateEdgeActor(1);
    SendJobs(runtime, router, edge, 20);
    runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{leaving}), edge);
    SendJobs(runtime, router, edge, 10, /*first=*/21);
    // Node 2 dies with some of the removed member's jobs unhandled: they are still reported.
    ASSERT_TRUE(runtime.DispatchUntil(
        [&] { return tally.by_member[leaving].size() >= 1 + seed % 5; },
        DispatchOptions{
            .max_events = 100'000, .max_time = absl::Seconds(10), .jump_timers = true}));
    runtime.KillNode(2);
    ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    ExpectEachHandledOnceOrReported(tally, Reports(runtime, edge), 30);
    EXPECT_EQ(tally.by_member[staying].size(), 20u);  // 10 of the first 20, and the last 10
  }
}

TEST(RouterTest, ARemovedRemoteMemberThatFinishesIsForgotten) {
  TestRuntime runtime({.nodes = 2, .latency = absl::Microseconds(100)});
  RouterTally tally;
  const ActorId leaving = runtime.Register(std::make_unique<RouterTestWorker>(&tally), 2);
  const ActorId router = RegisterRouter(runtime, RoutingPolicy::kRoundRobin, {leaving});
  const ActorId edge = runtime.AllocateEdgeActor(1);
  SendJobs(runtime, router, edge, 5);
  runtime.Send(router, std::make_unique<EvRouterRemove>(std::vector<ActorId>{leaving}), edge);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(tally.by_member[leaving].size(), 5u);
  // Forgotten: unwatched, so its end later reports nothing and the router is empty.
  runtime.Send(leaving, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(Reports(runtime, edge).empty());
  EXPECT_TRUE(MembersOf(runtime, router).empty());
  // The router ends on poison with its forward targets: only the edges are left on node 1.
  const uint64_t before = runtime.node(1).Counters().live_mailboxes;
  runtime.Send(router, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.node(1).Counters().live_mailboxes, before - 1);
}

}  // namespace
}  // namespace troupe::node::router_test
