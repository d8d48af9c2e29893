// SPDX-License-Identifier: Apache-2.0
//
// Actor lifecycle: Bootstrap, PassAway, poison, exception containment, shared mailboxes, and a
// clean shutdown (every actor destroyed, every event freed) with traffic still flowing.
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "actors/timer.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::Describe;
using testutil::EvKick;
using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvKick;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::Values;
using testutil::WaitTimeout;
using testutil::WaitUntil;

enum : EventType {
  kEvBoom = EventSpaceBegin(kUserEventSpace + 2),
  kEvCounted,
  kEvStart,
  kEvLifecycleEnd,
};
static_assert(InEventSpace(kEvLifecycleEnd - 1, kUserEventSpace + 2));

// Makes the receiving Thrower throw.
struct EvBoom final : EventLocal<EvBoom, kEvBoom> {
  explicit EvBoom(bool standard_value = true) : standard(standard_value) {}
  bool standard;
};

// Live-object counters: back at zero once a system is gone.
std::atomic<int64_t> g_live_events{0};
std::atomic<int64_t> g_live_actors{0};

// An event that counts its live instances.
struct EvCounted final : EventLocal<EvCounted, kEvCounted> {
  EvCounted() { g_live_events.fetch_add(1, std::memory_order_relaxed); }
  ~EvCounted() override { g_live_events.fetch_sub(1, std::memory_order_relaxed); }
  uint64_t hops = 0;
  // A delayed extra: its receiver drops it instead of passing it on.
  bool delayed = false;
};

// Base that counts live actors.
class CountedActor : public Actor {
 public:
  template <typename Derived>
  explicit CountedActor(void (Derived::*state)(EventHandlePtr&)) : Actor(state) {
    g_live_actors.fetch_add(1, std::memory_order_relaxed);
  }
  ~CountedActor() override { g_live_actors.fetch_sub(1, std::memory_order_relaxed); }
};

// Time allowed for Stop(): a healthy Stop takes milliseconds.
absl::Duration StopTimeout() {
  return testutil::kUnderSanitizer ? absl::Seconds(30) : absl::Seconds(10);
}

// -- bootstrap and PassAway -----------------------------------------------------------------------

// Checks that Bootstrap ran before any event and saw its own id.
class BootChecker : public Actor {
 public:
  BootChecker(Inbox* inbox, ActorId* seen_self, ActorSystem** seen_system)
      : Actor(&BootChecker::StateWork),
        inbox_(inbox),
        seen_self_(seen_self),
        seen_system_(seen_system) {}

 private:
  void Bootstrap() override {
    booted_ = true;
    *seen_self_ = SelfId();
    *seen_system_ = system();
  }
  TROUPE_STATE(StateWork) {
    Received r = Describe(*ev);
    // Marks events that arrived before Bootstrap with value 999.
    r.value = booted_ ? r.value : 999;
    inbox_->Add(r);
  }

  Inbox* inbox_;
  ActorId* seen_self_;
  ActorSystem** seen_system_;
  bool booted_ = false;
};

TEST(LifecycleTest, BootstrapRunsBeforeFirstEvent) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  ActorId seen_self;
  ActorSystem* seen_system = nullptr;
  const ActorId id =
      system->Register(std::make_unique<BootChecker>(&inbox, &seen_self, &seen_system));
  ASSERT_TRUE(id);
  // Sent immediately: the Bootstrap is already queued ahead of it.
  for (uint64_t i = 0; i < 5; ++i) {
    system->Send(id, std::make_unique<EvValue>(i));
  }
  ASSERT_TRUE(inbox.WaitForType(kEvValue, 5));
  for (const Received& r : inbox.OfType(kEvValue)) {
    EXPECT_NE(r.value, 999u) << "an event was handled before Bootstrap";
  }
  EXPECT_TRUE(inbox.OfType(kEvBootstrap).empty()) << "state functions never see Bootstrap";
  EXPECT_EQ(seen_self, id);
  EXPECT_EQ(seen_system, system.get());
}

