// SPDX-License-Identifier: Apache-2.0
//
// The troupe_session_* metrics, one row each in interconnect/internal/session_metrics.h: a running
// node registers every row (and no session counter or gauge without one), and each counter of a
// peer's channel reaches its own field of SessionCounters, and its metric under the name
// dashboards read, through the registry.
#include "interconnect/internal/session_metrics.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/metrics.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/internal/peer_table.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect::internal {
namespace {

TEST(SessionMetricsTest, ARunningNodeRegistersEveryRowAndNoSessionMetricWithoutOne) {
  PipeCluster cluster(2);
  testing::TestRuntime& rt = *cluster.runtime;
  ASSERT_TRUE(rt.DispatchUntil([&] { return cluster.Up(1, 2); }, Within(absl::Seconds(5))));

  std::map<std::string, MetricType> registered;  // node 1's series of peer 2
  rt.node(1).metrics().ForEach([&](const MetricSample& sample) {
    if (sample.name.starts_with("troupe_session_") && sample.label("peer") == "2") {
      registered.emplace(std::string(sample.name), sample.type);
    }
  });
  for (const SessionMetric& row : kSessionMetrics) {
    ASSERT_TRUE(registered.contains(std::string(row.name))) << row.name;
    EXPECT_EQ(registered.at(std::string(row.name)), row.type) << row.name;
    EXPECT_NE(row.read, nullptr) << row.name;
    EXPECT_NE(row.fill, nullptr) << row.name << " has no field in SessionCounters";
  }
  for (const auto& [name, type] : registered) {
    if (type == MetricType::kHistogram) {
      continue;
    }
    bool has_row = false;
    for (const SessionMetric& row : kSessionMetrics) {
      has_row = has_row || row.name == name;
    }
    EXPECT_TRUE(has_row) << name << " is registered without a row: Counters() cannot read it";
  }
  // The typed view of the running node reads what the registry holds.
  const SessionCounters view = cluster.Session(1, 2);
  EXPECT_TRUE(view.up);
  EXPECT_TRUE(view.connected);
  EXPECT_EQ(view.sessions, 1u);
  EXPECT_EQ(static_cast<int64_t>(view.bytes_written),
            rt.node(1).metrics().Value("troupe_session_bytes_written_total", {{"peer", "2"}}));
  EXPECT_GT(view.bytes_written, 0u) << "the handshake wrote to the peer";
}

TEST(SessionMetricsTest, EachCounterOfAChannelReachesItsFieldOfSessionCounters) {
  MetricsRegistry registry;
  PeerChannel channel(7);
  channel.PublishMetrics(registry, /*histogram=*/true);
  ASSERT_EQ(SessionCountersOf(registry).size(), 1u);
  const SessionCounters fresh = SessionCountersOf(registry)[0];
  EXPECT_EQ(fresh.peer, 7u);
  EXPECT_FALSE(fresh.up);
  EXPECT_EQ(fresh.events_sent, 0u);

  // A distinct value in each, so a row that reads or fills the wrong field shows.
  SessionStats& stats = channel.stats;
  stats.up.store(true, std::memory_order_relaxed);
  stats.connected.store(true, std::memory_order_relaxed);
  SessionStats::Set(stats.sessions, 3);
  SessionStats::Set(stats.connections, 4);
  SessionStats::Bump(stats.events_sent, 5);
  SessionStats::Bump(stats.events_received, 6);
  SessionStats::Bump(stats.bytes_written, 7);
  SessionStats::Bump(stats.bytes_read, 8);
  SessionStats::Bump(stats.frames_resent, 9);
  SessionStats::Bump(stats.duplicates_dropped, 10);
  SessionStats::Set(stats.queued_events, 11);
  SessionStats::Set(stats.unacked_bytes, 12);
  SessionStats::Bump(stats.backpressure_stalls, 13);
  SessionStats::Bump(stats.protocol_errors, 14);
  SessionStats::Bump(stats.refusals, 15);
  SessionStats::Bump(stats.overloaded, 16);
  SessionStats::Set(stats.failed_links, 17);
  channel.Charge(18);
  SessionStats::Set(stats.round_trips.smoothed_ns, 19'000);

  const std::vector<SessionCounters> all = SessionCountersOf(registry);
  ASSERT_EQ(all.size(), 1u);
  const SessionCounters& c = all[0];
  EXPECT_EQ(c.peer, 7u);
  EXPECT_TRUE(c.up);
  EXPECT_TRUE(c.connected);
  EXPECT_EQ(c.sessions, 3u);
  EXPECT_EQ(c.connections, 4u);
  EXPECT_EQ(c.events_sent, 5u);
  EXPECT_EQ(c.events_received, 6u);
  EXPECT_EQ(c.bytes_written, 7u);
  EXPECT_EQ(c.bytes_read, 8u);
  EXPECT_EQ(c.frames_resent, 9u);
  EXPECT_EQ(c.duplicates_dropped, 10u);
  EXPECT_EQ(c.queued_events, 11u);
  EXPECT_EQ(c.unacked_bytes, 12u);
  EXPECT_EQ(c.backpressure_stalls, 13u);
  EXPECT_EQ(c.protocol_errors, 14u);
  EXPECT_EQ(c.refusals, 15u);
  EXPECT_EQ(c.overloaded, 16u);
  EXPECT_EQ(c.failed_links, 17u);
  EXPECT_EQ(c.held_bytes, 18u);
  EXPECT_EQ(c.round_trip, absl::Microseconds(19));

  // The same values under the names a dashboard reads.
  const std::vector<std::pair<std::string, int64_t>> exposed = {
      {"troupe_session_up", 1},
      {"troupe_session_connected", 1},
      {"troupe_session_sessions_total", 3},
      {"troupe_session_connections_total", 4},
      {"troupe_session_events_sent_total", 5},
      {"troupe_session_events_received_total", 6},
      {"troupe_session_bytes_written_total", 7},
      {"troupe_session_bytes_read_total", 8},
      {"troupe_session_frames_resent_total", 9},
      {"troupe_session_duplicates_dropped_total", 10},
      {"troupe_session_queued_events", 11},
      {"troupe_session_unacked_bytes", 12},
      {"troupe_session_backpressure_stalls_total", 13},
      {"troupe_session_protocol_errors_total", 14},
      {"troupe_session_refusals_total", 15},
      {"troupe_session_overloaded_total", 16},
      {"troupe_session_failed_links", 17},
      {"troupe_session_held_bytes", 18},
      {"troupe_session_smoothed_round_trip_seconds", 19'000},
  };
  for (const auto& [name, value] : exposed) {
    EXPECT_EQ(registry.Value(name, {{"peer", "7"}}), value) << name;
  }

  // Moved again, read again: the view reads the counter now, not a copy.
  SessionStats::Bump(stats.events_sent);
  stats.connected.store(false, std::memory_order_relaxed);
  EXPECT_EQ(SessionCountersOf(registry)[0].events_sent, 6u);
  EXPECT_FALSE(SessionCountersOf(registry)[0].connected);

  channel.metrics.clear();
  EXPECT_TRUE(SessionCountersOf(registry).empty()) << "a closed channel leaves no session";
}

}  // namespace
}  // namespace troupe::interconnect::internal
