// SPDX-License-Identifier: Apache-2.0
//
// Coroutines in handlers (actors/coroutine.h) on TestRuntime: replies awaited in sequence, a
// timeout and an undelivered request as statuses, other events handled (in order, one at a time)
// while a coroutine waits, two coroutines waiting at once, an exception after a co_await failing
// the actor (so does one before it), and the frame of a coroutine whose actor ends destroyed
// without resuming.
#include "actors/coroutine.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
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

using Seen = std::vector<std::string>;

// Answers EvValue{v} with EvValue{v + 1}; v == 0 stays unanswered.
class Adder final : public Actor {
 public:
  Adder() : Actor(&Adder::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvValue) {
      const uint64_t value = ev->Get<EvValue>()->value;
      if (value != 0) {
        Reply(ev, std::make_unique<EvValue>(value + 1));
      }
    } else {
      Unhandled(ev);
    }
  }
};

// Sets `*flag` when destroyed: shows when a coroutine's frame goes.
struct Sentinel {
  explicit Sentinel(bool* flag) : flag_(flag) {}
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;
  ~Sentinel() { *flag_ = true; }
  bool* flag_;
};

// On EvKick{} starts Chain: asks `adder_` for `start`+1, then for that +1, recording each step.
// EvValue events are recorded as "event v" (and v == 99 throws after the next co_await).
class Chainer final : public Actor {
 public:
  Chainer(ActorId adder, Seen* seen, bool* frame_gone)
      : Actor(&Chainer::StateWork), adder_(adder), seen_(seen), frame_gone_(frame_gone) {}

 private:
  Task Chain(uint64_t start) {
    Sentinel sentinel(frame_gone_);
    seen_->push_back(absl::StrCat("start ", start));
    if (start == 42) {
      throw std::runtime_error("coroutine fails before its first co_await");
    }
    AskResult<EvValue> first =
        co_await Ask<EvValue>(adder_, std::make_unique<EvValue>(start), absl::Seconds(1));
    if (!first.ok()) {
      seen_->push_back(absl::StrCat("error ", absl::StatusCodeToString(first.status().code())));
      co_return;
    }
    seen_->push_back(absl::StrCat("got ", (*first)->value, " after ", events_));
    if (fail_after_await_) {
      throw std::runtime_error("coroutine fails on purpose");
    }
    AskResult<EvValue> second =
        co_await Ask<EvValue>(adder_, std::make_unique<EvValue>((*first)->value), absl::Seconds(1));
    seen_->push_back(second.ok() ? absl::StrCat("got ", (*second)->value)
                                 : absl::StrCat("error ", second.status().ToString()));
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        Chain(ev->cookie());
        break;
      case kEvValue:
        ++events_;
        seen_->push_back(absl::StrCat("event ", ev->Get<EvValue>()->value));
        fail_after_await_ = ev->Get<EvValue>()->value == 99;
        break;
      default:
        Unhandled(ev);
    }
  }

  ActorId adder_;
  Seen* seen_;
  bool* frame_gone_;
  uint64_t events_ = 0;
  bool fail_after_await_ = false;
};

struct Fixture {
  TestRuntime runtime{{.config = testutil::SmallConfig()}};
  Seen seen;
  bool frame_gone = false;
  ActorId adder = runtime.Register(std::make_unique<Adder>());
  ActorId chainer = runtime.Register(std::make_unique<Chainer>(adder, &seen, &frame_gone));

  void Kick(uint64_t start) { runtime.Send(chainer, std::make_unique<EvKick>(), {}, 0, start); }
};

TEST(CoroutineTest, RepliesAreAwaitedInSequenceAndTheFrameEndsWithTheCoroutine) {
  Fixture f;
  f.Kick(1);
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen, (Seen{"start 1", "got 2 after 0", "got 3"}));
  EXPECT_TRUE(f.frame_gone);
}

TEST(CoroutineTest, OtherEventsAreHandledInOrderWhileACoroutineWaits) {
  Fixture f;
  f.Kick(1);
  f.runtime.Send(f.chainer, std::make_unique<EvValue>(7));
  f.runtime.Send(f.chainer, std::make_unique<EvValue>(8));
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  // The two events were queued before the reply: they are handled first, and the coroutine sees
  // the state they left.
  EXPECT_EQ(f.seen, (Seen{"start 1", "event 7", "event 8", "got 2 after 2", "got 3"}));
}

TEST(CoroutineTest, TwoCoroutinesOfOneActorWaitAtOnce) {
  Fixture f;
  f.Kick(10);
  f.Kick(20);
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen,
            (Seen{"start 10", "start 20", "got 11 after 0", "got 21 after 0", "got 12", "got 22"}));
}

TEST(CoroutineTest, ATimeoutAndAnUndeliveredRequestAreStatuses) {
  Fixture f;
  f.Kick(0);  // the adder never answers 0
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen, (Seen{"start 0", "error DEADLINE_EXCEEDED"}));
  EXPECT_TRUE(f.frame_gone);

  f.seen.clear();
  f.runtime.Send(f.adder, std::make_unique<EvPoison>());
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  f.Kick(5);
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen, (Seen{"start 5", "error UNAVAILABLE"}));
}

TEST(CoroutineTest, AnExceptionAfterACoAwaitFailsTheActor) {
  Fixture f;
  f.runtime.Send(f.chainer, std::make_unique<EvValue>(99));
  f.Kick(1);
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen, (Seen{"event 99", "start 1", "got 2 after 1"}));
  EXPECT_TRUE(f.frame_gone);
  EXPECT_EQ(f.runtime.node().Counters().failed_actors, 1u);
}

TEST(CoroutineTest, AnExceptionBeforeTheFirstCoAwaitFailsTheActorInTheStartingHandler) {
  Fixture f;
  f.Kick(42);
  f.Kick(1);
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(f.seen, (Seen{"start 42"}));
  EXPECT_TRUE(f.frame_gone);
  EXPECT_EQ(f.runtime.node().Counters().failed_actors, 1u);
}

TEST(CoroutineTest, AnActorThatEndsWhileACoroutineWaitsDestroysItsFrameUnresumed) {
  Fixture f;
  f.Kick(0);  // waits a second for an answer that never comes
  ASSERT_EQ(f.runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  EXPECT_FALSE(f.frame_gone);
  f.runtime.Send(f.chainer, std::make_unique<EvPoison>());
  ASSERT_EQ(f.runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(f.frame_gone);
  EXPECT_EQ(f.seen, (Seen{"start 0"}));
}

}  // namespace
}  // namespace troupe
