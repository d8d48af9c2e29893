// SPDX-License-Identifier: Apache-2.0
//
// Watching (Actor::Watch): one EvTerminated per watch for a target that stops, fails, was already
// dead, never existed, lives on another node that ends or is cut off, or is unwatched first; and
// dead letters (ActorSystem::SubscribeDeadLetters): counted by type and reason, logged within the
// rate, described to listeners, never looping through a listener that ended. On TestRuntime, in
// simulated time.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testutil::EvKick;
using testutil::EvValue;
using testutil::kEvKick;
using testutil::kEvValue;

// "<target> <reason>" for each EvTerminated, in order.
using Seen = std::vector<std::string>;

std::string Describe(const ActorId& target, TerminationReason reason) {
  return absl::StrCat(target.ToString(), " ", TerminationReasonName(reason));
}

// Watches its targets in Bootstrap (each `times` times) and records the notices. EvKick unwatches
// every target; EvValue{1} ends it.
class Watcher final : public Actor {
 public:
  Watcher(std::vector<ActorId> targets, Seen* seen, int times = 1)
      : Actor(&Watcher::StateWork), targets_(std::move(targets)), seen_(seen), times_(times) {}

 private:
  void Bootstrap() override {
    for (int i = 0; i < times_; ++i) {
      for (const ActorId& target : targets_) {
        Watch(target);
      }
    }
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvTerminated: {
        const EvTerminated* notice = ev->Get<EvTerminated>();
        seen_->push_back(Describe(notice->target(), notice->reason()));
        break;
      }
      case kEvKick:
        for (const ActorId& target : targets_) {
          Unwatch(target);
        }
        break;
      case kEvValue:
        PassAway();
        break;
      default:
        Unhandled(ev);
    }
  }

  std::vector<ActorId> targets_;
  Seen* seen_;
  int times_;
};

// Ends on EvPoison (Unhandled), throws on EvValue, ignores EvKick.
class Target final : public Actor {
 public:
  Target() : Actor(&Target::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvValue:
        throw std::runtime_error("target fails on purpose");
      case kEvKick:
        break;
      default:
        Unhandled(ev);
    }
  }
};

TestRuntime Nodes(uint32_t nodes) {
  return TestRuntime({.nodes = nodes, .config = testutil::SmallConfig()});
}

TEST(WatchTest, ATargetThatStopsIsReportedOnceToEachWatcherAndWatchingTwiceIsOneWatch) {
  TestRuntime runtime = Nodes(1);
  Seen first;
  Seen second;
  const ActorId target = runtime.Register(std::make_unique<Target>());
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &first, /*times=*/3));
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &second));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(first.empty());
  runtime.Send(target, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(first, (Seen{Describe(target, TerminationReason::kStopped)}));
  EXPECT_EQ(second, (Seen{Describe(target, TerminationReason::kStopped)}));
}

TEST(WatchTest, ATargetWhoseHandlerThrowsIsReportedFailed) {
  TestRuntime runtime = Nodes(1);
  Seen seen;
  const ActorId target = runtime.Register(std::make_unique<Target>());
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &seen));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Send(target, std::make_unique<EvValue>(1));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(target, TerminationReason::kFailed)}));
}

TEST(WatchTest, ADeadAnUnknownAndAnEmptyTargetAreReportedNotFound) {
  TestRuntime runtime = Nodes(1);
  const ActorId dead = runtime.Register(std::make_unique<Target>());
  runtime.Send(dead, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  // An id of this node that no actor ever had, and a service nobody registered.
  const ActorId unknown = ActorId(1, 0, dead.local_id() + 1000, dead.hint());
  const ActorId service = ServiceId("nobody", 1);
  Seen seen;
  runtime.Register(
      std::make_unique<Watcher>(std::vector<ActorId>{dead, unknown, service, ActorId()}, &seen));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  // Each comes from where the watch failed (this actor, the dispatcher, the service table), so
  // their order is not defined.
  Seen expected = {Describe(ActorId(), TerminationReason::kNotFound),
                   Describe(dead, TerminationReason::kNotFound),
                   Describe(unknown, TerminationReason::kNotFound),
                   Describe(service, TerminationReason::kNotFound)};
  std::sort(seen.begin(), seen.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
}

TEST(WatchTest, UnwatchMeansNoNoticeAndAWatcherThatEndsLeavesNothingBehind) {
  TestRuntime runtime = Nodes(1);
  Seen unwatched;
  Seen ended;
  const ActorId target = runtime.Register(std::make_unique<Target>());
  const ActorId first =
      runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &unwatched));
  const ActorId second =
      runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &ended));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Send(first, std::make_unique<EvKick>());     // unwatch
  runtime.Send(second, std::make_unique<EvValue>(1));  // the watcher ends
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Send(target, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(unwatched.empty());
  EXPECT_TRUE(ended.empty());
  // The target knew neither watcher any more: no notice went anywhere, so none was lost.
  for (const DeadLetterCount& count : runtime.node().DeadLetterCounts()) {
    EXPECT_NE(count.type, static_cast<EventType>(kEvTerminated));
  }
  EXPECT_EQ(runtime.node().Counters().dropped_events, 0u);
}

