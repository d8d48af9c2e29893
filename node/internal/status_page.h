// SPDX-License-Identifier: Apache-2.0
//
// The status page a node's MonitoringServer serves at `/` (monitoring.h): one self-refreshing
// HTML page a person reads, built from the node's metrics registry at each request.
//
//   | section          | from                                                             |
//   |------------------|------------------------------------------------------------------|
//   | node             | live mailboxes, pending timers, dropped events, failed actors    |
//   | pools            | per pool, summed over its workers: threads, events, activations, |
//   |                  | busy share (busy / (busy + parked) since start), ready queue,    |
//   |                  | steals, budget preemptions, stuck-handler reports                |
//   | peers            | per session: state (up, up and reconnecting, down), sessions,    |
//   |                  | events and bytes each way, queued events, unacknowledged and     |
//   |                  | held bytes, frames resent, refusals, protocol errors, overloads  |
//   | recent warnings  | the process's last warn and error log lines (RecentWarnings,     |
//   |                  | actors/log.h), newest first                                      |
// Every text taken from a metric or a log line is HTML-escaped.
//
// Thread-safety: thread-safe (reads the registry as any scrape does).
#pragma once

#include <string>

#include "actors/actor_system.h"

namespace troupe::node::internal {

// Returns the page for `system`; it reloads itself every `refresh_seconds`.
std::string StatusPage(ActorSystem& system, int refresh_seconds = 2);

}  // namespace troupe::node::internal
