// SPDX-License-Identifier: Apache-2.0
//
// Delivery rules: plain sends, the service rewrite, Undelivered for dead / never-existing /
// unknown-service / unknown-node recipients, drop counting, forward-on-nondelivery, and the rule
// that a reused mailbox never hands a stale event to its new actor.
//
// Every test here but two runs on troupe::testing::TestRuntime (one thread, seeded dispatch order,
// simulated time). The delivery rules are decisions the runtime takes per event, not properties of
// its threads, so one thread checks them exactly: "nothing else arrived" is a fact once dispatching
// is idle, not a timeout, and the mailbox-reuse cases are reached on purpose rather than by luck.
// The multi-threaded machinery (a mailbox run by one worker at a time, per-sender order under
// contention, the scheduler thread) is tested on real threads in ordering_test.cc and
// scheduler_test.cc.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::EvValue;
using testutil::kEvValue;

// One node configured like the real-thread tests' nodes (System, User, Batch, IC).
TestRuntimeOptions OneNode(proto::ActorSystemConfig config = testutil::SmallConfig()) {
  return {.config = std::move(config)};
}

// An id on this node whose hint was never handed out.
ActorId NeverExisting() { return ActorId(0, 1, 0xDEAD, 0x7FFFFFF0u); }

using testutil::Mortal;

// Registers a Mortal, poisons it and dispatches until it is destroyed; returns its id.
ActorId MakeDeadActor(TestRuntime& runtime) {
  const auto destroyed = std::make_shared<bool>(false);
  const ActorId id = runtime.Register(std::make_unique<Mortal>(destroyed));
  EXPECT_TRUE(id);
  runtime.Send(id, std::make_unique<EvPoison>());
  EXPECT_TRUE(runtime.DispatchUntil([&destroyed] { return *destroyed; }))
      << "poison did not end it";
  return id;
}

// What one EvUndelivered said.
struct Report {
  UndeliveredReason reason;
  EventType source_type;
};

// Dispatches until idle, then takes every event `edge` holds: returns its EvUndelivered reports by
// cookie, and fails the test on any other event or on two reports with one cookie.
std::map<uint64_t, Report> DrainUndelivered(TestRuntime& runtime, const ActorId& edge) {
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  std::map<uint64_t, Report> reports;
  for (size_t left = runtime.EdgeEventCount(edge); left > 0; --left) {
    EventHandlePtr ev = runtime.GrabEdgeEvent(edge);
    if (ev == nullptr) {
      break;  // GrabEdgeEvent recorded the failure
    }
    const EvUndelivered* undelivered = ev->Get<EvUndelivered>();
    if (undelivered == nullptr) {
      ADD_FAILURE() << "edge " << edge << " got " << ev->ToString() << ", not an EvUndelivered";
      continue;
    }
    EXPECT_FALSE(undelivered->unsure) << "a local loss is certain";
    const bool first =
        reports.emplace(undelivered->cookie, Report{undelivered->reason, undelivered->source_type})
            .second;
    EXPECT_TRUE(first) << "two reports for cookie " << undelivered->cookie;
  }
  return reports;
}

TEST(DeliveryTest, DeliversEnvelopeToRegisteredActor) {
  TestRuntime runtime(OneNode());
  const ActorId id = runtime.AllocateEdgeActor();
  ASSERT_TRUE(id);
  EXPECT_EQ(id.node_id(), runtime.node().node_id());
  EXPECT_EQ(id.pool(), *runtime.node().PoolIndex("User"));
  const ActorId sender(0, 0, 4242, 0x7FFFFFF1u);
  runtime.Send(id, std::make_unique<EvValue>(17), sender, kNoFlags, 99);
  ASSERT_TRUE(runtime.Expect<EvValue>().From(sender).To(id));
  auto got = runtime.GrabEdgeEvent<EvValue>(id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->value, 17u);
  EXPECT_EQ(got.handle().cookie(), 99u);
  EXPECT_EQ(got.handle().sender(), sender);
  EXPECT_EQ(got.handle().recipient(), id);
  EXPECT_EQ(got.handle().flags(), kNoFlags);
  EXPECT_TRUE(got.handle().HasEvent()) << "within one node an event is moved, never serialized";
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(id), 0u);
}

