// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/test_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/check.h"
#include "actors/internal/runtime.h"
#include "actors/testing/internal/edge_actor.h"
#include "actors/testing/internal/runtime_state.h"

namespace troupe::testing {

namespace {

// The simulated epoch: a fixed date, so traces and logs do not depend on the wall clock.
absl::Time SimulatedEpoch() {
  return absl::FromCivil(absl::CivilDay(2026, 1, 1), absl::UTCTimeZone());
}

// Returns how many failures the running test has recorded so far (0 outside a test).
int FailuresSoFar() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) {
    return 0;
  }
  int failures = 0;
  const ::testing::TestResult* result = info->result();
  for (int i = 0; i < result->total_part_count(); ++i) {
    failures += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failures;
}

}  // namespace

std::string_view DispatchResultName(DispatchResult result) {
  switch (result) {
    case DispatchResult::kPredicate:
      return "predicate";
    case DispatchResult::kIdle:
      return "idle";
    case DispatchResult::kEventLimit:
      return "event limit";
    case DispatchResult::kTimeLimit:
      return "time limit";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, DispatchResult result) {
  return out << DispatchResultName(result);
}

std::string TraceEntry::ToString() const {
  return absl::StrFormat("#%d +%s %s n%d 0x%08x %s -> %s", step, absl::FormatDuration(at),
                         kind == 'n' ? "link" : "handle", node, type, sender.ToString(),
                         recipient.ToString());
}

// -- TestRuntime --------------------------------------------------------------------------------

TestRuntime::TestRuntime(TestRuntimeOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.owner = this;
  s.sim.options = std::move(options);
  s.failures_at_start = FailuresSoFar();
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the test's own thread; Troupe never calls setenv.
  const char* env = std::getenv("TROUPE_TEST_SEED");
  if (s.sim.options.seed.has_value()) {
    s.sim.seed = *s.sim.options.seed;
  } else if (env != nullptr && *env != '\0') {
    if (!absl::SimpleAtoi(env, &s.sim.seed)) {
      ADD_FAILURE() << "TROUPE_TEST_SEED=\"" << env << "\" is not an unsigned 64-bit number";
    }
  } else {
    std::random_device device;
    s.sim.seed = (uint64_t{device()} << 32) | device();
  }
  s.sim.rng.seed(s.sim.seed);
  s.sim.start = SimulatedEpoch();
  s.sim.now = s.sim.start;
  seed_trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, s.sim.SeedText());
  const uint32_t n = std::max<uint32_t>(s.sim.options.nodes, 1);
  s.nodes.resize(n);
  s.network.Init(n);
  for (NodeId id = 1; id <= n; ++id) {
    s.nodes[id - 1].id = id;
  }
  for (NodeId id = 1; id <= n; ++id) {
    s.StartNode(id);
  }
}

TestRuntime::~TestRuntime() {
  if (FailuresSoFar() > state_->failures_at_start) {
    std::cerr << state_->DescribeTail(20) << "\n";
  }
  for (NodeId id = 1; id <= state_->N(); ++id) {
    state_->StopNode(id);
  }
  state_->timers.Clear();
  state_->network.Clear();
}

uint64_t TestRuntime::seed() const { return state_->sim.seed; }

// -- nodes --------------------------------------------------------------------------------------

uint32_t TestRuntime::node_count() const { return state_->N(); }

ActorSystem& TestRuntime::node(NodeId node) {
  TROUPE_CHECK(state_->Alive(node)) << "node " << node << " does not exist or is dead";
  return *state_->NodeRef(node).system;
}

bool TestRuntime::IsAlive(NodeId node) const { return state_->Alive(node); }

uint32_t TestRuntime::incarnation(NodeId node) const {
  return state_->Exists(node) ? state_->nodes[node - 1].incarnation : 0;
}

// -- actors and events --------------------------------------------------------------------------

ActorId TestRuntime::Register(std::unique_ptr<Actor> actor, NodeId node, RegisterOptions options) {
  if (!state_->Alive(node)) {
    ADD_FAILURE() << "Register on node " << node << ": no such live node; actor destroyed";
    return {};
  }
  return this->node(node).Register(std::move(actor), options);
}

void TestRuntime::Send(const ActorId& recipient, std::unique_ptr<EventBase> event,
                       const ActorId& sender, uint32_t flags, uint64_t cookie) {
  Send(std::make_unique<EventHandle>(recipient, sender, std::move(event), flags, cookie));
}

namespace {

// The node a handle sent from the test body leaves from: `from`, else the sender's, else node 1.
NodeId SendingNode(const EventHandle& handle, NodeId from) {
  if (from != 0) {
    return from;
  }
  return handle.sender().node_id() != 0 ? handle.sender().node_id() : 1;
}

}  // namespace

