// SPDX-License-Identifier: Apache-2.0
//
// The node-wide troupe_* counters and gauges of one ActorSystem, one row each
// (actors/metric_table.h): the node's own (failed actors, live mailboxes, pending timers);
// labelled {"reason", name} for each UndeliveredReason, the events dropped and the events reported
// undelivered; and labelled {"class", name}, each actor class's figures (class_stats.h).
// Runtime::PublishNodeMetrics and ClassTable register them; ActorSystem::Counters() reads them back
// into ActorSystemCounters, summing the reasons' series and keeping one entry per class.
//
// Thread-safety: constant tables; their readers only load.
#pragma once

#include <array>
#include <cstdint>

#include "actors/actor_system.h"
#include "actors/internal/class_stats.h"
#include "actors/internal/runtime.h"
#include "actors/metric_table.h"
#include "actors/metrics.h"

namespace troupe::internal {

using NodeMetric = MetricRow<Runtime, ActorSystemCounters>;
using ReasonMetric = MetricRow<ReasonCounts, ActorSystemCounters>;

inline constexpr auto kNodeMetrics = std::to_array<NodeMetric>({
    {"troupe_failed_actors_total", MetricType::kCounter,
     "Exceptions that escaped a handler (each ended its actor or went to its parent).",
     [](const Runtime& runtime) { return static_cast<int64_t>(runtime.failed_actors()); },
     SetField<&ActorSystemCounters::failed_actors>},
    {"troupe_live_mailboxes", MetricType::kGauge, "Mailboxes with at least one actor.",
     [](const Runtime& runtime) { return static_cast<int64_t>(runtime.LiveMailboxes()); },
     SetField<&ActorSystemCounters::live_mailboxes>},
    {"troupe_pending_timers", MetricType::kGauge,
     "Delayed events not fired yet (cancelled ones included until due).",
     [](const Runtime& runtime) { return static_cast<int64_t>(runtime.PendingTimers()); },
     SetField<&ActorSystemCounters::pending_timers>},
});

inline constexpr auto kReasonMetrics = std::to_array<ReasonMetric>({
    {"troupe_dropped_events_total", MetricType::kCounter,
     "Events that could not be delivered and were dropped (no tracking, no forward target): the "
     "dead letters, by reason.",
     LoadRelaxed<&ReasonCounts::dropped>, AddToField<&ActorSystemCounters::dropped_events>},
    {"troupe_undelivered_events_total", MetricType::kCounter,
     "Events that could not be delivered and were reported to their sender (EvUndelivered), by "
     "reason.",
     LoadRelaxed<&ReasonCounts::undelivered>, AddToField<&ActorSystemCounters::undelivered_events>},
});

using ClassMetric = MetricRow<ClassStats, ActorClassCounters>;

inline constexpr auto kClassMetrics = std::to_array<ClassMetric>({
    {"troupe_actor_class_live", MetricType::kGauge, "Actors of the class alive.",
     [](const ClassStats& stats) { return stats.Live(); }, SetField<&ActorClassCounters::live>},
    {"troupe_actor_class_sampled_events_total", MetricType::kCounter,
     "Events handled by actors of the class, counting one in 64 (times 64: an estimate).",
     LoadRelaxed<&ClassStats::sampled_events>, SetField<&ActorClassCounters::sampled_events>},
    {"troupe_actor_class_sampled_handler_seconds_total", MetricType::kCounter,
     "Time in the handlers of the sampled events of the class.",
     LoadRelaxed<&ClassStats::sampled_handler_ns>,
     SetField<&ActorClassCounters::sampled_handler_time>, MetricUnit::kNanoseconds},
});

}  // namespace troupe::internal