TEST(WatchTest, ARemoteTargetThatStopsOrNeverExistedIsReportedAcrossNodes) {
  TestRuntime runtime = Nodes(2);
  const ActorId target = runtime.Register(std::make_unique<Target>(), /*node=*/2);
  const ActorId unknown = ActorId(2, 0, target.local_id() + 1000, target.hint());
  Seen seen;
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target, unknown}, &seen),
                   /*node=*/1);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(unknown, TerminationReason::kNotFound)}));
  runtime.Send(target, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(unknown, TerminationReason::kNotFound),
                        Describe(target, TerminationReason::kStopped)}));
}

TEST(WatchTest, APartitionReportsTheNodeLostOnceAndTheTargetsLaterEndIsNotASecondNotice) {
  TestRuntime runtime = Nodes(2);
  const ActorId target = runtime.Register(std::make_unique<Target>(), /*node=*/2);
  Seen seen;
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &seen), /*node=*/1);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Partition(1, 2);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(target, TerminationReason::kNodeLost)}));
  runtime.Heal(1, 2);
  runtime.Send(target, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(target, TerminationReason::kNodeLost)}));
}

TEST(WatchTest, AKilledNodeReportsEveryTargetOnItNodeLost) {
  TestRuntime runtime = Nodes(3);
  const ActorId a = runtime.Register(std::make_unique<Target>(), /*node=*/2);
  const ActorId b = runtime.Register(std::make_unique<Target>(), /*node=*/2);
  const ActorId elsewhere = runtime.Register(std::make_unique<Target>(), /*node=*/3);
  Seen seen;
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{a, b, elsewhere}, &seen),
                   /*node=*/1);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.KillNode(2);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  std::sort(seen.begin(), seen.end());
  Seen expected = {Describe(a, TerminationReason::kNodeLost),
                   Describe(b, TerminationReason::kNodeLost)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
}

TEST(WatchTest, AWatchSentToANodeThatIsCutOffComesBackNodeLost) {
  TestRuntime runtime = Nodes(2);
  const ActorId target = runtime.Register(std::make_unique<Target>(), /*node=*/2);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Partition(1, 2);
  Seen seen;
  runtime.Register(std::make_unique<Watcher>(std::vector<ActorId>{target}, &seen), /*node=*/1);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{Describe(target, TerminationReason::kNodeLost)}));
}

// -- dead letters -------------------------------------------------------------------------------

// Records each EvDeadLetter as "<type> <reason> <sender> -> <recipient>"; EvKick ends it.
class Auditor final : public Actor {
 public:
  explicit Auditor(std::vector<std::string>* seen) : Actor(&Auditor::StateWork), seen_(seen) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvDeadLetter: {
        const EvDeadLetter* letter = ev->Get<EvDeadLetter>();
        seen_->push_back(absl::StrFormat("0x%08x %s %s -> %s", letter->type,
                                         UndeliveredReasonName(letter->reason),
                                         letter->sender.ToString(), letter->recipient.ToString()));
        break;
      }
      case kEvKick:
        PassAway();
        break;
      default:
        Unhandled(ev);
    }
  }

  std::vector<std::string>* seen_;
};

TEST(DeadLetterTest, AnUntrackedEventToADeadActorIsCountedAndDescribedToListeners) {
  TestRuntime runtime = Nodes(1);
  std::vector<std::string> seen;
  const ActorId auditor = runtime.Register(std::make_unique<Auditor>(&seen));
  runtime.node().SubscribeDeadLetters(auditor);
  runtime.node().SubscribeDeadLetters(auditor);  // once is enough
  const ActorId dead = runtime.Register(std::make_unique<Target>());
  runtime.Send(dead, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  const ActorId sender = runtime.AllocateEdgeActor();
  runtime.Send(dead, std::make_unique<EvValue>(1), sender);
  runtime.Send(dead, std::make_unique<EvValue>(2), sender);
  // Tracked: the sender learns of it, so it is no dead letter.
  runtime.Send(dead, std::make_unique<EvKick>(), sender, kTrackDelivery);
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  const std::string line = absl::StrFormat("0x%08x actor-not-found %s -> %s", kEvValue,
                                           sender.ToString(), dead.ToString());
  EXPECT_EQ(seen, (std::vector<std::string>{line, line}));
  const std::vector<DeadLetterCount> counts = runtime.node().DeadLetterCounts();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].type, static_cast<EventType>(kEvValue));
  EXPECT_EQ(counts[0].reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(counts[0].count, 2u);
  EXPECT_EQ(runtime.node().metrics().Sum("troupe_dead_letters_total"), 2);
  EXPECT_TRUE(runtime.GrabEdgeEvent<EvUndelivered>(sender));
}

