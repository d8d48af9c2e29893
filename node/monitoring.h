// SPDX-License-Identifier: Apache-2.0
//
// MonitoringServer: a node's HTTP endpoint for its operator, served by cpp-httplib on its own
// threads (one accepting, one answering), never on the actor pools, so a node whose pools are
// stuck still answers.
//
//   | request       | answer                                                                 |
//   |---------------|------------------------------------------------------------------------|
//   | GET /         | 200, the status page (HTML for people, reloading itself every 2 s):    |
//   |               | the node, the cluster's members with links to their pages, the pools,  |
//   |               | each session's state since when and its last failure, rates over the   |
//   |               | last 10 s, the process's recent warnings (internal/status_page.h)       |
//   | GET           | 200, the same as JSON for scripts (proto/status.proto NodeStatus in     |
//   | /status.json  | protobuf's JSON mapping: field names as in the proto, 64-bit integers  |
//   |               | as strings)                                                            |
//   | GET /metrics  | 200, every metric of the node's registry (ActorSystem::metrics()) in   |
//   |               | the Prometheus text format 0.0.4 (PrometheusText, actors/metrics.h):   |
//   |               | pools, mailboxes, timers, dropped events and every session by peer,    |
//   |               | each labelled node="<id>"                                              |
//   | GET /healthz  | 200 "ok": the process serves (a liveness probe)                        |
//   | GET /readyz   | 200 "ready" when MonitoringOptions::readiness says OK (always, without |
//   |               | one); else 503 and the reason, one line (a readiness probe). Node's    |
//   |               | meaning is in node.h                                                   |
//   | GET /loglevels| 200, the node's log levels as JSON; POST /loglevels?component=C&level=L|
//   | POST          | changes them (400 naming the parameter when bad; internal/             |
//   |  /loglevels   | log_levels_http.h)                                                     |
//   | anything else | 404                                                                    |
// troupe::node::Node starts one when the config has `monitoring { port: N }` (proto/config.proto;
// port 0 takes a free one) and stops it first on Shutdown. A scrape reads each metric's current
// value without stopping anything (metrics.h); it costs the node's actors nothing.
//
// Security: there is no authentication. Whoever reaches the port reads the node's state, and with
// POST /loglevels changes its log levels (trace makes it write far more): with the default host,
// 127.0.0.1, that is every process of the machine, of every user. Keep the port on loopback or
// behind a firewall.
//
// Thread-safety: Start and the destructor from one thread; port() and url() are thread-safe.
// Destroy the server before its ActorSystem (Node does); the other order aborts with a message
// (actors/node_hooks.h).
//
// Example:
//
//   proto::MonitoringConfig config;
//   config.set_port(9464);
//   absl::StatusOr<std::unique_ptr<MonitoringServer>> server =
//       MonitoringServer::Start(system.get(), config);
//   // curl http://127.0.0.1:9464/metrics
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor_system.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "proto/config.pb.h"

namespace troupe::node {

struct MonitoringOptions {
  // Answers /readyz: OK when the node is ready, else why not (the message is the answer's body).
  // Called on the server's thread for each request; null means always ready.
  std::function<absl::Status()> readiness = nullptr;
  // The cluster's members, this node included, for the status page and /status.json; null:
  // none (a node without interconnect). Called on the server's threads.
  std::function<std::vector<interconnect::NodeEndpoint>()> members = nullptr;
  // The sessions with their last failures (Interconnect::Counters()); null: read from the
  // metrics registry, without the failures. Called on the server's threads.
  std::function<std::vector<interconnect::SessionCounters>()> sessions = nullptr;
};

class MonitoringServer {
 public:
  // Listens on config.host (default 127.0.0.1) and config.port, and starts answering.
  // kUnavailable names the address when it cannot be bound (in use, no such address).
  static absl::StatusOr<std::unique_ptr<MonitoringServer>> Start(
      ActorSystem* system, const proto::MonitoringConfig& config, MonitoringOptions options = {});
  // Stops listening; an answer in progress finishes first.
  ~MonitoringServer();
  MonitoringServer(const MonitoringServer&) = delete;
  MonitoringServer& operator=(const MonitoringServer&) = delete;
  MonitoringServer(MonitoringServer&&) = delete;
  MonitoringServer& operator=(MonitoringServer&&) = delete;

  // The port it listens on (the one chosen when the config said 0).
  uint16_t port() const;
  // "http://host:port", e.g. "http://127.0.0.1:9464" (IPv6 hosts in brackets).
  std::string url() const;

 private:
  struct Impl;
  explicit MonitoringServer(std::unique_ptr<Impl> impl);
  static std::string Url(const std::string& host, uint16_t port);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::node
