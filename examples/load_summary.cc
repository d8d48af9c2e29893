// SPDX-License-Identifier: Apache-2.0
#include "load_summary.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"

#ifndef TROUPE_VERSION
#error "TROUPE_VERSION must be defined (examples/CMakeLists.txt)"
#endif
#ifndef TROUPE_GIT_COMMIT
#error "TROUPE_GIT_COMMIT must be defined (examples/CMakeLists.txt)"
#endif

namespace troupe::examples {

namespace {

// The per-second CSV's header, as load_report.cc writes it: a baseline's must start so.
constexpr absl::string_view kPerSecondHeader = "second,pairs,events,mb,p50_us,p99_us,max_us";

std::vector<double> LoadAverage() {
  double averages[3] = {0, 0, 0};  // NOLINT: getloadavg's array
  const int got = ::getloadavg(averages, 3);
  return {averages, averages + std::max(0, got)};
}

// utime + stime in seconds and the start time in clock ticks of /proc/PID/stat; nullopt when the
// process is gone.
std::optional<std::pair<double, uint64_t>> ReadProcStat(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) {
    return std::nullopt;
  }
  // The command name (field 2) may hold spaces and parentheses: the fields after it start past
  // the last ')'. From there, field 3 (state) is index 0: utime (14) is 11, stime 12, starttime 19.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(line).substr(close + 1), ' ', absl::SkipEmpty());
  uint64_t utime = 0;
  uint64_t stime = 0;
  uint64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime) || !absl::SimpleAtoi(fields[19], &start)) {
    return std::nullopt;
  }
  const double ticks = static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)));
  return std::pair{static_cast<double>(utime + stime) / ticks, start};
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read (", std::strerror(errno), ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks a baseline's per-second CSV: the header, then rows of seven or more numbers.
absl::Status CheckPerSecondCsv(const std::string& path, const std::string& text) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || !absl::StartsWith(lines[0], kPerSecondHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": line 1: want the header '", kPerSecondHeader, "...'"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<absl::string_view> cells = absl::StrSplit(lines[i], ',');
    for (size_t c = 0; c < 7; ++c) {
      double value = 0;
      if (c >= cells.size() || !absl::SimpleAtod(cells[c], &value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": line ", i + 1, ": column ",
                         std::vector<absl::string_view>(absl::StrSplit(kPerSecondHeader, ','))[c],
                         ": not a number in '", lines[i], "'"));
      }
    }
  }
  return absl::OkStatus();
}

double Ratio(double value, double baseline) { return baseline != 0 ? value / baseline : 0; }

// One row of key figures (a pair, or all of them) as HTML.
std::string KeyFiguresRow(const PairSummary& pair, bool open) {
  const LatencySummary& l = pair.latency();
  std::string row = absl::StrFormat(
      "<tr><td class=\"l\">%s</td><td>%u</td><td>%.0f</td><td>%.2f</td><td>%.1f</td><td>%.1f</td>"
      "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%u</td><td>%u</td><td>%u</td><td>%u</td>",
      HtmlEscape(pair.pair() == 0 ? std::string("all")
                                  : absl::StrCat(pair.pair(), " (", pair.route(), ")")),
      pair.events(), pair.events_per_s(), pair.mb_per_s(), l.p50_us(), l.p90_us(), l.p99_us(),
      l.p999_us(), l.max_us(), pair.lost(), pair.dup(), pair.undelivered(), pair.unsure());
  if (open) {
    absl::StrAppendFormat(&row, "<td>%u</td><td>%u</td><td>%u</td><td>%.1f</td>", pair.sent(),
                          pair.scheduled(), pair.unsent(), pair.send_lag_p99_us());
  }
  absl::StrAppend(&row, "<td class=\"l", pair.passed() ? "" : " bad", "\">",
                  pair.passed() ? "passed" : HtmlEscape(pair.problem()), "</td></tr>\n");
  return row;
}

}  // namespace

// -- metadata ------------------------------------------------------------------------------------