// -- services -----------------------------------------------------------------------------------

TEST(DeliveryTest, RewritesServiceIdToRegisteredActor) {
  TestRuntime runtime(OneNode());
  const ActorId actor = runtime.AllocateEdgeActor();
  const ActorId service = ServiceId("echo");
  ASSERT_TRUE(runtime.node().RegisterService(service, actor).ok());
  EXPECT_EQ(runtime.node().LookupService(service), actor);

  runtime.Send(service, std::make_unique<EvValue>(1));
  // A service id qualified with this node's id resolves locally too.
  runtime.Send(ServiceId("echo", runtime.node().node_id()), std::make_unique<EvValue>(2));
  for (uint64_t value = 1; value <= 2; ++value) {
    auto got = runtime.GrabEdgeEvent<EvValue>(actor);
    ASSERT_TRUE(got) << "value " << value;
    EXPECT_EQ(got->value, value);
    // The handle was rewritten once, to the actor.
    EXPECT_EQ(got.handle().recipient(), actor);
  }
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(actor), 0u);
}

TEST(DeliveryTest, ReRegisteringServiceRedirectsSends) {
  TestRuntime runtime(OneNode());
  const ActorId first = runtime.AllocateEdgeActor();
  const ActorId second = runtime.AllocateEdgeActor();
  const ActorId service = ServiceId("worker");
  ASSERT_TRUE(runtime.node().RegisterService(service, first).ok());
  runtime.Send(service, std::make_unique<EvValue>(1));
  // Expect resolves the service when the event is handled, before the re-registration below.
  ASSERT_TRUE(runtime.Expect<EvValue>().To(service));
  auto at_first = runtime.GrabEdgeEvent<EvValue>(first);
  ASSERT_TRUE(at_first);
  EXPECT_EQ(at_first->value, 1u);

  ASSERT_TRUE(runtime.node().RegisterService(service, second).ok());
  EXPECT_EQ(runtime.node().LookupService(service), second);
  runtime.Send(service, std::make_unique<EvValue>(2));
  auto at_second = runtime.GrabEdgeEvent<EvValue>(second);
  ASSERT_TRUE(at_second);
  EXPECT_EQ(at_second->value, 2u);
  EXPECT_EQ(at_second.handle().recipient(), second);
  // Idle: nothing is left anywhere, so the old actor got nothing more.
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(first), 0u);
  EXPECT_EQ(runtime.EdgeEventCount(second), 0u);
}

TEST(DeliveryTest, RejectsServiceMappedToService) {
  TestRuntime runtime(OneNode());
  ActorSystem& system = runtime.node();
  const ActorId actor = runtime.AllocateEdgeActor();
  const ActorId service = ServiceId("front");
  ASSERT_TRUE(system.RegisterService(service, actor).ok());

  const absl::Status status = system.RegisterService(service, ServiceId("back"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const absl::Status remote = system.RegisterService(ServiceId("x"), ServiceId("y", 3));
  EXPECT_EQ(remote.code(), absl::StatusCode::kInvalidArgument) << remote;
  // The rejected call left the earlier mapping alone and created none.
  EXPECT_EQ(system.LookupService(service), actor);
  EXPECT_TRUE(system.LookupService(ServiceId("x")).IsEmpty());
}

TEST(DeliveryTest, RejectsNonServiceKey) {
  TestRuntime runtime(OneNode());
  ActorSystem& system = runtime.node();
  const ActorId actor = runtime.AllocateEdgeActor();
  const ActorId other = runtime.AllocateEdgeActor();
  const absl::Status status = system.RegisterService(other, actor);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const absl::Status empty = system.RegisterService(ActorId(), actor);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument) << empty;
  // A plain id still goes to its own actor, not rewritten.
  runtime.Send(other, std::make_unique<EvValue>(5));
  auto got = runtime.GrabEdgeEvent<EvValue>(other);
  ASSERT_TRUE(got);
  EXPECT_EQ(got.handle().recipient(), other);
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(actor), 0u);
}

