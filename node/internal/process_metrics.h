// SPDX-License-Identifier: Apache-2.0
//
// The process's own metrics, by the names every Prometheus client library exports, so dashboards
// and alerts written for any exporter work unchanged; and the build's identity. Read from /proc
// and getrlimit at each scrape (a few system calls per scrape, nothing per event):
//
//   | metric                             | type    | value                                      |
//   |------------------------------------|---------|--------------------------------------------|
//   | process_cpu_seconds_total          | counter | user and system CPU time of every thread   |
//   | process_resident_memory_bytes      | gauge   | resident set size                          |
//   | process_virtual_memory_bytes       | gauge   | virtual memory size                        |
//   | process_virtual_memory_max_bytes   | gauge   | RLIMIT_AS (-1: unlimited)                  |
//   | process_start_time_seconds         | gauge   | start time, seconds since the Unix epoch   |
//   | process_open_fds                   | gauge   | open file descriptors                      |
//   | process_max_fds                    | gauge   | RLIMIT_NOFILE (soft)                       |
//   | troupe_build_info{version, commit} | gauge   | 1; the labels say what runs (version.h)    |
//
// A value that cannot be read (no /proc) reads 0. Every series carries the registry's node label,
// so several nodes in one process each report the same process figures.
//
// Thread-safety: thread-safe (readers only read the process's state).
#pragma once

#include <vector>

#include "actors/metrics.h"

namespace troupe::node::internal {

// Registers the metrics above in `registry`; they exist while the returned registrations do.
std::vector<MetricsRegistry::Registration> PublishProcessMetrics(MetricsRegistry& registry);

}  // namespace troupe::node::internal