RunMetadata StartMetadata(std::string command_line, std::string launcher_command_line,
                          std::map<std::string, std::string> flags, std::string node_config) {
  RunMetadata metadata;
  metadata.set_date_utc(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  metadata.set_troupe_version(TROUPE_VERSION);
  metadata.set_git_commit(TROUPE_GIT_COMMIT);
  char host[256] = {};  // NOLINT: gethostname's buffer
  if (::gethostname(host, sizeof(host) - 1) == 0) {
    metadata.set_host(host);
  }
  metadata.set_cores(static_cast<uint32_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))));
  for (const double average : LoadAverage()) {
    metadata.add_load_average_start(average);
  }
  metadata.set_command_line(std::move(command_line));
  metadata.set_launcher_command_line(std::move(launcher_command_line));
  for (auto& [name, value] : flags) {
    (*metadata.mutable_flags())[name] = std::move(value);
  }
  metadata.set_node_config(std::move(node_config));
  return metadata;
}

CpuMeter::CpuMeter(std::vector<std::pair<std::string, pid_t>> processes) {
  processes.emplace_back("troupe_loadgen", ::getpid());
  for (auto& [name, pid] : processes) {
    Start start;
    start.name = std::move(name);
    start.pid = pid;
    if (const auto stat = ReadProcStat(pid)) {
      start.cpu_seconds = stat->first;
      start.start_ticks = stat->second;
    }
    starts_.push_back(std::move(start));
  }
}

std::vector<ProcessCpu> CpuMeter::Finish() const {
  std::vector<ProcessCpu> out;
  for (const Start& start : starts_) {
    ProcessCpu cpu;
    cpu.set_name(start.name);
    cpu.set_pid(start.pid);
    const auto stat = ReadProcStat(start.pid);
    if (!start.cpu_seconds) {
      cpu.set_problem("not running at the load's start");
    } else if (!stat) {
      cpu.set_problem("ended during the load");
    } else if (stat->second != start.start_ticks) {
      cpu.set_problem("restarted during the load (another process has its pid)");
    } else {
      cpu.set_cpu_seconds(stat->first - *start.cpu_seconds);
    }
    out.push_back(std::move(cpu));
  }
  return out;
}

void FinishMetadata(const CpuMeter& cpu, double wall_seconds, RunMetadata* metadata) {
  metadata->clear_load_average_end();
  for (const double average : LoadAverage()) {
    metadata->add_load_average_end(average);
  }
  metadata->clear_cpu();
  for (ProcessCpu& process : cpu.Finish()) {
    *metadata->add_cpu() = std::move(process);
  }
  metadata->set_wall_seconds(wall_seconds);
}

absl::StatusOr<std::vector<uint32_t>> ParsePayloadSizes(const std::string& text) {
  std::vector<uint32_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    uint32_t size = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &size) || size > kMaxPayload) {
      return absl::InvalidArgumentError(
          absl::StrCat("--payload: '", item, "' is not a size in bytes from 0 to ", kMaxPayload,
                       " (want e.g. 64 or 64,1024,65536)"));
    }
    sizes.push_back(size);
  }
  return sizes;
}

absl::StatusOr<std::vector<std::pair<std::string, pid_t>>> ParseNodePids(const std::string& text) {
  std::vector<std::pair<std::string, pid_t>> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    int pid = 0;
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &pid) || pid <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--node_pids: '", item, "': want NODE:PID, e.g. 1:4242"));
    }
    out.emplace_back(absl::StrCat("node ", parts[0]), static_cast<pid_t>(pid));
  }
  return out;
}

