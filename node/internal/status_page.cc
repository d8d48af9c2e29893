// SPDX-License-Identifier: Apache-2.0
#include "node/internal/status_page.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/log.h"
#include "actors/metrics.h"

namespace troupe::node::internal {
namespace {

// Metric values by name (the prefix left off), summed over the series of one group.
using Values = std::map<std::string, int64_t>;

std::string Escape(std::string_view text) {
  return absl::StrReplaceAll(std::string(text),
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

int64_t Get(const Values& values, const std::string& name) {
  auto it = values.find(name);
  return it == values.end() ? 0 : it->second;
}

std::string Mb(int64_t bytes) { return absl::StrFormat("%.2f", static_cast<double>(bytes) / 1e6); }

// What the registry says, grouped for the tables.
struct Grouped {
  Values node;
  std::map<std::string, Values> pools;
  std::map<int64_t, Values> peers;
  std::map<std::string, Values> classes;
};

Grouped Group(const MetricsRegistry& registry) {
  Grouped grouped;
  registry.ForEach([&](const MetricSample& sample) {
    const std::string name(sample.name);
    constexpr std::string_view kPool = "troupe_pool_";
    constexpr std::string_view kSession = "troupe_session_";
    constexpr std::string_view kClass = "troupe_actor_class_";
    if (name.starts_with(kClass)) {
      grouped.classes[std::string(sample.label("class"))][name.substr(kClass.size())] +=
          sample.value;
    } else if (name.starts_with(kPool)) {
      grouped.pools[std::string(sample.label("pool"))][name.substr(kPool.size())] += sample.value;
    } else if (name.starts_with(kSession)) {
      int64_t peer = 0;
      if (absl::SimpleAtoi(
              absl::string_view(sample.label("peer").data(), sample.label("peer").size()), &peer)) {
        grouped.peers[peer][name.substr(kSession.size())] += sample.value;
      }
    } else if (name.starts_with("troupe_")) {
      grouped.node[name.substr(std::string_view("troupe_").size())] += sample.value;
    }
  });
  return grouped;
}

// Appends a table row; `cells` are escaped.
void Row(std::string* html, const std::vector<std::string>& cells, bool header = false) {
  absl::StrAppend(html, "<tr>");
  for (const std::string& cell : cells) {
    absl::StrAppend(html, header ? "<th>" : "<td>", Escape(cell), header ? "</th>" : "</td>");
  }
  absl::StrAppend(html, "</tr>\n");
}

std::string Count(int64_t value) { return absl::StrCat(value); }

std::string PeerState(const Values& peer) {
  if (Get(peer, "up") == 0) {
    return "down";
  }
  return Get(peer, "connected") != 0 ? "up" : "up, reconnecting";
}

// The ten classes whose sampled handlers took the most time, with their live actors.
void AppendBusiestClasses(const std::map<std::string, Values>& classes, std::string* html) {
  std::vector<std::pair<int64_t, std::string>> busiest;
  int64_t total = 0;
  for (const auto& [name, values] : classes) {
    busiest.emplace_back(Get(values, "sampled_handler_nanoseconds_total"), name);
    total += busiest.back().first;
  }
  std::sort(busiest.rbegin(), busiest.rend());
  busiest.resize(std::min<size_t>(busiest.size(), 10));
  absl::StrAppend(html, "<h2>Busiest actor classes</h2>\n<table>\n");
  Row(html, {"class", "live", "events (est.)", "handler time share"}, true);
  for (const auto& [ns, name] : busiest) {
    const Values& values = classes.at(name);
    Row(html, {name, Count(Get(values, "live")), Count(Get(values, "sampled_events_total") * 64),
               total > 0 ? absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(ns) /
                                                         static_cast<double>(total))
                         : std::string("-")});
  }
  absl::StrAppend(html,
                  "</table>\n<p>Events and time are sampled: one event in 64 per worker.</p>\n");
}

}  // namespace

std::string StatusPage(ActorSystem& system, int refresh_seconds) {
  const Grouped grouped = Group(system.metrics());
  const NodeId node = system.node_id();
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"",
      refresh_seconds, "\"><title>Troupe node ", node, "</title>\n",
      "<style>body{font-family:sans-serif;margin:1.5em;color:#222}"
      "table{border-collapse:collapse;margin:.5em 0 1.5em}"
      "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
      "th{background:#f2f2f2}td:first-child{text-align:left}"
      "pre{background:#f8f8f8;padding:.6em;white-space:pre-wrap}</style></head><body>\n",
      "<h1>Troupe node ", node, "</h1>\n<p>",
      Escape(absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone())),
      ", refreshed every ", refresh_seconds,
      " s. Machine-readable: <a href=\"/metrics\">/metrics</a>.</p>\n");