// On EvKick: PassAway, then keeps using its members and sends a report (still valid until the
// handler returns).
class Quitter : public CountedActor {
 public:
  Quitter(ActorId report_to, troupe::Notification* destroyed)
      : CountedActor(&Quitter::StateWork), report_to_(report_to), destroyed_(destroyed) {}
  ~Quitter() override { destroyed_->Notify(); }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        PassAway();
        PassAway();  // harmless twice
        Send(report_to_, std::make_unique<EvValue>(++handled_));
        break;
      case kEvValue:
        ++handled_;
        break;
      default:
        Unhandled(ev);
    }
  }

  ActorId report_to_;
  troupe::Notification* destroyed_;
  uint64_t handled_ = 0;
};

TEST(LifecycleTest, PassAwayEndsActorAfterHandlerReturns) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  troupe::Notification destroyed;
  const uint64_t live_before = system->Counters().live_mailboxes;
  const ActorId quitter = system->Register(std::make_unique<Quitter>(probe, &destroyed));
  system->Send(quitter, std::make_unique<EvValue>(1), kNoFlags, 0, probe);
  system->Send(quitter, std::make_unique<EvKick>(), kNoFlags, 0, probe);
  // Queued behind the kick: reaches no actor.
  system->Send(quitter, std::make_unique<EvValue>(2), kTrackDelivery, 81, probe);
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
  ASSERT_TRUE(probe_inbox.WaitForType(kEvValue, 1));
  EXPECT_EQ(probe_inbox.OfType(kEvValue).front().value, 2u)
      << "the handler that called PassAway ran to completion";
  ASSERT_TRUE(probe_inbox.WaitForType(kEvUndelivered, 1));
  const Received r = probe_inbox.OfType(kEvUndelivered).front();
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.undelivered_cookie, 81u);
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().live_mailboxes == live_before; }))
      << "the ended actor's mailbox was not freed";
}

// Children that end on one worker while their parent spawns more on the other: the parent's list
// of children is written from both sides at once (a slot emptied by an ending child, compaction by
// the parent as it adds). When the parent ends, every child still alive ends first, and all the
// mailboxes are given back. Bounded: 200 rounds of 100 children.
TEST(LifecycleTest, ChildrenEndingWhileTheirParentSpawnsMoreAreTrackedExactly) {
  // Counted by the children as they end; outlives the system.
  std::atomic<int> stayers_ended{0};
  troupe::Notification parent_destroyed;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  // Ends at once, unless it is a stayer, which waits for its parent's end.
  class Child final : public Actor {
   public:
    Child(bool stay, std::atomic<int>* stayers_ended)
        : Actor(&Child::StateWork), stay_(stay), stayers_ended_(stayers_ended) {}
    ~Child() override {
      if (stay_) {
        stayers_ended_->fetch_add(1, std::memory_order_relaxed);
      }
    }

   private:
    void Bootstrap() override {
      if (!stay_) {
        PassAway();
      }
    }
    TROUPE_STATE(StateWork) { Unhandled(ev); }
    bool stay_;
    std::atomic<int>* stayers_ended_;
  };
  // EvValue{n}: spawns n children, one in 16 a stayer. EvKick: ends.
  class Parent final : public Actor {
   public:
    Parent(std::atomic<int>* stayers_ended, troupe::Notification* destroyed)
        : Actor(&Parent::StateWork), stayers_ended_(stayers_ended), destroyed_(destroyed) {}
    ~Parent() override { destroyed_->Notify(); }

   private:
    TROUPE_STATE(StateWork) {
      if (ev->type() == kEvValue) {
        for (uint64_t i = 0; i < ev->Get<EvValue>()->value; ++i) {
          Register(std::make_unique<Child>(spawned_++ % 16 == 0, stayers_ended_));
        }
      } else if (ev->type() == kEvKick) {
        PassAway();
      } else {
        Unhandled(ev);
      }
    }
    std::atomic<int>* stayers_ended_;
    troupe::Notification* destroyed_;
    uint64_t spawned_ = 0;
  };
  const uint64_t live_before = system->Counters().live_mailboxes;
  const ActorId parent =
      system->Register(std::make_unique<Parent>(&stayers_ended, &parent_destroyed));
  constexpr int kRounds = 200;
  constexpr int kPerRound = 100;
  for (int round = 0; round < kRounds; ++round) {
    system->Send(parent, std::make_unique<EvValue>(kPerRound));
  }
  system->Send(parent, std::make_unique<EvKick>());
  ASSERT_TRUE(parent_destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
  // The parent ends only after its children: every stayer has ended by now.
  EXPECT_EQ(stayers_ended.load(std::memory_order_relaxed), kRounds * kPerRound / 16);
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().live_mailboxes == live_before; }))
      << "mailboxes left: " << system->Counters().live_mailboxes - live_before;
}

