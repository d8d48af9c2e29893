// SPDX-License-Identifier: Apache-2.0
//
// Tests of the deterministic test runtime itself: replay, interleavings, simulated time, the
// simulated interconnect's contract, fault injection and the helpers.
#include "actors/testing/test_runtime.h"

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::testing {
namespace {

enum : EventType {
  kEvSeq = EventSpaceBegin(kUserEventSpace + 2),
  kEvLocalNote,
  kEvStart,
  kEvGet,
  kEvValueIs,
  kEvSet,
  kEvSimTestEnd,
};
static_assert(InEventSpace(kEvSimTestEnd - 1, kUserEventSpace + 2));

// A protobuf event: crosses nodes. record.seq() numbers it per sender, record.text() names it.
struct EvSeq final : EventPB<EvSeq, ut::TestPayload, kEvSeq> {
  EvSeq() = default;
  EvSeq(uint64_t seq, std::string text) {
    record.set_seq(seq);
    record.set_text(std::move(text));
  }
};
// A local event: must not cross nodes.
struct EvLocalNote final : EventLocal<EvLocalNote, kEvLocalNote> {};
struct EvStart final : EventLocal<EvStart, kEvStart> {};

// Sends `count` numbered EvSeq to `target` when it gets EvStart (or at bootstrap if `eager`).
class Sender : public Actor {
 public:
  Sender(ActorId target, int count, std::string name, bool eager = true, uint32_t flags = 0)
      : Actor(&Sender::StateWork),
        target_(target),
        count_(count),
        name_(std::move(name)),
        eager_(eager),
        flags_(flags) {}

  void Bootstrap() override {
    if (eager_) {
      SendAll();
    }
  }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_CFUNC(kEvStart, SendAll);
      default:
        Unhandled(ev);
    }
  }
  void SendAll() {
    for (int i = 0; i < count_; ++i) {
      Send(target_, std::make_unique<EvSeq>(i, name_), flags_);
    }
  }

  ActorId target_;
  int count_;
  std::string name_;
  bool eager_;
  uint32_t flags_;
};

// Appends "<name>:<seq>" of every EvSeq it handles to `log`.
class Sink : public Actor {
 public:
  explicit Sink(std::vector<std::string>* log) : Actor(&Sink::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvSeq, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvSeq> ev) {
    log_->push_back(absl::StrCat(ev.Get()->record.text(), ":", ev.Get()->record.seq()));
  }

  std::vector<std::string>* log_;
};

// Three senders on each of two nodes write to one sink per node, across nodes too.
std::vector<std::string> RunChatter(TestRuntime& runtime) {
  std::vector<std::string> log;
  const ActorId sink1 = runtime.Register(std::make_unique<Sink>(&log), 1);
  const ActorId sink2 = runtime.Register(std::make_unique<Sink>(&log), 2);
  for (int i = 0; i < 3; ++i) {
    runtime.Register(std::make_unique<Sender>(sink1, 5, absl::StrCat("a", i)), 1);
    runtime.Register(std::make_unique<Sender>(sink2, 5, absl::StrCat("b", i)), 1);
    runtime.Register(std::make_unique<Sender>(sink1, 5, absl::StrCat("c", i)), 2);
  }
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  return log;
}

std::vector<std::string> TraceStrings(const TestRuntime& runtime) {
  std::vector<std::string> out;
  for (const TraceEntry& entry : runtime.Trace()) {
    out.push_back(entry.ToString());
  }
  return out;
}

// -- replay and interleavings -------------------------------------------------------------------

TEST(TestRuntimeTest, SameSeedGivesIdenticalTrace) {
  TestRuntimeOptions options{.nodes = 2, .seed = 7, .jitter = absl::Microseconds(50)};
  TestRuntime first(options);
  const std::vector<std::string> first_log = RunChatter(first);
  TestRuntime second(options);
  const std::vector<std::string> second_log = RunChatter(second);

  EXPECT_EQ(first_log.size(), 45u);
  EXPECT_EQ(first_log, second_log);
  EXPECT_EQ(TraceStrings(first), TraceStrings(second));
  EXPECT_EQ(first.TraceFingerprint(), second.TraceFingerprint());
  EXPECT_EQ(first.steps(), second.steps());
  EXPECT_EQ(first.Now(), second.Now());
}

