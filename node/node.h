// SPDX-License-Identifier: Apache-2.0
//
// Node: one process's whole Troupe node — its ActorSystem, its Interconnect when the config has a
// node table, and its MonitoringServer when the config has a monitoring port — started from one
// config and stopped in the right order. A service keeps one Node and nothing else; the runtime,
// interconnect and monitoring server it exposes are the usual ones.
//
// Lifecycle:
//   | call                  | does                                                               |
//   |-----------------------|--------------------------------------------------------------------|
//   | Start(config)         | validates every section (ValidateConfig, config.h); with           |
//   |                       | interconnect.etcd, joins the membership in etcd (an id from etcd   |
//   |                       | when the config sets no node_id; see etcd_nameservice.h); creates  |
//   |                       | the ActorSystem with every default filled in (WithDefaults), runs  |
//   |                       | on_system_start (register services there), starts the monitoring  |
//   |                       | server when config.monitoring() has a port (monitoring.h: the      |
//   |                       | status page, /status.json, /metrics, /healthz, /readyz as          |
//   |                       | Readiness says; its port goes into the etcd record), then the      |
//   |                       | interconnect when config.interconnect() lists nodes or has etcd    |
//   |                       | (the node is then listening, published, and dialling every member);|
//   |                       | on failure nothing is left running                                 |
//   |                       | and the status names the field or the cause                        |
//   | WaitForPeer(s)        | blocks until sessions are up, with a timeout                       |
//   | Shutdown(timeout)     | leaves through the interconnect (Interconnect::Drain: peers stop   |
//   |                       | sending and hear goodbye, what arrived is answered, events held    |
//   |                       | for peers are acknowledged or reported Undelivered{kShutdown})     |
//   |                       | while /readyz answers 503 "leaving", stops the monitoring server,  |
//   |                       | destroys the interconnect, leaves the etcd                         |
//   |                       | membership (the others see the node leave at once), lets the       |
//   |                       | actors handle those reports, then stops                            |
//   |                       | the ActorSystem (actors are destroyed, their destructors run);     |
//   |                       | idempotent                                                         |
//   | ~Node                 | Shutdown(absl::ZeroDuration()) unless it ran                       |
// The MonitoringServer and the Interconnect are destroyed before the ActorSystem by construction;
// destroying an ActorSystem while either still uses it aborts with a message
// (actors/node_hooks.h). A monitoring port in use fails Start with kUnavailable naming the address.
//
// Thread-safety: thread-safe until Shutdown begins; Shutdown and the destructor must be called
// from a plain thread (not a handler of this node), once the node's other users are done.
//
// Example (a client that waits for its server, sends, and leaves nothing behind):
//
//   absl::StatusOr<std::unique_ptr<troupe::node::Node>> node = troupe::node::Node::Start(config);
//   if (!node.ok()) { std::cerr << node.status() << "\n"; return 2; }
//   if (absl::Status up = (*node)->WaitForPeer(1, absl::Seconds(10)); !up.ok()) {
//     std::cerr << up << "\n";   // kDeadlineExceeded says why: unreachable, refused, no route
//     return 1;
//   }
//   (*node)->system().Send(troupe::ServiceId("echo", 1), std::make_unique<EvPing>());
//   troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(5));
//   return report.flushed ? 0 : 1;
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "interconnect/interconnect.h"
#include "node/etcd_nameservice.h"
#include "node/monitoring.h"
#include "proto/config.pb.h"

