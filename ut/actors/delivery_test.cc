// SPDX-License-Identifier: Apache-2.0
//
// Delivery rules: plain sends, the service rewrite, Undelivered for dead / never-existing /
// unknown-service / unknown-node recipients, drop counting, forward-on-nondelivery, and the rule
// that a reused mailbox never hands a stale event to its new actor.
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::WaitTimeout;
using testutil::WaitUntil;

// An id on this node whose hint was never handed out.
ActorId NeverExisting() { return ActorId(0, 1, 0xDEAD, 0x7FFFFFF0u); }

// Registers a Recorder and waits until it has been poisoned and destroyed.
ActorId MakeDeadActor(ActorSystem& system) {
  Inbox inbox;
  troupe::Notification destroyed;
  const ActorId id = system.Register(std::make_unique<Recorder>(&inbox, &destroyed));
  EXPECT_TRUE(id);
  system.Send(id, std::make_unique<EvPoison>());
  EXPECT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout())) << "poison did not end it";
  return id;
}

// Waits for one EvUndelivered in `inbox` with `cookie` and returns it.
Received WaitUndelivered(Inbox& inbox, uint64_t cookie) {
  const bool got = inbox.WaitFor([cookie](const std::vector<Received>& events) {
    for (const Received& r : events) {
      if (r.type == kEvUndelivered && r.undelivered_cookie == cookie) {
        return true;
      }
    }
    return false;
  });
  EXPECT_TRUE(got) << "no EvUndelivered with cookie " << cookie;
  for (const Received& r : inbox.OfType(kEvUndelivered)) {
    if (r.undelivered_cookie == cookie) {
      return r;
    }
  }
  return Received();
}

size_t CountUndelivered(const Inbox& inbox) { return inbox.OfType(kEvUndelivered).size(); }

TEST(DeliveryTest, DeliversEnvelopeToRegisteredActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId id = system->Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(id);
  EXPECT_EQ(id.node_id(), system->node_id());
  EXPECT_EQ(id.pool(), *system->PoolIndex("User"));
  const ActorId sender(0, 0, 4242, 0x7FFFFFF1u);
  system->Send(id, std::make_unique<EvValue>(17), kNoFlags, 99, sender);
  ASSERT_TRUE(inbox.WaitForType(kEvValue));
  const Received r = inbox.OfType(kEvValue).front();
  EXPECT_EQ(r.value, 17u);
  EXPECT_EQ(r.cookie, 99u);
  EXPECT_EQ(r.sender, sender);
  EXPECT_EQ(r.recipient, id);
}

// -- services -----------------------------------------------------------------------------------

TEST(DeliveryTest, RewritesServiceIdToRegisteredActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId actor = system->Register(std::make_unique<Recorder>(&inbox));
  const ActorId service = ServiceId("echo");
  ASSERT_TRUE(system->RegisterService(service, actor).ok());
  EXPECT_EQ(system->LookupService(service), actor);

  system->Send(service, std::make_unique<EvValue>(1));
  // A service id qualified with this node's id resolves locally too.
  system->Send(ServiceId("echo", system->node_id()), std::make_unique<EvValue>(2));
  ASSERT_TRUE(inbox.WaitForType(kEvValue, 2));
  const std::vector<Received> got = inbox.OfType(kEvValue);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, 1u);
  EXPECT_EQ(got[1].value, 2u);
  // The handle was rewritten once, to the actor.
  EXPECT_EQ(got[0].recipient, actor);
  EXPECT_EQ(got[1].recipient, actor);
}

TEST(DeliveryTest, ReRegisteringServiceRedirectsSends) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox first_inbox;
  Inbox second_inbox;
  const ActorId first = system->Register(std::make_unique<Recorder>(&first_inbox));
  const ActorId second = system->Register(std::make_unique<Recorder>(&second_inbox));
  const ActorId service = ServiceId("worker");
  ASSERT_TRUE(system->RegisterService(service, first).ok());
  system->Send(service, std::make_unique<EvValue>(1));
  ASSERT_TRUE(first_inbox.WaitForType(kEvValue, 1));

  ASSERT_TRUE(system->RegisterService(service, second).ok());
  EXPECT_EQ(system->LookupService(service), second);
  system->Send(service, std::make_unique<EvValue>(2));
  // Fence: same sender, sent after; had value 2 gone to `first` it would arrive before 3.
  system->Send(first, std::make_unique<EvValue>(3));
  ASSERT_TRUE(second_inbox.WaitForType(kEvValue, 1));
  ASSERT_TRUE(first_inbox.WaitForType(kEvValue, 2));
  const std::vector<Received> at_first = first_inbox.OfType(kEvValue);
  ASSERT_EQ(at_first.size(), 2u);
  EXPECT_EQ(at_first[0].value, 1u);
  EXPECT_EQ(at_first[1].value, 3u);
  const std::vector<Received> at_second = second_inbox.OfType(kEvValue);
  ASSERT_EQ(at_second.size(), 1u);
  EXPECT_EQ(at_second[0].value, 2u);
  EXPECT_EQ(at_second[0].recipient, second);
}

