// SPDX-License-Identifier: Apache-2.0
//
// PipeNetwork: an in-memory network of byte-stream transports with fault injection, so the real
// interconnect (proxies, handshakes, resends) runs under the deterministic test runtime with
// simulated time. The twin of actors/testing/ for the interconnect: target
// troupe::interconnect_testing.
//
// PipeNetwork joins the PipeTransports of several nodes (one per ActorSystem) by "host:port"
// addresses. Bytes travel after `latency` of the node's clock (simulated under TestRuntime) and
// keep their order. Faults: Cut (both ends get EvConnectionDown), Stall/Resume (bytes wait),
// Blackhole (bytes vanish, the connection stays up), CorruptNextWrite (one bit flipped),
// Partition/Heal between two nodes (bytes wait, no new connection forms).
//
// Thread-safety: thread-safe (the transports it hands out too).
//
// Example:
//
//   // config.interconnect() lists nodes 1 and 2. The network outlives the nodes that use it.
//   troupe::interconnect::PipeNetwork network(absl::Milliseconds(1));  // of simulated time
//   troupe::testing::TestRuntime runtime(
//       {.nodes = 2, .config = config, .simulated_interconnect = false});
//   std::vector<std::unique_ptr<troupe::interconnect::Interconnect>> ics;  // before the runtime
//   for (troupe::NodeId node : {1u, 2u}) {
//     troupe::ActorSystem* system = &runtime.node(node);
//     ics.push_back(*troupe::interconnect::Interconnect::Start(
//         system, {.transport = network.TransportFor(system), .incarnation = node}));
//   }
//   runtime.DispatchUntil([&] { return !network.ConnectionIds().empty(); });
//   network.Cut(network.ConnectionIds().front());  // both ends see EvConnectionDown
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "actors/timer.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

class PipeTransport;

// The in-memory network joining PipeTransports.
class PipeNetwork {
 public:
  // Bytes arrive `latency` after they were written (by the writing node's clock).
  explicit PipeNetwork(absl::Duration latency = absl::ZeroDuration()) : latency_(latency) {}

  // Returns the transport of `system`'s node. The system must outlive every connection of it
  // (under TestRuntime: do not kill a node whose transport has connections), and the network
  // must outlive the transport: declare it before the systems or the TestRuntime, whose proxies
  // close their connections when the systems stop.
  std::unique_ptr<Transport> TransportFor(ActorSystem* system);

  // Makes the network authenticate like TLS: every connection's Peer() names, as certified_node,
  // the node of the certificate given here for the system at the other end (a system without one
  // has its connections refused with kUnauthenticated, as a TLS transport would). Call before the
  // connections are made.
  void SetCertificate(ActorSystem* system, NodeId node);

  // -- faults (by the id either end knows the connection by) ----------------------------------

  // Breaks the connection: both owners get EvConnectionDown; bytes in flight are lost.
  void Cut(ConnectionId connection);
  // Holds the bytes of both directions until Resume (a stalled peer, a full socket buffer).
  void Stall(ConnectionId connection);
  void Resume(ConnectionId connection);
  // Drops every byte from now on, both directions, while the connection seems up.
  void Blackhole(ConnectionId connection);
  // Flips one bit in the middle of the next write on this end.
  // With `skip`, the write after the next `skip` ones instead (past a handshake, say).
  void CorruptNextWrite(ConnectionId connection, uint32_t skip = 0);
  // Partitions nodes `a` and `b` (by the node ids of their systems), as a pulled cable would:
  // the bytes of their connections wait, both directions, and a dial between them is refused
  // (EvConnectionDown) until Heal. Connections stay up; what waited arrives on Heal, unless the
  // connection was closed meanwhile.
  void Partition(NodeId a, NodeId b);
  void Heal(NodeId a, NodeId b);
  void HealAll();
  bool IsPartitioned(NodeId a, NodeId b) const;
  // Returns the number of connections up.
  size_t Connections() const;
  // Returns the ids of every connection end that is up, in increasing order.
  std::vector<ConnectionId> ConnectionIds() const;

 private:
  friend class PipeTransport;

  struct End {
    ActorSystem* system = nullptr;
    ActorId owner;
    ConnectionId peer = 0;
    // What Peer() reports: the address dialled, or "pipe-from-node<N>:<id>" for an accepted end.
    std::string remote;
    bool up = true;
    bool stalled = false;
    bool blackholed = false;
    bool corrupt_next = false;
    uint32_t corrupt_skip = 0;
    // Bytes written while stalled, delivered on Resume.
    std::string held;
    // Deliveries to this end still waiting out the latency; cancelled when it goes down, so
    // nothing arrives after EvConnectionDown, and re-addressed by SetOwner, so bytes reach the
    // owner of the moment they arrive (as with TCP).
    struct InFlight {
      TimerCookie cookie;
      std::string bytes;
      absl::Time due;
    };
    std::deque<InFlight> in_flight;
  };

  // Delivers `bytes` to the end `to` (after the latency).
  void Transmit(ConnectionId to, std::string bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the end `id` down: cancels what is still on its way to it and tells its owner.
  void Down(ConnectionId id, const absl::Status& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the nodes of the two ends' systems are partitioned.
  bool Partitioned(const ActorSystem* a, const ActorSystem* b) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends what ends waiting only for a healed partition hold.
  void ReleaseHeld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `apply` on the end `connection` and then on its peer (those that exist).
  void ForBothEnds(ConnectionId connection, const std::function<void(End&)>& apply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration latency_;
  mutable troupe::Mutex mu_;
  ConnectionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint16_t next_port_ ABSL_GUARDED_BY(mu_) = 40000;
  // "host:port" → (node's system, acceptor).
  absl::flat_hash_map<std::string, std::pair<ActorSystem*, ActorId>> listeners_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ConnectionId, End> ends_ ABSL_GUARDED_BY(mu_);
  // SetCertificate: the node each system's certificate names; empty when not authenticating.
  absl::flat_hash_map<ActorSystem*, NodeId> certificates_ ABSL_GUARDED_BY(mu_);
  // Partitioned pairs of node ids, the smaller first.
  std::vector<std::pair<NodeId, NodeId>> partitions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::interconnect
