// SPDX-License-Identifier: Apache-2.0
//
// Requests and replies: Actor::Ask with its continuation (a reply, a reply of another type, a
// timeout and the late reply after it, an undelivered request, an actor that ends with asks
// pending, asks while suspended, the order of continuations among other events) on TestRuntime
// in simulated time; troupe::AskFuture from a plain thread and ScopedActor on real threads.
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/scoped_actor.h"
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

// Answers EvValue{v} with EvValue{v * 10} (by Reply), unless told to stay silent (then it answers
// the last request it kept on EvKick, late) or to answer with the wrong type.
class Replier final : public Actor {
 public:
  enum class Mode { kAnswer, kSilent, kWrongType };
  explicit Replier(Mode mode) : Actor(&Replier::StateWork), mode_(mode) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvValue: {
        const uint64_t value = ev->Get<EvValue>()->value;
        if (mode_ == Mode::kAnswer) {
          Reply(ev, std::make_unique<EvValue>(value * 10));
        } else if (mode_ == Mode::kWrongType) {
          Reply(ev, std::make_unique<EvKick>());
        } else {
          kept_ = std::move(ev);
        }
        break;
      }
      case kEvKick:
        if (kept_ != nullptr) {
          Reply(kept_, std::make_unique<EvValue>(999));
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  Mode mode_;
  EventHandlePtr kept_;
};

// What an Asker saw, in order: "reply 70", "error DEADLINE_EXCEEDED: ...", "event 5".
using Seen = std::vector<std::string>;

// Asks `to` for each EvKick it gets (the request value is the kick's count), and records the
// outcomes and every other EvValue it handles.
class Asker final : public Actor {
 public:
  Asker(ActorId to, absl::Duration timeout, Seen* seen)
      : Actor(&Asker::StateWork), to_(to), timeout_(timeout), seen_(seen) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        Ask<EvValue>(to_, std::make_unique<EvValue>(++asked_), timeout_,
                     [this](AskResult<EvValue> reply) {
                       seen_->push_back(reply.ok() ? "reply " + std::to_string((*reply)->value)
                                                   : "error " + reply.status().ToString());
                     });
        break;
      case kEvValue:
        seen_->push_back("event " + std::to_string(ev->Get<EvValue>()->value));
        break;
      default:
        Unhandled(ev);
    }
  }

  ActorId to_;
  absl::Duration timeout_;
  Seen* seen_;
  uint64_t asked_ = 0;
};

TestRuntime OneNodeRuntime() { return TestRuntime({.config = testutil::SmallConfig()}); }

TEST(AskTest, AReplyReachesTheContinuationMatchedByTheFramework) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  const ActorId asker = runtime.Register(std::make_unique<Asker>(replier, absl::Seconds(1), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{"reply 10", "reply 20"}));
  // The timeouts were cancelled with the replies: nothing fires later.
  ASSERT_TRUE(runtime.AdvanceTime(absl::Seconds(5)));
  EXPECT_EQ(seen.size(), 2u);
}

// Asks `to` on the first EvKick and keeps the reply it is handed; on the next EvKick, a later
// event than the one that carried the reply, records what it kept.
class Keeper final : public Actor {
 public:
  Keeper(ActorId to, Seen* seen) : Actor(&Keeper::StateWork), to_(to), seen_(seen) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
    } else if (!asked_) {
      asked_ = true;
      Ask<EvValue>(to_, std::make_unique<EvValue>(3), absl::Seconds(1),
                   [this](AskResult<EvValue> reply) {
                     if (reply.ok()) {
                       kept_ = *std::move(reply);
                     }
                   });
    } else {
      seen_->push_back(kept_ != nullptr ? "kept " + std::to_string(kept_->value) : "kept nothing");
    }
  }

  ActorId to_;
  Seen* seen_;
  bool asked_ = false;
  std::unique_ptr<EvValue> kept_;
};

TEST(AskTest, TheReplyIsTheAskersToKeepAfterTheContinuation) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  const ActorId keeper = runtime.Register(std::make_unique<Keeper>(replier, &seen));
  runtime.Send(keeper, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  runtime.Send(keeper, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{"kept 30"}));
}

