// SPDX-License-Identifier: Apache-2.0
//
// TestRuntime: runs real actors deterministically — one thread, simulated time, several nodes
// joined by a simulated interconnect, and fault injection.
//
// Every node is a real ActorSystem (the same actors, mailboxes and delivery rules as in
// production) whose threads are replaced by this runtime:
//   - Events are handled one at a time. At each step the runtime picks, with a generator seeded by
//     `seed()`, one ready mailbox (and handles its oldest event) or one link whose next event is
//     due (and delivers it). A seed fixes the whole run: the same seed gives the same trace, event
//     for event. A failing test prints its seed; set TROUPE_TEST_SEED=<seed> to replay a test that
//     does not fix its own seed.
//   - Time is simulated and starts at 2026-01-01 UTC. Nothing sleeps: delayed events fire when the
//     test advances the clock, or when nothing is ready and the runtime jumps to the next timer.
//     A timer due at T is handled with Now() == T exactly. Actor::Now() and ActorSystem::Now()
//     return the simulated time.
//   - Nodes 1..N talk through simulated links with the interconnect's contract: one session per
//     pair of nodes, FIFO per direction (so per sender→recipient order holds), optional latency and
//     jitter, kSubscribeOnSession with EvNodeConnected/EvNodeDisconnected, and Undelivered. Events
//     that cross nodes are serialized and travel as bytes; a local (non-EventPB) event sent to
//     another node fails the test and is reported undelivered (kNotSerializable).
//   - Faults: observers see every event sent on every node and may pass, drop, delay or duplicate
//     it; Partition/Heal cut and restore links; KillNode/RestartNode end a node (its actors are
//     destroyed) and start a new incarnation with fresh actor ids.
//
// Session rules of the simulated interconnect:
//   - a send to a reachable node brings the session up if it is down; the event joins the link;
//   - a send to a dead or partitioned node fails at once: Undelivered{kDisconnected} (certain),
//     and a subscribing sender gets EvNodeDisconnected;
//   - a partition, or a node's death, ends the session: events on the link are reported
//     Undelivered{kDisconnected, unsure} (to senders that tracked them or asked for
//     kGenerateUnsureUndelivered), and subscribers on both sides get EvNodeDisconnected;
//   - a send to a node id outside 1..N gets Undelivered{kNoRoute}.
//
// Thread-safety: thread-compatible; use it from the test's thread only. Handlers run inside the
// dispatch calls (Step, DispatchEvents, DispatchUntil, AdvanceTime, GrabEdgeEvent, Expect).
//
// Example:
//
//   troupe::testing::TestRuntime runtime({.nodes = 2});
//   troupe::ActorId echo = runtime.Register(std::make_unique<Echo>(), /*node=*/2);
//   troupe::ActorId edge = runtime.AllocateEdgeActor(/*node=*/1);
//   runtime.Send(echo, std::make_unique<EvPing>(7), edge);
//   runtime.Expect<EvPing>().From(edge).To(echo);
//   auto pong = runtime.GrabEdgeEvent<EvPing>(edge);
//   ASSERT_TRUE(pong);
//   EXPECT_EQ(pong->record.seq(), 7u);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "actors/timer.h"
#include "proto/config.pb.h"

namespace troupe::testing {

class TestRuntime;

// What an observer decides for one event.
class Verdict {
 public:
  enum class Kind : uint8_t { kPass, kDrop, kDelay, kDuplicate };

  // Lets the event through unchanged.
  static Verdict Pass() { return Verdict(Kind::kPass); }
  // Loses the event: delivery rule 3 applies (forward target, else Undelivered{reason} to a
  // tracking sender, else dropped and counted).
  static Verdict Drop(UndeliveredReason reason = UndeliveredReason::kDisconnected) {
    Verdict verdict(Kind::kDrop);
    verdict.reason_ = reason;
    return verdict;
  }
  // Sends the event `delay` of simulated time later. Later events of the same sender may overtake
  // it: use it to provoke reordering (to slow a link in order, use SetLinkLatency).
  static Verdict Delay(absl::Duration delay) {
    Verdict verdict(Kind::kDelay);
    verdict.delay_ = delay;
    return verdict;
  }
  // Delivers the event and then `copies` copies of it (decoded from its serialized form; a local
  // event cannot be copied and fails the test).
  static Verdict Duplicate(uint32_t copies = 1) {
    Verdict verdict(Kind::kDuplicate);
    verdict.copies_ = copies;
    return verdict;
  }