void TestRuntime::Send(EventHandlePtr handle, NodeId from) {
  from = SendingNode(*handle, from);
  if (!state_->Alive(from)) {
    ADD_FAILURE() << "Send from node " << from << ": no such live node; " << handle->ToString()
                  << " dropped";
    return;
  }
  internal::RuntimeOf(node(from))->Send(std::move(handle));
}

TimerCookie TestRuntime::Schedule(absl::Duration delay, EventHandlePtr handle, NodeId from) {
  from = SendingNode(*handle, from);
  if (!state_->Alive(from)) {
    ADD_FAILURE() << "Schedule from node " << from << ": no such live node; " << handle->ToString()
                  << " dropped";
    return {};
  }
  return node(from).Schedule(delay, std::move(handle));
}

// -- edge actors --------------------------------------------------------------------------------

ActorId TestRuntime::AllocateEdgeActor(NodeId node) {
  const ActorId edge = Register(std::make_unique<EdgeActor>(&state_->edges), node);
  state_->edges[edge];
  return edge;
}

EventHandlePtr TestRuntime::GrabEdgeEvent(const ActorId& edge, std::optional<EventType> type,
                                          DispatchOptions options) {
  return GrabEdgeEventIf(
      edge, [&type](EventHandle& ev) { return !type.has_value() || ev.type() == *type; }, options,
      type.has_value() ? absl::StrFormat(" of type 0x%08x", *type) : std::string());
}

EventHandlePtr TestRuntime::GrabEdgeEventIf(const ActorId& edge,
                                            const std::function<bool(EventHandle&)>& matches,
                                            DispatchOptions options, const std::string& what) {
  State& s = *state_;
  auto find = [&]() -> std::optional<std::deque<EventHandlePtr>::iterator> {
    auto queue = s.edges.find(edge);
    if (queue == s.edges.end()) {
      return std::nullopt;
    }
    auto it = std::find_if(queue->second.begin(), queue->second.end(),
                           [&matches](const EventHandlePtr& ev) { return matches(*ev); });
    if (it == queue->second.end()) {
      return std::nullopt;
    }
    return it;
  };
  const std::function<bool()> done = [&] { return find().has_value(); };
  const DispatchResult result = s.Run(&done, options);
  if (result != DispatchResult::kPredicate) {
    ADD_FAILURE() << "GrabEdgeEvent: no event" << (what.empty() ? " that matches" : what)
                  << " reached edge actor " << edge
                  << " (dispatch stopped: " << DispatchResultName(result) << ")\n"
                  << s.DescribeTail(20);
    return nullptr;
  }
  auto it = *find();
  EventHandlePtr ev = std::move(*it);
  s.edges.find(edge)->second.erase(it);
  return ev;
}

std::vector<EventHandlePtr> TestRuntime::TakeEdgeEvents(const ActorId& edge) {
  std::vector<EventHandlePtr> out;
  auto queue = state_->edges.find(edge);
  if (queue != state_->edges.end()) {
    for (EventHandlePtr& ev : queue->second) {
      out.push_back(std::move(ev));
    }
    queue->second.clear();
  }
  return out;
}

size_t TestRuntime::EdgeEventCount(const ActorId& edge) const {
  auto it = state_->edges.find(edge);
  return it == state_->edges.end() ? 0 : it->second.size();
}

// -- dispatching --------------------------------------------------------------------------------

bool TestRuntime::Step() { return state_->Step(); }

DispatchResult TestRuntime::DispatchEvents(DispatchOptions options) {
  return state_->Run(nullptr, options);
}

::testing::AssertionResult TestRuntime::DispatchUntil(const std::function<bool()>& done,
                                                      DispatchOptions options) {
  const DispatchResult result = state_->Run(&done, options);
  if (result == DispatchResult::kPredicate) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "DispatchUntil stopped before its condition held: " << DispatchResultName(result)
         << " (bounds: " << options.max_events << " events, "
         << absl::FormatDuration(options.max_time) << ")\n"
         << state_->DescribeTail(20);
}

uint64_t TestRuntime::steps() const { return state_->steps; }

// -- simulated time -----------------------------------------------------------------------------

absl::Time TestRuntime::Now() const { return state_->sim.now; }

::testing::AssertionResult TestRuntime::AdvanceTime(absl::Duration duration, uint64_t max_events) {
  State& s = *state_;
  const absl::Time target = s.sim.now + std::max(duration, absl::ZeroDuration());
  uint64_t count = 0;
  while (true) {
    while (count < max_events && s.Step()) {
      ++count;
    }
    if (count >= max_events) {
      return ::testing::AssertionFailure()
             << "AdvanceTime: " << max_events << " steps before reaching +"
             << absl::FormatDuration(target - s.sim.start) << "\n"
             << s.DescribeTail(20);
    }
    std::optional<absl::Time> next = s.NextDeadline();
    if (!next.has_value() || *next > target) {
      break;
    }
    s.AdvanceTo(*next);
  }
  s.AdvanceTo(target);
  return ::testing::AssertionSuccess();
}

