// SPDX-License-Identifier: Apache-2.0
#include "node/node.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

#include "actors/log.h"
#include "node/config.h"

namespace troupe::node {
namespace {

// Sums what the node's pools have handled and still have ready.
struct Activity {
  uint64_t handled = 0;
  int64_t ready = 0;
};

Activity ActivityOf(const ActorSystem& system) {
  Activity activity;
  for (const PoolCounters& pool : system.Counters().pools) {
    activity.handled += pool.events;
    activity.ready += pool.queue_length;
  }
  return activity;
}

// Waits until no pool has a ready mailbox and nothing was handled for a few milliseconds, or
// until `deadline`: the actors have handled what the drain reported to them (Undelivered), and
// whatever that made them send.
void WaitUntilQuiet(const ActorSystem& system, absl::Time deadline) {
  constexpr absl::Duration kQuiet = absl::Milliseconds(5);
  Activity last = ActivityOf(system);
  absl::Time quiet_since = absl::Now();
  for (absl::Time now = quiet_since; now < deadline; now = absl::Now()) {
    absl::SleepFor(std::min(absl::Milliseconds(1), deadline - now));
    const Activity activity = ActivityOf(system);
    if (activity.ready != 0 || activity.handled != last.handled) {
      quiet_since = absl::Now();
    } else if (absl::Now() - quiet_since >= kQuiet) {
      return;
    }
    last = activity;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> Node::Start(const proto::ActorSystemConfig& config,
                                                  NodeOptions options) {
  // Every section is checked first, so a bad field is named before anything is asked of etcd
  // or started.
  if (absl::Status valid = ValidateConfig(config); !valid.ok()) {
    return valid;
  }
  std::shared_ptr<EtcdNameservice> membership;
  proto::ActorSystemConfig joined;
  const bool etcd = config.interconnect().has_etcd() && options.interconnect.nameservice == nullptr;
  if (etcd) {
    // The id comes from etcd before the system exists.
    absl::StatusOr<std::shared_ptr<EtcdNameservice>> connected =
        EtcdNameservice::Connect(EtcdNameservice::OptionsFromConfig(config.interconnect()));
    if (!connected.ok()) {
      return connected.status();
    }
    membership = std::move(*connected);
    absl::StatusOr<NodeId> id = membership->Join(config.has_node_id() ? config.node_id() : 0);
    if (!id.ok()) {
      return id.status();
    }
    joined = config;
    joined.set_node_id(*id);
    options.interconnect.nameservice = membership;
  }
  absl::StatusOr<std::unique_ptr<ActorSystem>> system =
      ActorSystem::Create(WithDefaults(etcd ? joined : config));
  if (!system.ok()) {
    return system.status();
  }
  // What the node logs while it starts says which node it is.
  const LogBinding binding(&(*system)->log_context());
  auto node = std::unique_ptr<Node>(new Node());
  node->id_ = (*system)->node_id();
  node->membership_ = std::move(membership);
  node->system_ = std::move(*system);
  if (options.on_system_start) {
    if (absl::Status status = options.on_system_start(*node->system_); !status.ok()) {
      return status;  // ~Node stops the system
    }
  }
  // The monitoring server starts first, so that the membership can publish its port; it reads the
  // interconnect only once the node serves (serving_), and stops before the interconnect goes.
  const proto::MonitoringConfig& monitoring = node->system_->config().monitoring();
  if (monitoring.has_port()) {
    Node* raw = node.get();
    MonitoringOptions monitoring_options{
        .readiness = [raw] { return raw->Readiness(); },
        .members =
            [raw] {
              return raw->serving_.load(std::memory_order_acquire) && raw->interconnect_ != nullptr
                         ? raw->interconnect_->nameservice()->Members()
                         : std::vector<interconnect::NodeEndpoint>();
            },
        .sessions =
            [raw] {
              return raw->serving_.load(std::memory_order_acquire) && raw->interconnect_ != nullptr
                         ? raw->interconnect_->Counters()
                         : std::vector<interconnect::SessionCounters>();
            }};
    absl::StatusOr<std::unique_ptr<MonitoringServer>> server =
        MonitoringServer::Start(node->system_.get(), monitoring, std::move(monitoring_options));
    if (!server.ok()) {
      return server.status();  // ~Node stops the system
    }
    node->monitoring_ = std::move(*server);
    if (node->membership_ != nullptr) {
      node->membership_->SetMonitoringPort(node->monitoring_->port());
    }
  }
  const proto::InterconnectConfig& ic = node->system_->config().interconnect();
  if (ic.nodes_size() > 0 || options.interconnect.nameservice != nullptr) {
    absl::StatusOr<std::unique_ptr<interconnect::Interconnect>> started =
        interconnect::Interconnect::Start(node->system_.get(), std::move(options.interconnect));
    if (!started.ok()) {
      return started.status();  // ~Node stops the monitoring server and the system
    }
    node->interconnect_ = std::move(*started);
  }
  node->serving_.store(true, std::memory_order_release);
  return node;
}

absl::Status Node::Readiness() const {
  if (leaving_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(
        absl::StrCat("node ", id_, " is leaving: it answers what it accepted, then stops"));
  }
  if (!serving_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(absl::StrCat("node ", id_, " is starting"));
  }
  if (interconnect_ == nullptr) {
    return absl::OkStatus();
  }
  const std::vector<interconnect::NodeEndpoint> members = interconnect_->nameservice()->Members();
  const std::vector<interconnect::SessionCounters> sessions = interconnect_->Counters();
  bool listed = false;
  std::vector<NodeId> missing;
  for (const interconnect::NodeEndpoint& member : members) {
    if (member.node == id_) {
      listed = true;
      continue;
    }
    if (member.client) {
      continue;  // it dials this node; nothing waits for it
    }
    const bool up = std::any_of(sessions.begin(), sessions.end(), [&](const auto& session) {
      return session.peer == member.node && session.up;
    });
    if (!up) {
      missing.push_back(member.node);
    }
  }
  if (membership_ != nullptr && !listed) {
    return absl::UnavailableError(absl::StrCat("node ", id_, " is not in the etcd membership"));
  }
  if (!missing.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "no session with node", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", ")));
  }
  return absl::OkStatus();
}

Node::~Node() { (void)Shutdown(absl::ZeroDuration()); }

absl::Status Node::WaitForPeer(NodeId peer, absl::Duration timeout) {
  if (stopped_ || interconnect_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", id_, " cannot wait for node ", peer, ": ",
                     stopped_ ? "it is shutting down" : "it has no interconnect (no node table)"));
  }
  return interconnect_->WaitForPeer(peer, timeout);
}