TEST(AskTest, NoReplyInTimeIsDeadlineExceededAndTheLateReplyIsDropped) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kSilent));
  const ActorId asker =
      runtime.Register(std::make_unique<Asker>(replier, absl::Milliseconds(100), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(99)));
  EXPECT_TRUE(seen.empty()) << "not before the timeout";
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(2)));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(seen[0], "error DEADLINE_EXCEEDED")) << seen[0];
  EXPECT_TRUE(absl::StrContains(seen[0], replier.ToString())) << seen[0];
  // The reply comes now: dropped, the continuation does not run twice, the handler never sees it.
  runtime.Send(replier, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen.size(), 1u) << seen.back();
}

TEST(AskTest, AReplyOfAnotherTypeIsAnError) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kWrongType));
  const ActorId asker = runtime.Register(std::make_unique<Asker>(replier, absl::Seconds(1), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(seen[0], "error INVALID_ARGUMENT: expected a reply of type"))
      << seen[0];
}

TEST(AskTest, AnUndeliveredRequestIsUnavailableNamingTheReason) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId nobody(1, 0, 123456789, 0);
  const ActorId asker = runtime.Register(std::make_unique<Asker>(nobody, absl::Seconds(1), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(seen[0], "error UNAVAILABLE")) << seen[0];
  EXPECT_TRUE(absl::StrContains(seen[0], "actor-not-found")) << seen[0];
}

TEST(AskTest, OtherEventsAreHandledWhileAnAskWaitsAndTheContinuationRunsInOrder) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kSilent));
  const ActorId asker =
      runtime.Register(std::make_unique<Asker>(replier, absl::Milliseconds(50), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  runtime.Send(asker, std::make_unique<EvValue>(5));
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(10)));
  EXPECT_EQ(seen, Seen{"event 5"}) << "an ask does not block its actor";
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(100)));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(seen[1], "error DEADLINE_EXCEEDED")) << seen[1];
}

TEST(AskTest, ASuspendedActorRunsNoContinuationUntilResumed) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  const ActorId asker = runtime.Register(std::make_unique<Asker>(replier, absl::Seconds(1), &seen));
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_TRUE(runtime.node().Suspend(asker).ok());
  ASSERT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  // Whether the reply came before the suspend or not, nothing more runs while suspended.
  const size_t before = seen.size();
  runtime.Send(asker, std::make_unique<EvKick>());
  ASSERT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  EXPECT_EQ(seen.size(), before);
  ASSERT_TRUE(runtime.node().Resume(asker).ok());
  ASSERT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{"reply 10", "reply 20"}));
}

TEST(AskTest, AnActorThatEndsWithAsksPendingLeavesNothingBehind) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kSilent));
  const ActorId asker = runtime.Register(std::make_unique<Asker>(replier, absl::Seconds(1), &seen));
  for (int i = 0; i < 3; ++i) {
    runtime.Send(asker, std::make_unique<EvKick>());
  }
  ASSERT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  EXPECT_EQ(runtime.PendingTimers(), 3u);
  runtime.Send(asker, std::make_unique<EvPoison>());
  ASSERT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.AdvanceTime(absl::Seconds(2)));
  EXPECT_TRUE(seen.empty()) << "no continuation runs for an actor that ended";
  EXPECT_EQ(runtime.PendingTimers(), 0u);
}

// -- from plain threads ---------------------------------------------------------------------------

// Answers each EvValue by asking `to` for it and replying with what came back: an actor with
// asks of its own that is asked in turn.
class Relay final : public Actor {
 public:
  explicit Relay(ActorId to) : Actor(&Relay::StateWork), to_(to) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t value = ev->Get<EvValue>()->value;  // before the lambda takes `ev`
    Ask<EvValue>(to_, std::make_unique<EvValue>(value), absl::Seconds(1),
                 [this, request = std::move(ev)](AskResult<EvValue> reply) {
                   Reply(request, std::make_unique<EvValue>(reply.ok() ? (*reply)->value : 0));
                 });
  }

  ActorId to_;
};