bool TestRuntime::JumpToNextTimer() {
  std::optional<absl::Time> next = state_->NextDeadline();
  if (!next.has_value()) {
    return false;
  }
  state_->AdvanceTo(*next);
  return true;
}

size_t TestRuntime::PendingTimers() const { return state_->timers.Pending(); }

// -- faults -------------------------------------------------------------------------------------

ObserverId TestRuntime::AddObserver(Observer observer) {
  const ObserverId id = state_->next_observer++;
  state_->observers.emplace_back(id, std::move(observer));
  return id;
}

void TestRuntime::RemoveObserver(ObserverId id) {
  std::erase_if(state_->observers, [id](const auto& entry) { return entry.first == id; });
}

void TestRuntime::Partition(NodeId a, NodeId b) {
  State& s = *state_;
  if (!s.Exists(a) || !s.Exists(b) || a == b) {
    ADD_FAILURE() << "Partition(" << a << ", " << b << "): needs two different nodes in 1.."
                  << s.N();
    return;
  }
  s.network.Partition(a, b);
}

void TestRuntime::Isolate(NodeId node) {
  for (NodeId peer = 1; peer <= state_->N(); ++peer) {
    if (peer != node) {
      Partition(node, peer);
    }
  }
}

void TestRuntime::Heal(NodeId a, NodeId b) {
  if (state_->Exists(a) && state_->Exists(b) && a != b) {
    state_->network.Heal(a, b);
  }
}

void TestRuntime::HealAll() { state_->network.HealAll(); }

bool TestRuntime::IsPartitioned(NodeId a, NodeId b) const {
  return state_->Exists(a) && state_->Exists(b) && a != b && state_->network.IsPartitioned(a, b);
}

void TestRuntime::SetLinkLatency(NodeId from, NodeId to, absl::Duration latency,
                                 absl::Duration jitter) {
  if (state_->Exists(from) && state_->Exists(to) && from != to) {
    state_->network.SetLatency(from, to, latency, jitter);
  }
}

void TestRuntime::KillNode(NodeId node) {
  State& s = *state_;
  if (s.dispatch_depth > 0 || s.observing) {
    ADD_FAILURE() << "KillNode(" << node << ") called from a handler or an observer; ignored";
    return;
  }
  if (!s.Alive(node)) {
    ADD_FAILURE() << "KillNode(" << node << "): no such live node";
    return;
  }
  s.StopNode(node);
}

void TestRuntime::RestartNode(NodeId node) {
  State& s = *state_;
  if (!s.Exists(node) || s.Alive(node)) {
    ADD_FAILURE() << "RestartNode(" << node << "): the node must exist and be dead";
    return;
  }
  s.StartNode(node);
}

// -- expectations -------------------------------------------------------------------------------

bool TestRuntime::ExpectNext(const ActorId& recipient, EventType type,
                             const std::optional<ActorId>& from,
                             const std::function<bool(EventHandle&)>& check,
                             const DispatchOptions& options, const char* file, int line) {
  State& s = *state_;
  Watch watch{recipient, type, from, &check};
  s.watch = &watch;
  const std::function<bool()> done = [&watch] { return watch.done; };
  // `done` is checked before each step, so the watched event's handler has run on return.
  const DispatchResult result = s.Run(&done, options);
  s.watch = nullptr;
  std::string expected = absl::StrFormat("event 0x%08x", type);
  if (from.has_value()) {
    absl::StrAppend(&expected, " from ", from->ToString());
  }
  absl::StrAppend(&expected, " to ", recipient.ToString());
  if (!watch.done) {
    ADD_FAILURE_AT(file, line) << "Expect: " << expected
                               << "; no event reached the recipient (dispatch stopped: "
                               << DispatchResultName(result) << ")\n"
                               << s.DescribeTail(20);
    return false;
  }
  if (!watch.matched) {
    ADD_FAILURE_AT(file, line) << "Expect: " << expected << "; next was " << watch.seen << "\n"
                               << s.DescribeTail(20);
    return false;
  }
  return true;
}

// -- trace --------------------------------------------------------------------------------------

std::vector<TraceEntry> TestRuntime::Trace() const {
  return {state_->trace.entries().begin(), state_->trace.entries().end()};
}

uint64_t TestRuntime::TraceFingerprint() const { return state_->trace.fingerprint(); }

std::string TestRuntime::Describe(size_t entries) const { return state_->DescribeTail(entries); }

}  // namespace troupe::testing