absl::Status Node::WaitForPeers(absl::Duration timeout) {
  if (stopped_) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", id_, " cannot wait for peers: it is shutting down"));
  }
  return interconnect_ == nullptr ? absl::OkStatus() : interconnect_->WaitForPeers(timeout);
}

Node::ShutdownReport Node::Shutdown(absl::Duration timeout) {
  if (stopped_) {
    return {};
  }
  stopped_ = true;
  leaving_.store(true, std::memory_order_release);
  const LogBinding binding(&system_->log_context());
  ShutdownReport report;
  if (interconnect_ != nullptr) {
    // The monitoring server answers through the drain (/readyz: leaving; /metrics: the drain's
    // counters), and stops before the interconnect it reads goes.
    const interconnect::Interconnect::DrainReport drained = interconnect_->Drain(timeout);
    report.flushed = drained.flushed;
    report.quiet = drained.quiet;
    report.reported = drained.reported;
    monitoring_.reset();
    interconnect_.reset();
    if (membership_ != nullptr) {
      membership_->Leave();
    }
    if (drained.reported > 0) {
      WaitUntilQuiet(*system_, absl::Now() + timeout);
    }
  }
  monitoring_.reset();
  system_->Stop();
  TROUPE_LOG(kInfo, kActors) << "node " << id_ << " stopped"
                             << (report.reported > 0
                                     ? absl::StrCat(" (", report.reported,
                                                    " remote events reported undelivered)")
                                     : std::string());
  return report;
}

}  // namespace troupe::node