TEST(TestRuntimeTest, DifferentSeedsGiveDifferentInterleavings) {
  std::set<std::vector<std::string>> orders;
  std::set<uint64_t> fingerprints;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    TestRuntime runtime({.nodes = 2, .seed = seed});
    orders.insert(RunChatter(runtime));
    fingerprints.insert(runtime.TraceFingerprint());
  }
  // 45 events from 9 senders: twenty seeds that gave fewer than ten orders would mean the
  // generator barely moves the schedule.
  EXPECT_GE(orders.size(), 10u);
  EXPECT_GE(fingerprints.size(), 10u);
}

TEST(TestRuntimeTest, PerSenderOrderHoldsUnderEverySeed) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    TestRuntime runtime({.nodes = 2, .seed = seed, .jitter = absl::Milliseconds(2)});
    const std::vector<std::string> log = RunChatter(runtime);
    ASSERT_EQ(log.size(), 45u) << "seed " << seed;
    std::map<std::string, int> next;
    for (const std::string& entry : log) {
      const std::string name = entry.substr(0, entry.find(':'));
      const int seq = std::stoi(entry.substr(entry.find(':') + 1));
      EXPECT_EQ(seq, next[name]++) << "seed " << seed << ": " << entry;
    }
  }
}

TEST(TestRuntimeTest, EnvironmentSeedReplaysAnUnseededRun) {
  TestRuntime original({.nodes = 2});
  const std::vector<std::string> log = RunChatter(original);
  const std::string seed = absl::StrCat(original.seed());
  ASSERT_EQ(setenv("TROUPE_TEST_SEED", seed.c_str(), 1), 0);
  TestRuntime replay({.nodes = 2});
  unsetenv("TROUPE_TEST_SEED");
  EXPECT_EQ(replay.seed(), original.seed());
  EXPECT_EQ(RunChatter(replay), log);
  EXPECT_EQ(replay.TraceFingerprint(), original.TraceFingerprint());
}

// -- a real race, found and replayed -----------------------------------------------------------

struct EvGet final : EventLocal<EvGet, kEvGet> {};
struct EvValueIs final : EventLocal<EvValueIs, kEvValueIs> {
  explicit EvValueIs(int v) : value(v) {}
  int value;
};
struct EvSet final : EventLocal<EvSet, kEvSet> {
  explicit EvSet(int v) : value(v) {}
  int value;
};

class Cell : public Actor {
 public:
  explicit Cell(int* value) : Actor(&Cell::StateWork), value_(value) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvGet:
        Send(ev->sender(), std::make_unique<EvValueIs>(*value_));
        break;
      case kEvSet:
        *value_ = ev->Get<EvSet>()->value;
        break;
      default:
        Unhandled(ev);
    }
  }
  int* value_;
};

// Increments the register with a read-then-write: a lost update when two of them interleave.
class Incrementer : public Actor {
 public:
  explicit Incrementer(ActorId reg) : Actor(&Incrementer::StateWork), reg_(reg) {}
  void Bootstrap() override { Send(reg_, std::make_unique<EvGet>()); }

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvValueIs) {
      Send(reg_, std::make_unique<EvSet>(ev->Get<EvValueIs>()->value + 1));
      PassAway();
    }
  }
  ActorId reg_;
};

struct RaceOutcome {
  int value;
  uint64_t fingerprint;
};

RaceOutcome RunRace(uint64_t seed) {
  TestRuntime runtime({.seed = seed});
  int value = 0;
  const ActorId reg = runtime.Register(std::make_unique<Cell>(&value));
  runtime.Register(std::make_unique<Incrementer>(reg));
  runtime.Register(std::make_unique<Incrementer>(reg));
  runtime.DispatchEvents();
  return {value, runtime.TraceFingerprint()};
}