TEST(DeadLetterTest, AListenerThatEndsIsUnsubscribedWithoutALoop) {
  TestRuntime runtime = Nodes(1);
  std::vector<std::string> seen;
  const ActorId auditor = runtime.Register(std::make_unique<Auditor>(&seen));
  runtime.node().SubscribeDeadLetters(auditor);
  runtime.Send(auditor, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  // The first dead letter's EvDeadLetter finds no listener and unsubscribes it; the second is
  // only counted.
  runtime.Send(auditor, std::make_unique<EvValue>(1));
  runtime.Send(auditor, std::make_unique<EvValue>(2));
  ASSERT_EQ(runtime.DispatchEvents({.max_events = 100}), DispatchResult::kIdle);
  const std::vector<DeadLetterCount> counts = runtime.node().DeadLetterCounts();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].count, 2u);
  runtime.node().UnsubscribeDeadLetters(auditor);  // already gone: no effect
}

TEST(DeadLetterTest, LogLinesAreRateLimitedAndTheNextLineCountsTheOnesNotLogged) {
  CapturingLogSink sink;
  TestRuntime runtime = Nodes(1);
  const ActorId dead = runtime.Register(std::make_unique<Target>());
  runtime.Send(dead, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  for (uint64_t i = 0; i < 100; ++i) {
    runtime.Send(dead, std::make_unique<EvValue>(i));
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(sink.LinesWith("dead letter (actor-not-found)").size(), 10u);
  ASSERT_TRUE(runtime.AdvanceTime(absl::Seconds(1)));
  runtime.Send(dead, std::make_unique<EvValue>(100));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  const std::vector<std::string> lines = sink.LinesWith("dead letter (actor-not-found)");
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_TRUE(absl::StrContains(lines.back(), "90 earlier dead letters were not logged"))
      << lines.back();
  EXPECT_TRUE(absl::StrContains(lines.back(), "to " + dead.ToString())) << lines.back();
}

// Dead-letter lines, counts and metric labels name the event's type, as its class is called.
TEST(DeadLetterTest, LinesAndMetricLabelsNameTheEventType) {
  CapturingLogSink sink;
  TestRuntime runtime = Nodes(1);
  const ActorId dead = runtime.Register(std::make_unique<Target>());
  runtime.Send(dead, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Send(dead, std::make_unique<EvValue>(1));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  const std::vector<std::string> lines = sink.LinesWith("dead letter (actor-not-found)");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(absl::StrContains(lines[0], absl::StrFormat("event EvValue (0x%08x)", kEvValue)))
      << lines[0];
  EXPECT_EQ(runtime.node().metrics().Value("troupe_dead_letters_total",
                                           {{"type", "EvValue"}, {"reason", "actor-not-found"}}),
            1);
  EXPECT_EQ(EventTypeName(kEvValue), "EvValue");
  EXPECT_EQ(EventTypeName(kEvWakeup), "EvWakeup");
  EXPECT_EQ(EventTypeName(EventSpaceBegin(kUserEventSpace + 77)),
            absl::StrFormat("0x%08x", EventSpaceBegin(kUserEventSpace + 77)))
      << "a type no event class names";
}

// Schedules a wake-up and ends before it is due.
class Sleeper final : public Actor {
 public:
  Sleeper() : Actor(&Sleeper::StateWork) {}

 private:
  void Bootstrap() override {
    ScheduleWakeup(absl::Seconds(1));
    PassAway();
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }
};

// The runtime's own notices to an actor that has ended (here a timer's EvWakeup) are no dead
// letters: not logged, not counted as such, not described to listeners; only counted apart.
TEST(DeadLetterTest, ATimerWakeupOfAnEndedActorIsNoDeadLetter) {
  CapturingLogSink sink;
  TestRuntime runtime = Nodes(1);
  std::vector<std::string> seen;
  runtime.node().SubscribeDeadLetters(runtime.Register(std::make_unique<Auditor>(&seen)));
  runtime.Register(std::make_unique<Sleeper>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.AdvanceTime(absl::Seconds(2)));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.node().metrics().Sum("troupe_dropped_notices_total"), 1)
      << "the wake-up did reach the ended actor";
  EXPECT_TRUE(sink.LinesWith("dead letter").empty()) << sink.LinesWith("dead letter").front();
  EXPECT_TRUE(runtime.node().DeadLetterCounts().empty());
  EXPECT_EQ(runtime.node().metrics().Sum("troupe_dead_letters_total"), 0);
  EXPECT_EQ(runtime.node().Counters().dropped_events, 0u);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace troupe