TEST(DeliveryTest, RejectsServiceMappedToService) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId actor = system->Register(std::make_unique<Recorder>(&inbox));
  const ActorId service = ServiceId("front");
  ASSERT_TRUE(system->RegisterService(service, actor).ok());

  const absl::Status status = system->RegisterService(service, ServiceId("back"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const absl::Status remote = system->RegisterService(ServiceId("x"), ServiceId("y", 3));
  EXPECT_EQ(remote.code(), absl::StatusCode::kInvalidArgument) << remote;
  // The rejected call left the earlier mapping alone and created none.
  EXPECT_EQ(system->LookupService(service), actor);
  EXPECT_TRUE(system->LookupService(ServiceId("x")).IsEmpty());
}

TEST(DeliveryTest, RejectsNonServiceKey) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId actor = system->Register(std::make_unique<Recorder>(&inbox));
  const ActorId other = system->Register(std::make_unique<Recorder>(&inbox));
  const absl::Status status = system->RegisterService(other, actor);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const absl::Status empty = system->RegisterService(ActorId(), actor);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument) << empty;
  // A plain id still goes to its own actor, not rewritten.
  system->Send(other, std::make_unique<EvValue>(5));
  ASSERT_TRUE(inbox.WaitForType(kEvValue));
  EXPECT_EQ(inbox.OfType(kEvValue).front().recipient, other);
}

TEST(DeliveryTest, LookupServiceReturnsMappingOrEmpty) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId actor = system->Register(std::make_unique<Recorder>(&inbox));
  EXPECT_TRUE(system->LookupService(ServiceId("none")).IsEmpty());
  ASSERT_TRUE(system->RegisterService(ServiceId("abcdefghijkl"), actor).ok());
  EXPECT_EQ(system->LookupService(ServiceId("abcdefghijkl")), actor);
  // The node id of the key is ignored by the table.
  EXPECT_EQ(system->LookupService(ServiceId("abcdefghijkl", 9)), actor);
  EXPECT_TRUE(system->LookupService(ServiceId("abcdefghijk")).IsEmpty());
  // An empty actor removes the mapping.
  ASSERT_TRUE(system->RegisterService(ServiceId("abcdefghijkl"), ActorId()).ok());
  EXPECT_TRUE(system->LookupService(ServiceId("abcdefghijkl")).IsEmpty());
}

TEST(DeliveryTest, ServiceTableReportsFull) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  config.set_max_services(16);
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const ActorId actor(0, 0, 1, 1);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(system->RegisterService(ServiceId(absl::StrCat("svc", i)), actor).ok()) << i;
  }
  // Replacing an existing mapping needs no new slot.
  EXPECT_TRUE(system->RegisterService(ServiceId("svc3"), ActorId(0, 0, 2, 2)).ok());
  const absl::Status full = system->RegisterService(ServiceId("svc16"), actor);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(system->LookupService(ServiceId("svc3")), ActorId(0, 0, 2, 2));
  EXPECT_EQ(system->LookupService(ServiceId("svc15")), actor);
}

// -- undelivered --------------------------------------------------------------------------------

TEST(DeliveryTest, TracksUndeliveredToDeadActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId dead = MakeDeadActor(*system);

  system->Send(dead, std::make_unique<EvValue>(1), kTrackDelivery, 0xC0FFEE, probe);
  const Received r = WaitUndelivered(probe_inbox, 0xC0FFEE);
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.source_type, kEvValue);
  EXPECT_EQ(r.undelivered_cookie, 0xC0FFEEu);
  EXPECT_TRUE(probe_inbox.OfType(kEvValue).empty());
}