  Kind kind() const { return kind_; }
  UndeliveredReason reason() const { return reason_; }
  absl::Duration delay() const { return delay_; }
  uint32_t copies() const { return copies_; }

 private:
  explicit Verdict(Kind kind) : kind_(kind) {}

  Kind kind_;
  UndeliveredReason reason_ = UndeliveredReason::kDisconnected;
  absl::Duration delay_;
  uint32_t copies_ = 0;
};

// Sees an event sent on `node` (before delivery) and decides its fate. It may inspect the event
// (`ev.Get<E>()`) but must not take it, and must not dispatch or kill nodes.
using Observer = std::function<Verdict(NodeId node, EventHandle& ev)>;
using ObserverId = uint64_t;

struct TestRuntimeOptions {
  // Number of nodes, with node ids 1..nodes.
  uint32_t nodes = 1;
  // Fixes the interleaving. Unset: TROUPE_TEST_SEED from the environment, else a random seed
  // (printed when the test fails).
  std::optional<uint64_t> seed = std::nullopt;
  // Template of every node's config; node_id is set per node.
  proto::ActorSystemConfig config = {};
  // Adjusts one node's copy of `config` before the node starts (nodes that differ: limits,
  // cluster ids). Unset: every node runs the template.
  std::function<void(NodeId node, proto::ActorSystemConfig& config)> tune_node = nullptr;
  // Simulated time each event spends on a link between nodes, plus a uniform random extra in
  // [0, jitter]. Order per link is kept whatever the jitter.
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration jitter = absl::ZeroDuration();
  // Called when a node starts (at construction and on every RestartNode), to register its actors
  // and services.
  std::function<void(TestRuntime& runtime, NodeId node)> on_node_start = nullptr;
  // Number of most recent trace entries kept (the whole trace always feeds TraceFingerprint).
  size_t trace_capacity = 10000;
  // True: events between nodes travel over the simulated links above (latency, partitions,
  // observers' verdicts on links). False: they go to each node's installed remote router, so the
  // real interconnect (troupe::interconnect over a PipeNetwork) runs under simulated time;
  // Partition and SetLinkLatency then do not apply (use the PipeNetwork's faults).
  bool simulated_interconnect = true;
};

// Bounds of one dispatch call.
struct DispatchOptions {
  // At most this many steps (handled events plus link deliveries).
  uint64_t max_events = 1'000'000;
  // At most this much simulated time from the call.
  absl::Duration max_time = absl::Hours(1);
  // When nothing is ready, jump the clock to the next timer or link delivery (else stop: idle).
  bool jump_timers = true;
};

// Why a dispatch call stopped.
enum class DispatchResult : uint8_t { kPredicate, kIdle, kEventLimit, kTimeLimit };
std::string_view DispatchResultName(DispatchResult result);
std::ostream& operator<<(std::ostream& out, DispatchResult result);

// One step of the run: an event handled by an actor ('d') or delivered by a link ('n').
struct TraceEntry {
  uint64_t step = 0;
  absl::Duration at;  // simulated time since the runtime started
  char kind = 'd';
  NodeId node = 0;  // where it was handled or delivered
  EventType type = 0;
  ActorId sender;
  ActorId recipient;

  std::string ToString() const;
};

// An event taken from an edge actor, typed: `ev->field`, `ev.handle().sender()`.
template <typename E>
class Grabbed {
 public:
  Grabbed() = default;
  explicit Grabbed(EventHandlePtr handle) : handle_(std::move(handle)) {}

  explicit operator bool() const { return handle_ != nullptr && get() != nullptr; }
  E* get() const { return handle_ == nullptr ? nullptr : handle_->template Get<E>(); }
  E* operator->() const { return get(); }
  E& operator*() const { return *get(); }
  // Returns the envelope (sender, cookie, flags). Precondition: not empty.
  EventHandle& handle() const { return *handle_; }
  EventHandlePtr Release() { return std::move(handle_); }

 private:
  EventHandlePtr handle_;
};

// "The next event handled by actor `to` is an E from `from`": see TestRuntime::Expect.
template <typename E>
class Expectation {
 public:
  // Requires the sender to be `sender`.
  Expectation& From(const ActorId& sender) {
    from_ = sender;
    return *this;
  }
  // Requires `predicate` to hold for the event.
  Expectation& With(std::function<bool(const E&)> predicate) {
    predicate_ = std::move(predicate);
    return *this;
  }
  // Bounds the dispatching done while waiting.
  Expectation& Within(DispatchOptions options) {
    options_ = options;
    return *this;
  }
  // Dispatches until the next event handled by `recipient` (a ServiceId is resolved on its node;
  // Bootstrap does not count) and checks it before its handler runs; the handler then runs as
  // usual. Returns true on a
  // match; otherwise records a test failure naming the event seen instead (or the bound hit) and
  // the seed, and returns false.
  bool To(const ActorId& recipient);