TEST(DeliveryTest, LookupServiceReturnsMappingOrEmpty) {
  TestRuntime runtime(OneNode());
  ActorSystem& system = runtime.node();
  const ActorId actor = runtime.AllocateEdgeActor();
  EXPECT_TRUE(system.LookupService(ServiceId("none")).IsEmpty());
  ASSERT_TRUE(system.RegisterService(ServiceId("abcdefghijkl"), actor).ok());
  EXPECT_EQ(system.LookupService(ServiceId("abcdefghijkl")), actor);
  // The node id of the key is ignored by the table.
  EXPECT_EQ(system.LookupService(ServiceId("abcdefghijkl", 9)), actor);
  EXPECT_TRUE(system.LookupService(ServiceId("abcdefghijk")).IsEmpty());
  // An empty actor removes the mapping.
  ASSERT_TRUE(system.RegisterService(ServiceId("abcdefghijkl"), ActorId()).ok());
  EXPECT_TRUE(system.LookupService(ServiceId("abcdefghijkl")).IsEmpty());
}

TEST(DeliveryTest, ServiceTableReportsFull) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  config.set_max_services(16);
  TestRuntime runtime(OneNode(config));
  ActorSystem& system = runtime.node();
  const ActorId actor(0, 0, 1, 1);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(system.RegisterService(ServiceId(absl::StrCat("svc", i)), actor).ok()) << i;
  }
  // Replacing an existing mapping needs no new slot.
  EXPECT_TRUE(system.RegisterService(ServiceId("svc3"), ActorId(0, 0, 2, 2)).ok());
  const absl::Status full = system.RegisterService(ServiceId("svc16"), actor);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(system.LookupService(ServiceId("svc3")), ActorId(0, 0, 2, 2));
  EXPECT_EQ(system.LookupService(ServiceId("svc15")), actor);
}

// -- undelivered --------------------------------------------------------------------------------

TEST(DeliveryTest, TracksUndeliveredToDeadActor) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const ActorId dead = MakeDeadActor(runtime);

  runtime.Send(dead, std::make_unique<EvValue>(1), probe, kTrackDelivery, 0xC0FFEE);
  auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(probe);
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(undelivered->source_type, kEvValue);
  EXPECT_EQ(undelivered->cookie, 0xC0FFEEu);
  EXPECT_FALSE(undelivered->unsure);
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u) << "one report, and the event itself never came";
}

TEST(DeliveryTest, TracksUndeliveredToNeverExistingActor) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();

  // A hint never handed out.
  runtime.Send(NeverExisting(), std::make_unique<EvValue>(1), probe, kTrackDelivery, 11);
  // A live mailbox (the probe's own) but a local id nobody ever had.
  const ActorId forged(0, probe.pool(), probe.local_id() + 1'000'000, probe.hint());
  runtime.Send(forged, std::make_unique<EvValue>(2), probe, kTrackDelivery, 12);
  // Hint 0 is never used.
  runtime.Send(ActorId(0, 0, 5, 0), std::make_unique<testutil::EvKick>(), probe, kTrackDelivery,
               13);

  // DrainUndelivered fails on anything but a report: the forged event never reached the probe's
  // handler although it went through the probe's mailbox.
  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports.at(11).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(reports.at(11).source_type, kEvValue);
  EXPECT_EQ(reports.at(12).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(reports.at(12).source_type, kEvValue);
  EXPECT_EQ(reports.at(13).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(reports.at(13).source_type, testutil::kEvKick);
}

TEST(DeliveryTest, TracksUndeliveredToUnknownService) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  runtime.Send(ServiceId("nobody"), std::make_unique<EvValue>(1), probe, kTrackDelivery, 21);

  // A removed mapping is unknown again.
  const ActorId actor = runtime.AllocateEdgeActor();
  ASSERT_TRUE(runtime.node().RegisterService(ServiceId("gone"), actor).ok());
  ASSERT_TRUE(runtime.node().RegisterService(ServiceId("gone"), ActorId()).ok());
  runtime.Send(ServiceId("gone"), std::make_unique<EvValue>(2), probe, kTrackDelivery, 22);

  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports.at(21).reason, UndeliveredReason::kUnknownService);
  EXPECT_EQ(reports.at(21).source_type, kEvValue);
  EXPECT_EQ(reports.at(22).reason, UndeliveredReason::kUnknownService);
  EXPECT_EQ(runtime.EdgeEventCount(actor), 0u);
}

