// SPDX-License-Identifier: Apache-2.0
//
// The troupe_session_* metrics of one peer, one row each (actors/metric_table.h): read from the
// peer's PeerChannel, labelled {"peer", "<node>"} (PeerChannel::PublishMetrics), and read back
// into SessionCounters (SessionCountersOf, interconnect.h). The round-trip histogram
// (troupe_session_round_trip_seconds) is registered next to them and has no row.
//
// Thread-safety: a constant table; its readers are relaxed loads.
#pragma once

#include <array>
#include <cstdint>

#include "actors/metric_table.h"
#include "actors/metrics.h"
#include "interconnect/interconnect.h"
#include "interconnect/internal/peer_table.h"

namespace troupe::interconnect::internal {

// Returns the atomic `channel.stats.*kStat` as a metric value.
template <auto kStat>
int64_t SessionStat(const PeerChannel& channel) {
  return LoadRelaxed<kStat>(channel.stats);
}

using SessionMetric = MetricRow<PeerChannel, SessionCounters>;

inline constexpr auto kSessionMetrics = std::to_array<SessionMetric>({
    {"troupe_session_up", MetricType::kGauge, "1 while a session with the peer is established.",
     SessionStat<&SessionStats::up>, SetField<&SessionCounters::up>},
    {"troupe_session_connected", MetricType::kGauge, "1 while a connection carries the session.",
     SessionStat<&SessionStats::connected>, SetField<&SessionCounters::connected>},
    {"troupe_session_sessions_total", MetricType::kCounter, "Sessions established with the peer.",
     SessionStat<&SessionStats::sessions>, SetField<&SessionCounters::sessions>},
    {"troupe_session_connections_total", MetricType::kCounter,
     "Connections that carried a session (a session may use several).",
     SessionStat<&SessionStats::connections>, SetField<&SessionCounters::connections>},
    {"troupe_session_events_sent_total", MetricType::kCounter,
     "Events packed into frames for the peer.", SessionStat<&SessionStats::events_sent>,
     SetField<&SessionCounters::events_sent>},
    {"troupe_session_events_received_total", MetricType::kCounter, "Events received from the peer.",
     SessionStat<&SessionStats::events_received>, SetField<&SessionCounters::events_received>},
    {"troupe_session_bytes_written_total", MetricType::kCounter, "Bytes written to the peer.",
     SessionStat<&SessionStats::bytes_written>, SetField<&SessionCounters::bytes_written>},
    {"troupe_session_bytes_read_total", MetricType::kCounter, "Bytes read from the peer.",
     SessionStat<&SessionStats::bytes_read>, SetField<&SessionCounters::bytes_read>},
    {"troupe_session_frames_resent_total", MetricType::kCounter,
     "Frames sent again after a reconnect.", SessionStat<&SessionStats::frames_resent>,
     SetField<&SessionCounters::frames_resent>},
    {"troupe_session_duplicates_dropped_total", MetricType::kCounter,
     "Received frames dropped as duplicates.", SessionStat<&SessionStats::duplicates_dropped>,
     SetField<&SessionCounters::duplicates_dropped>},
    {"troupe_session_queued_events", MetricType::kGauge,
     "Events waiting in the proxy, not yet in a frame.", SessionStat<&SessionStats::queued_events>,
     SetField<&SessionCounters::queued_events>},
    {"troupe_session_unacked_bytes", MetricType::kGauge, "Bytes sent and not yet acknowledged.",
     SessionStat<&SessionStats::unacked_bytes>, SetField<&SessionCounters::unacked_bytes>},
    {"troupe_session_backpressure_stalls_total", MetricType::kCounter,
     "Times the proxy stopped sending at max_unacked_bytes.",
     SessionStat<&SessionStats::backpressure_stalls>,
     SetField<&SessionCounters::backpressure_stalls>},
    {"troupe_session_protocol_errors_total", MetricType::kCounter,
     "Connections closed for malformed or refused input.",
     SessionStat<&SessionStats::protocol_errors>, SetField<&SessionCounters::protocol_errors>},
    {"troupe_session_refusals_total", MetricType::kCounter,
     "Connections to the peer refused by it, or whose answer this node refused.",
     SessionStat<&SessionStats::refusals>, SetField<&SessionCounters::refusals>},
    {"troupe_session_overloaded_total", MetricType::kCounter,
     "Events refused with Undelivered{overloaded}: the bytes held for the peer were at "
     "max_queued_bytes.",
     SessionStat<&SessionStats::overloaded>, SetField<&SessionCounters::overloaded>},
    {"troupe_session_failed_links", MetricType::kGauge,
     "Connections in a row closed for protocol errors (the session ends at 5).",
     SessionStat<&SessionStats::failed_links>, SetField<&SessionCounters::failed_links>},
    {"troupe_session_smoothed_round_trip_seconds", MetricType::kGauge,
     "Round trip of a data frame to the peer and its acknowledgement back, smoothed (1/8 per "
     "sample; 0 before the first).",
     [](const PeerChannel& channel) {
       return LoadRelaxed<&RoundTrips::smoothed_ns>(channel.stats.round_trips);
     },
     SetField<&SessionCounters::round_trip>, MetricUnit::kNanoseconds},
    {"troupe_session_held_bytes", MetricType::kGauge,
     "Bytes held for the peer: queued, in unacknowledged frames, and their overhead.",
     LoadRelaxed<&PeerChannel::held_bytes>, SetField<&SessionCounters::held_bytes>},
    {"troupe_session_protocol_version", MetricType::kGauge,
     "The protocol version the session with the peer uses (0 before the first session).",
     SessionStat<&SessionStats::protocol_version>, SetField<&SessionCounters::protocol_version>},
});

}  // namespace troupe::interconnect::internal