  absl::StrAppend(&html, "<h2>Node</h2>\n<table>\n");
  Row(&html, {"live mailboxes", "pending timers", "dropped events", "failed actors"}, true);
  Row(&html,
      {Count(Get(grouped.node, "live_mailboxes")), Count(Get(grouped.node, "pending_timers")),
       Count(Get(grouped.node, "dropped_events_total")),
       Count(Get(grouped.node, "failed_actors_total"))});
  absl::StrAppend(&html, "</table>\n<h2>Pools</h2>\n<table>\n");
  Row(&html,
      {"pool", "threads", "events", "activations", "busy", "ready queue", "steals", "preemptions",
       "stuck reports"},
      true);
  for (const auto& [pool, values] : grouped.pools) {
    const int64_t busy = Get(values, "busy_nanoseconds_total");
    const int64_t parked = Get(values, "parked_nanoseconds_total");
    const double share =
        busy + parked > 0 ? 100.0 * static_cast<double>(busy) / static_cast<double>(busy + parked)
                          : 0.0;
    Row(&html, {pool, Count(Get(values, "threads")), Count(Get(values, "events_total")),
                Count(Get(values, "activations_total")), absl::StrFormat("%.1f%%", share),
                Count(Get(values, "queue_length")), Count(Get(values, "steals_total")),
                Count(Get(values, "budget_preemptions_total")),
                Count(Get(values, "stuck_reports_total"))});
  }
  absl::StrAppend(&html, "</table>\n");
  AppendBusiestClasses(grouped.classes, &html);
  absl::StrAppend(&html, "<h2>Peers</h2>\n");
  if (grouped.peers.empty()) {
    absl::StrAppend(&html, "<p>No interconnect: this node has no peers.</p>\n");
  } else {
    absl::StrAppend(&html, "<table>\n");
    Row(&html,
        {"peer", "session", "round trip", "sessions", "events sent", "events received",
         "MB written", "MB read", "queued", "unacked bytes", "held bytes", "resent", "refusals",
         "protocol errors", "overloaded"},
        true);
    for (const auto& [peer, values] : grouped.peers) {
      Row(&html,
          {absl::StrCat("node ", peer), PeerState(values),
           Get(values, "round_trip_nanoseconds") > 0
               ? absl::StrFormat("%.3f ms",
                                 static_cast<double>(Get(values, "round_trip_nanoseconds")) / 1e6)
               : std::string("-"),
           Count(Get(values, "sessions_total")), Count(Get(values, "events_sent_total")),
           Count(Get(values, "events_received_total")), Mb(Get(values, "bytes_written_total")),
           Mb(Get(values, "bytes_read_total")), Count(Get(values, "queued_events")),
           Count(Get(values, "unacked_bytes")), Count(Get(values, "held_bytes")),
           Count(Get(values, "frames_resent_total")), Count(Get(values, "refusals_total")),
           Count(Get(values, "protocol_errors_total")), Count(Get(values, "overloaded_total"))});
    }
    absl::StrAppend(&html, "</table>\n");
  }
  absl::StrAppend(&html, "<h2>Recent warnings</h2>\n");
  std::vector<std::string> warnings = RecentWarnings(20);
  if (warnings.empty()) {
    absl::StrAppend(&html, "<p>None in this process.</p>\n");
  } else {
    absl::StrAppend(&html, "<pre>");
    std::reverse(warnings.begin(), warnings.end());  // newest first
    for (const std::string& warning : warnings) {
      absl::StrAppend(&html, Escape(warning), "\n");
    }
    absl::StrAppend(&html, "</pre>\n");
  }
  absl::StrAppend(&html, "</body></html>\n");
  return html;
}

}  // namespace troupe::node::internal