// The names reach every text sink the code base uses. Debian's abseil has its own
// absl::string_view, so absl::StrCat takes no std::string_view: the name is a const char*.
TEST(DeliveryTest, NamesUndeliveredReasonsForStrCatStreamsAndStringView) {
  EXPECT_EQ(absl::StrCat("(", UndeliveredReasonName(UndeliveredReason::kActorNotFound), ")"),
            "(actor-not-found)");
  std::ostringstream out;
  out << UndeliveredReasonName(UndeliveredReason::kOverloaded);
  EXPECT_EQ(out.str(), "overloaded");
  const std::string_view name = UndeliveredReasonName(UndeliveredReason::kNoRoute);
  EXPECT_EQ(name, "no-route");
  EXPECT_EQ(std::string_view(UndeliveredReasonName(static_cast<UndeliveredReason>(0))), "unknown");
}

TEST(DeliveryTest, TracksUndeliveredToUnknownNode) {
  TestRuntime runtime(OneNode());
  ASSERT_EQ(runtime.node().node_id(), 1u);
  ASSERT_EQ(runtime.node_count(), 1u);
  const ActorId probe = runtime.AllocateEdgeActor();
  runtime.Send(probe.WithNode(2), std::make_unique<EvValue>(1), probe, kTrackDelivery, 31);
  runtime.Send(ServiceId("echo", 5), std::make_unique<EvValue>(2), probe, kTrackDelivery, 32);
  // DrainUndelivered fails on anything but a report: neither reached the probe itself.
  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports.at(31).reason, UndeliveredReason::kNoRoute);
  EXPECT_EQ(reports.at(31).source_type, kEvValue);
  EXPECT_EQ(reports.at(32).reason, UndeliveredReason::kNoRoute);
}

// The two tests on real threads: a standalone node (no driver) has its own rule 1 branch — the
// installed RemoteRouter, else kNoRoute — which TestRuntime replaces with its simulated
// interconnect.
TEST(DeliveryTest, StandaloneNodeReportsRemoteRecipientsAsNoRoute) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  testutil::Inbox inbox;
  const ActorId probe = system->Register(std::make_unique<testutil::Recorder>(&inbox));
  system->Send(probe.WithNode(2), std::make_unique<EvValue>(1), kTrackDelivery, 41, probe);
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered));
  const std::vector<testutil::Received> reports = inbox.OfType(kEvUndelivered);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].reason, UndeliveredReason::kNoRoute);
  EXPECT_EQ(reports[0].undelivered_cookie, 41u);
}

// Collects what the runtime routes to other nodes.
class CollectingRouter final : public RemoteRouter {
 public:
  void Route(EventHandlePtr ev) override {
    troupe::MutexLock lock(&mu_);
    routed_.push_back(std::move(ev));
  }
  std::vector<EventHandlePtr> Take() {
    troupe::MutexLock lock(&mu_);
    return std::move(routed_);
  }

 private:
  troupe::Mutex mu_;
  std::vector<EventHandlePtr> routed_ ABSL_GUARDED_BY(mu_);
};