std::string MetadataHtml(const RunMetadata& metadata) {
  auto averages = [](const google::protobuf::RepeatedField<double>& values) {
    return absl::StrJoin(values, " / ", [](std::string* out, double value) {
      absl::StrAppendFormat(out, "%.2f", value);
    });
  };
  std::string cpu;
  for (const ProcessCpu& process : metadata.cpu()) {
    absl::StrAppend(
        &cpu, cpu.empty() ? "" : "; ", HtmlEscape(process.name()), " (pid ", process.pid(), "): ",
        process.problem().empty()
            ? absl::StrFormat("%.2f s (%.0f%% of a core)", process.cpu_seconds(),
                              100 * process.cpu_seconds() / std::max(1e-9, metadata.wall_seconds()))
            : HtmlEscape(process.problem()));
  }
  std::string flags;
  for (const auto& [name, value] :
       std::map<std::string, std::string>(metadata.flags().begin(), metadata.flags().end())) {
    absl::StrAppend(&flags, flags.empty() ? "" : " ", "--", HtmlEscape(name), "=",
                    HtmlEscape(value));
  }
  std::string html = absl::StrCat(
      "<h2>Run</h2>\n<table class=\"meta\">\n", "<tr><th>date (UTC)</th><td class=\"l\">",
      HtmlEscape(metadata.date_utc()), "</td></tr>\n", "<tr><th>Troupe</th><td class=\"l\">",
      HtmlEscape(metadata.troupe_version()), ", commit ", HtmlEscape(metadata.git_commit()),
      "</td></tr>\n", "<tr><th>host</th><td class=\"l\">", HtmlEscape(metadata.host()), ", ",
      metadata.cores(), " cores</td></tr>\n",
      "<tr><th>load average (1/5/15 min)</th><td class=\"l\">start ",
      averages(metadata.load_average_start()), ", end ", averages(metadata.load_average_end()),
      "</td></tr>\n", "<tr><th>CPU over the load (",
      absl::StrFormat("%.1f", metadata.wall_seconds()), " s)</th><td class=\"l\">",
      cpu.empty() ? "not measured" : cpu, "</td></tr>\n");
  if (!metadata.launcher_command_line().empty()) {
    absl::StrAppend(&html, "<tr><th>launcher</th><td class=\"l\"><code>",
                    HtmlEscape(metadata.launcher_command_line()), "</code></td></tr>\n");
  }
  absl::StrAppend(&html, "<tr><th>command</th><td class=\"l\"><code>",
                  HtmlEscape(metadata.command_line()), "</code></td></tr>\n",
                  "<tr><th>flags</th><td class=\"l\"><code>", flags, "</code></td></tr>\n",
                  "<tr><th>node config</th><td class=\"l\"><pre>",
                  HtmlEscape(metadata.node_config()), "</pre></td></tr>\n</table>\n");
  return html;
}

std::string ModeText(uint64_t rate, uint32_t window) {
  if (rate == 0) {
    return absl::StrCat("closed loop: a window of ", window,
                        " events in flight per pair, the next sent as one is acknowledged");
  }
  return absl::StrCat("open loop: ", rate,
                      " events/s per pair on a fixed schedule, latency from each event's "
                      "intended send time (a window of ",
                      window, " bounds what is in flight; a due event waits for room)");
}

// -- summary.json --------------------------------------------------------------------------------

absl::Status WriteSummaryJson(const std::string& dir, LoadSummary summary) {
  summary.set_schema(kSummarySchema);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (const auto printed = google::protobuf::util::MessageToJsonString(summary, &json, options);
      !printed.ok()) {
    return absl::InternalError(
        absl::StrCat(dir, "/summary.json: ", std::string(printed.message())));
  }
  return WriteTextFile(dir + "/summary.json", json);
}

std::vector<ComparisonRow> Compare(const PhaseSummary& baseline, const PhaseSummary& now) {
  std::vector<ComparisonRow> rows;
  auto add = [&](const char* figure, double base, double value) {
    ComparisonRow row;
    row.set_payload_bytes(now.payload_bytes());
    row.set_figure(figure);
    row.set_baseline(base);
    row.set_value(value);
    row.set_ratio(Ratio(value, base));
    rows.push_back(std::move(row));
  };
  const PairSummary& b = baseline.all();
  const PairSummary& n = now.all();
  add("events/s", b.events_per_s(), n.events_per_s());
  add("MB/s", b.mb_per_s(), n.mb_per_s());
  add("latency p50 us", b.latency().p50_us(), n.latency().p50_us());
  add("latency p90 us", b.latency().p90_us(), n.latency().p90_us());
  add("latency p99 us", b.latency().p99_us(), n.latency().p99_us());
  add("latency p99.9 us", b.latency().p999_us(), n.latency().p999_us());
  add("latency max us", b.latency().max_us(), n.latency().max_us());
  add("lost", static_cast<double>(b.lost()), static_cast<double>(n.lost()));
  add("undelivered", static_cast<double>(b.undelivered()), static_cast<double>(n.undelivered()));
  if (baseline.mode() == "open" || now.mode() == "open") {
    add("sent events/s", baseline.sent_events_per_s(), now.sent_events_per_s());
  }
  return rows;
}

