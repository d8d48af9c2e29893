// SPDX-License-Identifier: Apache-2.0
//
// SimNetwork: the simulated interconnect between the nodes of a TestRuntime.
//
// It follows the interconnect's contract (actors/session_events.h) without sockets: one session
// per unordered pair of nodes, created by the first send; one FIFO link per direction whose events
// are serialized on entry and carry a due time (latency plus a uniform jitter drawn from the
// simulation's generator); subscribers per direction. Session states:
//   | session              | a send                           | Partition, or a node's death     |
//   |----------------------|----------------------------------|----------------------------------|
//   | down, reachable      | brings it up; joins the link     | —                                |
//   | up                   | joins the link, behind its last  | down: events on both links are   |
//   |                      | event whatever the jitter        | Undelivered{kDisconnected,       |
//   |                      |                                  | unsure}; subscribers on both     |
//   |                      |                                  | sides get EvNodeDisconnected     |
//   | partitioned, or a    | Undelivered{kDisconnected}       | —                                |
//   | node dead            | (certain); a subscriber gets     |                                  |
//   |                      | EvNodeDisconnected               |                                  |
// A node id outside 1..N gets Undelivered{kNoRoute}; an event that cannot be serialized fails the
// test and is reported Undelivered{kNotSerializable}.
//
// The network never delivers on its own: the stepper counts the links whose head is due, picks one
// with the seeded generator and takes its arrival (TakeDue), so link deliveries interleave with
// handlers deterministically. Private to troupe::testing; not installed.
//
// Thread-safety: thread-compatible; the test runtime uses it from the test's thread only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/internal/runtime.h"
#include "actors/testing/internal/simulation.h"

namespace troupe::testing {

class SimNetwork {
 public:
  // An event that left its link, for the receiving node.
  struct Arrival {
    NodeId to = 0;
    EventHandlePtr ev;
  };

  // Draws jitter from `sim` and reads its clock and options; `sim` must outlive the network.
  explicit SimNetwork(Simulation* sim) : sim_(sim) {}
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;
  SimNetwork(SimNetwork&&) = delete;
  SimNetwork& operator=(SimNetwork&&) = delete;
  ~SimNetwork() = default;

  // -- nodes ------------------------------------------------------------------------------------

  // Sizes the tables for nodes 1..`nodes`: every session down, no link yet (a link is created at
  // its pair's first send, or by SetLatency). Call once, before NodeUp.
  void Init(uint32_t nodes);
  // Makes `id` reachable, run by `runtime`.
  void NodeUp(NodeId id, internal::Runtime* runtime);
  // Makes `id` unreachable and ends its sessions: only the peers' side hears of it.
  void NodeDown(NodeId id);
  // Drops every event still on a link, without reports.
  void Clear();

  // -- routing ----------------------------------------------------------------------------------

  // Takes an event sent on `from` (run by `runtime`) to an actor on another node.
  void Route(NodeId from, internal::Runtime* runtime, EventHandlePtr ev);
  // Returns the number of links whose next event is due now.
  size_t DueCount() const;
  // Takes the next event of the `pick`-th due link (in link order). Precondition: pick <
  // DueCount().
  Arrival TakeDue(size_t pick);
  // Returns the earliest due time of an event on a link, if any.
  std::optional<absl::Time> NextArrival() const;

  // -- faults -----------------------------------------------------------------------------------

  // Cuts `a`–`b` (ending their session) until Heal. Precondition: two different nodes in 1..N.
  void Partition(NodeId a, NodeId b);
  void Heal(NodeId a, NodeId b);
  void HealAll();
  bool IsPartitioned(NodeId a, NodeId b) const;
  // Overrides the options' latency and jitter on the link `from`→`to`.
  void SetLatency(NodeId from, NodeId to, absl::Duration latency, absl::Duration jitter);

 private:
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

  uint32_t N() const { return static_cast<uint32_t>(runtimes_.size()); }
  bool Alive(NodeId id) const { return runtimes_[id - 1] != nullptr; }
  size_t LinkIndex(NodeId from, NodeId to) const { return (from - 1) * N() + (to - 1); }
  // Returns the link `from`→`to`, creating it at the first use.
  Link& LinkRef(NodeId from, NodeId to);
  // Returns the link `from`→`to`, or null when the pair never used it.
  Link* FindLink(NodeId from, NodeId to) const { return links_[LinkIndex(from, to)].get(); }
  size_t SessionIndex(NodeId a, NodeId b) const {
    return (std::min(a, b) - 1) * N() + (std::max(a, b) - 1);
  }
  Session& SessionRef(NodeId a, NodeId b) { return sessions_[SessionIndex(a, b)]; }
  bool Reachable(NodeId a, NodeId b);
  // Ends the session between `a` and `b` if it is up.
  void SessionDown(NodeId a, NodeId b);

  Simulation* sim_;
  std::vector<internal::Runtime*> runtimes_;  // index = node id - 1; null while dead
  // Index (from - 1) * N + (to - 1); a link exists once its pair talked (or got a latency), so a
  // pair that never talks costs one null pointer.
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Session> sessions_;  // index (min - 1) * N + (max - 1)
  // Indexes of the links with a non-empty queue, in link order: the stepper's scans cost the busy
  // links, not all N² of them.
  absl::btree_set<size_t> busy_;
};

}  // namespace troupe::testing
