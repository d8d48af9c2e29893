// SPDX-License-Identifier: Apache-2.0
//
// TestRuntime::State: everything behind the public API, and the driver (actors/internal/driver.h)
// of every node.
//
// It owns the nodes (real ActorSystems built by internal::CreateDrivenSystem: no worker, no
// scheduler thread; local ids start at incarnation << 40, so a restarted node's ids never meet
// the old ones) and takes the five calls a driven runtime makes: sends (through the observers),
// remote routes (into the simulated interconnect, or the node's own router), mailboxes that became
// ready, delayed sends, and the clock. It steps the run: each step the seeded generator picks one
// ready mailbox or one due link; when nothing is ready the clock jumps to the next timer or link
// arrival. The parts it composes live beside it: Simulation (options, generator, clock),
// SimNetwork (the links), SimTimers, TraceLog and Watch, EdgeActor. Private to troupe::testing;
// not installed.
//
// Thread-safety: thread-compatible; everything runs on the test's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/internal/driver.h"
#include "actors/internal/mailbox.h"
#include "actors/internal/runtime.h"
#include "actors/testing/internal/edge_actor.h"
#include "actors/testing/internal/sim_network.h"
#include "actors/testing/internal/sim_timers.h"
#include "actors/testing/internal/simulation.h"
#include "actors/testing/internal/trace.h"
#include "actors/testing/test_runtime.h"
#include "actors/timer.h"

namespace troupe::testing {

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

  TestRuntime* owner = nullptr;
  Simulation sim;
  std::vector<Node> nodes;  // index = node id - 1
  absl::flat_hash_map<const internal::Runtime*, NodeId> node_of;
  std::vector<Ready> ready;
  SimNetwork network{&sim};
  SimTimers timers;
  std::vector<std::pair<ObserverId, Observer>> observers;
  ObserverId next_observer = 1;
  EdgeQueues edges;
  Watch* watch = nullptr;
  uint64_t steps = 0;
  TraceLog trace;
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
  NodeId NodeOf(const internal::Runtime* runtime) const {
    auto it = node_of.find(runtime);
    return it == node_of.end() ? 0 : it->second;
  }
  // Adds a step to the trace: an event handled ('d') or delivered by a link ('n') on `node`.
  void Record(char kind, NodeId node, const EventHandle& ev);
  // Returns the seed, the simulated time, the step count and the last `entries` trace entries.
  std::string DescribeTail(size_t entries) const;

  // -- nodes ------------------------------------------------------------------------------------

  // Starts a new incarnation of node `id` (a failure leaves it dead) and runs on_node_start.
  void StartNode(NodeId id);
  // Ends node `id`: its sessions, ready mailboxes, timers and edge queues go, then its actors.
  void StopNode(NodeId id);

  // -- driver -----------------------------------------------------------------------------------

  void OnSend(internal::Runtime* runtime, EventHandlePtr ev) override;
  void RouteRemote(internal::Runtime* runtime, EventHandlePtr ev) override;
  void MailboxReady(internal::Runtime* runtime, internal::Mailbox* mailbox) override;
  TimerCookie Schedule(internal::Runtime* runtime, absl::Duration delay,
                       EventHandlePtr ev) override;
  absl::Time Now() const override { return sim.now; }
  size_t PendingTimers(const internal::Runtime* runtime) const override;

  // Carries out an observer's verdict on `ev`, sent on `node`.
  void Apply(internal::Runtime* runtime, NodeId node, const Verdict& verdict, EventHandlePtr ev);
  TimerCookie AddTimer(NodeId node, absl::Duration delay, EventHandlePtr ev, bool observed);

  // -- stepping ---------------------------------------------------------------------------------

  // Takes one step: handles one event of a ready mailbox or delivers one due link's next event.
  // Returns false when nothing is ready now.
  bool Step();
  void RemoveReady(size_t index);
  void RunMailbox(size_t index);
  // Returns the earliest due time of a live timer or a link arrival.
  std::optional<absl::Time> NextDeadline();
  // Moves the clock to `when` (never back) and fires every timer due by then, in order.
  void AdvanceTo(absl::Time when);
  // Steps (jumping the clock when idle, if allowed) until `done` holds or a bound is hit.
  DispatchResult Run(const std::function<bool()>* done, const DispatchOptions& bounds);
};

}  // namespace troupe::testing