 private:
  friend class TestRuntime;
  Expectation(TestRuntime* runtime, const char* file, int line)
      : runtime_(runtime), file_(file), line_(line) {}

  TestRuntime* runtime_;
  const char* file_;
  int line_;
  std::optional<ActorId> from_;
  std::function<bool(const E&)> predicate_;
  DispatchOptions options_;
};

class TestRuntime {
 public:
  // Starts `options.nodes` nodes (config errors fail the test and leave the node dead).
  explicit TestRuntime(TestRuntimeOptions options = {});
  // Stops every node (destroying its actors) and prints the seed and the trace's tail when the
  // current test has failed.
  ~TestRuntime();
  TestRuntime(const TestRuntime&) = delete;
  TestRuntime& operator=(const TestRuntime&) = delete;
  TestRuntime(TestRuntime&&) = delete;
  TestRuntime& operator=(TestRuntime&&) = delete;

  uint64_t seed() const;

  // -- nodes ------------------------------------------------------------------------------------

  uint32_t node_count() const;
  // Returns node `node`'s system. Precondition: the node exists and is alive.
  ActorSystem& node(NodeId node = 1);
  bool IsAlive(NodeId node) const;
  // Returns how many times `node` was started (1 before any restart).
  uint32_t incarnation(NodeId node) const;

  // -- actors and events from the test body ----------------------------------------------------

  // Registers `actor` on `node` (its Bootstrap runs at the next dispatch). A dead or unknown node
  // fails the test and returns an empty id.
  ActorId Register(std::unique_ptr<Actor> actor, NodeId node = 1, RegisterOptions options = {});
  // Sends `event` from `sender` (may be empty); it leaves from the sender's node, or node 1.
  void Send(const ActorId& recipient, std::unique_ptr<EventBase> event,
            const ActorId& sender = ActorId(), uint32_t flags = kNoFlags, uint64_t cookie = 0);
  // Sends a prepared handle from `from` (0: the sender's node, or node 1). Sending from a dead
  // node fails the test.
  void Send(EventHandlePtr handle, NodeId from = 0);
  // Sends `handle` after `delay` of simulated time, from `from` as for Send.
  TimerCookie Schedule(absl::Duration delay, EventHandlePtr handle, NodeId from = 0);

  // -- edge actors ------------------------------------------------------------------------------

  // Registers an actor on `node` that keeps every event it receives for GrabEdgeEvent.
  ActorId AllocateEdgeActor(NodeId node = 1);
  // Dispatches until `edge` holds an event (of `type`, when given) and takes the oldest such one.
  // Returns nullptr and records a test failure when the bounds are hit first.
  EventHandlePtr GrabEdgeEvent(const ActorId& edge, std::optional<EventType> type = std::nullopt,
                               DispatchOptions options = {});
  template <typename E>
  Grabbed<E> GrabEdgeEvent(const ActorId& edge, DispatchOptions options = {}) {
    return Grabbed<E>(GrabEdgeEvent(edge, E::kEventType, options));
  }
  // As GrabEdgeEvent, for the oldest E for which `matches(event, envelope)` holds (a cookie, a
  // field): `runtime.GrabEdgeEvent<EvUndelivered>(edge, [](auto& e, auto&) { return ...; })`.
  template <typename E>
  Grabbed<E> GrabEdgeEvent(const ActorId& edge,
                           const std::function<bool(const E&, const EventHandle&)>& matches,
                           DispatchOptions options = {}) {
    return Grabbed<E>(GrabEdgeEventIf(
        edge,
        [&matches](EventHandle& ev) {
          const E* event = ev.template Get<E>();
          return event != nullptr && matches(*event, ev);
        },
        options, " that matches"));
  }
  // Dispatches until `edge` holds an event for which `matches` holds and takes the oldest such
  // one; nullptr and a test failure (mentioning `what`) when the bounds are hit first.
  EventHandlePtr GrabEdgeEventIf(const ActorId& edge,
                                 const std::function<bool(EventHandle&)>& matches,
                                 DispatchOptions options = {}, const std::string& what = {});
  // Takes every event `edge` holds now, oldest first, without dispatching.
  std::vector<EventHandlePtr> TakeEdgeEvents(const ActorId& edge);
  // Returns how many events `edge` holds, without dispatching.
  size_t EdgeEventCount(const ActorId& edge) const;

