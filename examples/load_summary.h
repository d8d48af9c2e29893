// SPDX-License-Identifier: Apache-2.0
//
// What a load report says besides its figures (troupe_loadgen --report=DIR, load_report.h):
//
//   | piece                 | what                                                               |
//   |-----------------------|--------------------------------------------------------------------|
//   | RunMetadata           | date (UTC), Troupe version and git commit, host, cores, load        |
//   |                       | average at the load's start and end, both command lines, every     |
//   |                       | flag, the node config, CPU seconds per process over the load        |
//   |                       | (CpuMeter: /proc/PID/stat of the nodes troupe_cluster started and   |
//   |                       | of the load generator)                                             |
//   | summary.json          | LoadSummary (loadtest.proto) printed by protobuf's JSON printer,   |
//   |                       | field names as in the .proto: parameters, mode, per payload size    |
//   |                       | and pair the events, rates, latency percentiles, losses, verdict,   |
//   |                       | the metadata and, with --baseline, the comparison                  |
//   | --baseline=DIR        | ReadBaseline: an earlier report's summary.json and the per-second   |
//   |                       | CSV of each phase, checked (a clear error names the file and the    |
//   |                       | field); Compare: the key figures of a phase next to the baseline's  |
//   |                       | with the ratio new / baseline                                      |
//   | several payload sizes | WriteRunIndex: DIR/report.html and summary.json over the phases,   |
//   |                       | each phase's own report in DIR/payload-<bytes>/                    |
//
// Thread-safety: thread-compatible; the free functions are thread-safe.
//
// Example:
//
//   absl::StatusOr<Baseline> baseline = ReadBaseline("/tmp/run1");   // before the load
//   CpuMeter cpu({{"node 1", pid1}, {"node 2", pid2}});              // at the load's start
//   RunMetadata metadata = StartMetadata(command_line, "", flags, config_text);
//   ... the load ...
//   FinishMetadata(cpu, wall_seconds, &metadata);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loadtest.pb.h"

namespace troupe::examples {

// LoadSummary.schema of the summaries this code writes and reads.
inline constexpr char kSummarySchema[] = "troupe-load-summary/1";

// -- metadata ------------------------------------------------------------------------------------

// Returns the metadata known at the load's start: date, version, commit, host, cores, load
// average, the command lines, `flags` and the node config's text.
RunMetadata StartMetadata(std::string command_line, std::string launcher_command_line,
                          std::map<std::string, std::string> flags, std::string node_config);

// The CPU time of processes over the load: each one's utime + stime (/proc/PID/stat) at the start
// and at the end. A process that ended, or whose pid another process took (its start time
// differs), gets a problem instead of a figure.
class CpuMeter {
 public:
  // Reads the processes now (`name`, pid); this process is added as "troupe_loadgen".
  explicit CpuMeter(std::vector<std::pair<std::string, pid_t>> processes);
  // Returns each process's CPU seconds since the constructor, this process last.
  std::vector<ProcessCpu> Finish() const;

 private:
  struct Start {
    std::string name;
    pid_t pid = 0;
    std::optional<double> cpu_seconds;  // none: could not be read
    uint64_t start_ticks = 0;
  };
  std::vector<Start> starts_;
};

// Completes `metadata` at the load's end: the load average and each process's CPU seconds.
void FinishMetadata(const CpuMeter& cpu, double wall_seconds, RunMetadata* metadata);

// The largest payload a data event may carry (--payload): a larger one is likelier a typo than a
// test.
inline constexpr uint32_t kMaxPayload = 64 << 20;

// Parses --payload: one size in bytes or several, comma-separated; kInvalidArgument names the bad
// item.
absl::StatusOr<std::vector<uint32_t>> ParsePayloadSizes(const std::string& text);

// Parses --node_pids ("1:4242,2:4243": node name, pid); kInvalidArgument names the bad item.
absl::StatusOr<std::vector<std::pair<std::string, pid_t>>> ParseNodePids(const std::string& text);

// -- summary.json --------------------------------------------------------------------------------

// Writes `summary` to `dir`/summary.json (its schema set). kInternal names the file.
absl::Status WriteSummaryJson(const std::string& dir, LoadSummary summary);

// Returns the key figures of `now` next to `baseline`'s: events/s, MB/s, latency percentiles,
// lost and undelivered events (open loop: events sent per second too), with new / baseline.
std::vector<ComparisonRow> Compare(const PhaseSummary& baseline, const PhaseSummary& now);

// Returns the comparison as a terminal table, and as an HTML section (linking the baseline's
// per-second CSV at `csv_href` when not empty).
std::string ComparisonText(const std::vector<ComparisonRow>& rows, const std::string& baseline_dir);
std::string ComparisonHtml(const std::vector<ComparisonRow>& rows, const std::string& baseline_dir,
                           const std::string& csv_href);

// Returns the metadata as report.html's header (a definition list).
std::string MetadataHtml(const RunMetadata& metadata);

// Returns what the mode is: "closed loop, window 256 per pair" or "open loop, 10000 events/s per
// pair (intended send times; window 256 bounds what is in flight)".
std::string ModeText(uint64_t rate, uint32_t window);

// -- --baseline ----------------------------------------------------------------------------------

// An earlier report, read back: its summary and the text of each phase's per-second CSV (the
// phase's index in summary.phases).
struct Baseline {
  std::string dir;
  LoadSummary summary;
  std::vector<std::string> per_second;
  // Returns the index of the phase to compare a phase of `payload` bytes with: the one of the same
  // size, else the only one; nullopt when neither.
  std::optional<size_t> PhaseFor(uint32_t payload) const;
};

// Reads `dir`/summary.json and each phase's per-second CSV. kNotFound / kInvalidArgument name the
// file and the field (or line) at fault: a file that cannot be read, JSON that does not parse as
// LoadSummary, another schema, no phase, a phase without figures or CSV, a CSV without the
// per_second.csv header or with a row that does not parse.
absl::StatusOr<Baseline> ReadBaseline(const std::string& dir);

// -- several payload sizes -----------------------------------------------------------------------

// Writes `dir`/summary.json (`summary`) and `dir`/report.html: the metadata, each phase's key
// figures in a section of its own with its plots and a link to its report (payload-<bytes>/), and
// the comparison. Returns the path of report.html; kInternal names a file it could not write.
absl::StatusOr<std::string> WriteRunIndex(const std::string& dir, const LoadSummary& summary);

// -- helpers the report writers share ------------------------------------------------------------

// Writes `text` to `path`, replacing it; kInternal names the file.
absl::Status WriteTextFile(const std::string& path, const std::string& text);
// Returns the start of a report.html: the head with its style, the body's heading.
std::string HtmlHead();
// Returns `text` with &, <, > and " escaped for HTML.
std::string HtmlEscape(const std::string& text);

}  // namespace troupe::examples
