// SPDX-License-Identifier: Apache-2.0
#include "node/internal/status_page.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace troupe::node::internal {
namespace {

std::string Escape(std::string_view text) {
  return absl::StrReplaceAll(std::string(text),
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string Mb(uint64_t bytes) { return absl::StrFormat("%.2f", static_cast<double>(bytes) / 1e6); }
std::string PerSecond(double rate) { return absl::StrFormat("%.1f", rate); }

// Appends a table row of `cells`, escaped; `row_class` (e.g. "bad") colours the row.
void Row(std::string* html, const std::vector<std::string>& cells, bool header = false,
         std::string_view row_class = "") {
  absl::StrAppend(html, row_class.empty()
                            ? std::string("<tr>")
                            : absl::StrCat("<tr class=\"", std::string(row_class), "\">"));
  for (const std::string& cell : cells) {
    absl::StrAppend(html, header ? "<th>" : "<td>", Escape(cell), header ? "</th>" : "</td>");
  }
  absl::StrAppend(html, "</tr>\n");
}

std::string StateClass(std::string_view state) {
  if (state == "down") {
    return "bad";
  }
  return state == "up" ? "" : "warn";
}

std::string Duration(double seconds) {
  if (seconds < 120) {
    return absl::StrFormat("%.0f s", seconds);
  }
  if (seconds < 7200) {
    return absl::StrFormat("%.0f min", seconds / 60);
  }
  return absl::StrFormat("%.1f h", seconds / 3600);
}

const proto::SessionStatus* SessionWith(const proto::NodeStatus& status, uint32_t peer) {
  for (const proto::SessionStatus& session : status.sessions()) {
    if (session.peer() == peer) {
      return &session;
    }
  }
  return nullptr;
}

void AppendMembers(const proto::NodeStatus& status, std::string* html) {
  absl::StrAppend(html, "<h2>Members</h2>\n");
  if (status.members().empty()) {
    absl::StrAppend(html, "<p>No interconnect: this node is alone.</p>\n");
    return;
  }
  absl::StrAppend(html, "<table>\n");
  Row(html, {"node", "address", "status page", "session"}, true);
  for (const proto::MemberStatus& member : status.members()) {
    const proto::SessionStatus* session = SessionWith(status, member.node_id());
    const std::string state = member.self() ? "this node" : session ? session->state() : "none";
    const std::string link = member.status_url().empty()
                                 ? "-"
                                 : absl::StrCat("<a href=\"", Escape(member.status_url()), "\">",
                                                Escape(member.status_url()), "</a>");
    absl::StrAppend(html, "<tr",
                    StateClass(state).empty() || member.self()
                        ? ""
                        : absl::StrCat(" class=\"", StateClass(state), "\""),
                    "><td>node ", member.node_id(), "</td><td>",
                    Escape(member.client() ? "client (dials only)" : member.address()), "</td><td>",
                    link, "</td><td>", Escape(state), "</td></tr>\n");
  }
  absl::StrAppend(html, "</table>\n");
}

void AppendPools(const proto::NodeStatus& status, std::string* html) {
  const proto::NodeTotals& totals = status.totals();
  absl::StrAppend(html, "<h2>Node</h2>\n<table>\n");
  Row(html,
      {"events", "events/s", "live mailboxes", "pending timers", "dropped events", "failed actors"},
      true);
  Row(html, {absl::StrCat(totals.events()), PerSecond(totals.events_per_second()),
             absl::StrCat(totals.live_mailboxes()), absl::StrCat(totals.pending_timers()),
             absl::StrCat(totals.dropped_events()), absl::StrCat(totals.failed_actors())});
  absl::StrAppend(html, "</table>\n<h2>Pools</h2>\n<table>\n");
  Row(html,
      {"pool", "threads", "range", "borrowed", "lent", "temporary", "events", "events/s",
       "busy threads", "ready queue", "activations", "steals", "preemptions", "stuck reports"},
      true);
  for (const proto::PoolStatus& pool : status.pools()) {
    Row(html, {pool.name(), absl::StrCat(pool.threads()),
               absl::StrCat(pool.min_threads(), "..", pool.max_threads()),
               absl::StrCat(pool.threads_borrowed()), absl::StrCat(pool.threads_lent()),
               absl::StrCat(pool.temporary_threads()), absl::StrCat(pool.events()),
               PerSecond(pool.events_per_second()), absl::StrFormat("%.2f", pool.busy_threads()),
               absl::StrCat(pool.queue_length()), absl::StrCat(pool.activations()),
               absl::StrCat(pool.steals()), absl::StrCat(pool.budget_preemptions()),
               absl::StrCat(pool.stuck_reports())});
  }
  absl::StrAppend(html, "</table>\n");
  absl::StrAppend(html, "<h2>Busiest actor classes</h2>\n<table>\n");
  Row(html, {"class", "live", "events (est.)", "handler time share"}, true);
  for (const proto::ClassStatus& c : status.busiest_classes()) {
    Row(html, {c.name(), absl::StrCat(c.live()), absl::StrCat(c.events()),
               absl::StrFormat("%.1f%%", 100 * c.handler_time_share())});
  }
  absl::StrAppend(html,
                  "</table>\n<p>Events and time are sampled: one event in 64 per worker.</p>\n");
}

void AppendPeers(const proto::NodeStatus& status, std::string* html) {
  absl::StrAppend(html, "<h2>Peers</h2>\n");
  if (status.sessions().empty()) {
    absl::StrAppend(html, "<p>No interconnect: this node has no peers.</p>\n");
    return;
  }
  absl::StrAppend(html, "<table>\n");
  Row(html,
      {"peer",
       "session",
       "since",
       "last failure",
       "protocol",
       "round trip",
       "events/s out",
       "events/s in",
       "MB/s out",
       "MB/s in",
       "sessions",
       "events sent",
       "events received",
       "MB written",
       "MB read",
       "queued",
       "unacked bytes",
       "held bytes",
       "resent",
       "refusals",
       "protocol errors",
       "overloaded"},
      true);
  for (const proto::SessionStatus& peer : status.sessions()) {
    Row(html,
        {absl::StrCat("node ", peer.peer()),
         peer.state(),
         peer.since().empty() ? std::string("-")
                              : absl::StrCat(peer.since(), " (", Duration(peer.for_seconds()), ")"),
         peer.last_failure().empty() ? std::string("-") : peer.last_failure(),
         peer.protocol_version() > 0 ? absl::StrCat(peer.protocol_version()) : std::string("-"),
         peer.round_trip_ms() > 0 ? absl::StrFormat("%.3f ms", peer.round_trip_ms())
                                  : std::string("-"),
         PerSecond(peer.events_sent_per_second()),
         PerSecond(peer.events_received_per_second()),
         absl::StrFormat("%.2f", peer.mb_written_per_second()),
         absl::StrFormat("%.2f", peer.mb_read_per_second()),
         absl::StrCat(peer.sessions()),
         absl::StrCat(peer.events_sent()),
         absl::StrCat(peer.events_received()),
         Mb(peer.bytes_written()),
         Mb(peer.bytes_read()),
         absl::StrCat(peer.queued_events()),
         absl::StrCat(peer.unacked_bytes()),
         absl::StrCat(peer.held_bytes()),
         absl::StrCat(peer.frames_resent()),
         absl::StrCat(peer.refusals()),
         absl::StrCat(peer.protocol_errors()),
         absl::StrCat(peer.overloaded())},
        /*header=*/false, StateClass(peer.state()));
  }
  absl::StrAppend(html, "</table>\n");
}

}  // namespace

std::string StatusPage(const proto::NodeStatus& status, int refresh_seconds) {
  const uint32_t node = status.node_id();
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"",
      refresh_seconds, "\"><title>Troupe node ", node, "</title>\n",
      "<style>body{font-family:sans-serif;margin:1.5em;color:#222}"
      "table{border-collapse:collapse;margin:.5em 0 1.5em}"
      "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
      "th{background:#f2f2f2}td:first-child{text-align:left}"
      "tr.bad td{background:#fbe3e3}tr.warn td{background:#fdf3d8}"
      "pre{background:#f8f8f8;padding:.6em;white-space:pre-wrap}</style></head><body>\n",
      "<h1>Troupe node ", node, "</h1>\n<p>", Escape(status.time()), ", refreshed every ",
      refresh_seconds, " s. Troupe ", Escape(status.version()), " (commit ",
      Escape(status.commit().substr(0, 12)), "), up ", Duration(status.uptime_seconds()),
      status.listen_address().empty()
          ? std::string()
          : absl::StrCat(", listening on ", Escape(status.listen_address())),
      ". Rates over the last ", absl::StrFormat("%.0f", status.rate_window_seconds()),
      " s. Machine-readable: <a href=\"/status.json\">/status.json</a>, "
      "<a href=\"/metrics\">/metrics</a>.</p>\n");
  AppendMembers(status, &html);
  AppendPools(status, &html);
  AppendPeers(status, &html);
  absl::StrAppend(&html, "<h2>Recent warnings</h2>\n");
  if (status.recent_warnings().empty()) {
    absl::StrAppend(&html, "<p>None in this process.</p>\n");
  } else {
    absl::StrAppend(&html, "<pre>");
    for (const std::string& warning : status.recent_warnings()) {
      absl::StrAppend(&html, Escape(warning), "\n");
    }
    absl::StrAppend(&html, "</pre>\n");
  }
  absl::StrAppend(&html, "</body></html>\n");
  return html;
}

}  // namespace troupe::node::internal