TEST(TestRuntimeTest, FindsALostUpdateAndReplaysItBySeed) {
  std::optional<uint64_t> lost;
  std::optional<uint64_t> kept;
  for (uint64_t seed = 1; seed <= 200 && !(lost && kept); ++seed) {
    const int value = RunRace(seed).value;
    (value == 1 ? lost : kept) = seed;
  }
  ASSERT_TRUE(lost.has_value()) << "no seed in 1..200 interleaved the two read-then-writes";
  ASSERT_TRUE(kept.has_value()) << "no seed in 1..200 serialized the two read-then-writes";
  const RaceOutcome first = RunRace(*lost);
  const RaceOutcome again = RunRace(*lost);
  EXPECT_EQ(first.value, 1);
  EXPECT_EQ(again.value, 1);
  EXPECT_EQ(first.fingerprint, again.fingerprint);
  EXPECT_EQ(RunRace(*kept).value, 2);
}

TEST(TestRuntimeTest, FailurePrintsTheSeed) {
  EXPECT_NONFATAL_FAILURE(
      {
        TestRuntime runtime({.seed = 4242});
        const ActorId edge = runtime.AllocateEdgeActor();
        runtime.GrabEdgeEvent<EvSeq>(edge, {.max_events = 10});
      },
      "troupe::testing seed 4242");
}

// -- simulated time -----------------------------------------------------------------------------

// Schedules wakeups at the given delays and records Now() when each fires.
class Sleeper : public Actor {
 public:
  Sleeper(std::vector<absl::Duration> delays, std::vector<std::pair<uint64_t, absl::Time>>* fired)
      : Actor(&Sleeper::StateWork), delays_(std::move(delays)), fired_(fired) {}
  void Bootstrap() override {
    for (size_t i = 0; i < delays_.size(); ++i) {
      cookies_.push_back(ScheduleWakeup(delays_[i], i));
    }
  }
  std::vector<TimerCookie>& cookies() { return cookies_; }

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvWakeup) {
      fired_->emplace_back(ev->Get<EvWakeup>()->tag, Now());
    }
  }
  std::vector<absl::Duration> delays_;
  std::vector<std::pair<uint64_t, absl::Time>>* fired_;
  std::vector<TimerCookie> cookies_;
};

TEST(TestRuntimeTest, TimersFireAtExactlyTheirSimulatedTime) {
  TestRuntime runtime({.seed = 1});
  const absl::Time start = runtime.Now();
  std::vector<std::pair<uint64_t, absl::Time>> fired;
  const std::vector<absl::Duration> delays = {absl::Hours(3), absl::Milliseconds(5),
                                              absl::Microseconds(1), absl::Seconds(1)};
  runtime.Register(std::make_unique<Sleeper>(delays, &fired));

  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(4)));
  ASSERT_EQ(fired.size(), 1u);  // only the 1 µs one is due
  EXPECT_EQ(fired[0].first, 2u);
  EXPECT_EQ(fired[0].second, start + absl::Microseconds(1));
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(4));

  // Idle with timers pending: dispatching jumps to each in turn; nothing sleeps.
  EXPECT_EQ(runtime.DispatchEvents({.max_time = absl::Hours(4)}), DispatchResult::kIdle);
  ASSERT_EQ(fired.size(), 4u);
  EXPECT_EQ(fired[1], std::make_pair(uint64_t{1}, start + absl::Milliseconds(5)));
  EXPECT_EQ(fired[2], std::make_pair(uint64_t{3}, start + absl::Seconds(1)));
  EXPECT_EQ(fired[3], std::make_pair(uint64_t{0}, start + absl::Hours(3)));
  EXPECT_EQ(runtime.Now(), start + absl::Hours(3));
  EXPECT_EQ(runtime.PendingTimers(), 0u);
}

