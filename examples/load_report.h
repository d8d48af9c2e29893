// SPDX-License-Identifier: Apache-2.0
//
// The load generator's figures, gathered while it runs and written out at the end
// (troupe_loadgen --report=DIR):
//
//   | file                   | holds                                                           |
//   |------------------------|-----------------------------------------------------------------|
//   | pairs.csv              | one row per pair: route, events, events/s, MB/s, RTT p50, p99,  |
//   |                        | p99.9 and max, lost, duplicated, undelivered, unsure, problem   |
//   | per_second.csv         | one row per second, all pairs: pairs that reported it, events   |
//   |                        | acknowledged, MB, RTT p50, p99 and max of that second, events   |
//   |                        | sent                                                            |
//   | per_pair_second.csv    | the same per second and pair                                    |
//   | latency_histogram.csv  | every non-empty RTT bucket of all pairs: low_us, high_us, count |
//   | latency.png, .svg      | RTT p50/p99/max per second above the RTT histogram (log scales),|
//   |                        | rendered by gnuplot from report.gp when gnuplot is on PATH; a   |
//   |                        | dashed line marks each fault injected (chaos.csv), green for a  |
//   |                        | node that joined or is ready again after a rolling restart,     |
//   |                        | orange for a node that leaves in one                            |
//   | chaos.csv              | only after troupe_cluster --chaos, --roll (or                   |
//   |                        | --membership=etcd): each node killed, restarted, joined, left,  |
//   |                        | or left and ready again in a rolling restart, seconds after the |
//   |                        | load start (chaos.h)                                            |
//   | throughput.png, .svg   | events/s per second of all pairs (open loop: sent and the       |
//   |                        | target too) above each pair's: per_second.csv, and              |
//   |                        | per_pair_second.csv's figures as data blocks in report.gp; a    |
//   |                        | baseline's figures dashed                                       |
//   | summary.json           | LoadSummary (loadtest.proto) as JSON: metadata, parameters,     |
//   |                        | each pair's figures and verdict (load_summary.h)                |
//   | baseline_per_second.csv| with --baseline: the baseline's per_second.csv, drawn dashed    |
//   | report.html            | the run's parameters, the faults and membership changes (with   |
//   |                        | each joined node's time to its first event), both tables, the   |
//   |                        | plot and what RTT means                                         |
// lost: events sent that got neither an acknowledgement nor an Undelivered report. An event
// refused because its receiver's node was leaving (loadtest.h) is counted in undelivered, not lost.
//
// RTT is the time from a data event's send to its acknowledgement back at the sender (one clock):
// it includes the wait behind up to `window - 1` earlier events of the same pair, so it is a
// latency under load, not an idle round trip (run --window=1 for that). In open loop (a rate per
// pair, open_loop.h) the latency counts from each event's intended send time instead.
//
// A pair started during the run (a node joined) reports the run's seconds from the one it started
// in (LoadPair::first_second): the per-second figures wait for it from that second on.
//
// Thread-safety: LoadFigures is thread-safe (the controller actor writes, the main thread reads);
// WriteLoadReport is thread-compatible.
//
// Example:
//
//   LoadFigures figures;                       // the controller actor calls Add / SetReport
//   ... figures.TakeSeconds(pairs, false) each tick: print the lines it returns ...
//   absl::StatusOr<std::string> html =
//       WriteLoadReport("/tmp/run1", {.title = "3 pairs ...", .pairs = routes}, figures);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include "actors/sync.h"
#include "chaos.h"
#include "histogram.h"
#include "loadtest.pb.h"

namespace troupe::examples {

// One second of the run, summed over the pairs that reported it.
struct LoadSecond {
  uint32_t second = 0;
  // Pairs that sent their figures for this second.
  uint32_t pairs = 0;
  uint64_t acked = 0;
  uint64_t bytes = 0;
  // Data events sent in the second (open loop: against the target).
  uint64_t sent = 0;
  LatencyHistogram rtt;
  // Each pair's own figures for the second.
  std::map<uint32_t, LoadProgress> by_pair;
};

// A pair as the load generator started it.
struct LoadPair {
  uint32_t id = 0;
  uint32_t sender = 0;
  uint32_t receiver = 0;
  // The run's second the pair started in: 1, or later for a pair started when a node joined.
  uint32_t first_second = 1;
};

// What the load generator learned: each pair's seconds (EvLoadProgress) and final reports.
class LoadFigures {
 public:
  void AddSecond(const LoadProgress& progress) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps the first report of each pair.
  void SetReport(LoadReport report) ABSL_LOCKS_EXCLUDED(mu_);

