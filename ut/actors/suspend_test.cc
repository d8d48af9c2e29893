// SPDX-License-Identifier: Apache-2.0
//
// Suspend and resume: held events keep their order and are never lost, nested suspends need as
// many resumes, an actor may suspend itself, a stray resume is ignored (with a warning), PassAway
// during the replay reports the rest undelivered, and ids that are not local actors are refused.
//
// "Nothing is handled while suspended" runs on TestRuntime, where "nothing" can be checked without
// waiting; ordering under concurrent senders and toggles needs real threads.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::EvKick;
using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvKick;
using testutil::kEvValue;
using testutil::LineWithAll;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::Scaled;
using testutil::Values;
using testutil::WaitUntil;

// One node configured like the real-thread tests' nodes.
TestRuntimeOptions SuspendNode() { return {.config = testutil::SmallConfig()}; }

// Returns first, first + 1, ..., last - 1.
std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> values;
  for (uint64_t v = first; v < last; ++v) {
    values.push_back(v);
  }
  return values;
}

TEST(SuspendTest, SuspendKeepsOrderAndLosesNothing) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  constexpr uint64_t kPerStep = 100;
  uint64_t next = 0;
  auto send_step = [&] {
    for (uint64_t i = 0; i < kPerStep; ++i) {
      system->Send(recorder, std::make_unique<EvValue>(next++));
    }
  };
  ASSERT_TRUE(system->Suspend(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Suspend(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Resume(recorder).ok());
  send_step();
  ASSERT_TRUE(system->Resume(recorder).ok());
  send_step();

  ASSERT_TRUE(inbox.WaitForType(kEvValue, 4 * kPerStep)) << testutil::DescribeCounters(*system);
  const std::vector<Received> events = inbox.Snapshot();
  EXPECT_EQ(events.size(), 4 * kPerStep) << "the state function saw other events (suspend/resume?)";
  EXPECT_EQ(Values(events), Range(0, 4 * kPerStep));
}

TEST(SuspendTest, SuspendedActorHandlesNothingUntilLastResume) {
  TestRuntime runtime(SuspendNode());
  Inbox inbox;
  const ActorId recorder = runtime.Register(std::make_unique<Recorder>(&inbox));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  for (uint64_t v = 0; v < 5; ++v) {
    runtime.Send(recorder, std::make_unique<EvValue>(v));
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(inbox.Snapshot().empty()) << "handled while suspended twice";

  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  for (uint64_t v = 5; v < 8; ++v) {
    runtime.Send(recorder, std::make_unique<EvValue>(v));
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(inbox.Snapshot().empty()) << "handled after one resume of two suspends";

  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(8));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), Range(0, 9));
}

// What a SelfSuspender saw: values, and its SuspendCount() in each handler.
struct SelfSuspendLog {
  std::vector<uint64_t> values;
  std::vector<uint32_t> counts;
  uint32_t count_after_suspend = 0;
};

// Suspends itself on EvKick; records every EvValue. TestRuntime only (single thread).
class SelfSuspender : public Actor {
 public:
  explicit SelfSuspender(SelfSuspendLog* log) : Actor(&SelfSuspender::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick:
        Suspend();
        log_->count_after_suspend = SuspendCount();
        break;
      case kEvValue:
        log_->values.push_back(ev->Get<EvValue>()->value);
        log_->counts.push_back(SuspendCount());
        break;
      default:
        Unhandled(ev);
    }
  }

  SelfSuspendLog* log_;
};

TEST(SuspendTest, ActorSuspendsItselfUntilResumedFromOutside) {
  TestRuntime runtime(SuspendNode());
  SelfSuspendLog log;
  const ActorId actor = runtime.Register(std::make_unique<SelfSuspender>(&log));
  runtime.Send(actor, std::make_unique<EvValue>(0));
  runtime.Send(actor, std::make_unique<EvKick>());
  // Already queued behind the kick when the actor suspends itself: held too.
  runtime.Send(actor, std::make_unique<EvValue>(1));
  runtime.Send(actor, std::make_unique<EvValue>(2));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.count_after_suspend, 1u);
  EXPECT_EQ(log.values, std::vector<uint64_t>{0});

  runtime.Send(actor, std::make_unique<EvValue>(3));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.values, std::vector<uint64_t>{0});

  ASSERT_TRUE(runtime.node().Resume(actor).ok());
  runtime.Send(actor, std::make_unique<EvValue>(4));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(log.values, Range(0, 5));
  EXPECT_EQ(log.counts, std::vector<uint32_t>(5, 0));
}