std::string ComparisonText(const std::vector<ComparisonRow>& rows,
                           const std::string& baseline_dir) {
  std::string text = absl::StrCat("comparison with the baseline ", baseline_dir, ":\n");
  absl::StrAppendFormat(&text, "  %8s %-18s %14s %14s %12s\n", "payload", "figure", "baseline",
                        "this run", "new/baseline");
  for (const ComparisonRow& row : rows) {
    absl::StrAppendFormat(
        &text, "  %6u B %-18s %14.1f %14.1f %12s\n", row.payload_bytes(), row.figure(),
        row.baseline(), row.value(),
        row.baseline() != 0 ? absl::StrFormat("%.3f", row.ratio()) : std::string("-"));
  }
  return text;
}

std::string ComparisonHtml(const std::vector<ComparisonRow>& rows, const std::string& baseline_dir,
                           const std::string& csv_href) {
  std::string html = absl::StrCat(
      "<h2>Against the baseline</h2>\n<p>--baseline=", HtmlEscape(baseline_dir), ": ",
      csv_href.empty() ? std::string("each size's plots draw the baseline's figures dashed")
                       : absl::StrCat("the plots draw <a href=\"", HtmlEscape(csv_href),
                                      "\">its per-second figures</a> dashed"),
      ".</p>\n<table class=\"comparison\"><tr><th>payload</th><th>figure</th>"
      "<th>baseline</th><th>this run</th><th>new / baseline</th></tr>\n");
  for (const ComparisonRow& row : rows) {
    absl::StrAppendFormat(
        &html,
        "<tr><td>%u B</td><td class=\"l\">%s</td><td>%.1f</td><td>%.1f</td><td>%s</td></tr>\n",
        row.payload_bytes(), HtmlEscape(row.figure()), row.baseline(), row.value(),
        row.baseline() != 0 ? absl::StrFormat("%.3f", row.ratio()) : std::string("-"));
  }
  absl::StrAppend(&html, "</table>\n");
  return html;
}

// -- --baseline ----------------------------------------------------------------------------------

std::optional<size_t> Baseline::PhaseFor(uint32_t payload) const {
  for (int i = 0; i < summary.phases_size(); ++i) {
    if (summary.phases(i).payload_bytes() == payload) {
      return static_cast<size_t>(i);
    }
  }
  if (summary.phases_size() == 1) {
    return 0;
  }
  return std::nullopt;
}

absl::StatusOr<Baseline> ReadBaseline(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  absl::StatusOr<std::string> json = ReadTextFile(path);
  if (!json.ok()) {
    return json.status();
  }
  Baseline baseline;
  baseline.dir = dir;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a later writer's additions
  if (const auto parsed =
          google::protobuf::util::JsonStringToMessage(*json, &baseline.summary, options);
      !parsed.ok()) {
    // The parser's message spans lines (a caret under the spot): one line here.
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a load summary: ",
                     absl::StripAsciiWhitespace(absl::StrReplaceAll(std::string(parsed.message()),
                                                                    {{"\n^", ""}, {"\n", " "}}))));
  }
  const LoadSummary& summary = baseline.summary;
  if (summary.schema() != kSummarySchema) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field 'schema': want '", kSummarySchema,
                                                   "', got '", summary.schema(), "'"));
  }
  if (summary.phases().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field 'phases': missing or empty"));
  }
  for (int i = 0; i < summary.phases_size(); ++i) {
    const PhaseSummary& phase = summary.phases(i);
    if (!phase.has_all()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": field 'phases[", i, "].all': missing"));
    }
    if (phase.per_second_csv().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": field 'phases[", i, "].per_second_csv': missing"));
    }
    const std::string csv_path = absl::StrCat(dir, "/", phase.per_second_csv());
    absl::StatusOr<std::string> csv = ReadTextFile(csv_path);
    if (!csv.ok()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": field 'phases[", i, "].per_second_csv': ", csv.status().message()));
    }
    if (absl::Status checked = CheckPerSecondCsv(csv_path, *csv); !checked.ok()) {
      return checked;
    }
    baseline.per_second.push_back(std::move(*csv));
  }
  return baseline;
}