  // -- dispatching ------------------------------------------------------------------------------

  // Handles one ready event or delivers one due link event; false when nothing is ready now.
  bool Step();
  // Dispatches until nothing is ready and no timer is pending (or a bound is hit).
  DispatchResult DispatchEvents(DispatchOptions options = {});
  // Dispatches until `done()` holds (checked before every step). The result says why it stopped.
  ::testing::AssertionResult DispatchUntil(const std::function<bool()>& done,
                                           DispatchOptions options = {});
  // Returns the number of steps taken so far.
  uint64_t steps() const;

  // -- simulated time ---------------------------------------------------------------------------

  absl::Time Now() const;
  // Dispatches everything due up to Now() + `duration`, firing timers at their times, then sets
  // the clock to Now() + `duration`. Fails (and stops early) past `max_events` steps.
  ::testing::AssertionResult AdvanceTime(absl::Duration duration, uint64_t max_events = 1'000'000);
  // Moves the clock to the next timer or link delivery and fires what is due; false when none.
  bool JumpToNextTimer();
  // Returns the number of timers not yet fired, cancelled ones excluded. (A node's
  // Counters().pending_timers counts its own timers as the real scheduler does: cancelled ones
  // included until due.)
  size_t PendingTimers() const;

  // -- faults -----------------------------------------------------------------------------------

  // Adds an observer of every event sent on every node; observers run in the order added and the
  // first verdict other than Pass applies.
  ObserverId AddObserver(Observer observer);
  void RemoveObserver(ObserverId id);
  // Cuts both directions between `a` and `b`: the session dies (see the file comment).
  void Partition(NodeId a, NodeId b);
  // Cuts `node` from every other node.
  void Isolate(NodeId node);
  // Restores the links between `a` and `b`; the session comes back with the next send.
  void Heal(NodeId a, NodeId b);
  // Restores every link.
  void HealAll();
  bool IsPartitioned(NodeId a, NodeId b) const;
  // Sets the latency of the link from `from` to `to` (overrides the options' latency and jitter).
  void SetLinkLatency(NodeId from, NodeId to, absl::Duration latency,
                      absl::Duration jitter = absl::ZeroDuration());
  // Stops `node` as a crash would: sessions to it die, its actors are destroyed, its timers and
  // queued events vanish. Must not be called from a handler or an observer.
  void KillNode(NodeId node);
  // Starts a dead node again as a new incarnation (new actor ids; on_node_start runs).
  void RestartNode(NodeId node);

  // -- expectations -----------------------------------------------------------------------------

  // Starts an expectation: `runtime.Expect<EvPong>().From(a).To(b)`.
  template <typename E>
  Expectation<E> Expect(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return Expectation<E>(this, file, line);
  }

  // -- trace ------------------------------------------------------------------------------------

  // Returns the most recent trace entries (at most options.trace_capacity).
  std::vector<TraceEntry> Trace() const;
  // Returns a hash of every trace entry so far: equal runs have equal fingerprints.
  uint64_t TraceFingerprint() const;
  // Returns the seed and the last `entries` trace entries, one per line.
  std::string Describe(size_t entries = 20) const;

 private:
  template <typename E>
  friend class Expectation;
  struct State;

  // Dispatches until the next event handled by `recipient`; `check` judges it (sets `why` on a
  // mismatch). Records a failure at file:line unless it matched.
  bool ExpectNext(const ActorId& recipient, EventType type, const std::optional<ActorId>& from,
                  const std::function<bool(EventHandle&)>& check, const DispatchOptions& options,
                  const char* file, int line);

  std::unique_ptr<State> state_;
  std::unique_ptr<::testing::ScopedTrace> seed_trace_;
};

template <typename E>
bool Expectation<E>::To(const ActorId& recipient) {
  std::function<bool(EventHandle&)> check;
  if (predicate_) {
    check = [predicate = predicate_](EventHandle& ev) {
      const E* event = ev.template Get<E>();
      return event != nullptr && predicate(*event);
    };
  }
  return runtime_->ExpectNext(recipient, E::kEventType, from_, check, options_, file_, line_);
}

}  // namespace troupe::testing