// -- poison ---------------------------------------------------------------------------------------

TEST(LifecycleTest, PoisonEndsActorThatCallsUnhandled) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  troupe::Notification destroyed;
  const ActorId id = system->Register(std::make_unique<Recorder>(&inbox, &destroyed));
  system->Send(id, std::make_unique<EvValue>(1));
  system->Send(id, std::make_unique<EvPoison>());
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()))
      << "EvPoison through Unhandled did not end the actor";
  EXPECT_EQ(inbox.OfType(kEvValue).size(), 1u);
  EXPECT_EQ(inbox.OfType(kEvPoison).size(), 1u);
}

// Handles poison itself (ignores it) and keeps working.
class PoisonProof : public CountedActor {
 public:
  PoisonProof(Inbox* inbox, troupe::Notification* destroyed)
      : CountedActor(&PoisonProof::StateWork), inbox_(inbox), destroyed_(destroyed) {}
  ~PoisonProof() override { destroyed_->Notify(); }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_IGNORE(kEvPoison);
      default:
        inbox_->Add(Describe(*ev));
        Unhandled(ev);
    }
  }
  Inbox* inbox_;
  troupe::Notification* destroyed_;
};

TEST(LifecycleTest, PoisonHandledByStateDoesNotEndActor) {
  Inbox inbox;
  troupe::Notification destroyed;
  {
    auto system = MakeSystem();
    ASSERT_NE(system, nullptr);
    const ActorId id = system->Register(std::make_unique<PoisonProof>(&inbox, &destroyed));
    system->Send(id, std::make_unique<EvPoison>());
    system->Send(id, std::make_unique<EvValue>(5));
    ASSERT_TRUE(inbox.WaitForType(kEvValue, 1));
    EXPECT_FALSE(destroyed.HasBeenNotified());
  }
  // Stop destroys it.
  EXPECT_TRUE(destroyed.HasBeenNotified());
  EXPECT_EQ(g_live_actors.load(), 0);
}

// -- exceptions -----------------------------------------------------------------------------------

// Throws from the handler of EvBoom (std::runtime_error, or an int when !standard).
class Thrower : public CountedActor {
 public:
  explicit Thrower(troupe::Notification* destroyed, bool throw_in_bootstrap = false)
      : CountedActor(&Thrower::StateWork),
        destroyed_(destroyed),
        throw_in_bootstrap_(throw_in_bootstrap) {}
  ~Thrower() override { destroyed_->Notify(); }

 private:
  void Bootstrap() override {
    if (throw_in_bootstrap_) {
      throw std::logic_error("bootstrap failed");
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvBoom, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvBoom> ev) {
    if (ev.Get()->standard) {
      throw std::runtime_error("boom");
    }
    throw 42;
  }

  troupe::Notification* destroyed_;
  bool throw_in_bootstrap_;
};

// Registers a Recorder on its own mailbox in Bootstrap.
class SpawnsMailboxSibling : public Actor {
 public:
  SpawnsMailboxSibling(Inbox* sibling_inbox, ActorId* sibling, troupe::Notification* spawned)
      : Actor(&SpawnsMailboxSibling::StateWork),
        sibling_inbox_(sibling_inbox),
        sibling_(sibling),
        spawned_(spawned) {}

 private:
  void Bootstrap() override {
    *sibling_ = RegisterWithSameMailbox(std::make_unique<Recorder>(sibling_inbox_));
    spawned_->Notify();
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvBoom:
        throw std::runtime_error("boom in shared mailbox");
      default:
        Unhandled(ev);
    }
  }
  Inbox* sibling_inbox_;
  ActorId* sibling_;
  troupe::Notification* spawned_;
};

