// SPDX-License-Identifier: Apache-2.0
//
// troupe_loadgen: the controller of a load test, itself a node of the cluster. Waits until a
// session with every other node of the table is up, starts `--pairs` sender→receiver pairs (pair i:
// sender others[i % K], receiver others[(i + 1) % K]), prints a line for every second of the run
// (events/s, MB/s, RTT p50 and p99 of all pairs) and, at the end, a table per pair (events,
// events/s, MB/s of payload, RTT percentiles, lost, duplicated, undelivered, unsure) and what RTT
// measures. With --report=DIR it also writes the figures, plots and report.html there
// (load_report.h). Exits 0 only when every pair reported, every event sent was acknowledged once
// and in order; 2 on a bad flag, 3 on a bad config (cli.h). Under troupe_cluster --chaos it
// writes the load's start time to --load_start_file and reads the faults injected from
// --chaos_log at the end (chaos.h): losses on a pair touching a killed node are then expected.
//
//   troupe_loadgen --config=cluster.conf --node_id=4 --seconds=5 [--report=/tmp/run1]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "actors/sync.h"
#include "chaos.h"
#include "cli.h"
#include "interconnect/interconnect.h"
#include "interconnect/node.h"
#include "load_report.h"
#include "loadtest.h"
#include "node_runner.h"

ABSL_FLAG(std::string, config, "", "cluster config (protobuf text, proto/config.proto)");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's node_id");
ABSL_FLAG(int, pairs, 0, "sender→receiver pairs; 0 means one per other node");
ABSL_FLAG(int, payload, 64, "payload bytes per data event");
ABSL_FLAG(int, window, 256, "data events in flight per pair, at most");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(int, connect_timeout_s, 30, "how long to wait for a session with every other node");
ABSL_FLAG(std::string, report, "",
          "write the figures (CSV), plots (gnuplot) and report.html into this directory");
ABSL_FLAG(std::string, load_start_file, "",
          "write the wall-clock time the load starts at into this file (troupe_cluster --chaos "
          "times its faults from it)");
ABSL_FLAG(std::string, chaos_log, "",
          "the faults injected during the run (chaos.csv of troupe_cluster --chaos), read at the "
          "end: shown in the report, and losses on pairs touching a killed node are expected");

namespace {

using troupe::NodeId;
using troupe::examples::kExitConfig;
using troupe::examples::kExitFailed;
using troupe::examples::kExitOk;
using troupe::examples::kExitUsage;
using troupe::examples::LoadReport;

// What the controller actor learned, read by the main thread: the figures (load_report.h) and
// which node sends for which pair.
class Board {
 public:
  troupe::examples::LoadFigures& figures() { return figures_; }

  void Report(LoadReport report) { figures_.SetReport(std::move(report)); }
  // A pair whose LoadStart did not arrive: it gets a report saying so.
  void StartFailed(uint32_t pair, std::string problem) {
    LoadReport report;
    report.set_pair_id(pair);
    report.set_problem(std::move(problem));
    Report(std::move(report));
  }

  // The session to `node` died: the pairs it was sending for cannot report any more.
  void SenderLost(NodeId node) {
    troupe::MutexLock lock(&mu_);
    for (const auto& [pair, sender] : senders_) {
      if (sender == node && !figures_.has_report(pair)) {
        LoadReport report;
        report.set_pair_id(pair);
        report.set_problem(absl::StrCat("the session to its sender, node ", node, ", died"));
        figures_.SetReport(std::move(report));  // a report that came meanwhile stays
      }
    }
  }
  void SetSender(uint32_t pair, NodeId node) {
    troupe::MutexLock lock(&mu_);
    senders_[pair] = node;
  }

 private:
  troupe::examples::LoadFigures figures_;
  mutable troupe::Mutex mu_;
  std::map<uint32_t, NodeId> senders_ ABSL_GUARDED_BY(mu_);
};

// Receives progress and reports for the main thread. LoadStarts are sent in its name (the
// cookie is the pair id) with kTrackDelivery | kSubscribeOnSession, so it also learns when one is
// undelivered or when a sender node's session dies.
class Controller final : public troupe::Actor {
 public:
  explicit Controller(Board* board) : Actor(&Controller::StateWork), board_(board) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(troupe::examples::EvLoadProgress, HandleProgress);
      TROUPE_HFUNC(troupe::examples::EvLoadReport, HandleReport);
      TROUPE_HFUNC(troupe::EvUndelivered, HandleUndelivered);
      TROUPE_HFUNC(troupe::EvNodeDisconnected, HandleDisconnected);
      TROUPE_IGNORE(troupe::kEvNodeConnected);
      default:
        Unhandled(ev);
    }
  }

  void HandleProgress(troupe::EventPtr<troupe::examples::EvLoadProgress> ev) {
    board_->figures().AddSecond(ev.Get()->record);
  }
  void HandleReport(troupe::EventPtr<troupe::examples::EvLoadReport> ev) {
    board_->Report(std::move(ev.Get()->record));
  }
  void HandleUndelivered(troupe::EventPtr<troupe::EvUndelivered> ev) {
    if (ev.Get()->source_type == troupe::examples::kEvLoadStart) {
      board_->StartFailed(static_cast<uint32_t>(ev->cookie()),
                          absl::StrCat("LoadStart undelivered (",
                                       troupe::UndeliveredReasonName(ev.Get()->reason), ")"));
    }
  }

  void HandleDisconnected(troupe::EventPtr<troupe::EvNodeDisconnected> ev) {
    board_->SenderLost(ev.Get()->node);
  }

  Board* board_;
};