  size_t reported() const ABSL_LOCKS_EXCLUDED(mu_);
  std::map<uint32_t, LoadReport> reports() const ABSL_LOCKS_EXCLUDED(mu_);
  bool has_report(uint32_t pair) const ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the seconds, in order, that were not returned before and are complete: each pair of
  // `pairs` that runs in it (first_second at most it) sent its figures for it or has ended. With
  // `all`, returns every second not returned before (at the end of the run). Figures for a second
  // already returned are kept out of the per-second figures (the pair's report still counts
  // them).
  std::vector<LoadSecond> TakeSeconds(const std::vector<LoadPair>& pairs, bool all)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Returns every second gathered, in order.
  std::vector<LoadSecond> seconds() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable Mutex mu_;
  std::map<uint32_t, LoadSecond> seconds_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, LoadReport> reports_ ABSL_GUARDED_BY(mu_);
  uint32_t taken_ ABSL_GUARDED_BY(mu_) = 0;
};

struct LoadRunInfo {
  // One line saying what ran, e.g. "3 pair(s), 64 B payload, window 256, 5 s".
  std::string title;
  std::vector<LoadPair> pairs;
  // Why the run failed, one line each; empty when it passed.
  std::vector<std::string> failures;
  // The faults and membership changes during the run (troupe_cluster --chaos, chaos.h), in order.
  std::vector<ChaosEvent> chaos;
  // Each node that joined during the run, one line each: when, how long after its start the first
  // event came back from it, the pair started for it.
  std::vector<std::string> joins;
  // Losses of pairs touching a node killed or gone, one line each: expected, not failures.
  std::vector<std::string> expected;
  // The rolling restart (troupe_cluster --roll), one line each: the restarts, what was lost and
  // what was reported undelivered while a node left, the RTT p99 during the roll and the whole
  // run's.
  std::vector<std::string> roll;
  // Events reported undelivered because their receiver's node was leaving (not lost).
  uint64_t leave_undelivered = 0;
  // The phase: payload bytes, window, seconds, and the open-loop rate per pair (0: closed loop).
  uint32_t payload = 0;
  uint32_t window = 0;
  uint32_t seconds = 0;
  uint64_t rate = 0;
  // Where and how the run ran (report.html's header, summary.json); null: left out.
  const RunMetadata* metadata = nullptr;
  // With --baseline: its directory, the text of its per-second CSV for this phase (copied into
  // the report as baseline_per_second.csv and drawn dashed) and the comparison (Compare).
  std::string baseline_dir;
  std::string baseline_per_second;
  std::vector<ComparisonRow> comparison;
};

// The final table's verdict: one line per pair that failed, and per pair whose losses the
// faults explain.
struct LoadVerdict {
  std::vector<std::string> failures;
  std::vector<std::string> expected;
};

// Formats one per-second line for the terminal, saying the mode: `target` is the open loop's
// events/s of all pairs (0: closed loop).
std::string FormatSecond(const LoadSecond& second, uint64_t target);

// Prints the final table (a row per pair and one for all, then what RTT measures) to stdout;
// returns why the run failed, one line per failing pair (no failure: every event was
// acknowledged once and in order). A pair whose sender or receiver is a key of `gone` (nodes
// killed on purpose or that left the cluster, each with what happened: "was killed", "left") may
// lose events, end early or see gaps: its line goes to `expected` instead, saying why; a
// duplicate still fails it. `rate`: the open loop's events/s per pair (0: closed loop), whose line
// follows the table.
LoadVerdict PrintLoadTable(const std::vector<LoadPair>& pairs,
                           const std::map<uint32_t, LoadReport>& reports,
                           const std::map<uint32_t, std::string>& gone = {}, uint64_t rate = 0);

// Returns the summary of one phase (`run`'s payload size): parameters, mode, every pair's and all
// pairs' figures and verdict (summary.json, load_summary.h).
PhaseSummary SummarizePhase(const LoadRunInfo& run, const LoadFigures& figures);
// Returns the run's summary over `phases`: `run`'s metadata, title, failures and comparison.
LoadSummary SummarizeRun(const LoadRunInfo& run, std::vector<PhaseSummary> phases);

// Writes the report files (see the file comment) into `dir`, creating it, summary.json (this one
// phase) too; returns the path of report.html. Without gnuplot on PATH the images are missing and
// report.html says so (not an error). kInvalidArgument / kInternal name the file that could not be
// written.
absl::StatusOr<std::string> WriteLoadReport(const std::string& dir, const LoadRunInfo& run,
                                            const LoadFigures& figures);

}  // namespace troupe::examples