// Returns the captured line that mentions both `id` and `type` (as 0x%08x), or "".
std::string FindFailureLine(const CapturingLogSink& sink, const ActorId& id, EventType type) {
  const std::string type_hex = absl::StrFormat("0x%08x", type);
  for (const std::string& line : sink.Lines()) {
    if (absl::StrContains(line, id.ToString()) && absl::StrContains(line, type_hex)) {
      return line;
    }
  }
  return "";
}

TEST(LifecycleTest, ThrowingHandlerEndsOnlyThatActor) {
  CapturingLogSink sink;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  Inbox sibling_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId sibling = system->Register(std::make_unique<Recorder>(&sibling_inbox));
  troupe::Notification destroyed;
  const ActorId thrower = system->Register(std::make_unique<Thrower>(&destroyed));
  const uint64_t failed_before = system->Counters().failed_actors;

  system->Send(thrower, std::make_unique<EvBoom>(true));
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()))
      << "the throwing actor was not ended";
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().failed_actors == failed_before + 1; }))
      << "failed_actors " << system->Counters().failed_actors;
  EXPECT_TRUE(WaitUntil([&] { return !FindFailureLine(sink, thrower, kEvBoom).empty(); }))
      << "no log line names " << thrower << " and " << absl::StrFormat("0x%08x", kEvBoom);

  // The sibling (same pool) keeps working.
  system->Send(sibling, std::make_unique<EvValue>(1));
  EXPECT_TRUE(sibling_inbox.WaitForType(kEvValue, 1));
  // Later tracked sends to the failed actor come back undelivered.
  system->Send(thrower, std::make_unique<EvValue>(2), kTrackDelivery, 91, probe);
  ASSERT_TRUE(probe_inbox.WaitForType(kEvUndelivered, 1));
  const Received r = probe_inbox.OfType(kEvUndelivered).front();
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.source_type, kEvValue);
  EXPECT_EQ(r.undelivered_cookie, 91u);
  EXPECT_EQ(system->Counters().failed_actors, failed_before + 1);
}

TEST(LifecycleTest, NonStandardExceptionIsContained) {
  CapturingLogSink sink;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  troupe::Notification destroyed;
  const ActorId thrower = system->Register(std::make_unique<Thrower>(&destroyed));
  system->Send(thrower, std::make_unique<EvBoom>(false));
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().failed_actors == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return !FindFailureLine(sink, thrower, kEvBoom).empty(); }));
}

TEST(LifecycleTest, ThrowingBootstrapIsContained) {
  CapturingLogSink sink;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  troupe::Notification destroyed;
  const ActorId thrower = system->Register(std::make_unique<Thrower>(&destroyed, true));
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().failed_actors == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return !FindFailureLine(sink, thrower, kEvBootstrap).empty(); }));
  // The system keeps running.
  Inbox inbox;
  const ActorId other = system->Register(std::make_unique<Recorder>(&inbox));
  system->Send(other, std::make_unique<EvValue>(1));
  EXPECT_TRUE(inbox.WaitForType(kEvValue, 1));
}

TEST(LifecycleTest, ThrowingActorLeavesMailboxSiblingRunning) {
  CapturingLogSink sink;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox sibling_inbox;
  ActorId sibling;
  troupe::Notification spawned;
  const ActorId owner =
      system->Register(std::make_unique<SpawnsMailboxSibling>(&sibling_inbox, &sibling, &spawned));
  ASSERT_TRUE(spawned.WaitForNotificationWithTimeout(WaitTimeout()));
  ASSERT_EQ(sibling.hint(), owner.hint());
  system->Send(owner, std::make_unique<EvBoom>());
  // Same sender, same mailbox, sent after the boom.
  system->Send(sibling, std::make_unique<EvValue>(1));
  ASSERT_TRUE(sibling_inbox.WaitForType(kEvValue, 1));
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().failed_actors == 1; }));
  EXPECT_FALSE(FindFailureLine(sink, owner, kEvBoom).empty());
  system->Send(sibling, std::make_unique<EvValue>(2));
  EXPECT_TRUE(sibling_inbox.WaitForType(kEvValue, 2));
}

