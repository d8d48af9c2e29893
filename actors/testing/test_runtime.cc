// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/test_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/check.h"
#include "actors/internal/driver.h"
#include "actors/internal/mailbox.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"

namespace troupe::testing {

namespace {

// The simulated epoch: a fixed date, so traces and logs do not depend on the wall clock.
absl::Time SimulatedEpoch() {
  return absl::FromCivil(absl::CivilDay(2026, 1, 1), absl::UTCTimeZone());
}

// Local ids of incarnation k start at k << 40: ids of a restarted node never meet the old ones.
uint64_t FirstLocalId(uint32_t incarnation) { return (uint64_t{incarnation} << 40) + 1; }

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

uint64_t Mix(uint64_t hash, uint64_t value) {
  // splitmix64 finalizer over the running hash: cheap and stable across processes and builds.
  uint64_t z = hash ^ (value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t HashId(uint64_t hash, const ActorId& id) {
  hash = Mix(hash, id.local_id());
  hash = Mix(hash, id.hint());
  return Mix(hash, id.node_word());
}

std::string DescribeEvent(EventType type, const ActorId& sender, const ActorId& recipient) {
  return absl::StrFormat("event 0x%08x from %s to %s", type, sender.ToString(),
                         recipient.ToString());
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

// -- state --------------------------------------------------------------------------------------

// Everything behind the public API; it is also the driver of every node.
struct TestRuntime::State final : internal::Driver {
  struct Node {
    NodeId id = 0;
    uint32_t incarnation = 0;
    std::unique_ptr<ActorSystem> system;  // null while dead
    internal::Runtime* runtime = nullptr;
  };
  struct Ready {
    NodeId node;
    internal::Mailbox* mailbox;
  };
  struct InFlight {
    absl::Time due;
    EventHandlePtr ev;
  };
  // One direction between two nodes.
  struct Link {
    std::deque<InFlight> queue;
    // Actors on the sending side subscribed to the current session.
    absl::flat_hash_set<ActorId> subscribers;
    std::optional<std::pair<absl::Duration, absl::Duration>> latency;  // latency, jitter
  };
  // The session of an unordered pair of nodes.
  struct Session {
    bool up = false;
    bool partitioned = false;
  };
  struct Timer {
    NodeId node;
    uint32_t incarnation;
    EventHandlePtr ev;
    TimerCookie cookie;
    // Observers saw it already (a Delay verdict): deliver without asking them again.
    bool observed;
  };
  // A pending Expect: the next event handled by `recipient`.
  struct Watch {
    ActorId recipient;
    EventType type;
    std::optional<ActorId> from;
    const std::function<bool(EventHandle&)>* check;
    bool done = false;
    bool matched = false;
    std::string seen = {};
  };

  TestRuntime* owner = nullptr;
  TestRuntimeOptions options;
  uint64_t seed = 0;
  std::mt19937_64 rng;
  absl::Time start;
  absl::Time now;
  std::vector<Node> nodes;  // index = node id - 1
  absl::flat_hash_map<const internal::Runtime*, NodeId> node_of;
  std::vector<Ready> ready;
  std::vector<Link> links;        // index (from - 1) * N + (to - 1)
  std::vector<Session> sessions;  // index (min - 1) * N + (max - 1)
  size_t links_busy = 0;          // links with a non-empty queue
  std::map<std::pair<absl::Time, uint64_t>, Timer> timers;
  uint64_t timer_sequence = 0;
  std::vector<std::pair<ObserverId, Observer>> observers;
  ObserverId next_observer = 1;
  absl::flat_hash_map<ActorId, std::deque<EventHandlePtr>> edges;
  Watch* watch = nullptr;
  uint64_t steps = 0;
  std::deque<TraceEntry> trace;
  uint64_t fingerprint = 0;
  int dispatch_depth = 0;
  bool observing = false;
  // Failures of the running test before this runtime existed: the trace is printed only for
  // failures during its lifetime (a seed loop prints the failing seed's trace, not every later
  // one).
  int failures_at_start = 0;

  // -- helpers ----------------------------------------------------------------------------------

  uint32_t N() const { return static_cast<uint32_t>(nodes.size()); }
  bool Exists(NodeId id) const { return id >= 1 && id <= N(); }
  Node& NodeRef(NodeId id) { return nodes[id - 1]; }
  bool Alive(NodeId id) const { return Exists(id) && nodes[id - 1].system != nullptr; }
  Link& LinkRef(NodeId from, NodeId to) { return links[(from - 1) * N() + (to - 1)]; }
  Session& SessionRef(NodeId a, NodeId b) {
    return sessions[(std::min(a, b) - 1) * N() + (std::max(a, b) - 1)];
  }
  NodeId NodeOf(const internal::Runtime* runtime) const {
    auto it = node_of.find(runtime);
    return it == node_of.end() ? 0 : it->second;
  }
  uint64_t Uniform(uint64_t n) { return n <= 1 ? 0 : rng() % n; }

  std::string SeedText() const {
    return absl::StrCat("troupe::testing seed ", seed,
                        options.seed.has_value()
                            ? " (fixed by the test)"
                            : absl::StrCat(" (replay: TROUPE_TEST_SEED=", seed, ")"));
  }

  void Record(char kind, NodeId node, const EventHandle& ev) {
    TraceEntry entry{steps, now - start, kind, node, ev.type(), ev.sender(), ev.recipient()};
    fingerprint = Mix(fingerprint, static_cast<uint64_t>(kind));
    fingerprint = Mix(fingerprint, node);
    fingerprint = Mix(fingerprint, ev.type());
    fingerprint = Mix(fingerprint, static_cast<uint64_t>(absl::ToInt64Nanoseconds(entry.at)));
    fingerprint = HashId(HashId(fingerprint, ev.sender()), ev.recipient());
    if (options.trace_capacity == 0) {
      return;
    }
    if (trace.size() == options.trace_capacity) {
      trace.pop_front();
    }
    trace.push_back(entry);
  }

  // -- nodes ------------------------------------------------------------------------------------

  void StartNode(NodeId id) {
    Node& node = NodeRef(id);
    ++node.incarnation;
    proto::ActorSystemConfig config = options.config;
    config.set_node_id(id);
    absl::StatusOr<std::unique_ptr<ActorSystem>> system =
        internal::CreateDrivenSystem(config, this, FirstLocalId(node.incarnation));
    if (!system.ok()) {
      ADD_FAILURE() << "node " << id << " did not start: " << system.status();
      return;
    }
    node.system = std::move(*system);
    node.runtime = internal::RuntimeOf(*node.system);
    node_of[node.runtime] = id;
    if (options.on_node_start) {
      options.on_node_start(*owner, id);
    }
  }

  void StopNode(NodeId id) {
    Node& node = NodeRef(id);
    if (node.system == nullptr) {
      return;
    }
    // Dead from here on: the sessions below report only on the peers' side.
    std::unique_ptr<ActorSystem> dying = std::move(node.system);
    for (NodeId peer = 1; peer <= N(); ++peer) {
      if (peer != id) {
        SessionDown(id, peer);
      }
    }
    std::erase_if(ready, [id](const Ready& r) { return r.node == id; });
    for (auto it = timers.begin(); it != timers.end();) {
      if (it->second.node == id) {
        it->second.cookie.TryFire();  // no longer pending: it never fires
        it = timers.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = edges.begin(); it != edges.end();) {
      if (it->first.node_id() == id) {
        edges.erase(it++);
      } else {
        ++it;
      }
    }
    // Stopping destroys every actor; what their destructors send is dropped (OnSend sees a stopped
    // runtime). The runtime stays in node_of until then so those calls are recognised.
    internal::Runtime* runtime = node.runtime;
    dying.reset();
    node_of.erase(runtime);
    node.runtime = nullptr;
  }

  // -- the simulated interconnect ---------------------------------------------------------------

  bool Reachable(NodeId a, NodeId b) {
    return Alive(a) && Alive(b) && !SessionRef(a, b).partitioned;
  }

  // Ends the session between `a` and `b` if it is up.
  void SessionDown(NodeId a, NodeId b) {
    Session& session = SessionRef(a, b);
    if (!session.up) {
      return;
    }
    session.up = false;
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      Link& link = LinkRef(from, to);
      if (!link.queue.empty()) {
        --links_busy;
      }
      std::deque<InFlight> lost = std::move(link.queue);
      link.queue.clear();
      absl::flat_hash_set<ActorId> subscribers = std::move(link.subscribers);
      link.subscribers.clear();
      if (!Alive(from)) {
        continue;  // the senders are gone; so are their reports
      }
      internal::Runtime* runtime = NodeRef(from).runtime;
      for (InFlight& in_flight : lost) {
        runtime->Undeliverable(std::move(in_flight.ev), UndeliveredReason::kDisconnected,
                               /*unsure=*/true);
      }
      // Sorted, so the order of the notifications does not depend on hashing.
      std::vector<ActorId> sorted(subscribers.begin(), subscribers.end());
      std::sort(sorted.begin(), sorted.end());
      for (const ActorId& subscriber : sorted) {
        runtime->Send(std::make_unique<EventHandle>(subscriber, ActorId(),
                                                    std::make_unique<EvNodeDisconnected>(to)));
      }
    }
  }

  void RouteRemote(internal::Runtime* runtime, EventHandlePtr ev) override {
    const NodeId from = NodeOf(runtime);
    const NodeId to = ev->recipient().node_id();
    if (from == 0 || runtime->stopped()) {
      return;  // a dying node's last words
    }
    if (!options.simulated_interconnect) {
      runtime->RouteThroughRouter(std::move(ev));
      return;
    }
    if (!Exists(to)) {
      runtime->Undeliverable(std::move(ev), UndeliveredReason::kNoRoute);
      return;
    }
    const bool subscribe = ev->HasFlag(kSubscribeOnSession) && !ev->sender().IsEmpty();
    if (!Reachable(from, to)) {
      if (subscribe) {
        runtime->Send(std::make_unique<EventHandle>(ev->sender(), ActorId(),
                                                    std::make_unique<EvNodeDisconnected>(to)));
      }
      runtime->Undeliverable(std::move(ev), UndeliveredReason::kDisconnected);
      return;
    }
    SessionRef(from, to).up = true;
    Link& link = LinkRef(from, to);
    if (subscribe && link.subscribers.insert(ev->sender()).second) {
      runtime->Send(std::make_unique<EventHandle>(ev->sender(), ActorId(),
                                                  std::make_unique<EvNodeConnected>(to)));
    }
    if (absl::Status status = ev->Serialize(); !status.ok()) {
      ADD_FAILURE() << DescribeEvent(ev->type(), ev->sender(), ev->recipient())
                    << " cannot cross from node " << from << " to node " << to << ": " << status
                    << "\n"
                    << SeedText();
      runtime->Undeliverable(std::move(ev), UndeliveredReason::kNotSerializable);
      return;
    }
    absl::Duration latency = options.latency;
    absl::Duration jitter = options.jitter;
    if (link.latency.has_value()) {
      std::tie(latency, jitter) = *link.latency;
    }
    absl::Time due = now + latency;
    if (jitter > absl::ZeroDuration()) {
      due += absl::Nanoseconds(static_cast<int64_t>(
          Uniform(static_cast<uint64_t>(absl::ToInt64Nanoseconds(jitter)) + 1)));
    }
    if (!link.queue.empty()) {
      due = std::max(due, link.queue.back().due);  // FIFO per link, whatever the jitter
    } else {
      ++links_busy;
    }
    link.queue.push_back(InFlight{due, std::move(ev)});
  }

  // Delivers the head of link `index` on its receiving node.
  void DeliverLink(size_t index) {
    const NodeId to = static_cast<NodeId>(index % N()) + 1;
    Link& link = links[index];
    EventHandlePtr ev = std::move(link.queue.front().ev);
    link.queue.pop_front();
    if (link.queue.empty()) {
      --links_busy;
    }
    Record('n', to, *ev);
    NodeRef(to).runtime->Deliver(std::move(ev));
  }

  // -- driver -----------------------------------------------------------------------------------

  void OnSend(internal::Runtime* runtime, EventHandlePtr ev) override {
    const NodeId node = NodeOf(runtime);
    if (node == 0 || runtime->stopped()) {
      return;  // a dying node's last words are lost with it
    }
    if (observers.empty() || observing) {
      runtime->Deliver(std::move(ev));
      return;
    }
    Verdict verdict = Verdict::Pass();
    observing = true;
    for (auto& [id, observer] : observers) {
      verdict = observer(node, *ev);
      if (verdict.kind() != Verdict::Kind::kPass) {
        break;
      }
    }
    observing = false;
    Apply(runtime, node, verdict, std::move(ev));
  }

  void Apply(internal::Runtime* runtime, NodeId node, const Verdict& verdict, EventHandlePtr ev) {
    switch (verdict.kind()) {
      case Verdict::Kind::kPass:
        runtime->Deliver(std::move(ev));
        return;
      case Verdict::Kind::kDrop:
        TROUPE_LOG(kDebug, kActors) << "test observer dropped " << ev->ToString();
        runtime->Undeliverable(std::move(ev), verdict.reason());
        return;
      case Verdict::Kind::kDelay:
        AddTimer(node, std::max(verdict.delay(), absl::ZeroDuration()), std::move(ev),
                 /*observed=*/true);
        return;
      case Verdict::Kind::kDuplicate: {
        std::vector<EventHandlePtr> copies;
        if (absl::Status status = ev->Serialize(); !status.ok()) {
          ADD_FAILURE() << "observer asked to duplicate "
                        << DescribeEvent(ev->type(), ev->sender(), ev->recipient())
                        << ", which cannot be copied: " << status << "\n"
                        << SeedText();
        } else {
          for (uint32_t i = 0; i < verdict.copies(); ++i) {
            copies.push_back(std::make_unique<EventHandle>(
                ev->type(), ev->recipient(), ev->sender(), std::string(ev->bytes()), ev->flags(),
                ev->cookie(), ev->forward_to(), ev->trace_id()));
          }
        }
        runtime->Deliver(std::move(ev));
        for (EventHandlePtr& copy : copies) {
          runtime->Deliver(std::move(copy));
        }
        return;
      }
    }
  }

  void MailboxReady(internal::Runtime* runtime, internal::Mailbox* mailbox) override {
    const NodeId node = NodeOf(runtime);
    if (node == 0 || runtime->stopped()) {
      return;  // the runtime frees what is queued when it stops
    }
    ready.push_back(Ready{node, mailbox});
  }

  TimerCookie Schedule(internal::Runtime* runtime, absl::Duration delay,
                       EventHandlePtr ev) override {
    const NodeId node = NodeOf(runtime);
    if (node == 0 || runtime->stopped()) {
      return {};
    }
    return AddTimer(node, std::max(delay, absl::ZeroDuration()), std::move(ev), /*observed=*/false);
  }

  absl::Time Now() const override { return now; }

  size_t PendingTimers(const internal::Runtime* runtime) const override {
    const NodeId node = NodeOf(runtime);
    size_t pending = 0;
    for (const auto& [key, timer] : timers) {
      pending += timer.node == node ? 1 : 0;
    }
    return pending;
  }

  TimerCookie AddTimer(NodeId node, absl::Duration delay, EventHandlePtr ev, bool observed) {
    TimerCookie cookie = TimerCookie::Make();
    timers.emplace(std::pair{now + delay, timer_sequence++},
                   Timer{node, NodeRef(node).incarnation, std::move(ev), cookie, observed});
    return cookie;
  }

  // -- stepping ---------------------------------------------------------------------------------

  bool Step() {
    size_t due_links = 0;
    if (links_busy > 0) {
      for (const Link& link : links) {
        due_links += (!link.queue.empty() && link.queue.front().due <= now) ? 1 : 0;
      }
    }
    const size_t total = ready.size() + due_links;
    if (total == 0) {
      return false;
    }
    ++steps;
    size_t pick = Uniform(total);
    if (pick < ready.size()) {
      RunMailbox(pick);
      return true;
    }
    pick -= ready.size();
    for (size_t index = 0; index < links.size(); ++index) {
      const Link& link = links[index];
      if (!link.queue.empty() && link.queue.front().due <= now && pick-- == 0) {
        DeliverLink(index);
        break;
      }
    }
    return true;
  }

  void RemoveReady(size_t index) {
    ready[index] = ready.back();
    ready.pop_back();
  }

  void RunMailbox(size_t index) {
    const Ready item = ready[index];
    internal::Mailbox* mailbox = item.mailbox;
    EventHandlePtr ev(mailbox->Pop());
    if (ev == nullptr) {
      // One thread: an empty pop means an empty queue, so the mailbox goes idle for sure.
      TROUPE_CHECK(mailbox->TryIdle()) << "mailbox refilled with no other thread running";
      RemoveReady(index);
      return;
    }
    Record('d', item.node, *ev);
    if (watch != nullptr && !watch->done) {
      Observe(item.node, *ev);
    }
    ++dispatch_depth;
    NodeRef(item.node).runtime->Dispatch(mailbox, std::move(ev));
    --dispatch_depth;
    // `ready` may have grown, never shrunk: index still names this mailbox.
    if (mailbox->IsEmpty()) {
      TROUPE_CHECK(mailbox->TryIdle()) << "mailbox refilled with no other thread running";
      RemoveReady(index);
    }
  }

  void Observe(NodeId node, EventHandle& ev) {
    if (ev.type() == kEvBootstrap) {
      return;  // the runtime's own first event, not something a test expects
    }
    ActorId target = watch->recipient;
    if (target.IsService() && (target.node_id() == 0 || target.node_id() == node)) {
      target = NodeRef(node).system->LookupService(target.WithNode(0));
    }
    if (ev.recipient() != target) {
      return;
    }
    watch->done = true;
    watch->seen = DescribeEvent(ev.type(), ev.sender(), ev.recipient());
    if (ev.type() != watch->type) {
      return;
    }
    if (watch->from.has_value() && ev.sender() != *watch->from) {
      return;
    }
    if (watch->check != nullptr && *watch->check && !(*watch->check)(ev)) {
      watch->seen += " (its contents do not match)";
      return;
    }
    watch->matched = true;
  }

  std::optional<absl::Time> NextDeadline() {
    // Cancelled timers are dropped here, so jumps never land on them.
    while (!timers.empty() && !timers.begin()->second.cookie.IsPending()) {
      timers.erase(timers.begin());
    }
    std::optional<absl::Time> next;
    if (!timers.empty()) {
      next = timers.begin()->first.first;
    }
    if (links_busy > 0) {
      for (const Link& link : links) {
        if (!link.queue.empty() && (!next.has_value() || link.queue.front().due < *next)) {
          next = link.queue.front().due;
        }
      }
    }
    return next;
  }

  // Moves the clock to `when` (never back) and fires every timer due by then, in order.
  void AdvanceTo(absl::Time when) {
    now = std::max(now, when);
    while (!timers.empty() && timers.begin()->first.first <= now) {
      auto node_handle = timers.extract(timers.begin());
      Timer& timer = node_handle.mapped();
      if (!Alive(timer.node) || NodeRef(timer.node).incarnation != timer.incarnation ||
          !timer.cookie.TryFire()) {
        continue;  // node died since, or cancelled: the event is freed
      }
      internal::Runtime* runtime = NodeRef(timer.node).runtime;
      if (timer.observed) {
        runtime->Deliver(std::move(timer.ev));
      } else {
        runtime->Send(std::move(timer.ev));
      }
    }
  }

  DispatchResult Run(const std::function<bool()>* done, const DispatchOptions& bounds) {
    const absl::Time limit = now + bounds.max_time;
    uint64_t count = 0;
    while (true) {
      if (done != nullptr && (*done)()) {
        return DispatchResult::kPredicate;
      }
      if (count >= bounds.max_events) {
        return DispatchResult::kEventLimit;
      }
      if (Step()) {
        ++count;
        continue;
      }
      if (!bounds.jump_timers) {
        return DispatchResult::kIdle;
      }
      std::optional<absl::Time> next = NextDeadline();
      if (!next.has_value()) {
        return DispatchResult::kIdle;
      }
      if (*next > limit) {
        return DispatchResult::kTimeLimit;
      }
      AdvanceTo(*next);
    }
  }

  std::string DescribeTail(size_t entries) const {
    std::string out = SeedText();
    absl::StrAppend(&out, "\nsimulated time +", absl::FormatDuration(now - start), ", ", steps,
                    " steps; last ", std::min(entries, trace.size()), " trace entries:");
    const size_t first = trace.size() > entries ? trace.size() - entries : 0;
    for (size_t i = first; i < trace.size(); ++i) {
      absl::StrAppend(&out, "\n  ", trace[i].ToString());
    }
    return out;
  }
};

// -- edge actor ---------------------------------------------------------------------------------

namespace {

// Keeps whatever it receives in the runtime's edge queue for GrabEdgeEvent.
class EdgeActor final : public Actor {
 public:
  explicit EdgeActor(absl::flat_hash_map<ActorId, std::deque<EventHandlePtr>>* edges)
      : Actor(&EdgeActor::StateWork), edges_(edges) {}

 private:
  TROUPE_STATE(StateWork) { (*edges_)[SelfId()].push_back(std::move(ev)); }

  absl::flat_hash_map<ActorId, std::deque<EventHandlePtr>>* edges_;
};

}  // namespace

// -- TestRuntime --------------------------------------------------------------------------------

TestRuntime::TestRuntime(TestRuntimeOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.owner = this;
  s.options = std::move(options);
  s.failures_at_start = FailuresSoFar();
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the test's own thread; Troupe never calls setenv.
  const char* env = std::getenv("TROUPE_TEST_SEED");
  if (s.options.seed.has_value()) {
    s.seed = *s.options.seed;
  } else if (env != nullptr && *env != '\0') {
    if (!absl::SimpleAtoi(env, &s.seed)) {
      ADD_FAILURE() << "TROUPE_TEST_SEED=\"" << env << "\" is not an unsigned 64-bit number";
    }
  } else {
    std::random_device device;
    s.seed = (uint64_t{device()} << 32) | device();
  }
  s.rng.seed(s.seed);
  s.start = SimulatedEpoch();
  s.now = s.start;
  seed_trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, s.SeedText());
  const uint32_t n = std::max<uint32_t>(s.options.nodes, 1);
  s.nodes.resize(n);
  // Sized once: a Link (a deque inside) cannot be relocated without copying.
  s.links = std::vector<State::Link>(size_t{n} * n);
  s.sessions.resize(size_t{n} * n);
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
  state_->timers.clear();
  for (State::Link& link : state_->links) {
    link.queue.clear();
  }
}

uint64_t TestRuntime::seed() const { return state_->seed; }

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

absl::Time TestRuntime::Now() const { return state_->now; }

::testing::AssertionResult TestRuntime::AdvanceTime(absl::Duration duration, uint64_t max_events) {
  State& s = *state_;
  const absl::Time target = s.now + std::max(duration, absl::ZeroDuration());
  uint64_t count = 0;
  while (true) {
    while (count < max_events && s.Step()) {
      ++count;
    }
    if (count >= max_events) {
      return ::testing::AssertionFailure()
             << "AdvanceTime: " << max_events << " steps before reaching +"
             << absl::FormatDuration(target - s.start) << "\n"
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

size_t TestRuntime::PendingTimers() const {
  size_t pending = 0;
  for (const auto& [key, timer] : state_->timers) {
    pending += timer.cookie.IsPending() ? 1 : 0;
  }
  return pending;
}

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
  s.SessionRef(a, b).partitioned = true;
  s.SessionDown(a, b);
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
    state_->SessionRef(a, b).partitioned = false;
  }
}

void TestRuntime::HealAll() {
  for (State::Session& session : state_->sessions) {
    session.partitioned = false;
  }
}

bool TestRuntime::IsPartitioned(NodeId a, NodeId b) const {
  return state_->Exists(a) && state_->Exists(b) && a != b && state_->SessionRef(a, b).partitioned;
}

void TestRuntime::SetLinkLatency(NodeId from, NodeId to, absl::Duration latency,
                                 absl::Duration jitter) {
  if (state_->Exists(from) && state_->Exists(to) && from != to) {
    state_->LinkRef(from, to).latency = std::pair{latency, jitter};
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
  State::Watch watch{recipient, type, from, &check};
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
  return {state_->trace.begin(), state_->trace.end()};
}

uint64_t TestRuntime::TraceFingerprint() const { return state_->fingerprint; }

std::string TestRuntime::Describe(size_t entries) const { return state_->DescribeTail(entries); }

}  // namespace troupe::testing
