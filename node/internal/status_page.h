// SPDX-License-Identifier: Apache-2.0
//
// The status page a node's MonitoringServer serves at `/` (monitoring.h): one self-refreshing
// HTML page a person reads, drawn from the node's NodeStatus (node_status.h), the same content
// /status.json gives scripts:
//
//   | section          | shows                                                               |
//   |------------------|---------------------------------------------------------------------|
//   | header           | node, version and commit, uptime, listen address, links to          |
//   |                  | /status.json and /metrics                                           |
//   | members          | the cluster's members with their addresses and a link to each one's |
//   |                  | page when known, and this node's session with each                  |
//   | node             | live mailboxes, pending timers, dropped events, failed actors,      |
//   |                  | events and events per second                                        |
//   | pools            | per pool: threads, range and moves, events and events per second,   |
//   |                  | busy threads now, ready queue, activations, steals, preemptions,    |
//   |                  | stuck-handler reports                                               |
//   | busiest classes  | the ten actor classes with the most sampled handler time            |
//   | peers            | per session: state (up, up and reconnecting, down; highlighted when |
//   |                  | not up) since when and for how long, the last failure, protocol,    |
//   |                  | round trip, events and MB per second each way, and the totals       |
//   | recent warnings  | the process's last warn and error log lines, newest first           |
// Every text taken from a metric or a log line is HTML-escaped.
//
// Thread-safety: thread-safe (a pure function).
#pragma once

#include <string>

#include "proto/status.pb.h"

namespace troupe::node::internal {

// Returns the page for `status`; it reloads itself every `refresh_seconds`.
std::string StatusPage(const proto::NodeStatus& status, int refresh_seconds = 2);

}  // namespace troupe::node::internal