// -- shared mailboxes -----------------------------------------------------------------------------

TEST(LifecycleTest, SharedMailboxIsFreedWithItsLastActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox sibling_inbox;
  ActorId sibling;
  troupe::Notification spawned;
  const uint64_t live_before = system->Counters().live_mailboxes;
  const ActorId owner =
      system->Register(std::make_unique<SpawnsMailboxSibling>(&sibling_inbox, &sibling, &spawned));
  ASSERT_TRUE(spawned.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_EQ(system->Counters().live_mailboxes, live_before + 1) << "two actors, one mailbox";
  system->Send(owner, std::make_unique<EvPoison>());
  system->Send(sibling, std::make_unique<EvValue>(1));
  ASSERT_TRUE(sibling_inbox.WaitForType(kEvValue, 1));
  EXPECT_EQ(system->Counters().live_mailboxes, live_before + 1) << "the sibling still lives there";
  system->Send(sibling, std::make_unique<EvPoison>());
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().live_mailboxes == live_before; }));
}

// Shares its mailbox with a Recorder it registers at start. EvKick blocks its handler until
// `release` is notified (after `entered`), so that the test can queue events behind it for the
// same activation; EvValue(0) registers another Recorder on the mailbox (publishing its id to
// `late`) and sends it EvValue(7); any other EvValue is recorded in `own_inbox`.
class Gatekeeper : public Actor {
 public:
  struct Links {
    Inbox* own_inbox;
    Inbox* sibling_inbox;
    Inbox* late_inbox;
    ActorId* sibling;
    ActorId* late;
    troupe::Notification* spawned;
    troupe::Notification* entered;
    troupe::Notification* release;
  };
  explicit Gatekeeper(Links links) : Actor(&Gatekeeper::StateWork), links_(links) {}

 private:
  void Bootstrap() override {
    *links_.sibling = RegisterWithSameMailbox(std::make_unique<Recorder>(links_.sibling_inbox));
    links_.spawned->Notify();
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        links_.entered->Notify();
        ASSERT_TRUE(links_.release->WaitForNotificationWithTimeout(WaitTimeout()));
        break;
      case kEvValue:
        if (ev->Get<EvValue>()->value == 0) {
          *links_.late = RegisterWithSameMailbox(std::make_unique<Recorder>(links_.late_inbox));
          Send(*links_.late, std::make_unique<EvValue>(7));
        } else {
          links_.own_inbox->Add(Describe(*ev));
        }
        break;
      default:
        Unhandled(ev);
    }
  }
  Links links_;
};

// A worker reads a mailbox's actor list once per activation (it shares the line the mailbox's
// senders write); an actor that ends, or one that joins, in the middle of an activation must
// still be seen by the events behind it. Ending the list's head would leave a freed actor there.
TEST(LifecycleTest, ActorsThatLeaveOrJoinAMailboxMidActivationAreSeenByTheEventsBehind) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox own_inbox;
  Inbox sibling_inbox;
  Inbox late_inbox;
  ActorId sibling;
  ActorId late;
  troupe::Notification spawned;
  troupe::Notification entered;
  troupe::Notification release;
  const ActorId owner = system->Register(std::make_unique<Gatekeeper>(Gatekeeper::Links{
      &own_inbox, &sibling_inbox, &late_inbox, &sibling, &late, &spawned, &entered, &release}));
  ASSERT_TRUE(spawned.WaitForNotificationWithTimeout(WaitTimeout()));
  ASSERT_EQ(sibling.hint(), owner.hint());
  const uint64_t dropped_before = system->Counters().dropped_events;
  system->Send(owner, std::make_unique<EvKick>());
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(WaitTimeout()));
  // Queued behind the blocked handler, so one activation handles them all. The sibling, the
  // list's head (registered last), records 1 and ends on the poison.
  system->Send(sibling, std::make_unique<EvValue>(1));
  system->Send(sibling, std::make_unique<EvPoison>());
  system->Send(owner, std::make_unique<EvValue>(2));
  system->Send(owner, std::make_unique<EvValue>(0));
  system->Send(owner, std::make_unique<EvValue>(3));
  release.Notify();
  ASSERT_TRUE(late_inbox.WaitForType(kEvValue, 1)) << "the joiner got its event";
  ASSERT_TRUE(own_inbox.WaitForType(kEvValue, 2));
  EXPECT_EQ(Values(late_inbox.Snapshot()), (std::vector<uint64_t>{7}));
  EXPECT_EQ(Values(own_inbox.Snapshot()), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Values(sibling_inbox.Snapshot()), (std::vector<uint64_t>{1}));
  EXPECT_EQ(system->Counters().dropped_events, dropped_before);
  EXPECT_NE(late.hint(), 0u);
  EXPECT_EQ(late.hint(), owner.hint());
}