TEST(TestRuntimeTest, CancelledTimerNeverFiresAndIsNotJumpedTo) {
  TestRuntime runtime({.seed = 1});
  const absl::Time start = runtime.Now();
  std::vector<std::pair<uint64_t, absl::Time>> fired;
  auto sleeper = std::make_unique<Sleeper>(
      std::vector<absl::Duration>{absl::Seconds(1), absl::Seconds(10)}, &fired);
  Sleeper* raw = sleeper.get();
  runtime.Register(std::move(sleeper));
  runtime.DispatchEvents({.jump_timers = false});  // bootstrap only
  ASSERT_EQ(raw->cookies().size(), 2u);
  EXPECT_EQ(runtime.PendingTimers(), 2u);
  EXPECT_TRUE(raw->cookies()[1].Cancel());
  EXPECT_EQ(runtime.PendingTimers(), 1u);

  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].first, 0u);
  EXPECT_EQ(runtime.Now(), start + absl::Seconds(1));  // never moved on to the cancelled one
  EXPECT_FALSE(raw->cookies()[0].Cancel());            // already fired
}

TEST(TestRuntimeTest, JumpToNextTimerMovesTheClockOnlyThatFar) {
  TestRuntime runtime({.seed = 1});
  const absl::Time start = runtime.Now();
  std::vector<std::pair<uint64_t, absl::Time>> fired;
  runtime.Register(std::make_unique<Sleeper>(
      std::vector<absl::Duration>{absl::Milliseconds(7), absl::Milliseconds(9)}, &fired));
  runtime.DispatchEvents({.jump_timers = false});
  EXPECT_TRUE(fired.empty());
  ASSERT_TRUE(runtime.JumpToNextTimer());
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(7));
  runtime.DispatchEvents({.jump_timers = false});
  EXPECT_EQ(fired.size(), 1u);
  ASSERT_TRUE(runtime.JumpToNextTimer());
  runtime.DispatchEvents({.jump_timers = false});
  EXPECT_EQ(fired.size(), 2u);
  EXPECT_FALSE(runtime.JumpToNextTimer());
}

TEST(TestRuntimeTest, DispatchStopsAtItsBounds) {
  // An actor that wakes itself every second forever: never idle.
  class Ticker : public Actor {
   public:
    Ticker() : Actor(&Ticker::StateWork) {}
    void Bootstrap() override { ScheduleWakeup(absl::Seconds(1)); }

   private:
    TROUPE_STATE(StateWork) { ScheduleWakeup(absl::Seconds(1)); }
  };
  TestRuntime runtime({.seed = 1});
  const absl::Time start = runtime.Now();
  runtime.Register(std::make_unique<Ticker>());
  EXPECT_EQ(runtime.DispatchEvents({.max_time = absl::Seconds(10)}), DispatchResult::kTimeLimit);
  EXPECT_EQ(runtime.Now(), start + absl::Seconds(10));
  EXPECT_EQ(runtime.DispatchEvents({.max_events = 3}), DispatchResult::kEventLimit);
  const ::testing::AssertionResult never =
      runtime.DispatchUntil([] { return false; }, {.max_events = 5});
  EXPECT_FALSE(never);
  EXPECT_NE(std::string(never.message()).find("event limit"), std::string::npos);
}

// -- the simulated interconnect -----------------------------------------------------------------

TEST(TestRuntimeTest, CrossNodeEventsTravelAsBytesAndParseOnUse) {
  TestRuntime runtime({.nodes = 2, .seed = 3});
  const ActorId edge2 = runtime.AllocateEdgeActor(2);
  const ActorId edge1 = runtime.AllocateEdgeActor(1);
  runtime.Send(edge2, std::make_unique<EvSeq>(9, "hop"), edge1);
  EventHandlePtr ev = runtime.GrabEdgeEvent(edge2, kEvSeq);
  ASSERT_NE(ev, nullptr);
  EXPECT_TRUE(ev->HasBytes());
  EXPECT_FALSE(ev->HasEvent());
  EXPECT_EQ(ev->sender(), edge1);
  ASSERT_NE(ev->Get<EvSeq>(), nullptr);
  EXPECT_EQ(ev->Get<EvSeq>()->record.text(), "hop");
}