int Run() {
  Board board;  // outlives the system, whose controller actor writes to it
  const int payload = absl::GetFlag(FLAGS_payload);
  const int window = absl::GetFlag(FLAGS_window);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const int connect_timeout_s = absl::GetFlag(FLAGS_connect_timeout_s);
  if (payload < 0 || window < 1 || seconds < 1 || connect_timeout_s < 1 ||
      absl::GetFlag(FLAGS_pairs) < 0) {
    std::fprintf(
        stderr,
        "troupe_loadgen: --payload must be >= 0, --window, --seconds and --connect_timeout_s "
        ">= 1, --pairs >= 0\n");
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr, "troupe_loadgen: --config: required (the cluster config)\n");
    return kExitUsage;
  }
  const std::string chaos_log = absl::GetFlag(FLAGS_chaos_log);
  if (!chaos_log.empty() && !troupe::examples::ReadChaosLog(chaos_log).ok()) {
    std::fprintf(stderr, "troupe_loadgen: --chaos_log=%s: cannot be read\n", chaos_log.c_str());
    return kExitUsage;
  }

  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "troupe_loadgen: %s\n", absl::StrCat(config.status().message()).c_str());
    return kExitConfig;
  }
  const NodeId self = config->node_id();
  std::vector<NodeId> others;
  for (const troupe::proto::NodeAddress& node : config->interconnect().nodes()) {
    if (node.node_id() != self) {
      others.push_back(node.node_id());
    }
  }
  std::sort(others.begin(), others.end());
  if (others.empty()) {
    std::fprintf(stderr, "troupe_loadgen: interconnect.nodes lists no node but this one (%u)\n",
                 self);
    return kExitConfig;
  }
  const size_t k = others.size();
  const int pair_count =
      absl::GetFlag(FLAGS_pairs) > 0 ? absl::GetFlag(FLAGS_pairs) : static_cast<int>(k);

  troupe::ActorId controller;
  troupe::NodeOptions options;
  options.on_system_start = [&board, &controller](troupe::ActorSystem& system) {
    troupe::examples::EnableSessionLogs();
    absl::StatusOr<troupe::ActorId> registered =
        system.TryRegister(std::make_unique<Controller>(&board));
    controller = registered.value_or(troupe::ActorId());
    return registered.status();
  };
  // The node stops on every path out of here: the interconnect drains, then the system stops.
  absl::StatusOr<std::unique_ptr<troupe::Node>> node =
      troupe::Node::Start(*config, std::move(options));
  if (!node.ok()) {
    std::fprintf(stderr, "troupe_loadgen: node %u: %s\n", self,
                 absl::StrCat(node.status().message()).c_str());
    return absl::IsInvalidArgument(node.status()) ? kExitConfig : kExitFailed;
  }
  troupe::ActorSystem& system = (*node)->system();
  troupe::examples::SessionWatcher watcher(self, (*node)->interconnect());

  // Sleeps `d` unless a termination signal comes; returns false then.
  auto wait = [&](absl::Duration d) {
    const int signal = troupe::examples::WaitForTerminationSignal(d);
    watcher.Poll(stderr);
    if (signal != 0) {
      std::printf("troupe_loadgen: interrupted (%s)\n",
                  troupe::examples::SignalName(signal).c_str());
    }
    return signal == 0;
  };

  // -- the cluster comes up ---------------------------------------------------------------------
  // Each node registers its services before it listens (troupe_node): a session up means its
  // services answer.
  const absl::Time connect_start = absl::Now();
  if (absl::Status up = (*node)->WaitForPeers(absl::Seconds(connect_timeout_s)); !up.ok()) {
    std::printf("troupe_loadgen: %s\n", absl::StrCat(up.message()).c_str());
    return kExitFailed;
  }
  watcher.Poll(stderr);
  std::printf("cluster up: %zu nodes (sessions with %zu in %.2f s; this loadgen is node %u)\n",
              k + 1, k, absl::ToDoubleSeconds(absl::Now() - connect_start), self);

  // -- the load ---------------------------------------------------------------------------------
  std::vector<troupe::examples::LoadPair> pairs;
  pairs.reserve(static_cast<size_t>(pair_count));
  for (int i = 0; i < pair_count; ++i) {
    pairs.push_back({.id = static_cast<uint32_t>(i + 1),
                     .sender = others[static_cast<size_t>(i) % k],
                     .receiver = others[static_cast<size_t>(i + 1) % k]});
  }
  std::printf("load: %d pair(s), %d B payload, window %d, %d s\n", pair_count, payload, window,
              seconds);
  std::fflush(stdout);
  if (const std::string path = absl::GetFlag(FLAGS_load_start_file); !path.empty()) {
    if (absl::Status written = troupe::examples::WriteLoadStart(path, absl::Now()); !written.ok()) {
      std::printf("troupe_loadgen: --load_start_file: %s\n",
                  absl::StrCat(written.message()).c_str());
      return kExitFailed;
    }
  }
  for (const troupe::examples::LoadPair& pair : pairs) {
    board.SetSender(pair.id, pair.sender);
    auto start = std::make_unique<troupe::examples::EvLoadStart>();
    start->record.set_pair_id(pair.id);
    start->record.set_receiver(pair.receiver);
    start->record.set_payload_bytes(static_cast<uint32_t>(payload));
    start->record.set_window(static_cast<uint32_t>(window));
    start->record.set_duration_ms(static_cast<uint64_t>(seconds) * 1000);
    *start->record.mutable_controller() = troupe::examples::ToWords(controller);
    system.Send(troupe::examples::kLoadSenderService.WithNode(pair.sender), std::move(start),
                troupe::kTrackDelivery | troupe::kSubscribeOnSession, pair.id, controller);
  }

  // Each second's line is printed once every pair sent its figures for it (or ended); the last
  // second comes with the pairs' drains, just before their reports.
  troupe::examples::LoadFigures& figures = board.figures();
  const absl::Time report_deadline = absl::Now() + absl::Seconds(seconds + 15);
  auto print_seconds = [&](bool all) {
    for (const troupe::examples::LoadSecond& second : figures.TakeSeconds(pairs.size(), all)) {
      std::printf("%s\n", troupe::examples::FormatSecond(second).c_str());
    }
  };
  while (figures.reported() < pairs.size()) {
    if (absl::Now() > report_deadline) {
      std::printf("troupe_loadgen: %zu of %zu pair(s) reported within %d s\n", figures.reported(),
                  pairs.size(), seconds + 15);
      break;
    }
    if (!wait(absl::Milliseconds(100))) {
      return kExitFailed;
    }
    print_seconds(/*all=*/false);
  }
  print_seconds(/*all=*/true);

  watcher.PrintCounters(stderr);
  // The faults happened during the load (troupe_cluster times them before its end): the log is
  // complete now.
  std::vector<troupe::examples::ChaosEvent> chaos;
  std::set<uint32_t> killed;
  if (!chaos_log.empty()) {
    absl::StatusOr<std::vector<troupe::examples::ChaosEvent>> read =
        troupe::examples::ReadChaosLog(chaos_log);
    if (!read.ok()) {
      std::printf("troupe_loadgen: --chaos_log: %s\n",
                  absl::StrCat(read.status().message()).c_str());
      return kExitFailed;
    }
    chaos = std::move(*read);
    for (const troupe::examples::ChaosEvent& event : chaos) {
      if (event.action == "kill") {
        killed.insert(event.node);
      }
    }
  }
  troupe::examples::LoadVerdict verdict =
      troupe::examples::PrintLoadTable(pairs, figures.reports(), killed);
  troupe::examples::LoadRunInfo run{
      .title = absl::StrFormat("%d pair(s) on %zu node(s), %d B payload, window %d, %d s%s",
                               pair_count, k, payload, window, seconds,
                               chaos.empty() ? "" : ", with faults injected"),
      .pairs = pairs,
      .failures = std::move(verdict.failures),
      .chaos = std::move(chaos),
      .expected = std::move(verdict.expected)};
  if (const std::string dir = absl::GetFlag(FLAGS_report); !dir.empty()) {
    absl::StatusOr<std::string> html = troupe::examples::WriteLoadReport(dir, run, figures);
    if (!html.ok()) {
      std::printf("troupe_loadgen: report: %s\n", absl::StrCat(html.status().message()).c_str());
      return kExitFailed;
    }
    std::printf("report: %s\n", html->c_str());
  }
  if (!run.expected.empty()) {
    std::printf("expected under chaos (a node the pair touches was killed):\n");
    for (const std::string& line : run.expected) {
      std::printf("  %s\n", line.c_str());
    }
  }
  if (!run.failures.empty()) {
    std::printf("FAILED:\n");
    for (const std::string& failure : run.failures) {
      std::printf("  %s\n", failure.c_str());
    }
    return kExitFailed;
  }
  std::printf(run.expected.empty()
                  ? "OK: every event acknowledged once, in order\n"
                  : "OK under chaos: every pair clear of the killed nodes had every event "
                    "acknowledged once, in order\n");
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  troupe::examples::BlockTerminationSignals();
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Load-test controller: a cluster node that drives sender→receiver pairs and prints the "
      "throughput and round-trip times. Exits 1 unless every event was acknowledged once, in "
      "order (under --chaos_log: except on pairs touching a killed node).");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run();
}
