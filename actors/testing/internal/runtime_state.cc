// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/internal/runtime_state.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/check.h"
#include "actors/log.h"

namespace troupe::testing {

namespace {

// Local ids of incarnation k start at k << 40: ids of a restarted node never meet the old ones.
uint64_t FirstLocalId(uint32_t incarnation) { return (uint64_t{incarnation} << 40) + 1; }

}  // namespace

// -- helpers ------------------------------------------------------------------------------------

void TestRuntime::State::Record(char kind, NodeId node, const EventHandle& ev) {
  trace.Record(
      TraceEntry{steps, sim.now - sim.start, kind, node, ev.type(), ev.sender(), ev.recipient()},
      sim.options.trace_capacity);
}

std::string TestRuntime::State::DescribeTail(size_t entries) const {
  std::string out = sim.SeedText();
  absl::StrAppend(&out, "\nsimulated time +", absl::FormatDuration(sim.now - sim.start), ", ",
                  steps, " steps; last ", std::min(entries, trace.entries().size()),
                  " trace entries:");
  trace.AppendTail(&out, entries);
  return out;
}

// -- nodes --------------------------------------------------------------------------------------

void TestRuntime::State::StartNode(NodeId id) {
  Node& node = NodeRef(id);
  ++node.incarnation;
  proto::ActorSystemConfig config = sim.options.config;
  config.set_node_id(id);
  if (sim.options.tune_node) {
    sim.options.tune_node(id, config);
  }
  absl::StatusOr<std::unique_ptr<ActorSystem>> system =
      internal::CreateDrivenSystem(config, this, FirstLocalId(node.incarnation));
  if (!system.ok()) {
    ADD_FAILURE() << "node " << id << " did not start: " << system.status();
    return;
  }
  node.system = std::move(*system);
  node.runtime = internal::RuntimeOf(*node.system);
  node_of[node.runtime] = id;
  network.NodeUp(id, node.runtime);
  if (sim.options.on_node_start) {
    sim.options.on_node_start(*owner, id);
  }
}

void TestRuntime::State::StopNode(NodeId id) {
  Node& node = NodeRef(id);
  if (node.system == nullptr) {
    return;
  }
  // Dead from here on: the sessions end, reported only on the peers' side.
  std::unique_ptr<ActorSystem> dying = std::move(node.system);
  network.NodeDown(id);
  std::erase_if(ready, [id](const Ready& r) { return r.node == id; });
  timers.DropNode(id);
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

// -- driver -------------------------------------------------------------------------------------

void TestRuntime::State::OnSend(internal::Runtime* runtime, EventHandlePtr ev) {
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

void TestRuntime::State::RouteRemote(internal::Runtime* runtime, EventHandlePtr ev) {
  const NodeId from = NodeOf(runtime);
  if (from == 0 || runtime->stopped()) {
    return;  // a dying node's last words
  }
  if (!sim.options.simulated_interconnect) {
    runtime->RouteThroughRouter(std::move(ev));
    return;
  }
  network.Route(from, runtime, std::move(ev));
}

void TestRuntime::State::MailboxReady(internal::Runtime* runtime, internal::Mailbox* mailbox) {
  const NodeId node = NodeOf(runtime);
  if (node == 0 || runtime->stopped()) {
    return;  // the runtime frees what is queued when it stops
  }
  ready.push_back(Ready{node, mailbox});
}

TimerCookie TestRuntime::State::Schedule(internal::Runtime* runtime, absl::Duration delay,
                                         EventHandlePtr ev) {
  const NodeId node = NodeOf(runtime);
  if (node == 0 || runtime->stopped()) {
    return {};
  }
  return AddTimer(node, std::max(delay, absl::ZeroDuration()), std::move(ev), /*observed=*/false);
}

size_t TestRuntime::State::PendingTimers(const internal::Runtime* runtime) const {
  return timers.CountOn(NodeOf(runtime));
}

void TestRuntime::State::Apply(internal::Runtime* runtime, NodeId node, const Verdict& verdict,
                               EventHandlePtr ev) {
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
                      << sim.SeedText();
      } else {
        for (uint32_t i = 0; i < verdict.copies(); ++i) {
          copies.push_back(std::make_unique<EventHandle>(ev->type(), ev->recipient(), ev->sender(),
                                                         ev->bytes(), ev->flags(), ev->cookie(),
                                                         ev->forward_to(), ev->trace_id()));
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

TimerCookie TestRuntime::State::AddTimer(NodeId node, absl::Duration delay, EventHandlePtr ev,
                                         bool observed) {
  return timers.Add(sim.now + delay, node, NodeRef(node).incarnation, std::move(ev), observed);
}

// -- stepping -----------------------------------------------------------------------------------

bool TestRuntime::State::Step() {
  const size_t due_links = network.DueCount();
  const size_t total = ready.size() + due_links;
  if (total == 0) {
    return false;
  }
  ++steps;
  size_t pick = sim.Uniform(total);
  if (pick < ready.size()) {
    RunMailbox(pick);
    return true;
  }
  SimNetwork::Arrival arrival = network.TakeDue(pick - ready.size());
  Record('n', arrival.to, *arrival.ev);
  NodeRef(arrival.to).runtime->Deliver(std::move(arrival.ev));
  return true;
}

void TestRuntime::State::RemoveReady(size_t index) {
  ready[index] = ready.back();
  ready.pop_back();
}

void TestRuntime::State::RunMailbox(size_t index) {
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
    watch->Observe(item.node, *NodeRef(item.node).system, *ev);
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

std::optional<absl::Time> TestRuntime::State::NextDeadline() {
  std::optional<absl::Time> next = timers.NextDue();
  const std::optional<absl::Time> arrival = network.NextArrival();
  if (arrival.has_value() && (!next.has_value() || *arrival < *next)) {
    next = arrival;
  }
  return next;
}

void TestRuntime::State::AdvanceTo(absl::Time when) {
  sim.now = std::max(sim.now, when);
  while (std::optional<SimTimers::Timer> timer = timers.PopDue(sim.now)) {
    if (!Alive(timer->node) || NodeRef(timer->node).incarnation != timer->incarnation ||
        !timer->cookie.TryFire()) {
      continue;  // node died since, or cancelled: the event is freed
    }
    internal::Runtime* runtime = NodeRef(timer->node).runtime;
    if (timer->observed) {
      runtime->Deliver(std::move(timer->ev));
    } else {
      runtime->Send(std::move(timer->ev));
    }
  }
}

DispatchResult TestRuntime::State::Run(const std::function<bool()>* done,
                                       const DispatchOptions& bounds) {
  const absl::Time limit = sim.now + bounds.max_time;
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

}  // namespace troupe::testing