// -- shutdown -------------------------------------------------------------------------------------

// Carries the ids a Flooder sends to.
struct EvStart final : EventLocal<EvStart, kEvStart> {
  std::vector<ActorId> peers;
};

// Bounces EvCounted events among its peers forever (until `quiesce`): each received event is
// either forwarded as is or replaced by a new one, so the flood never dies out; now and then it
// also schedules a short-delayed extra event (dropped on receipt) or feeds its child. At start it
// injects `initial` events. Registers a passive counted child on its own mailbox.
class Flooder : public CountedActor {
 public:
  Flooder(const std::atomic<bool>* quiesce, std::atomic<int64_t>* handled, int initial)
      : CountedActor(&Flooder::StateWork),
        quiesce_(quiesce),
        handled_(handled),
        initial_(initial) {}

 private:
  // A passive actor sharing the flooder's mailbox; receives some of the traffic.
  class Child : public CountedActor {
   public:
    Child() : CountedActor(&Child::StateWork) {}

   private:
    TROUPE_STATE(StateWork) { Unhandled(ev); }
  };

  void Bootstrap() override { child_ = RegisterWithSameMailbox(std::make_unique<Child>()); }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvStart:
        peers_ = ev->Get<EvStart>()->peers;
        for (int i = 0; i < initial_; ++i) {
          Send(NextPeer(), std::make_unique<EvCounted>());
        }
        break;
      case kEvCounted:
        Bounce(ev);
        break;
      default:
        Unhandled(ev);
    }
  }

  const ActorId& NextPeer() {
    cursor_ = (cursor_ * 1103515245u + 12345u) & 0x7FFFFFFFu;
    return peers_[cursor_ % peers_.size()];
  }

  void Bounce(EventHandlePtr& ev) {
    handled_->fetch_add(1, std::memory_order_relaxed);
    // acquire: pairs with the test's release store; after it no event is re-sent.
    if (quiesce_->load(std::memory_order_acquire)) {
      return;
    }
    EvCounted* counted = ev->Get<EvCounted>();
    // A peer that started first may reach us before our own EvStart: drop those.
    if (counted->delayed || peers_.empty()) {
      return;
    }
    ++count_;
    counted->hops++;
    // The number of non-delayed events in flight stays constant: the flood never dies out.
    switch (count_ % 16) {
      case 0: {
        auto extra = std::make_unique<EvCounted>();
        extra->delayed = true;
        Schedule(absl::Milliseconds(2), NextPeer(), std::move(extra));
        Forward(NextPeer(), ev);
        break;
      }
      case 5:
        Send(child_, std::make_unique<EvCounted>());
        Send(NextPeer(), std::make_unique<EvCounted>());
        break;
      case 1:
      case 3:
      case 7:
      case 9:
      case 11:
      case 13:
        Forward(NextPeer(), ev);
        break;
      default:
        Send(NextPeer(), std::make_unique<EvCounted>());
    }
  }

  const std::atomic<bool>* quiesce_;
  std::atomic<int64_t>* handled_;
  const int initial_;
  std::vector<ActorId> peers_;
  ActorId child_;
  uint32_t cursor_ = 1;
  uint64_t count_ = 0;
};

enum class StopBy { kStop, kDestroy };