TEST(AskTest, AnActorWithAsksOfItsOwnStillGetsTheRequestsOthersAskIt) {
  TestRuntime runtime = OneNodeRuntime();
  Seen seen;
  const ActorId replier = runtime.Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  const ActorId relay = runtime.Register(std::make_unique<Relay>(replier));
  const ActorId asker = runtime.Register(std::make_unique<Asker>(relay, absl::Seconds(1), &seen));
  for (int i = 0; i < 3; ++i) {
    runtime.Send(asker, std::make_unique<EvKick>());
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(seen, (Seen{"reply 10", "reply 20", "reply 30"}));
}

TEST(ThreadAskTest, AFutureGetsTheReplyTheTimeoutOrTheUndelivered) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId answering = system->Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  const ActorId silent = system->Register(std::make_unique<Replier>(Replier::Mode::kSilent));

  AskResult<EvValue> reply =
      AskFuture<EvValue>(*system, answering, std::make_unique<EvValue>(4), testutil::WaitTimeout())
          .get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)->value, 40u);

  reply = AskFuture<EvValue>(*system, silent, std::make_unique<EvValue>(1), absl::Milliseconds(20))
              .get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded) << reply.status();

  reply = AskFuture<EvValue>(*system, ActorId(system->node_id(), 0, 987654321, 0),
                             std::make_unique<EvValue>(1), testutil::WaitTimeout())
              .get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();

  // Many at once, each matched to its own reply.
  std::vector<std::future<AskResult<EvValue>>> futures;
  for (uint64_t i = 1; i <= 100; ++i) {
    futures.push_back(AskFuture<EvValue>(*system, answering, std::make_unique<EvValue>(i),
                                         testutil::WaitTimeout()));
  }
  for (uint64_t i = 1; i <= 100; ++i) {
    AskResult<EvValue> got = futures[i - 1].get();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)->value, i * 10);
  }
}

TEST(ThreadAskTest, AnAskCutShortByTheSystemStoppingIsCancelled) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId silent = system->Register(std::make_unique<Replier>(Replier::Mode::kSilent));
  std::future<AskResult<EvValue>> pending =
      AskFuture<EvValue>(*system, silent, std::make_unique<EvValue>(1), absl::Hours(1));
  system->Stop();
  EXPECT_EQ(pending.get().status().code(), absl::StatusCode::kCancelled);
  // After the stop: a ready future, never a hang.
  EXPECT_EQ(AskFuture<EvValue>(*system, silent, std::make_unique<EvValue>(1), absl::Hours(1))
                .get()
                .status()
                .code(),
            absl::StatusCode::kCancelled);
}

TEST(ScopedActorTest, AThreadSendsReceivesAndTimesOut) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId answering = system->Register(std::make_unique<Replier>(Replier::Mode::kAnswer));
  ScopedActor me(*system);
  ASSERT_FALSE(me.id().IsEmpty());
  EXPECT_EQ(me.Receive(absl::Milliseconds(5)), nullptr) << "nothing sent yet";
  for (uint64_t i = 1; i <= 3; ++i) {
    me.Send(answering, std::make_unique<EvValue>(i), kNoFlags, i);
  }
  for (uint64_t i = 1; i <= 3; ++i) {
    EventHandlePtr reply = me.Receive(testutil::WaitTimeout());
    ASSERT_NE(reply, nullptr);
    EXPECT_EQ(reply->Get<EvValue>()->value, i * 10) << "in order";
    EXPECT_EQ(reply->cookie(), i) << "Reply keeps the cookie";
    EXPECT_EQ(reply->sender(), answering);
  }
  EXPECT_EQ(me.waiting(), 0u);
  // A tracked send to nobody comes back as Undelivered.
  me.Send(ActorId(system->node_id(), 0, 987654321, 0), std::make_unique<EvValue>(1),
          kTrackDelivery);
  EventHandlePtr notice = me.Receive(testutil::WaitTimeout());
  ASSERT_NE(notice, nullptr);
  EXPECT_EQ(notice->type(), kEvUndelivered);
}

}  // namespace
}  // namespace troupe