TEST(DeliveryTest, InstalledRemoteRouterTakesEventsForOtherNodes) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  auto shared_router = std::make_shared<CollectingRouter>();
  CollectingRouter& router = *shared_router;
  SetRemoteRouter(*system, shared_router);
  testutil::Inbox inbox;
  const ActorId local = system->Register(std::make_unique<testutil::Recorder>(&inbox));
  system->Send(ActorId(3, 0, 10, 1), std::make_unique<EvValue>(1), kTrackDelivery, 51, local);
  system->Send(ServiceId("echo", 4), std::make_unique<EvValue>(2), kNoFlags, 52, local);
  system->Send(local, std::make_unique<EvValue>(3));  // local: not routed
  ASSERT_TRUE(inbox.WaitForType(kEvValue));
  std::vector<EventHandlePtr> routed = router.Take();
  ASSERT_EQ(routed.size(), 2u);
  EXPECT_EQ(routed[0]->recipient(), ActorId(3, 0, 10, 1));
  EXPECT_EQ(routed[0]->cookie(), 51u);
  EXPECT_EQ(routed[1]->recipient(), ServiceId("echo", 4)) << "a remote service id is not rewritten";
  SetRemoteRouter(*system, nullptr);
  system->Send(ActorId(3, 0, 10, 1), std::make_unique<EvValue>(4), kTrackDelivery, 53, local);
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered));
  EXPECT_EQ(inbox.OfType(kEvUndelivered)[0].reason, UndeliveredReason::kNoRoute);
  system->Stop();
}

TEST(DeliveryTest, DropsAndCountsUntrackedUndeliverable) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const ActorId dead = MakeDeadActor(runtime);
  auto dropped = [&runtime] { return runtime.node().Counters().dropped_events; };
  const uint64_t before = dropped();

  // Unknown service and never-existing hint are decided by the sender, at once.
  runtime.Send(ServiceId("nobody"), std::make_unique<EvValue>(1), probe, kNoFlags, 1);
  runtime.Send(NeverExisting(), std::make_unique<EvValue>(2), probe, kNoFlags, 2);
  EXPECT_EQ(dropped(), before + 2);
  // A dead actor is found missing by its mailbox's reader: counted when that runs.
  runtime.Send(dead, std::make_unique<EvValue>(3), probe, kNoFlags, 3);
  // Tracking without a sender cannot report: dropped too.
  runtime.Send(dead, std::make_unique<EvValue>(4), ActorId(), kTrackDelivery, 4);
  EXPECT_EQ(dropped(), before + 2);

  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(dropped(), before + 4);
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u) << "an untracked loss is not reported";
}

TEST(DeliveryTest, ForwardsOnNondeliveryToForwardTarget) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const ActorId target = runtime.AllocateEdgeActor();
  const ActorId dead = MakeDeadActor(runtime);
  const uint64_t dropped_before = runtime.node().Counters().dropped_events;

  runtime.Send(std::make_unique<EventHandle>(dead, probe, std::make_unique<EvValue>(41),
                                             kForwardOnNondelivery | kTrackDelivery, 41, target));
  runtime.Send(std::make_unique<EventHandle>(ServiceId("nobody"), probe,
                                             std::make_unique<EvValue>(42), kForwardOnNondelivery,
                                             42, target));
  runtime.Send(std::make_unique<EventHandle>(NeverExisting(), probe, std::make_unique<EvValue>(43),
                                             kForwardOnNondelivery, 43, target));
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(runtime.EdgeEventCount(target), 3u);
  std::set<uint64_t> values;
  for (int i = 0; i < 3; ++i) {
    auto got = runtime.GrabEdgeEvent<EvValue>(target);
    ASSERT_TRUE(got);
    values.insert(got->value);
    EXPECT_EQ(got->value, got.handle().cookie()) << "body and cookie travel together";
    EXPECT_EQ(got.handle().sender(), probe) << "the original sender is kept";
    EXPECT_EQ(got.handle().recipient(), target);
    EXPECT_EQ(got.handle().flags() & kForwardOnNondelivery, 0u)
        << "a forwarded event is not forwarded again";
  }
  EXPECT_EQ(values, (std::set<uint64_t>{41, 42, 43}));
  // The forward replaced the Undelivered report, and nothing was dropped.
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u);
  EXPECT_EQ(runtime.node().Counters().dropped_events, dropped_before);
}

