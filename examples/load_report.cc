// SPDX-License-Identifier: Apache-2.0
#include "load_report.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "load_summary.h"
#include "loadtest.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace troupe::examples {

void LoadFigures::AddSecond(const LoadProgress& progress) {
  MutexLock lock(&mu_);
  if (progress.second() <= taken_) {
    return;  // printed already without it (the pair was late); the totals still have it
  }
  LoadSecond& second = seconds_[progress.second()];
  second.second = progress.second();
  if (!second.by_pair.emplace(progress.pair_id(), progress).second) {
    return;
  }
  ++second.pairs;
  second.acked += progress.acked();
  second.bytes += progress.bytes();
  second.sent += progress.sent();
  AddHistogramProto(progress.rtt(), &second.rtt);
}

void LoadFigures::SetReport(LoadReport report) {
  MutexLock lock(&mu_);
  const uint32_t pair = report.pair_id();
  reports_.emplace(pair, std::move(report));
}

size_t LoadFigures::reported() const {
  MutexLock lock(&mu_);
  return reports_.size();
}

std::map<uint32_t, LoadReport> LoadFigures::reports() const {
  MutexLock lock(&mu_);
  return reports_;
}

bool LoadFigures::has_report(uint32_t pair) const {
  MutexLock lock(&mu_);
  return reports_.contains(pair);
}

std::vector<LoadSecond> LoadFigures::TakeSeconds(const std::vector<LoadPair>& pairs, bool all) {
  MutexLock lock(&mu_);
  std::vector<LoadSecond> out;
  for (auto it = seconds_.upper_bound(taken_); it != seconds_.end(); ++it) {
    if (it->first != taken_ + 1) {
      break;  // a second no pair reported yet comes first
    }
    bool complete = true;
    for (const LoadPair& pair : pairs) {
      if (pair.first_second <= it->first && !it->second.by_pair.contains(pair.id) &&
          !reports_.contains(pair.id)) {
        complete = false;
        break;
      }
    }
    if (!complete && !all) {
      break;
    }
    out.push_back(it->second);
    taken_ = it->first;
  }
  return out;
}

std::vector<LoadSecond> LoadFigures::seconds() const {
  MutexLock lock(&mu_);
  std::vector<LoadSecond> out;
  out.reserve(seconds_.size());
  for (const auto& [second, figures] : seconds_) {
    out.push_back(figures);
  }
  return out;
}

namespace {

double Micros(uint64_t nanos) { return static_cast<double>(nanos) / 1e3; }

// The report's figures of one pair, as the final table shows them.
struct PairRow {
  LoadPair pair;
  bool reported = false;
  uint64_t acked = 0;
  double rate = 0;
  double mbps = 0;
  LatencyHistogram rtt;
  uint64_t lost = 0;
  uint64_t dup = 0;
  uint64_t undelivered = 0;
  uint64_t unsure = 0;
  std::string problem;
  // Open loop: events sent, in the schedule, never sent; how late they went out.
  uint64_t sent = 0;
  uint64_t scheduled = 0;
  uint64_t unsent = 0;
  LatencyHistogram send_lag;

