// SPDX-License-Identifier: Apache-2.0
//
// Nameservice: where the nodes of a cluster listen (node id → endpoint), and news when that
// changes. The interconnect asks it whom to dial (at every dial, so a node that moved is found at
// its new address) and whether a node that dials in is a member; it opens a proxy for a node
// that joins the table while the interconnect runs.
//
// StaticNameservice is the embedded default: the config's `interconnect.nodes` table, which the
// program may change at run time with Set and Remove (a node added to a running cluster is dialled
// by the nodes that learn of it). troupe::node::EtcdNameservice (node/etcd_nameservice.h) keeps the
// table in etcd. Other implementations plug in through InterconnectOptions::nameservice.
//
// A node that leaves the table is gone: its session ends at once (tracked events get
// Undelivered{kDisconnected}, session subscribers EvNodeDisconnected, watchers of its actors
// EvTerminated{kNodeLost}), new connections from it are refused and events for it get
// Undelivered{kNoRoute}. If it joins again, it is dialled (or awaited) again.
//
// A client node (NodeEndpoint::client) never listens: it dials every member that listens, and
// they reach it over those connections. Two clients have no session with each other.
//
// Thread-safety: implementations are thread-safe. Watchers are called on the thread that changed
// the table, one at a time; they may call Resolve and Members, must not block, and must not start
// or cancel a watch.
//
// Example:
//
//   std::shared_ptr<troupe::interconnect::StaticNameservice> names =
//       troupe::interconnect::StaticNameservice::FromConfig(config.interconnect());
//   auto ic = troupe::interconnect::Interconnect::Start(system, {.nameservice = names});
//   names->Set({.node = 4, .host = "10.0.0.4", .port = 19001});  // node 4 joins
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "actors/sync.h"
#include "proto/config.pb.h"

namespace troupe::interconnect {

struct NodeEndpoint {
  NodeId node = 0;
  std::string host;
  uint16_t port = 0;
  // Dials, never listens: host and port are unused.
  bool client = false;
  // The port of its monitoring server on `host` (node/monitoring.h), 0 when not known: status
  // pages link to the member's own page with it.
  uint16_t monitoring_port = 0;
  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

// Keeps a Watch alive; the watcher is not called after the subscription is destroyed (or, when
// a call is in progress, once it returns). Movable.
class NameserviceWatch {
 public:
  NameserviceWatch() = default;
  explicit NameserviceWatch(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  ~NameserviceWatch() { Cancel(); }
  NameserviceWatch(NameserviceWatch&& other) noexcept : cancel_(std::exchange(other.cancel_, {})) {}
  NameserviceWatch& operator=(NameserviceWatch&& other) noexcept {
    if (this != &other) {
      Cancel();
      cancel_ = std::exchange(other.cancel_, {});
    }
    return *this;
  }
  NameserviceWatch(const NameserviceWatch&) = delete;
  NameserviceWatch& operator=(const NameserviceWatch&) = delete;

  // Stops the watch now. Idempotent.
  void Cancel() {
    if (cancel_) {
      std::exchange(cancel_, {})();
    }
  }

 private:
  std::function<void()> cancel_;
};

class Nameservice {
 public:
  Nameservice() = default;
  virtual ~Nameservice() = default;
  Nameservice(const Nameservice&) = delete;
  Nameservice& operator=(const Nameservice&) = delete;
  Nameservice(Nameservice&&) = delete;
  Nameservice& operator=(Nameservice&&) = delete;

  // Returns where `node` listens, or nullopt when it is not a member.
  virtual std::optional<NodeEndpoint> Resolve(NodeId node) const = 0;
  // Returns every member, in node-id order.
  virtual std::vector<NodeEndpoint> Members() const = 0;
  // Calls `on_change` after every change of the table, until the returned watch goes.
  [[nodiscard]] virtual NameserviceWatch Watch(std::function<void()> on_change) = 0;

  // Where node `self` is to listen (port 0: any free port), or that it is a client; nullopt when
  // this nameservice has no place for it. The default: its entry in the table.
  virtual std::optional<NodeEndpoint> Local(NodeId self) const { return Resolve(self); }
  // Called by the interconnect once node `self.node` listens at `self` (the port bound), or at
  // start for a client: a membership service publishes the node here, so the others find it.
  // An error fails Interconnect::Start. The default does nothing (the table lists the node).
  virtual absl::Status Announce(const NodeEndpoint& self) {
    (void)self;
    return absl::OkStatus();
  }
};

// A table kept in memory: the config's node table, changed by the program.
class StaticNameservice final : public Nameservice {
 public:
  // Reads `config.nodes()` (checked by ValidateConfig, config.h: ids unique, hosts and ports set)
  // and, without config.etcd, `config.listen()`: its host and port, when set, are where this node
  // binds instead of its entry's (Local), while the others dial the entry.
  static std::shared_ptr<StaticNameservice> FromConfig(const proto::InterconnectConfig& config);
  explicit StaticNameservice(const std::vector<NodeEndpoint>& members = {});

  std::optional<NodeEndpoint> Resolve(NodeId node) const override;
  std::vector<NodeEndpoint> Members() const override;
  NameserviceWatch Watch(std::function<void()> on_change) override;
  // The entry of `self`, with the listen host and port of FromConfig put in (a client's entry
  // as it is).
  std::optional<NodeEndpoint> Local(NodeId self) const override;

  // Adds `endpoint`, or moves its node there; then tells the watchers.
  void Set(const NodeEndpoint& endpoint);
  // Removes `node` (nothing when it is not a member); then tells the watchers.
  void Remove(NodeId node);

 private:
  void Notify();

  // Where this node binds, when not at its entry (set by FromConfig only, before it is shared).
  std::string listen_host_;
  std::optional<uint16_t> listen_port_;
  mutable troupe::Mutex mu_;
  std::map<NodeId, NodeEndpoint> members_ ABSL_GUARDED_BY(mu_);
  // Watchers by id; `notify_mu_` is held while they run, so a cancelled watch returns only when no
  // call to it is in progress.
  troupe::Mutex notify_mu_;
  uint64_t next_watch_ ABSL_GUARDED_BY(notify_mu_) = 1;
  std::map<uint64_t, std::function<void()>> watchers_ ABSL_GUARDED_BY(notify_mu_);
};

}  // namespace troupe::interconnect