TEST(DeliveryTest, ForwardsOnNondeliveryOnlyOnce) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const ActorId dead = MakeDeadActor(runtime);
  const ActorId dead_target = MakeDeadActor(runtime);
  const uint64_t dropped_before = runtime.node().Counters().dropped_events;
  // The forward target is dead too: the event is reported to the tracking sender, not bounced.
  runtime.Send(std::make_unique<EventHandle>(dead, probe, std::make_unique<EvValue>(51),
                                             kForwardOnNondelivery | kTrackDelivery, 51,
                                             dead_target));
  // Untracked, it is dropped and counted once.
  runtime.Send(std::make_unique<EventHandle>(dead, probe, std::make_unique<EvValue>(52),
                                             kForwardOnNondelivery, 52, dead_target));
  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports.at(51).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(reports.at(51).source_type, kEvValue);
  EXPECT_EQ(runtime.node().Counters().dropped_events, dropped_before + 1);
}

TEST(DeliveryTest, FreedMailboxNeverDeliversStaleEventToNewActor) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const uint64_t live_before = runtime.node().Counters().live_mailboxes;
  const ActorId old_id = MakeDeadActor(runtime);
  EXPECT_EQ(runtime.node().Counters().live_mailboxes, live_before);

  // One thread: the old mailbox went idle with its last event, so the next Register takes it.
  const ActorId reused = runtime.AllocateEdgeActor();
  ASSERT_EQ(reused.hint(), old_id.hint()) << "the freed mailbox was not reused";
  EXPECT_NE(reused.local_id(), old_id.local_id()) << "local ids are never reused";
  EXPECT_NE(reused, old_id);

  // The stale send reaches the reused mailbox (same hint); its new actor must not see it.
  runtime.Send(old_id, std::make_unique<EvValue>(1), probe, kTrackDelivery, 61);
  runtime.Send(reused, std::make_unique<EvValue>(2), probe, kNoFlags, 62);
  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports.at(61).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(reports.at(61).source_type, kEvValue);
  ASSERT_EQ(runtime.EdgeEventCount(reused), 1u) << "the new actor received the stale event";
  auto got = runtime.GrabEdgeEvent<EvValue>(reused);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->value, 2u);
  EXPECT_EQ(got.handle().recipient(), reused);
}

// The interleaving the real-thread version could only hope for: an actor ends while a stale event
// still waits in its mailbox, and a Register comes before the reader has drained it.
TEST(DeliveryTest, DrainingFreedMailboxIsNotReusedUntilItsStaleEventsAreReported) {
  TestRuntime runtime(OneNode());
  const ActorId probe = runtime.AllocateEdgeActor();
  const auto destroyed = std::make_shared<bool>(false);
  const ActorId victim = runtime.Register(std::make_unique<Mortal>(destroyed));
  runtime.Send(victim, std::make_unique<EvPoison>());
  runtime.Send(victim, std::make_unique<EvValue>(1), probe, kTrackDelivery, 71);
  // Stops right after the poison's handler: the victim is gone, its mailbox freed but still held
  // by its reader with the EvValue queued.
  ASSERT_TRUE(runtime.Expect<EvPoison>().To(victim));
  ASSERT_TRUE(*destroyed);
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u);

  const ActorId during = runtime.AllocateEdgeActor();
  EXPECT_NE(during.hint(), victim.hint()) << "a mailbox still draining was handed out again";

  const std::map<uint64_t, Report> reports = DrainUndelivered(runtime, probe);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports.at(71).reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(runtime.EdgeEventCount(during), 0u);

  // Drained and idle: now it is reused, and the new actor starts with an empty queue.
  const ActorId after = runtime.AllocateEdgeActor();
  EXPECT_EQ(after.hint(), victim.hint());
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(after), 0u);
}

}  // namespace
}  // namespace troupe