TEST(TestRuntimeTest, LocalEventSentToAnotherNodeFailsTheTest) {
  TestRuntime runtime({.nodes = 2, .seed = 3});
  const ActorId edge1 = runtime.AllocateEdgeActor(1);
  const ActorId edge2 = runtime.AllocateEdgeActor(2);
  EXPECT_NONFATAL_FAILURE(
      runtime.Send(edge2, std::make_unique<EvLocalNote>(), edge1, kTrackDelivery),
      "cannot cross from node 1 to node 2");
  auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(edge1);
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kNotSerializable);
  EXPECT_EQ(undelivered->source_type, kEvLocalNote);
}

TEST(TestRuntimeTest, LinkLatencyDelaysDeliveryInSimulatedTime) {
  TestRuntime runtime({.nodes = 2, .seed = 3, .latency = absl::Milliseconds(20)});
  const absl::Time start = runtime.Now();
  const ActorId edge1 = runtime.AllocateEdgeActor(1);
  const ActorId edge2 = runtime.AllocateEdgeActor(2);
  runtime.SetLinkLatency(1, 2, absl::Milliseconds(3));
  runtime.Send(edge2, std::make_unique<EvSeq>(1, "x"), edge1);
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvSeq>(edge2));
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(3));
  runtime.Send(edge1, std::make_unique<EvSeq>(2, "y"), edge2);
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvSeq>(edge1));
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(23));
}

TEST(TestRuntimeTest, UnknownNodeIsReportedNoRoute) {
  TestRuntime runtime({.nodes = 2, .seed = 3});
  const ActorId edge = runtime.AllocateEdgeActor(1);
  runtime.Send(ActorId(7, 0, 1, 1), std::make_unique<EvSeq>(), edge, kTrackDelivery);
  auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(edge);
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kNoRoute);
}

TEST(TestRuntimeTest, PartitionDisconnectsBothSidesAndHealReconnects) {
  TestRuntime runtime({.nodes = 2, .seed = 5});
  const ActorId a = runtime.AllocateEdgeActor(1);
  const ActorId b = runtime.AllocateEdgeActor(2);
  runtime.Send(b, std::make_unique<EvSeq>(1, "a"), a, kSubscribeOnSession);
  runtime.Send(a, std::make_unique<EvSeq>(1, "b"), b, kSubscribeOnSession);
  auto connected_a = runtime.GrabEdgeEvent<EvNodeConnected>(a);
  auto connected_b = runtime.GrabEdgeEvent<EvNodeConnected>(b);
  ASSERT_TRUE(connected_a && connected_b);
  EXPECT_EQ(connected_a->node, 2u);
  EXPECT_EQ(connected_b->node, 1u);
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvSeq>(a));
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvSeq>(b));
  // A second subscribed send in the same session does not connect again.
  runtime.Send(b, std::make_unique<EvSeq>(2, "a"), a, kSubscribeOnSession);
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvSeq>(b));
  EXPECT_EQ(runtime.EdgeEventCount(a), 0u);

  runtime.Partition(1, 2);
  EXPECT_TRUE(runtime.IsPartitioned(2, 1));
  auto disconnected_a = runtime.GrabEdgeEvent<EvNodeDisconnected>(a);
  auto disconnected_b = runtime.GrabEdgeEvent<EvNodeDisconnected>(b);
  ASSERT_TRUE(disconnected_a && disconnected_b);
  EXPECT_EQ(disconnected_a->node, 2u);
  EXPECT_EQ(disconnected_b->node, 1u);

  // While partitioned a tracked send fails for sure, and a subscriber hears the session is down.
  runtime.Send(b, std::make_unique<EvSeq>(3, "a"), a, kTrackDelivery | kSubscribeOnSession, 77);
  auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(a);
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
  EXPECT_FALSE(undelivered->unsure);
  EXPECT_EQ(undelivered->cookie, 77u);
  EXPECT_TRUE(runtime.GrabEdgeEvent<EvNodeDisconnected>(a));

  runtime.Heal(1, 2);
  runtime.Send(b, std::make_unique<EvSeq>(4, "a"), a, kSubscribeOnSession);
  auto reconnected = runtime.GrabEdgeEvent<EvNodeConnected>(a);
  ASSERT_TRUE(reconnected);
  EXPECT_EQ(reconnected->node, 2u);
  auto delivered = runtime.GrabEdgeEvent<EvSeq>(b);
  ASSERT_TRUE(delivered);
  EXPECT_EQ(delivered->record.seq(), 4u);
}