TEST(SuspendTest, ResumeOfActorNotSuspendedIsIgnored) {
  CapturingLogSink sink;
  TestRuntime runtime(SuspendNode());
  Inbox inbox;
  const ActorId recorder = runtime.Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(1));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{1});
  EXPECT_FALSE(LineWithAll(sink, {recorder.ToString(), "not suspended"}).empty())
      << "no warning about the stray resume; log:\n"
      << absl::StrJoin(sink.Lines(), "\n");

  // The stray resume left no credit behind: a suspend still holds events until its resume.
  ASSERT_TRUE(runtime.node().Suspend(recorder).ok());
  runtime.Send(recorder, std::make_unique<EvValue>(2));
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{1});
  ASSERT_TRUE(runtime.node().Resume(recorder).ok());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(Values(inbox.Snapshot()), Range(1, 3));
  EXPECT_EQ(inbox.Snapshot().size(), 2u) << "the state function saw a suspend or resume";
}

// Records EvValue values; ends itself while handling `last`. TestRuntime only.
class Quitter : public Actor {
 public:
  Quitter(uint64_t last, std::vector<uint64_t>* values)
      : Actor(&Quitter::StateWork), last_(last), values_(values) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t v = ev->Get<EvValue>()->value;
    values_->push_back(v);
    if (v == last_) {
      PassAway();
    }
  }

  const uint64_t last_;
  std::vector<uint64_t>* values_;
};

TEST(SuspendTest, PassAwayDuringReplayReportsRemainingHeldEventsUndelivered) {
  TestRuntime runtime(SuspendNode());
  std::vector<uint64_t> values;
  const ActorId quitter = runtime.Register(std::make_unique<Quitter>(2, &values));
  const ActorId edge = runtime.AllocateEdgeActor();
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_TRUE(runtime.node().Suspend(quitter).ok());
  for (uint64_t v = 1; v <= 5; ++v) {
    runtime.Send(quitter, std::make_unique<EvValue>(v), edge, kTrackDelivery, /*cookie=*/v);
  }
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(values.empty());
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u);

  ASSERT_TRUE(runtime.node().Resume(quitter).ok());
  ASSERT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(values, Range(1, 3));
  std::vector<EventHandlePtr> reports = runtime.TakeEdgeEvents(edge);
  ASSERT_EQ(reports.size(), 3u);
  for (size_t i = 0; i < reports.size(); ++i) {
    const EvUndelivered* undelivered = reports[i]->Get<EvUndelivered>();
    ASSERT_NE(undelivered, nullptr) << "report " << i << ": " << reports[i]->ToString();
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kActorNotFound);
    EXPECT_EQ(undelivered->source_type, kEvValue);
    EXPECT_EQ(undelivered->cookie, 3 + i) << "held events reported out of order";
    EXPECT_FALSE(undelivered->unsure);
  }
  EXPECT_EQ(runtime.node().Counters().dropped_events, 0u);
}