// -- several payload sizes -----------------------------------------------------------------------

absl::StatusOr<std::string> WriteRunIndex(const std::string& dir, const LoadSummary& summary) {
  if (absl::Status written = WriteSummaryJson(dir, summary); !written.ok()) {
    return written;
  }
  std::string html = absl::StrCat(
      HtmlHead(), "<p>", HtmlEscape(summary.title()), "</p>\n<p>Mode: ",
      HtmlEscape(summary.phases().empty()
                     ? std::string()
                     : ModeText(summary.phases(0).rate_per_pair(), summary.phases(0).window())),
      "</p>\n");
  if (summary.passed()) {
    absl::StrAppend(&html,
                    "<p><b>Passed:</b> every payload size, every event acknowledged once, "
                    "in order.</p>\n");
  } else {
    absl::StrAppend(&html, "<p class=\"bad\"><b>Failed:</b></p>\n<ul class=\"bad\">\n");
    for (const std::string& failure : summary.failures()) {
      absl::StrAppend(&html, "<li>", HtmlEscape(failure), "</li>\n");
    }
    absl::StrAppend(&html, "</ul>\n");
  }
  absl::StrAppend(&html, MetadataHtml(summary.metadata()));
  for (const PhaseSummary& phase : summary.phases()) {
    const bool open = phase.mode() == "open";
    const std::string sub = absl::StrCat("payload-", phase.payload_bytes());
    absl::StrAppendFormat(
        &html,
        "<h2 id=\"%s\">Payload %u B</h2>\n<p>%u s, %s. Its own report: <a href=\"%s/report.html\">"
        "%s/report.html</a>.</p>\n",
        sub, phase.payload_bytes(), phase.seconds(),
        phase.passed() ? "passed" : "<b class=\"bad\">failed</b>", sub, sub);
    if (open) {
      absl::StrAppendFormat(&html,
                            "<p>Open loop: sent %.0f events/s of a %.0f events/s target.</p>\n",
                            phase.sent_events_per_s(), phase.target_events_per_s());
    }
    absl::StrAppend(
        &html,
        "<table><tr><th>pair</th><th>events</th><th>events/s</th><th>MB/s</th>"
        "<th>p50 us</th><th>p90 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th>"
        "<th>lost</th><th>dup</th><th>undelivered</th><th>unsure</th>",
        open ? "<th>sent</th><th>scheduled</th><th>unsent</th><th>send lag p99 us</th>" : "",
        "<th>verdict</th></tr>\n", KeyFiguresRow(phase.all(), open));
    for (const PairSummary& pair : phase.pairs()) {
      absl::StrAppend(&html, KeyFiguresRow(pair, open));
    }
    absl::StrAppend(&html, "</table>\n");
    for (const char* plot : {"throughput", "latency"}) {
      absl::StrAppendFormat(&html,
                            "<p><img src=\"%s/%s.png\" alt=\"%s, payload %u B\" width=\"960\"> "
                            "(<a href=\"%s/%s.svg\">SVG</a>)</p>\n",
                            sub, plot, plot, phase.payload_bytes(), sub, plot);
    }
  }
  if (!summary.comparison().empty()) {
    absl::StrAppend(&html,
                    ComparisonHtml({summary.comparison().begin(), summary.comparison().end()},
                                   summary.baseline_dir(), ""));
  }
  absl::StrAppend(&html,
                  "<p>Data: <a href=\"summary.json\">summary.json</a>; each size's CSVs "
                  "in its directory.</p>\n</body></html>\n");
  const std::string path = dir + "/report.html";
  if (absl::Status written = WriteTextFile(path, html); !written.ok()) {
    return written;
  }
  return path;
}

// -- helpers the report writers share ------------------------------------------------------------

std::string HtmlHead() {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Troupe load report</title>\n"
         "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
         "margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
         "th{background:#f2f2f2}td.l{text-align:left}.bad{color:#b00}</style></head><body>\n"
         "<h1>Troupe load report</h1>\n";
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string HtmlEscape(const std::string& text) {
  return absl::StrReplaceAll(text,
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace troupe::examples