TEST(TestRuntimeTest, EventsInFlightWhenTheSessionDiesAreReportedUnsure) {
  TestRuntime runtime({.nodes = 2, .seed = 5, .latency = absl::Milliseconds(10)});
  const ActorId a = runtime.AllocateEdgeActor(1);
  const ActorId b = runtime.AllocateEdgeActor(2);
  runtime.Send(b, std::make_unique<EvSeq>(1, "tracked"), a, kTrackDelivery, 1);
  runtime.Send(b, std::make_unique<EvSeq>(2, "unsure"), a, kGenerateUnsureUndelivered, 2);
  runtime.Send(b, std::make_unique<EvSeq>(3, "silent"), a, kNoFlags, 3);
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(5)));  // on the link, not delivered
  runtime.Partition(1, 2);
  std::vector<uint64_t> cookies;
  for (int i = 0; i < 2; ++i) {
    auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(a);
    ASSERT_TRUE(undelivered);
    EXPECT_TRUE(undelivered->unsure);
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
    cookies.push_back(undelivered->cookie);
  }
  EXPECT_EQ(cookies, (std::vector<uint64_t>{1, 2}));
  runtime.DispatchEvents();
  EXPECT_EQ(runtime.EdgeEventCount(a), 0u);
  EXPECT_EQ(runtime.EdgeEventCount(b), 0u);  // nothing crossed the cut
}

// Counts its destructions, for KillNode.
class Mortal : public Actor {
 public:
  explicit Mortal(int* destroyed) : Actor(&Mortal::StateWork), destroyed_(destroyed) {}
  ~Mortal() override { ++*destroyed_; }

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  int* destroyed_;
};

TEST(TestRuntimeTest, KilledNodeLosesItsActorsAndRestartsAsANewIncarnation) {
  constexpr ActorId kService = ServiceId("mortal");
  int destroyed = 0;
  int started = 0;
  TestRuntime runtime({.nodes = 2, .seed = 9, .on_node_start = [&](TestRuntime& rt, NodeId node) {
                         if (node == 2) {
                           ++started;
                           const ActorId actor =
                               rt.Register(std::make_unique<Mortal>(&destroyed), 2);
                           ASSERT_TRUE(rt.node(2).RegisterService(kService, actor).ok());
                         }
                       }});
  const ActorId a = runtime.AllocateEdgeActor(1);
  const ActorId old_actor = runtime.node(2).LookupService(kService);
  runtime.Send(kService.WithNode(2), std::make_unique<EvSeq>(1, "hello"), a, kSubscribeOnSession);
  ASSERT_TRUE(runtime.GrabEdgeEvent<EvNodeConnected>(a));
  runtime.DispatchEvents();
  EXPECT_EQ(runtime.incarnation(2), 1u);

  runtime.KillNode(2);
  EXPECT_FALSE(runtime.IsAlive(2));
  EXPECT_EQ(destroyed, 1);
  auto disconnected = runtime.GrabEdgeEvent<EvNodeDisconnected>(a);
  ASSERT_TRUE(disconnected);
  EXPECT_EQ(disconnected->node, 2u);
  runtime.Send(old_actor, std::make_unique<EvSeq>(2, "dead"), a, kTrackDelivery);
  auto to_dead = runtime.GrabEdgeEvent<EvUndelivered>(a);
  ASSERT_TRUE(to_dead);
  EXPECT_EQ(to_dead->reason, UndeliveredReason::kDisconnected);

  runtime.RestartNode(2);
  EXPECT_EQ(runtime.incarnation(2), 2u);
  EXPECT_EQ(started, 2);
  const ActorId new_actor = runtime.node(2).LookupService(kService);
  EXPECT_NE(new_actor, old_actor);
  EXPECT_NE(new_actor.local_id(), old_actor.local_id());
  // The old incarnation's id reaches nobody, even though the new actor may share its hint.
  runtime.Send(old_actor, std::make_unique<EvSeq>(3, "stale"), a, kTrackDelivery);
  auto stale = runtime.GrabEdgeEvent<EvUndelivered>(a);
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->reason, UndeliveredReason::kActorNotFound);
  runtime.Send(kService.WithNode(2), std::make_unique<EvSeq>(4, "again"), a,
               kTrackDelivery | kSubscribeOnSession);
  EXPECT_TRUE(runtime.GrabEdgeEvent<EvNodeConnected>(a));
  runtime.DispatchEvents();
  EXPECT_EQ(runtime.EdgeEventCount(a), 0u);  // delivered: no Undelivered came back
}