TEST(DeliveryTest, TracksUndeliveredToNeverExistingActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));

  // A hint never handed out.
  system->Send(NeverExisting(), std::make_unique<EvValue>(1), kTrackDelivery, 11, probe);
  // A live mailbox (the probe's own) but a local id nobody ever had.
  const ActorId forged(0, probe.pool(), probe.local_id() + 1'000'000, probe.hint());
  system->Send(forged, std::make_unique<EvValue>(2), kTrackDelivery, 12, probe);
  // Hint 0 is never used.
  system->Send(ActorId(0, 0, 5, 0), std::make_unique<testutil::EvKick>(), kTrackDelivery, 13,
               probe);

  const Received never = WaitUndelivered(probe_inbox, 11);
  EXPECT_EQ(never.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(never.source_type, kEvValue);
  const Received wrong_id = WaitUndelivered(probe_inbox, 12);
  EXPECT_EQ(wrong_id.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(wrong_id.source_type, kEvValue);
  const Received hint_zero = WaitUndelivered(probe_inbox, 13);
  EXPECT_EQ(hint_zero.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(hint_zero.source_type, testutil::kEvKick);
  // The probe shares the mailbox with nobody: the forged event never reached its handler.
  EXPECT_TRUE(probe_inbox.OfType(kEvValue).empty());
}

TEST(DeliveryTest, TracksUndeliveredToUnknownService) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  system->Send(ServiceId("nobody"), std::make_unique<EvValue>(1), kTrackDelivery, 21, probe);
  const Received r = WaitUndelivered(probe_inbox, 21);
  EXPECT_EQ(r.reason, UndeliveredReason::kUnknownService);
  EXPECT_EQ(r.source_type, kEvValue);

  // A removed mapping is unknown again.
  Inbox inbox;
  const ActorId actor = system->Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(system->RegisterService(ServiceId("gone"), actor).ok());
  ASSERT_TRUE(system->RegisterService(ServiceId("gone"), ActorId()).ok());
  system->Send(ServiceId("gone"), std::make_unique<EvValue>(2), kTrackDelivery, 22, probe);
  EXPECT_EQ(WaitUndelivered(probe_inbox, 22).reason, UndeliveredReason::kUnknownService);
  EXPECT_TRUE(inbox.OfType(kEvValue).empty());
}

TEST(DeliveryTest, TracksUndeliveredToUnknownNode) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  ASSERT_EQ(system->node_id(), 1u);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  system->Send(probe.WithNode(2), std::make_unique<EvValue>(1), kTrackDelivery, 31, probe);
  system->Send(ServiceId("echo", 5), std::make_unique<EvValue>(2), kTrackDelivery, 32, probe);
  EXPECT_EQ(WaitUndelivered(probe_inbox, 31).reason, UndeliveredReason::kNoRoute);
  EXPECT_EQ(WaitUndelivered(probe_inbox, 32).reason, UndeliveredReason::kNoRoute);
  EXPECT_TRUE(probe_inbox.OfType(kEvValue).empty());
}

TEST(DeliveryTest, DropsAndCountsUntrackedUndeliverable) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId dead = MakeDeadActor(*system);
  const uint64_t before = system->Counters().dropped_events;

  // Unknown service and never-existing hint are decided on the sending thread.
  system->Send(ServiceId("nobody"), std::make_unique<EvValue>(1), kNoFlags, 1, probe);
  system->Send(NeverExisting(), std::make_unique<EvValue>(2), kNoFlags, 2, probe);
  // A dead actor is found missing by its mailbox's reader.
  system->Send(dead, std::make_unique<EvValue>(3), kNoFlags, 3, probe);
  // Tracking without a sender cannot report: dropped too.
  system->Send(dead, std::make_unique<EvValue>(4), kTrackDelivery, 4, ActorId());

  EXPECT_TRUE(WaitUntil([&] { return system->Counters().dropped_events >= before + 4; }))
      << "dropped_events " << system->Counters().dropped_events << ", expected " << before + 4;
  EXPECT_EQ(system->Counters().dropped_events, before + 4);
  // Fence: a tracked failure after the drops reaches the probe; nothing else did.
  system->Send(NeverExisting(), std::make_unique<EvValue>(5), kTrackDelivery, 5, probe);
  WaitUndelivered(probe_inbox, 5);
  EXPECT_EQ(CountUndelivered(probe_inbox), 1u);
}

