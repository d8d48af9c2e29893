// SPDX-License-Identifier: Apache-2.0
//
// The run-next slot of a handler that stays busy, in real time: the actor it woke starts on an idle
// worker long before the handler ends, and asks sent from one long handler are answered by an idle
// worker before they time out.
//
// Label `timing` (actors_timing_ut, Release only): the assertions are real-time windows (a
// recipient's start within 50 ms of a 100 ms handler's send; replies within an ask's 50 ms).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::AddPool;
using testutil::BusyFor;
using testutil::EvKick;
using testutil::EvValue;
using testutil::kEvKick;
using testutil::kEvValue;
using testutil::MakeNodeWithPool;
using testutil::OnPool;
using testutil::WaitTimeout;
using testutil::WaitUntil;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Steady-clock nanoseconds of the probe's moments (0 until they happen).
struct ProbeTimes {
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> first_run{0};
  std::atomic<int64_t> handler_end{0};
};

// Records when it first runs.
class ProbeRecipient : public Actor {
 public:
  explicit ProbeRecipient(ProbeTimes* times) : Actor(&ProbeRecipient::StateWork), times_(times) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    int64_t none = 0;
    // release: pairs with the test's acquire load.
    times_->first_run.compare_exchange_strong(none, NowNanos(), std::memory_order_release);
  }

  ProbeTimes* times_;
};

// On EvKick sends one event to `target` and then keeps its worker busy for 100 ms.
class ProbeSender : public Actor {
 public:
  ProbeSender(ActorId target, ProbeTimes* times)
      : Actor(&ProbeSender::StateWork), target_(target), times_(times) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
      return;
    }
    times_->sent.store(NowNanos(), std::memory_order_relaxed);
    Send(target_, std::make_unique<EvValue>(0));
    BusyFor(absl::Milliseconds(100));
    // release: pairs with the test's acquire load (and publishes `sent`).
    times_->handler_end.store(NowNanos(), std::memory_order_release);
  }

  ActorId target_;
  ProbeTimes* times_;
};

class RunNextTimingTest : public ::testing::TestWithParam<uint32_t> {};

// A handler sends one event and stays busy for 100 ms: the recipient, in that worker's run-next
// slot, starts on an idle worker well before the handler ends (the slot is stolen, and counted).
TEST_P(RunNextTimingTest, RecipientOfABusyHandlerStartsWellBeforeItEnds) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Probe", GetParam())->clear_spin_time_us();  // the default spin
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Probe", &pool);
  ASSERT_NE(system, nullptr);
  ProbeTimes times;
  const ActorId recipient =
      system->Register(std::make_unique<ProbeRecipient>(&times), OnPool(pool));
  const ActorId sender =
      system->Register(std::make_unique<ProbeSender>(recipient, &times), OnPool(pool));
  const uint64_t steals_before = system->Counters().pools[pool].steals;

  system->Send(sender, std::make_unique<EvKick>());
  ASSERT_TRUE(WaitUntil([&] {
    return times.handler_end.load(std::memory_order_acquire) != 0 &&
           times.first_run.load(std::memory_order_acquire) != 0;
  })) << testutil::DescribeCounters(*system);

  const int64_t sent = times.sent.load(std::memory_order_relaxed);
  const absl::Duration to_first_run =
      absl::Nanoseconds(times.first_run.load(std::memory_order_acquire) - sent);
  const absl::Duration handler =
      absl::Nanoseconds(times.handler_end.load(std::memory_order_acquire) - sent);
  EXPECT_LT(to_first_run, absl::Milliseconds(50))
      << "the recipient first ran " << to_first_run << " after the send, its sender's handler "
      << "took " << handler;
  EXPECT_GT(system->Counters().pools[pool].steals, steals_before)
      << testutil::DescribeCounters(*system);
}

INSTANTIATE_TEST_SUITE_P(Workers, RunNextTimingTest, ::testing::Values(2U, 4U));

constexpr uint64_t kStormAsks = 100'000;

// Answers the requests with an odd value, ignores the others.
class OddAnswerer : public Actor {
 public:
  OddAnswerer() : Actor(&OddAnswerer::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t value = ev->Get<EvValue>()->value;
    if (value % 2 == 1) {
      Reply(ev, std::make_unique<EvValue>(value));
    }
  }
};

struct StormResult {
  std::atomic<uint64_t> replies{0};
  std::atomic<uint64_t> failures{0};
  troupe::Notification done;
};

// On EvKick asks `answerer` kStormAsks times (50 ms each) in one handler.
class StormAsker : public Actor {
 public:
  StormAsker(ActorId answerer, StormResult* result)
      : Actor(&StormAsker::StateWork), answerer_(answerer), result_(result) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
      return;
    }
    for (uint64_t i = 0; i < kStormAsks; ++i) {
      Ask<EvValue>(answerer_, std::make_unique<EvValue>(i), absl::Milliseconds(50),
                   [this](AskResult<EvValue> reply) { Count(reply.ok()); });
    }
  }

  void Count(bool replied) {
    // relaxed: the continuations run in this actor's handlers; the notification publishes them.
    (replied ? result_->replies : result_->failures).fetch_add(1, std::memory_order_relaxed);
    if (++ended_ == kStormAsks) {
      result_->done.Notify();
    }
  }

  ActorId answerer_;
  StormResult* result_;
  uint64_t ended_ = 0;
};

// 100,000 asks with a 50 ms timeout from one handler to an actor that answers every other one: the
// answerer, woken into the asking worker's run-next slot, runs on an idle worker while the asks
// are still being sent, so the answerable asks get their replies. On a quiet machine all 50,000
// do; the bound asks for more than half of them (the answerer's worker shares the machine's cores
// with everything else), where an answerer held up by the asking handler got at most a quarter.
TEST_P(RunNextTimingTest, AsksFromOneLongHandlerAreAnswered) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Storm", GetParam())->clear_spin_time_us();
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Storm", &pool);
  ASSERT_NE(system, nullptr);
  StormResult result;
  const ActorId answerer = system->Register(std::make_unique<OddAnswerer>(), OnPool(pool));
  const ActorId asker =
      system->Register(std::make_unique<StormAsker>(answerer, &result), OnPool(pool));

  system->Send(asker, std::make_unique<EvKick>());
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(WaitTimeout()));
  const uint64_t replies = result.replies.load(std::memory_order_relaxed);
  RecordProperty("replies", static_cast<int>(replies));
  std::printf("asks %llu: replies %llu, failures %llu\n",
              static_cast<unsigned long long>(kStormAsks), static_cast<unsigned long long>(replies),
              static_cast<unsigned long long>(result.failures.load(std::memory_order_relaxed)));
  EXPECT_EQ(replies + result.failures.load(std::memory_order_relaxed), kStormAsks);
  EXPECT_LE(replies, kStormAsks / 2);
  EXPECT_GT(replies, kStormAsks / 4);
}

}  // namespace
}  // namespace troupe