// -- fault injection ----------------------------------------------------------------------------

TEST(TestRuntimeTest, DroppedTrackedEventProducesUndelivered) {
  for (NodeId target_node : {NodeId{1}, NodeId{2}}) {
    TestRuntime runtime({.nodes = 2, .seed = 11});
    std::vector<std::string> log;
    const ActorId sink = runtime.Register(std::make_unique<Sink>(&log), target_node);
    const ActorId edge = runtime.AllocateEdgeActor(1);
    runtime.AddObserver([](NodeId, EventHandle& ev) {
      if (ev.type() == kEvSeq && ev.Get<EvSeq>()->record.seq() == 1) {
        return Verdict::Drop();
      }
      return Verdict::Pass();
    });
    for (uint64_t seq = 0; seq < 3; ++seq) {
      runtime.Send(sink, std::make_unique<EvSeq>(seq, "s"), edge, kTrackDelivery, seq);
    }
    auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(edge);
    ASSERT_TRUE(undelivered) << "target node " << target_node;
    EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
    EXPECT_EQ(undelivered->cookie, 1u);
    EXPECT_EQ(undelivered->source_type, kEvSeq);
    runtime.DispatchEvents();
    EXPECT_EQ(log, (std::vector<std::string>{"s:0", "s:2"}));
  }
}

TEST(TestRuntimeTest, DelayAndDuplicateVerdicts) {
  TestRuntime runtime({.nodes = 2, .seed = 13});
  const absl::Time start = runtime.Now();
  std::vector<std::string> log;
  const ActorId sink = runtime.Register(std::make_unique<Sink>(&log), 2);
  const ObserverId observer = runtime.AddObserver([](NodeId node, EventHandle& ev) {
    if (node != 1 || ev.type() != kEvSeq) {
      return Verdict::Pass();
    }
    const uint64_t seq = ev.Get<EvSeq>()->record.seq();
    if (seq == 0) {
      return Verdict::Delay(absl::Seconds(2));
    }
    return seq == 1 ? Verdict::Duplicate(2) : Verdict::Pass();
  });
  for (uint64_t seq = 0; seq < 3; ++seq) {
    runtime.Send(sink, std::make_unique<EvSeq>(seq, "s"));
  }
  runtime.DispatchEvents();
  EXPECT_EQ(log, (std::vector<std::string>{"s:1", "s:1", "s:1", "s:2", "s:0"}));
  EXPECT_EQ(runtime.Now(), start + absl::Seconds(2));
  runtime.RemoveObserver(observer);
  runtime.Send(sink, std::make_unique<EvSeq>(0, "t"));
  runtime.DispatchEvents();
  EXPECT_EQ(log.back(), "t:0");
}

// -- helpers ------------------------------------------------------------------------------------