TEST(DeliveryTest, ForwardsOnNondeliveryToForwardTarget) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  Inbox target_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId target = system->Register(std::make_unique<Recorder>(&target_inbox));
  const ActorId dead = MakeDeadActor(*system);

  system->Send(std::make_unique<EventHandle>(dead, probe, std::make_unique<EvValue>(41),
                                             kForwardOnNondelivery | kTrackDelivery, 41, target));
  system->Send(std::make_unique<EventHandle>(ServiceId("nobody"), probe,
                                             std::make_unique<EvValue>(42), kForwardOnNondelivery,
                                             42, target));
  system->Send(std::make_unique<EventHandle>(NeverExisting(), probe, std::make_unique<EvValue>(43),
                                             kForwardOnNondelivery, 43, target));
  ASSERT_TRUE(target_inbox.WaitForType(kEvValue, 3));
  for (const Received& r : target_inbox.OfType(kEvValue)) {
    EXPECT_EQ(r.value, r.cookie) << "body and cookie travel together";
    EXPECT_EQ(r.sender, probe) << "the original sender is kept";
    EXPECT_EQ(r.recipient, target);
    EXPECT_EQ(r.flags & kForwardOnNondelivery, 0u) << "a forwarded event is not forwarded again";
  }
  // The forward replaced the Undelivered report; a later tracked failure is the only report.
  system->Send(NeverExisting(), std::make_unique<EvValue>(44), kTrackDelivery, 44, probe);
  WaitUndelivered(probe_inbox, 44);
  EXPECT_EQ(CountUndelivered(probe_inbox), 1u);
}

TEST(DeliveryTest, ForwardsOnNondeliveryOnlyOnce) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId dead = MakeDeadActor(*system);
  const ActorId dead_target = MakeDeadActor(*system);
  // The forward target is dead too: the event is reported to the tracking sender, not bounced.
  system->Send(std::make_unique<EventHandle>(dead, probe, std::make_unique<EvValue>(51),
                                             kForwardOnNondelivery | kTrackDelivery, 51,
                                             dead_target));
  const Received r = WaitUndelivered(probe_inbox, 51);
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.source_type, kEvValue);
}

TEST(DeliveryTest, FreedMailboxNeverDeliversStaleEventToNewActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const uint64_t live_before = system->Counters().live_mailboxes;
  const ActorId old_id = MakeDeadActor(*system);
  // Wait until the old mailbox is back on the free list.
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().live_mailboxes == live_before; }))
      << "live_mailboxes " << system->Counters().live_mailboxes << ", expected " << live_before;

  // Register actors until one gets the old hint (the freed mailbox may still be draining for a
  // short while; Register then uses a fresh one).
  std::vector<std::unique_ptr<Inbox>> inboxes;
  ActorId reused;
  Inbox* reused_inbox = nullptr;
  const absl::Time deadline = absl::Now() + WaitTimeout();
  for (int i = 0; i < 20000 && absl::Now() < deadline; ++i) {
    inboxes.push_back(std::make_unique<Inbox>());
    const ActorId id = system->Register(std::make_unique<Recorder>(inboxes.back().get()));
    ASSERT_TRUE(id);
    if (id.hint() == old_id.hint()) {
      reused = id;
      reused_inbox = inboxes.back().get();
      break;
    }
    std::this_thread::yield();
  }
  ASSERT_TRUE(reused) << "no new actor got hint " << old_id.hint() << " after " << inboxes.size()
                      << " registrations";
  EXPECT_NE(reused.local_id(), old_id.local_id()) << "local ids are never reused";
  EXPECT_NE(reused, old_id);

  // The stale send reaches the reused mailbox (same hint); its new actor must not see it.
  system->Send(old_id, std::make_unique<EvValue>(1), kTrackDelivery, 61, probe);
  system->Send(reused, std::make_unique<EvValue>(2), kNoFlags, 62, probe);
  const Received r = WaitUndelivered(probe_inbox, 61);
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.source_type, kEvValue);
  ASSERT_TRUE(reused_inbox->WaitForType(kEvValue, 1));
  const std::vector<Received> got = reused_inbox->OfType(kEvValue);
  ASSERT_EQ(got.size(), 1u) << "the new actor received the stale event";
  EXPECT_EQ(got[0].value, 2u);
  EXPECT_EQ(got[0].recipient, reused);
  for (const Received& any : reused_inbox->Snapshot()) {
    EXPECT_NE(any.recipient, old_id);
  }
}

}  // namespace
}  // namespace troupe