  // Adds `row`'s figures to these (the "all" row: rates and MB/s add up over the pairs).
  void Add(const PairRow& row) {
    acked += row.acked;
    rate += row.rate;
    mbps += row.mbps;
    rtt.Merge(row.rtt);
    lost += row.lost;
    dup += row.dup;
    undelivered += row.undelivered;
    unsure += row.unsure;
    sent += row.sent;
    scheduled += row.scheduled;
    unsent += row.unsent;
    send_lag.Merge(row.send_lag);
  }
};

std::vector<PairRow> PairRows(const std::vector<LoadPair>& pairs,
                              const std::map<uint32_t, LoadReport>& reports) {
  std::vector<PairRow> rows;
  for (const LoadPair& pair : pairs) {
    PairRow row;
    row.pair = pair;
    if (auto it = reports.find(pair.id); it != reports.end()) {
      const LoadReport& r = it->second;
      const double seconds = std::max(1e-9, static_cast<double>(r.elapsed_ns()) / 1e9);
      row.reported = true;
      row.acked = r.acked();
      row.rate = static_cast<double>(r.acked()) / seconds;
      row.mbps = static_cast<double>(r.bytes()) / seconds / 1e6;
      AddHistogramProto(r.rtt(), &row.rtt);
      // Lost: neither acknowledged nor reported Undelivered.
      row.lost = r.sent() - std::min(r.sent(), r.acked() + r.undelivered());
      row.dup = r.dups() + r.reorders();
      row.undelivered = r.undelivered();
      row.unsure = r.unsure();
      row.problem = r.problem();
      row.sent = r.sent();
      row.scheduled = r.scheduled();
      row.unsent = r.unsent();
      AddHistogramProto(r.send_lag(), &row.send_lag);
    } else {
      row.problem = "no report";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string Route(const LoadPair& pair) { return absl::StrCat(pair.sender, "->", pair.receiver); }

// Whether a pair's report left it short of an event, and why; empty when it passed (or sent
// nothing because a node it touches left before it started, cleanly).
std::string PairWhy(const PairRow& row, const LoadReport* r) {
  if (r != nullptr && (r->sender_left() || r->receiver_left()) && r->sent() == 0 &&
      r->problem().empty()) {
    return "";
  }
  if (r == nullptr || !r->problem().empty()) {
    return row.problem;
  }
  if (r->sent() == 0) {
    return "sent nothing";
  }
  if (row.lost != 0) {
    return absl::StrCat(row.lost, " of ", r->sent(),
                        " events neither acknowledged nor reported undelivered");
  }
  if (r->acked() + r->leave_undelivered() != r->sent()) {
    return absl::StrCat(r->undelivered() - r->leave_undelivered(), " of ", r->sent(),
                        " events undelivered");
  }
  if (r->dups() != 0 || r->gaps() != 0 || r->reorders() != 0) {
    return absl::StrCat("receiver saw ", r->dups(), " duplicates and ", r->gaps(),
                        " gaps; sender saw ", r->reorders(), " acks out of order");
  }
  return "";
}

LatencySummary Latencies(const LatencyHistogram& histogram) {
  LatencySummary latency;
  latency.set_p50_us(Micros(histogram.Percentile(0.5)));
  latency.set_p90_us(Micros(histogram.Percentile(0.9)));
  latency.set_p99_us(Micros(histogram.Percentile(0.99)));
  latency.set_p999_us(Micros(histogram.Percentile(0.999)));
  latency.set_max_us(Micros(histogram.Percentile(1.0)));
  return latency;
}

PairSummary ToPairSummary(const PairRow& row, const std::string& why) {
  PairSummary pair;
  pair.set_pair(row.pair.id);
  pair.set_route(row.pair.id == 0 ? std::string("all") : Route(row.pair));
  pair.set_events(row.acked);
  pair.set_events_per_s(row.rate);
  pair.set_mb_per_s(row.mbps);
  *pair.mutable_latency() = Latencies(row.rtt);
  pair.set_lost(row.lost);
  pair.set_dup(row.dup);
  pair.set_undelivered(row.undelivered);
  pair.set_unsure(row.unsure);
  pair.set_passed(why.empty());
  pair.set_problem(why);
  pair.set_sent(row.sent);
  pair.set_scheduled(row.scheduled);
  pair.set_unsent(row.unsent);
  pair.set_send_lag_p99_us(Micros(row.send_lag.Percentile(0.99)));
  return pair;
}

// One line of the terminal table.
std::string TableLine(const std::string& pair, const std::string& route, const PairRow& row,
                      const LatencyHistogram& rtt) {
  return absl::StrFormat("%4s %-7s %11u %11.0f %8.2f %9.1f %9.1f %9.1f %7u %5u %6u %6u", pair,
                         route, row.acked, row.rate, row.mbps, Micros(rtt.Percentile(0.5)),
                         Micros(rtt.Percentile(0.99)), Micros(rtt.Percentile(0.999)), row.lost,
                         row.dup, row.undelivered, row.unsure);
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) {
    return text;
  }
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

// A gnuplot single-quoted string: a quote inside is written twice.
std::string GnuplotString(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

std::string PairsCsv(const std::vector<PairRow>& rows) {
  std::string csv =
      "pair,route,events,events_per_s,mb_per_s,p50_us,p99_us,p999_us,max_us,lost,dup,"
      "undelivered,unsure,problem\n";
  for (const PairRow& row : rows) {
    absl::StrAppendFormat(&csv, "%u,%s,%u,%.0f,%.3f,%.1f,%.1f,%.1f,%.1f,%u,%u,%u,%u,%s\n",
                          row.pair.id, Route(row.pair), row.acked, row.rate, row.mbps,
                          Micros(row.rtt.Percentile(0.5)), Micros(row.rtt.Percentile(0.99)),
                          Micros(row.rtt.Percentile(0.999)), Micros(row.rtt.Percentile(1.0)),
                          row.lost, row.dup, row.undelivered, row.unsure, CsvField(row.problem));
  }
  return csv;
}

// One row per second of all pairs (`by_pair` false), or per second and pair.
std::string PerSecondCsv(const std::vector<LoadSecond>& seconds, bool by_pair) {
  // `events` are those acknowledged in the second (events/s), `sent` those sent in it.
  std::string csv = by_pair ? "second,pair,events,mb,p50_us,p99_us,max_us,sent\n"
                            : "second,pairs,events,mb,p50_us,p99_us,max_us,sent\n";
  auto row = [&csv](uint32_t second, uint32_t pair, uint64_t acked, uint64_t bytes,
                    const LatencyHistogram& rtt, uint64_t sent) {
    absl::StrAppendFormat(&csv, "%u,%u,%u,%.3f,%.1f,%.1f,%.1f,%u\n", second, pair, acked,
                          static_cast<double>(bytes) / 1e6, Micros(rtt.Percentile(0.5)),
                          Micros(rtt.Percentile(0.99)), Micros(rtt.Percentile(1.0)), sent);
  };
  for (const LoadSecond& second : seconds) {
    if (!by_pair) {
      row(second.second, second.pairs, second.acked, second.bytes, second.rtt, second.sent);
      continue;
    }
    for (const auto& [pair, progress] : second.by_pair) {
      LatencyHistogram rtt;
      AddHistogramProto(progress.rtt(), &rtt);
      row(second.second, pair, progress.acked(), progress.bytes(), rtt, progress.sent());
    }
  }
  return csv;
}

std::string HistogramCsv(const LatencyHistogram& all) {
  std::string csv = "low_us,high_us,count\n";
  for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    if (all.bucket(i) != 0) {
      absl::StrAppendFormat(&csv, "%.3f,%.3f,%u\n", Micros(LatencyHistogram::BucketLow(i)),
                            Micros(LatencyHistogram::BucketHigh(i)), all.bucket(i));
    }
  }
  return csv;
}

// Latency over time (p50, p99, max of all pairs per second, log y) above the histogram of every
// round trip (log x); throughput over time (events/s of all pairs, then of each pair). Each into
// a PNG and an SVG; with a baseline (baseline_per_second.csv) its lines dashed on the same axes.
std::string GnuplotScript(const std::string& dir, const LoadRunInfo& run,
                          const std::vector<LoadSecond>& by_second, bool baseline) {
  const size_t seconds = by_second.size();
  const std::string& title = run.title;
  const std::vector<ChaosEvent>& chaos = run.chaos;
  // Whole seconds on the x axis: one tick each for a short run, about ten for a long one.
  const size_t xtics = std::max<size_t>(1, (seconds + 9) / 10);
  // A dashed line at each fault, labelled at the top; the x axis starts at the load start so a
  // fault in the first second shows too.
  std::string faults;
  if (!chaos.empty()) {
    faults = "set xrange [0:*]\n";
  }
  for (size_t i = 0; i < chaos.size(); ++i) {
    const ChaosEvent& event = chaos[i];
    // A roll's rows come a fraction of a second apart: their labels step down so they stay
    // readable, and say "leave"/"ready" without the prefix (the colour tells it is the roll).
    const bool roll = event.action == kRollLeave || event.action == kRollReady;
    const double label_y = 0.96 - 0.055 * static_cast<double>(i % 6);
    const std::string label = absl::StrCat(
        roll ? (event.action == kRollLeave ? "leave" : "ready") : event.action, " ", event.node);
    // A node joining is good news: green; a fault red.
    // A rolling restart's leave is planned: orange.
    const char* color = event.action == "join" || event.action == kRollReady ? "#007000"
                        : event.action == kRollLeave                         ? "#c06000"
                                                                             : "#b00000";
    absl::StrAppendFormat(&faults,
                          "set arrow from first %.3f, graph 0 to first %.3f, graph 1 nohead "
                          "dashtype 2 linewidth 1.5 linecolor rgb '%s'\n"
                          "set label %s at first %.3f, graph %.3f offset 0.4,0 "
                          "textcolor rgb '%s'\n",
                          event.second, event.second, color, GnuplotString(label), event.second,
                          label_y, color);
  }
  // Each pair's events per second as a data block of its own ($pair<id>): the rows of
  // per_pair_second.csv interleave the pairs, and a filter over them would break every line.
  std::string script;
  for (const LoadPair& pair : run.pairs) {
    absl::StrAppend(&script, "$pair", pair.id, " << EOD\n");
    for (const LoadSecond& second : by_second) {
      if (const auto it = second.by_pair.find(pair.id); it != second.by_pair.end()) {
        absl::StrAppend(&script, second.second, ",", it->second.acked(), "\n");
      }
    }
    absl::StrAppend(&script, "EOD\n");
  }
  for (const auto& [terminal, file] :
       {std::pair{"pngcairo size 960,720 font 'sans,10'", "latency.png"},
        std::pair{"svg size 960,720 font 'sans,10' background '#ffffff'", "latency.svg"}}) {
    absl::StrAppend(
        &script, "set terminal ", terminal, "\nset output ", GnuplotString(dir + "/" + file),
        "\nset datafile separator ','\n", "set multiplot layout 2,1 title ", GnuplotString(title),
        "\nset title '", run.rate == 0 ? "Round-trip time" : "Latency from the intended send time",
        " per second, all pairs'\n", "set xlabel 'second of the run'; set ylabel '",
        run.rate == 0 ? "RTT" : "latency", " (us)'; set logscale y; set grid\n", "set xtics ",
        xtics, "\n", faults, "set key outside right\n", "plot ",
        GnuplotString(dir + "/per_second.csv"),
        " using 1:5 every ::1 with linespoints lw 2 title 'p50', \\\n", "     ",
        GnuplotString(dir + "/per_second.csv"),
        " using 1:6 every ::1 with linespoints lw 2 title 'p99', \\\n", "     ",
        GnuplotString(dir + "/per_second.csv"), " using 1:7 every ::1 with lines title 'max'",
        baseline ? absl::StrCat(", \\\n     ", GnuplotString(dir + "/baseline_per_second.csv"),
                                " using 1:5 every ::1 with lines dt 2 lw 2 title 'baseline p50', "
                                "\\\n     ",
                                GnuplotString(dir + "/baseline_per_second.csv"),
                                " using 1:6 every ::1 with lines dt 2 lw 2 title 'baseline p99'")
                 : std::string(),
        "\nunset arrow; unset label; set autoscale x\n",
        "unset logscale; set logscale xy; set xtics autofreq; set yrange [0.8:*]\n", "set title '",
        run.rate == 0 ? "Round-trip time" : "Latency", " histogram, all pairs ",
        "(log-linear buckets)'\n", "set xlabel '", run.rate == 0 ? "RTT" : "latency",
        " (us)'; set ylabel 'events'; set style fill solid 0.6\n", "plot ",
        GnuplotString(dir + "/latency_histogram.csv"),
        " using (($1+$2)/2):3:1:2:(0.8):3 every ::1 with boxxyerror notitle\n",
        "unset multiplot\nunset output\n", "reset\n");
  }
  // Throughput: acknowledged events per second (events/s), all pairs above each pair. Open loop:
  // what was sent next to the target.
  const auto pair_count = static_cast<double>(run.pairs.size());
  for (const auto& [terminal, file] :
       {std::pair{"pngcairo size 960,720 font 'sans,10'", "throughput.png"},
        std::pair{"svg size 960,720 font 'sans,10' background '#ffffff'", "throughput.svg"}}) {
    absl::StrAppend(
        &script, "set terminal ", terminal, "\nset output ", GnuplotString(dir + "/" + file),
        "\nset datafile separator ','\n", "set multiplot layout 2,1 title ", GnuplotString(title),
        "\nset title 'Throughput per second, all pairs'\n",
        "set xlabel 'second of the run'; set ylabel 'events/s'; set grid\n", "set xtics ", xtics,
        "\n", faults, "set key outside right; set yrange [0:*]\nplot ",
        GnuplotString(dir + "/per_second.csv"),
        " using 1:3 every ::1 with linespoints lw 2 title 'acknowledged'");
    if (run.rate != 0) {
      absl::StrAppendFormat(&script,
                            ", \\\n     %s using 1:8 every ::1 with linespoints title 'sent', "
                            "\\\n     %.0f with lines dt 3 lw 2 lc rgb '#555555' title 'target'",
                            GnuplotString(dir + "/per_second.csv"),
                            static_cast<double>(run.rate) * pair_count);
    }
    if (baseline) {
      absl::StrAppend(&script, ", \\\n     ", GnuplotString(dir + "/baseline_per_second.csv"),
                      " using 1:3 every ::1 with linespoints dt 2 lw 2 title 'baseline'");
    }
    absl::StrAppend(&script, "\nunset arrow; unset label\n",
                    "set title 'Throughput per second, each pair'\nplot ");
    for (size_t i = 0; i < run.pairs.size(); ++i) {
      const LoadPair& pair = run.pairs[i];
      absl::StrAppendFormat(
          &script, "%s$pair%u using 1:2 with linespoints title 'pair %u (%u->%u)'",
          i == 0 ? "" : ", \\\n     ", pair.id, pair.id, pair.sender, pair.receiver);
    }
    if (run.rate != 0) {
      absl::StrAppendFormat(&script,
                            ", \\\n     %u with lines dt 3 lw 2 lc rgb '#555555' title "
                            "'target per pair'",
                            run.rate);
    }
    absl::StrAppend(&script, "\nunset multiplot\nunset output\nreset\n");
  }
  return script;
}

// Runs `gnuplot script` with a 30 s bound; returns why it failed, or empty.
std::string RunGnuplot(const std::string& script) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the caller may block SIGINT/SIGTERM
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string program = "gnuplot";
  std::string path = script;
  char* argv[] = {program.data(), path.data(), nullptr};  // NOLINT: posix_spawnp's argv
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, "gnuplot", nullptr, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    return absl::StrCat("cannot run gnuplot: ", std::strerror(spawned),
                        " (install gnuplot-nox for the plots)");
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      break;
    }
    if (done < 0 && errno != EINTR) {
      return absl::StrCat("waiting for gnuplot: ", std::strerror(errno));
    }
    if (absl::Now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "gnuplot did not finish within 30 s";
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::StrCat("gnuplot failed (wait status ", status, ")");
  }
  return "";
}

// What the latency figures measure, by mode.
std::string LatencyText(uint64_t rate) {
  if (rate != 0) {
    return "Latency (open loop): from each data event's intended send time on the pair's fixed "
           "schedule to its acknowledgement back at the sender (one clock). A stall anywhere, the "
           "load generator's own included (its timers keep the scheduler's resolution, 1 ms in "
           "troupe_cluster's config; see the send lag), counts in the latency of every event it "
           "delayed. An event that found the window full stayed due and was sent once there was "
           "room, its latency growing meanwhile.";
  }
  return "RTT: from a data event's send to its acknowledgement back at the sender (one clock). It "
         "includes the wait behind the earlier events of the pair's window, so it is latency "
         "under load; an idle round trip needs --window=1. Closed loop: a stall delays the sends "
         "that would have measured it (coordinated omission); --rate measures without that.";
}

std::string Html(const LoadRunInfo& run, const std::vector<PairRow>& rows,
                 const std::vector<LoadSecond>& seconds, const std::string& plot_problem,
                 const std::vector<ComparisonRow>& comparison) {
  std::string html =
      absl::StrCat(HtmlHead(), "<p>", HtmlEscape(run.title),
                   "</p>\n<p>Mode: ", HtmlEscape(ModeText(run.rate, run.window)), "</p>\n");
  auto list = [&html](const std::vector<std::string>& lines, const char* attributes) {
    absl::StrAppend(&html, "<ul", attributes, ">\n");
    for (const std::string& line : lines) {
      absl::StrAppend(&html, "<li>", HtmlEscape(line), "</li>\n");
    }
    absl::StrAppend(&html, "</ul>\n");
  };
  if (run.failures.empty() && run.expected.empty() &&
      (!run.roll.empty() || run.leave_undelivered > 0)) {
    absl::StrAppend(&html, "<p><b>Passed", run.roll.empty() ? "" : " through the rolling restart",
                    ":</b> no tracked event lost (each acknowledged once, in order, or reported "
                    "undelivered while its node was leaving).</p>\n");
  } else if (run.failures.empty() && run.expected.empty()) {
    absl::StrAppend(&html, "<p><b>Passed:</b> every event acknowledged once, in order.</p>\n");
  } else if (run.failures.empty()) {
    absl::StrAppend(&html,
                    "<p><b>Passed under chaos:</b> every pair clear of the nodes killed or gone "
                    "had every event acknowledged once, in order.</p>\n");
  } else {
    absl::StrAppend(&html, "<p class=\"bad\"><b>Failed:</b></p>\n");
    list(run.failures, " class=\"bad\"");
  }
  if (run.metadata != nullptr) {
    absl::StrAppend(&html, MetadataHtml(*run.metadata));
  }
  if (!run.expected.empty()) {
    absl::StrAppend(&html,
                    "<p>Expected losses (a node the pair touches was killed or left):</p>\n");
    list(run.expected, "");
  }
  if (!run.chaos.empty()) {
    const bool membership = std::any_of(
        run.chaos.begin(), run.chaos.end(),
        [](const ChaosEvent& event) { return event.action == "join" || event.action == "leave"; });
    const bool roll_only =
        std::all_of(run.chaos.begin(), run.chaos.end(), [](const ChaosEvent& event) {
          return event.action == kRollLeave || event.action == kRollReady;
        });
    absl::StrAppend(
        &html, "<h2>",
        roll_only    ? "Rolling restart steps"
        : membership ? "Faults and membership changes"
                     : "Faults injected",
        "</h2>\n<p>troupe_cluster --chaos, --roll (or --membership=etcd); seconds after "
        "the load start, marked on the latency plot (<a href=\"chaos.csv\">chaos.csv"
        "</a>).</p>"
        "\n<table><tr><th>second</th><th>node</th><th>action</th><th>pid</th></tr>\n");
    for (const ChaosEvent& event : run.chaos) {
      absl::StrAppendFormat(&html,
                            "<tr><td>%.2f</td><td>%u</td><td class=\"l\">%s</td><td>%d</td>"
                            "</tr>\n",
                            event.second, event.node, HtmlEscape(event.action), event.pid);
    }
    absl::StrAppend(&html, "</table>\n");
  }
  if (!run.roll.empty()) {
    absl::StrAppend(&html,
                    "<h2>Rolling restart</h2>\n<p>troupe_cluster --roll: each node in turn left "
                    "(SIGTERM), started again and was ready (GET /readyz 200) before the next "
                    "(rows roll-leave and roll-ready above).</p>\n");
    list(run.roll, "");
  }
  if (!run.joins.empty()) {
    absl::StrAppend(&html,
                    "<p>Nodes that joined (the first event is the load generator's echo ping "
                    "answered by the node; each gets a pair of its own):</p>\n");
    list(run.joins, "");
  }
  const bool open = run.rate != 0;
  absl::StrAppend(
      &html, "<p>", HtmlEscape(LatencyText(run.rate)), "</p>\n",
      "<h2>Pairs</h2>\n<table><tr><th>pair</th><th>route</th><th>events</th>"
      "<th>events/s</th><th>MB/s</th><th>p50 us</th><th>p99 us</th><th>p99.9 us</th>"
      "<th>max us</th><th>lost</th><th>dup</th><th>undelivered</th><th>unsure</th>",
      open ? "<th>sent</th><th>scheduled</th><th>unsent</th><th>send lag p99 us</th>" : "",
      "<th>problem</th></tr>\n");
  for (const PairRow& row : rows) {
    absl::StrAppendFormat(
        &html,
        "<tr><td>%u</td><td>%s</td><td>%u</td><td>%.0f</td><td>%.2f</td><td>%.1f</td>"
        "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%u</td><td>%u</td><td>%u</td><td>%u</td>",
        row.pair.id, Route(row.pair), row.acked, row.rate, row.mbps,
        Micros(row.rtt.Percentile(0.5)), Micros(row.rtt.Percentile(0.99)),
        Micros(row.rtt.Percentile(0.999)), Micros(row.rtt.Percentile(1.0)), row.lost, row.dup,
        row.undelivered, row.unsure);
    if (open) {
      absl::StrAppendFormat(&html, "<td>%u</td><td>%u</td><td>%u</td><td>%.1f</td>", row.sent,
                            row.scheduled, row.unsent, Micros(row.send_lag.Percentile(0.99)));
    }
    absl::StrAppend(&html, "<td class=\"l\">", HtmlEscape(row.problem), "</td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");
  if (!comparison.empty()) {
    absl::StrAppend(&html, ComparisonHtml(comparison, run.baseline_dir, "baseline_per_second.csv"));
  }
  absl::StrAppend(&html, "<h2>Throughput</h2>\n");
  if (plot_problem.empty()) {
    absl::StrAppend(&html,
                    "<p><img src=\"throughput.png\" alt=\"events/s per second, all pairs and "
                    "each pair\" width=\"960\"> (<a href=\"throughput.svg\">SVG</a>)</p>\n");
  }
  absl::StrAppend(&html, "<h2>Latency</h2>\n");
  if (plot_problem.empty()) {
    absl::StrAppend(&html,
                    "<p><img src=\"latency.png\" alt=\"RTT per second and RTT histogram\" "
                    "width=\"960\"> (<a href=\"latency.svg\">SVG</a>)</p>\n");
  } else {
    absl::StrAppend(&html, "<p class=\"bad\">No plot: ", HtmlEscape(plot_problem),
                    ". The data is in per_second.csv and latency_histogram.csv.</p>\n");
  }
  absl::StrAppend(&html,
                  "<h2>Per second, all pairs</h2>\n<table><tr><th>second</th><th>pairs</th>"
                  "<th>events</th><th>MB</th><th>p50 us</th><th>p99 us</th><th>max us</th>"
                  "<th>sent</th></tr>\n");
  for (const LoadSecond& second : seconds) {
    absl::StrAppendFormat(&html,
                          "<tr><td>%u</td><td>%u</td><td>%u</td><td>%.2f</td><td>%.1f</td>"
                          "<td>%.1f</td><td>%.1f</td><td>%u</td></tr>\n",
                          second.second, second.pairs, second.acked,
                          static_cast<double>(second.bytes) / 1e6,
                          Micros(second.rtt.Percentile(0.5)), Micros(second.rtt.Percentile(0.99)),
                          Micros(second.rtt.Percentile(1.0)), second.sent);
  }
  absl::StrAppend(&html,
                  "</table>\n<p>Data: <a href=\"summary.json\">summary.json</a>, "
                  "<a href=\"pairs.csv\">pairs.csv</a>, "
                  "<a href=\"per_second.csv\">per_second.csv</a> (all pairs), "
                  "<a href=\"per_pair_second.csv\">per_pair_second.csv</a>, "
                  "<a href=\"latency_histogram.csv\">latency_histogram.csv</a>; plot script "
                  "<a href=\"report.gp\">report.gp</a>.</p>\n</body></html>\n");
  return html;
}

}  // namespace

std::string FormatSecond(const LoadSecond& second, uint64_t target) {
  // Open loop, the latency counts from the intended send time: no round trip of its own.
  std::string line = absl::StrFormat(
      "  %2u s: %10u events/s %8.2f MB/s   %s p50 %8.1f us  p99 %8.1f us", second.second,
      second.acked, static_cast<double>(second.bytes) / 1e6, target == 0 ? "RTT" : "lat",
      Micros(second.rtt.Percentile(0.5)), Micros(second.rtt.Percentile(0.99)));
  if (target == 0) {
    absl::StrAppend(&line, "  closed loop");
  } else {
    absl::StrAppendFormat(&line, "  open loop: sent %u of %u/s", second.sent, target);
  }
  return line;
}

LoadVerdict PrintLoadTable(const std::vector<LoadPair>& pairs,
                           const std::map<uint32_t, LoadReport>& reports,
                           const std::map<uint32_t, std::string>& gone, uint64_t rate) {
  LoadVerdict verdict;
  // A pair touching a node killed or gone may lose events; a duplicate is never expected.
  auto judge = [&](const LoadPair& pair, const std::string& why, uint64_t dups) {
    const std::string line = absl::StrCat("pair ", pair.id, " (", Route(pair), "): ", why);
    auto it = gone.find(pair.sender);
    if (it == gone.end()) {
      it = gone.find(pair.receiver);
    }
    if (it == gone.end()) {
      verdict.failures.push_back(line);
    } else if (dups != 0) {
      verdict.failures.push_back(absl::StrCat(line, "; receiver saw ", dups, " duplicates"));
    } else {
      verdict.expected.push_back(absl::StrCat(line, " (a node it touches ", it->second, ")"));
    }
  };
  std::printf("\n%4s %-7s %11s %11s %8s %9s %9s %9s %7s %5s %6s %6s\n", "pair", "route", "events",
              "events/s", "MB/s", "p50 us", "p99 us", "p99.9 us", "lost", "dup", "undel", "unsure");
  PairRow total;
  for (const PairRow& row : PairRows(pairs, reports)) {
    const std::string route = Route(row.pair);
    const LoadReport* r = row.reported ? &reports.at(row.pair.id) : nullptr;
    if (r != nullptr && (r->sender_left() || r->receiver_left()) && r->sent() == 0 &&
        r->problem().empty()) {
      std::printf("%4u %-7s %11s\n", row.pair.id, route.c_str(), "a node it touches left first");
      continue;
    }
    if (r == nullptr || (r->sent() == 0 && !r->problem().empty())) {
      std::printf("%4u %-7s %11s\n", row.pair.id, route.c_str(), "no report");
      judge(row.pair, row.problem, 0);
      continue;
    }
    total.Add(row);
    std::printf("%s\n", TableLine(absl::StrCat(row.pair.id), route, row, row.rtt).c_str());
    if (const std::string why = PairWhy(row, r); !why.empty()) {
      judge(row.pair, why, r->dups());
    }
  }
  std::printf("%s\n", TableLine("all", "", total, total.rtt).c_str());
  if (rate != 0) {
    std::printf(
        "%s\n",
        absl::StrFormat(
            "open loop at %u events/s per pair: sent %u of the %u events scheduled (%u never "
            "sent); send lag (sent after the intended time) p50 %.1f us, p99 %.1f us. Latency: "
            "from each event's intended send time to its acknowledgement, so a stall counts in "
            "every event it delayed.",
            rate, total.sent, total.scheduled, total.unsent, Micros(total.send_lag.Percentile(0.5)),
            Micros(total.send_lag.Percentile(0.99)))
            .c_str());
  } else {
    std::printf(
        "RTT: from a data event's send to its acknowledgement back at the sender, including the "
        "wait behind the pair's earlier events in its window (latency under load; --window=1 "
        "measures an idle round trip; closed loop: see --rate).\n");
  }
  std::printf(
      "undel: events reported undelivered; unsure: of those, sent but not known "
      "delivered.\n");
  return verdict;
}

PhaseSummary SummarizePhase(const LoadRunInfo& run, const LoadFigures& figures) {
  const std::map<uint32_t, LoadReport> reports = figures.reports();
  PhaseSummary phase;
  phase.set_payload_bytes(run.payload);
  phase.set_mode(run.rate == 0 ? "closed" : "open");
  phase.set_rate_per_pair(run.rate);
  phase.set_window(run.window);
  phase.set_seconds(run.seconds);
  PairRow total;
  for (const PairRow& row : PairRows(run.pairs, reports)) {
    const auto it = reports.find(row.pair.id);
    const std::string why = PairWhy(row, it == reports.end() ? nullptr : &it->second);
    *phase.add_pairs() = ToPairSummary(row, why);
    total.Add(row);
  }
  *phase.mutable_all() = ToPairSummary(total, run.failures.empty() ? "" : "the run failed");
  phase.set_target_events_per_s(static_cast<double>(run.rate) *
                                static_cast<double>(run.pairs.size()));
  phase.set_sent_events_per_s(static_cast<double>(total.sent) /
                              std::max(1.0, static_cast<double>(run.seconds)));
  phase.set_passed(run.failures.empty());
  phase.set_per_second_csv("per_second.csv");
  phase.set_report_html("report.html");
  return phase;
}

LoadSummary SummarizeRun(const LoadRunInfo& run, std::vector<PhaseSummary> phases) {
  LoadSummary summary;
  summary.set_schema(kSummarySchema);
  if (run.metadata != nullptr) {
    *summary.mutable_metadata() = *run.metadata;
  }
  summary.set_title(run.title);
  summary.set_mode(run.rate == 0 ? "closed" : "open");
  summary.set_pairs(static_cast<uint32_t>(run.pairs.size()));
  bool passed = true;
  for (PhaseSummary& phase : phases) {
    passed = passed && phase.passed();
    *summary.add_phases() = std::move(phase);
  }
  summary.set_passed(passed && run.failures.empty());
  for (const std::string& failure : run.failures) {
    summary.add_failures(failure);
  }
  summary.set_baseline_dir(run.baseline_dir);
  for (const ComparisonRow& row : run.comparison) {
    *summary.add_comparison() = row;
  }
  return summary;
}

absl::StatusOr<std::string> WriteLoadReport(const std::string& dir, const LoadRunInfo& run,
                                            const LoadFigures& figures) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("--report: empty directory");
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--report: cannot create ", dir, ": ", error.message()));
  }
  const std::vector<PairRow> rows = PairRows(run.pairs, figures.reports());
  const std::vector<LoadSecond> seconds = figures.seconds();
  LatencyHistogram all;
  for (const PairRow& row : rows) {
    all.Merge(row.rtt);
  }
  for (const auto& [name, text] :
       {std::pair{"pairs.csv", PairsCsv(rows)},
        std::pair{"per_second.csv", PerSecondCsv(seconds, /*by_pair=*/false)},
        std::pair{"per_pair_second.csv", PerSecondCsv(seconds, /*by_pair=*/true)},
        std::pair{"latency_histogram.csv", HistogramCsv(all)},
        std::pair{"report.gp",
                  GnuplotScript(dir, run, seconds, !run.baseline_per_second.empty())}}) {
    if (absl::Status written = WriteTextFile(absl::StrCat(dir, "/", name), text); !written.ok()) {
      return written;
    }
  }
  if (!run.baseline_per_second.empty()) {
    if (absl::Status written =
            WriteTextFile(dir + "/baseline_per_second.csv", run.baseline_per_second);
        !written.ok()) {
      return written;
    }
  }
  if (absl::Status written =
          WriteSummaryJson(dir, SummarizeRun(run, {SummarizePhase(run, figures)}));
      !written.ok()) {
    return written;
  }
  if (!run.chaos.empty()) {
    std::string csv = absl::StrCat(kChaosCsvHeader, "\n");
    for (const ChaosEvent& event : run.chaos) {
      absl::StrAppend(&csv, ChaosCsvRow(event));
    }
    if (absl::Status written = WriteTextFile(dir + "/chaos.csv", csv); !written.ok()) {
      return written;
    }
  }
  std::string plot_problem;
  if (all.count() == 0) {
    plot_problem = "no round trip was measured";
  } else {
    plot_problem = RunGnuplot(dir + "/report.gp");
  }
  const std::string html_path = dir + "/report.html";
  if (absl::Status written =
          WriteTextFile(html_path, Html(run, rows, seconds, plot_problem, run.comparison));
      !written.ok()) {
    return written;
  }
  if (!plot_problem.empty()) {
    std::fprintf(stderr, "troupe_loadgen: report without plots: %s\n", plot_problem.c_str());
  }
  return html_path;
}

}  // namespace troupe::examples