TEST(TestRuntimeTest, ExpectChecksTheNextEventToARecipient) {
  TestRuntime runtime({.nodes = 2, .seed = 17});
  std::vector<std::string> log;
  const ActorId sink = runtime.Register(std::make_unique<Sink>(&log), 2);
  const ActorId sender =
      runtime.Register(std::make_unique<Sender>(sink, 2, "p", /*eager=*/false), 1);
  runtime.Send(sender, std::make_unique<EvStart>());
  runtime.Expect<EvStart>().To(sender);
  runtime.Expect<EvSeq>()
      .From(sender)
      .With([](const EvSeq& ev) { return ev.record.seq() == 0; })
      .To(sink);
  EXPECT_EQ(log, std::vector<std::string>{"p:0"});  // its handler has run
  EXPECT_NONFATAL_FAILURE(
      runtime.Expect<EvSeq>().With([](const EvSeq& ev) { return ev.record.seq() == 5; }).To(sink),
      "contents do not match");
  runtime.Send(sink, std::make_unique<EvSeq>(9, "q"));
  EXPECT_NONFATAL_FAILURE(runtime.Expect<EvStart>().To(sink), "next was event 0x01020000");
  EXPECT_NONFATAL_FAILURE(runtime.Expect<EvSeq>().Within({.max_events = 100}).To(sink),
                          "no event reached the recipient");
}

TEST(TestRuntimeTest, GrabEdgeEventTakesTheRequestedTypeAndKeepsTheRest) {
  TestRuntime runtime({.seed = 19});
  const ActorId edge = runtime.AllocateEdgeActor();
  runtime.Send(edge, std::make_unique<EvStart>());
  runtime.Send(edge, std::make_unique<EvSeq>(5, "x"));
  auto seq = runtime.GrabEdgeEvent<EvSeq>(edge);
  ASSERT_TRUE(seq);
  EXPECT_EQ(seq->record.seq(), 5u);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 1u);
  EventHandlePtr any = runtime.GrabEdgeEvent(edge);
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->type(), kEvStart);
}

TEST(TestRuntimeTest, GrabEdgeEventByPredicateAndTakeTheRest) {
  TestRuntime runtime({.seed = 23});
  const ActorId edge = runtime.AllocateEdgeActor();
  for (uint64_t seq = 0; seq < 4; ++seq) {
    runtime.Send(edge, std::make_unique<EvSeq>(seq, "x"), ActorId(), kNoFlags, 100 + seq);
  }
  auto third = runtime.GrabEdgeEvent<EvSeq>(edge, [](const EvSeq& ev, const EventHandle& envelope) {
    return ev.record.seq() == 2 && envelope.cookie() == 102;
  });
  ASSERT_TRUE(third);
  EXPECT_EQ(third.handle().cookie(), 102u);
  runtime.DispatchEvents();  // the grab stopped dispatching as soon as the match arrived
  std::vector<EventHandlePtr> rest = runtime.TakeEdgeEvents(edge);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0]->cookie(), 100u);
  EXPECT_EQ(rest[2]->cookie(), 103u);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u);
}

TEST(TestRuntimeTest, NodeCountersSeeSimulatedTimers) {
  TestRuntime runtime({.nodes = 2, .seed = 29});
  std::vector<std::pair<uint64_t, absl::Time>> fired;
  runtime.Register(std::make_unique<Sleeper>(
                       std::vector<absl::Duration>{absl::Seconds(1), absl::Seconds(2)}, &fired),
                   2);
  runtime.DispatchEvents({.jump_timers = false});
  EXPECT_EQ(runtime.node(2).Counters().pending_timers, 2u);
  EXPECT_EQ(runtime.node(1).Counters().pending_timers, 0u);
  EXPECT_EQ(runtime.node(2).Now(), runtime.Now());
  runtime.DispatchEvents();
  EXPECT_EQ(runtime.node(2).Counters().pending_timers, 0u);
  EXPECT_EQ(fired.size(), 2u);
}

}  // namespace
}  // namespace troupe::testing