namespace troupe::node {

struct NodeOptions {
  // Runs once the ActorSystem is up and before the interconnect starts, so that what it
  // registers (services, their actors) is there before any peer can send to this node. A failure
  // fails Start with its status.
  std::function<absl::Status(ActorSystem& system)> on_system_start = nullptr;
  // How the interconnect starts (transport, nameservice, incarnation, pool); unused without a
  // node table in the config.
  interconnect::InterconnectOptions interconnect = {};
};

class Node {
 public:
  // What Shutdown did.
  struct ShutdownReport {
    // Every event held for a peer was acknowledged by its node before the timeout (true for a
    // node without an interconnect).
    bool flushed = true;
    // The node left quietly before the timeout: every peer was done sending, every event was
    // acknowledged, and the actors had answered what arrived (Interconnect::DrainReport::quiet;
    // true for a node without an interconnect).
    bool quiet = true;
    // Events reported Undelivered{kShutdown} because the timeout passed.
    uint64_t reported = 0;
  };

  // Starts a node from `config` (see the file comment). kInvalidArgument names the config field
  // at fault (ValidateConfig, config.h); the interconnect's errors are those of
  // Interconnect::Start, the monitoring server's those of MonitoringServer::Start (kUnavailable:
  // its address cannot be bound).
  static absl::StatusOr<std::unique_ptr<Node>> Start(const proto::ActorSystemConfig& config,
                                                     NodeOptions options = {});
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  Node(Node&&) = delete;
  Node& operator=(Node&&) = delete;

  // -- the parts ----------------------------------------------------------------------------------

  NodeId id() const { return id_; }
  // Returns the node's runtime. Valid until Shutdown.
  ActorSystem& system() const { return *system_; }
  // Returns the node's interconnect, or null when the config has no node table. Valid until
  // Shutdown.
  interconnect::Interconnect* interconnect() const { return interconnect_.get(); }
  // Returns the node's monitoring server (its port(), url()), or null when the config has no
  // monitoring port. Valid until Shutdown.
  MonitoringServer* monitoring() const { return monitoring_.get(); }

  // -- peers ------------------------------------------------------------------------------------

  // Blocks until the session with node `peer` is up or `timeout` passes
  // (Interconnect::WaitForPeer: OK for this node, kNotFound for a node not in the table,
  // kDeadlineExceeded saying why). kFailedPrecondition for a node without an interconnect, or
  // after Shutdown began.
  absl::Status WaitForPeer(NodeId peer, absl::Duration timeout);
  // Blocks until sessions with every other member are up, one `timeout` for all
  // (Interconnect::WaitForPeers). OK at once for a node without an interconnect.
  absl::Status WaitForPeers(absl::Duration timeout);

  // What the monitoring server's /readyz answers: OK when Start has returned, the node is not
  // shutting down (kUnavailable "node N is leaving ..." from the start of Shutdown) and, with an
  // interconnect, a session is up with every member it must reach (every listening member but
  // itself: a client is reached by the members it dials, never needed) and, with etcd membership,
  // the node is in it. Otherwise kUnavailable saying which (e.g. "no session with node 3"). A
  // cluster with a member down is not ready on any node: a rolling restart that waits on /readyz
  // waits for the cluster to be whole again.
  absl::Status Readiness() const;

  // -- stopping -----------------------------------------------------------------------------------

  // Stops the node (see the file comment): `timeout` bounds the drain of remote events; the
  // actors then get a moment to handle the Undelivered reports (at most `timeout` more, and only
  // while events are still being handled) before the system stops. A second call returns
  // {flushed = true, quiet = true, reported = 0}.
  ShutdownReport Shutdown(absl::Duration timeout);

 private:
  Node() = default;

  NodeId id_ = 0;
  // With interconnect.etcd: the membership, left at Shutdown after the drain.
  std::shared_ptr<EtcdNameservice> membership_;
  std::unique_ptr<ActorSystem> system_;
  // Declared after the system, so that they are destroyed first even if Shutdown never ran.
  std::unique_ptr<interconnect::Interconnect> interconnect_;
  std::unique_ptr<MonitoringServer> monitoring_;
  bool stopped_ = false;
  // Start has returned; Shutdown has begun (read by the monitoring server's thread).
  std::atomic<bool> serving_{false};
  std::atomic<bool> leaving_{false};
};

}  // namespace troupe::node
