// SPDX-License-Identifier: Apache-2.0
#include "node/internal/status_page.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/log.h"
#include "actors/metrics.h"
#include "interconnect/interconnect.h"

namespace troupe::node::internal {
namespace {

using interconnect::SessionCounters;
using interconnect::SessionCountersOf;

std::string Escape(std::string_view text) {
  return absl::StrReplaceAll(std::string(text),
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string Mb(uint64_t bytes) { return absl::StrFormat("%.2f", static_cast<double>(bytes) / 1e6); }

// Appends a table row; `cells` are escaped.
void Row(std::string* html, const std::vector<std::string>& cells, bool header = false) {
  absl::StrAppend(html, "<tr>");
  for (const std::string& cell : cells) {
    absl::StrAppend(html, header ? "<th>" : "<td>", Escape(cell), header ? "</th>" : "</td>");
  }
  absl::StrAppend(html, "</tr>\n");
}

template <typename Number>
std::string Count(Number value) {
  return absl::StrCat(value);
}

std::string PeerState(const SessionCounters& peer) {
  if (!peer.up) {
    return "down";
  }
  return peer.connected ? "up" : "up, reconnecting";
}

// The ten classes whose sampled handlers took the most time, with their live actors.
void AppendBusiestClasses(const std::vector<ActorClassCounters>& classes, std::string* html) {
  std::vector<const ActorClassCounters*> busiest;
  absl::Duration total;
  for (const ActorClassCounters& c : classes) {
    busiest.push_back(&c);
    total += c.sampled_handler_time;
  }
  std::sort(busiest.begin(), busiest.end(),
            [](const ActorClassCounters* a, const ActorClassCounters* b) {
              return std::tie(b->sampled_handler_time, b->name) <
                     std::tie(a->sampled_handler_time, a->name);
            });
  busiest.resize(std::min<size_t>(busiest.size(), 10));
  absl::StrAppend(html, "<h2>Busiest actor classes</h2>\n<table>\n");
  Row(html, {"class", "live", "events (est.)", "handler time share"}, true);
  for (const ActorClassCounters* c : busiest) {
    Row(html,
        {c->name, Count(c->live), Count(c->sampled_events * 64),
         total > absl::ZeroDuration()
             ? absl::StrFormat("%.1f%%", 100.0 * absl::FDivDuration(c->sampled_handler_time, total))
             : std::string("-")});
  }
  absl::StrAppend(html,
                  "</table>\n<p>Events and time are sampled: one event in 64 per worker.</p>\n");
}

}  // namespace

std::string StatusPage(ActorSystem& system, int refresh_seconds) {
  const ActorSystemCounters counters = system.Counters();
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
  Row(&html, {Count(counters.live_mailboxes), Count(counters.pending_timers),
              Count(counters.dropped_events), Count(counters.failed_actors)});
  absl::StrAppend(&html, "</table>\n<h2>Pools</h2>\n<table>\n");
  Row(&html,
      {"pool", "threads", "range", "borrowed", "lent", "temporary", "events", "activations", "busy",
       "ready queue", "steals", "preemptions", "stuck reports"},
      true);
  std::vector<PoolCounters> pools = counters.pools;
  std::sort(pools.begin(), pools.end(),
            [](const PoolCounters& a, const PoolCounters& b) { return a.name < b.name; });
  for (const PoolCounters& pool : pools) {
    const absl::Duration awake = pool.busy_time + pool.parked_time;
    const double share =
        awake > absl::ZeroDuration() ? 100.0 * absl::FDivDuration(pool.busy_time, awake) : 0.0;
    Row(&html,
        {pool.name, Count(pool.threads), absl::StrCat(pool.min_threads, "..", pool.max_threads),
         Count(pool.threads_borrowed), Count(pool.threads_lent), Count(pool.temporary_threads),
         Count(pool.events), Count(pool.activations), absl::StrFormat("%.1f%%", share),
         Count(pool.queue_length), Count(pool.steals), Count(pool.budget_preemptions),
         Count(pool.stuck_reports)});
  }
  absl::StrAppend(&html, "</table>\n");
  AppendBusiestClasses(counters.classes, &html);
  absl::StrAppend(&html, "<h2>Peers</h2>\n");
  const std::vector<SessionCounters> peers = SessionCountersOf(system.metrics());
  if (peers.empty()) {
    absl::StrAppend(&html, "<p>No interconnect: this node has no peers.</p>\n");
  } else {
    absl::StrAppend(&html, "<table>\n");
    Row(&html,
        {"peer", "session", "protocol", "round trip", "sessions", "events sent", "events received",
         "MB written", "MB read", "queued", "unacked bytes", "held bytes", "resent", "refusals",
         "protocol errors", "overloaded"},
        true);
    for (const SessionCounters& peer : peers) {
      Row(&html, {absl::StrCat("node ", peer.peer), PeerState(peer),
                  peer.protocol_version > 0 ? Count(peer.protocol_version) : std::string("-"),
                  peer.round_trip > absl::ZeroDuration()
                      ? absl::StrFormat("%.3f ms", absl::ToDoubleMilliseconds(peer.round_trip))
                      : std::string("-"),
                  Count(peer.sessions), Count(peer.events_sent), Count(peer.events_received),
                  Mb(peer.bytes_written), Mb(peer.bytes_read), Count(peer.queued_events),
                  Count(peer.unacked_bytes), Count(peer.held_bytes), Count(peer.frames_resent),
                  Count(peer.refusals), Count(peer.protocol_errors), Count(peer.overloaded)});
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