// Floods the system, then stops it (Stop() or the destructor) from another thread while the
// traffic flows; checks that it returns in time and that nothing stays alive.
void RunFloodAndStop(StopBy how) {
  ASSERT_EQ(g_live_actors.load(), 0);
  ASSERT_EQ(g_live_events.load(), 0);
  std::atomic<bool> quiesce{false};
  std::atomic<int64_t> handled{0};
  std::unique_ptr<ActorSystem> system = MakeSystem();
  ASSERT_NE(system, nullptr);
  // Two independent floods: one confined to the User pool (its workers never run out of work),
  // one whose members sit on every pool (traffic crosses pools).
  const uint32_t user = *system->PoolIndex("User");
  std::vector<ActorId> one_pool;
  std::vector<ActorId> all_pools;
  for (int i = 0; i < 8; ++i) {
    RegisterOptions options;
    options.pool = user;
    one_pool.push_back(system->Register(std::make_unique<Flooder>(&quiesce, &handled, 8), options));
    ASSERT_TRUE(one_pool.back());
  }
  for (uint32_t pool = 0; pool < 4; ++pool) {
    RegisterOptions options;
    options.pool = pool;
    all_pools.push_back(
        system->Register(std::make_unique<Flooder>(&quiesce, &handled, 8), options));
    ASSERT_TRUE(all_pools.back());
  }
  for (const std::vector<ActorId>* group : {&one_pool, &all_pools}) {
    for (const ActorId& id : *group) {
      auto start = std::make_unique<EvStart>();
      start->peers = *group;
      system->Send(id, std::move(start));
    }
  }
  // Delayed events that are still pending when the system stops.
  std::vector<TimerCookie> far;
  for (int i = 0; i < 50; ++i) {
    far.push_back(system->Schedule(
        absl::Hours(1),
        std::make_unique<EventHandle>(all_pools[i % 4], ActorId(), std::make_unique<EvCounted>())));
  }
  const int64_t warmup = testutil::Scaled(50'000, 2'000);
  ASSERT_TRUE(WaitUntil([&] { return handled.load() >= warmup; }))
      << "traffic did not flow: " << handled.load() << " events handled";
  EXPECT_GT(g_live_actors.load(), 0);
  EXPECT_GT(g_live_events.load(), 0);

  troupe::Notification stopped;
  std::thread stopper([&] {
    if (how == StopBy::kStop) {
      system->Stop();
    } else {
      system.reset();
    }
    stopped.Notify();
  });
  const bool in_time = stopped.WaitForNotificationWithTimeout(StopTimeout());
  if (!in_time) {
    // Let the runtime finish so the test can end and report: no actor sends any more.
    quiesce.store(true, std::memory_order_release);
  }
  stopper.join();
  EXPECT_TRUE(in_time) << (how == StopBy::kStop ? "Stop()" : "~ActorSystem()")
                       << " did not return within " << StopTimeout()
                       << " while actors kept sending to each other; handled " << handled.load()
                       << " events";
  // Stop destroys every actor and frees every queued and pending event.
  EXPECT_EQ(g_live_actors.load(), 0) << "actors still alive after stop";
  EXPECT_EQ(g_live_events.load(), 0) << "events still alive after stop";
  for (const TimerCookie& cookie : far) {
    EXPECT_FALSE(cookie.IsPending());
  }
  system.reset();
  EXPECT_EQ(g_live_actors.load(), 0);
  EXPECT_EQ(g_live_events.load(), 0) << "events leaked by the destroyed system";
}

TEST(LifecycleTest, StopWithEventsInFlightDestroysEveryActorAndEvent) {
  RunFloodAndStop(StopBy::kStop);
}

TEST(LifecycleTest, DestroyWithEventsInFlightDestroysEveryActorAndEvent) {
  RunFloodAndStop(StopBy::kDestroy);
}

TEST(LifecycleTest, StopFreesPendingDelayedEvents) {
  ASSERT_EQ(g_live_events.load(), 0);
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  std::vector<TimerCookie> cookies;
  for (int i = 0; i < 100; ++i) {
    cookies.push_back(system->Schedule(
        absl::Hours(1),
        std::make_unique<EventHandle>(recorder, ActorId(), std::make_unique<EvCounted>())));
  }
  EXPECT_TRUE(cookies[10].Cancel());
  EXPECT_EQ(g_live_events.load(), 100);
  EXPECT_EQ(system->Counters().pending_timers, 100u);
  system->Stop();
  EXPECT_EQ(g_live_events.load(), 0) << "pending delayed events were not freed by Stop";
  for (const TimerCookie& cookie : cookies) {
    EXPECT_FALSE(cookie.IsPending());
    EXPECT_FALSE(cookie.Cancel());
  }
  EXPECT_TRUE(inbox.OfType(kEvCounted).empty());
}