TEST(SuspendTest, SuspendAndResumeRejectIdsThatAreNotLocalActors) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  ASSERT_TRUE(system->RegisterService(ServiceId("sched"), recorder).ok());
  const ActorId remote = recorder.WithNode(system->node_id() + 1);
  for (const ActorId& id :
       {ActorId(), ServiceId("sched"), ServiceId("sched", system->node_id()), remote}) {
    EXPECT_EQ(system->Suspend(id).code(), absl::StatusCode::kInvalidArgument) << id.ToString();
    EXPECT_EQ(system->Resume(id).code(), absl::StatusCode::kInvalidArgument) << id.ToString();
  }
  // None of them reached the actor (a suspend would hold the value below), and the local id
  // itself is accepted.
  EXPECT_TRUE(system->Suspend(recorder).ok());
  EXPECT_TRUE(system->Resume(recorder).ok());
  system->Send(recorder, std::make_unique<EvValue>(7));
  ASSERT_TRUE(inbox.WaitForType(kEvValue));
  EXPECT_EQ(Values(inbox.Snapshot()), std::vector<uint64_t>{7});
  EXPECT_EQ(inbox.Snapshot().size(), 1u);
}

// Keeps every EvValue's value, in handling order; publishes the count.
class ValueCollector : public Actor {
 public:
  ValueCollector(std::vector<uint64_t>* values, std::atomic<uint64_t>* count)
      : Actor(&ValueCollector::StateWork), values_(values), count_(count) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    values_->push_back(ev->Get<EvValue>()->value);
    // release: publishes the push_back to the test's acquire load.
    count_->fetch_add(1, std::memory_order_release);
  }

  std::vector<uint64_t>* values_;
  std::atomic<uint64_t>* count_;
};

TEST(SuspendTest, SuspendResumeStressKeepsPerSenderOrder) {
  constexpr int kSenders = 4;
  const uint64_t per_sender = Scaled(2'000, 200);
  constexpr int kToggles = 200;
  constexpr uint32_t kMaxDepth = 3;
  std::vector<uint64_t> values;
  std::atomic<uint64_t> count{0};
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId collector = system->Register(std::make_unique<ValueCollector>(&values, &count));

  std::atomic<bool> go{false};
  std::vector<std::thread> senders;
  senders.reserve(kSenders);
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      // acquire: pairs with the release store below (a start line, so the sends overlap).
      WaitUntil([&] { return go.load(std::memory_order_acquire); });
      for (uint64_t i = 0; i < per_sender; ++i) {
        system->Send(collector,
                     std::make_unique<EvValue>(uint64_t{static_cast<uint32_t>(s)} << 32 | i));
      }
    });
  }
  std::mt19937 rng(20261121);
  uint32_t depth = 0;
  go.store(true, std::memory_order_release);
  // EXPECT, not ASSERT, until the senders are joined.
  for (int t = 0; t < kToggles; ++t) {
    const bool suspend = depth == 0 || (depth < kMaxDepth && rng() % 2 == 0);
    if (suspend) {
      EXPECT_TRUE(system->Suspend(collector).ok());
      ++depth;
    } else {
      EXPECT_TRUE(system->Resume(collector).ok());
      --depth;
    }
    std::this_thread::yield();
  }
  for (; depth > 0; --depth) {
    EXPECT_TRUE(system->Resume(collector).ok());
  }
  for (std::thread& sender : senders) {
    sender.join();
  }

  const uint64_t expected = kSenders * per_sender;
  ASSERT_TRUE(WaitUntil([&] { return count.load(std::memory_order_acquire) >= expected; }))
      << count.load() << " of " << expected << " handled: " << testutil::DescribeCounters(*system);
  // Joins the workers: `values` is the test's now. A duplicate would have been handled by then or
  // never; the count and the order check below see it.
  system->Stop();
  ASSERT_EQ(count.load(std::memory_order_acquire), expected);
  ASSERT_EQ(values.size(), expected);
  std::array<uint64_t, kSenders> next{};
  uint64_t out_of_order = 0;
  for (const uint64_t v : values) {
    const auto sender = static_cast<size_t>(v >> 32);
    const uint64_t seq = v & 0xffffffffu;
    ASSERT_LT(sender, next.size());
    out_of_order += seq != next[sender] ? 1 : 0;
    next[sender] = seq + 1;
  }
  EXPECT_EQ(out_of_order, 0u);
  for (int s = 0; s < kSenders; ++s) {
    EXPECT_EQ(next[s], per_sender) << "sender " << s;
  }
}

}  // namespace
}  // namespace troupe