TEST(LifecycleTest, CallsAfterStopAreDroppedAndFreed) {
  ASSERT_EQ(g_live_events.load(), 0);
  ASSERT_EQ(g_live_actors.load(), 0);
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  troupe::Notification destroyed;
  const ActorId quitter = system->Register(std::make_unique<Quitter>(ActorId(), &destroyed));
  ASSERT_TRUE(quitter);
  system->Stop();
  EXPECT_TRUE(destroyed.HasBeenNotified()) << "Stop must destroy every actor";
  system->Stop();  // idempotent

  system->Send(quitter, std::make_unique<EvCounted>());
  EXPECT_EQ(g_live_events.load(), 0) << "a send after Stop must free its event";
  TimerCookie cookie = system->Schedule(
      absl::Milliseconds(1),
      std::make_unique<EventHandle>(quitter, ActorId(), std::make_unique<EvCounted>()));
  EXPECT_EQ(g_live_events.load(), 0) << "a schedule after Stop must free its event";
  EXPECT_FALSE(cookie.IsPending());
  troupe::Notification late_destroyed;
  const ActorId late = system->Register(std::make_unique<Quitter>(ActorId(), &late_destroyed));
  EXPECT_TRUE(late.IsEmpty()) << "Register after Stop must fail";
  EXPECT_TRUE(late_destroyed.HasBeenNotified()) << "the refused actor must be destroyed";
  EXPECT_EQ(g_live_actors.load(), 0);
}

// Counts its destructions.
class Idle final : public Actor {
 public:
  explicit Idle(std::atomic<int>* destroyed) : Actor(&Idle::StateWork), destroyed_(destroyed) {}
  ~Idle() override { destroyed_->fetch_add(1); }
  Idle(const Idle&) = delete;
  Idle& operator=(const Idle&) = delete;
  Idle(Idle&&) = delete;
  Idle& operator=(Idle&&) = delete;

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  std::atomic<int>* destroyed_;
};

TEST(LifecycleTest, RegisterFailsWithAStatusWhereItReturnsAnEmptyId) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  config.set_max_mailboxes(4096);
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  std::atomic<int> destroyed{0};
  auto idle = [&] { return std::make_unique<Idle>(&destroyed); };

  EXPECT_EQ(system->TryRegister(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(system->Register(nullptr).IsEmpty());
  RegisterOptions no_pool;
  no_pool.pool = 99;
  EXPECT_EQ(system->TryRegister(idle(), no_pool).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(system->Register(idle(), no_pool).IsEmpty());
  RegisterOptions no_kind;
  no_kind.mailbox = static_cast<MailboxKind>(200);
  EXPECT_EQ(system->TryRegister(idle(), no_kind).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(destroyed.load(), 3) << "a refused actor is destroyed";

  // The mailbox table holds max_mailboxes: the next registration is refused, with both calls.
  absl::Status full = absl::OkStatus();
  for (int i = 0; i < 10'000 && full.ok(); ++i) {
    full = system->TryRegister(idle()).status();
  }
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("max_mailboxes"), std::string::npos) << full;
  EXPECT_TRUE(system->Register(idle()).IsEmpty());

  system->Stop();
  EXPECT_EQ(system->TryRegister(idle()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(system->Register(idle()).IsEmpty());
}

TEST(LifecycleDeathTest, DestroyingASystemThatAnExtensionStillUsesAbortsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto system = MakeSystem();
        SystemLease lease = LeaseSystem(*system, "the test extension");
        system.reset();
      },
      "destroyed while the test extension still uses it: destroy it first");
  // A released lease lets the system go.
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  SystemLease lease = LeaseSystem(*system, "the test extension");
  lease.Release();
  system.reset();
}

}  // namespace
}  // namespace troupe
