// SPDX-License-Identifier: Apache-2.0
//
// troupe_loadgen: the controller of a load test, itself a node of the cluster. Waits until a
// session with every other node of the table is up, starts `--pairs` sender→receiver pairs (pair i:
// sender others[i % K], receiver others[(i + 1) % K]), prints throughput each second and, at the
// end, a table per pair (events, events/s, MB/s of payload, RTT percentiles, lost, duplicated).
// Exits 0 only when every pair reported, every event sent was acknowledged once and in order.
//
//   troupe_loadgen --config=cluster.conf --node_id=4 --seconds=5
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
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
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
#include "histogram.h"
#include "interconnect/interconnect.h"
#include "interconnect/node.h"
#include "loadtest.h"
#include "node_runner.h"

ABSL_FLAG(std::string, config, "", "cluster config (protobuf text, proto/config.proto)");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's node_id");
ABSL_FLAG(int, pairs, 0, "sender→receiver pairs; 0 means one per other node");
ABSL_FLAG(int, payload, 64, "payload bytes per data event");
ABSL_FLAG(int, window, 256, "data events in flight per pair, at most");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(int, connect_timeout_s, 30, "how long to wait for a session with every other node");

namespace {

using troupe::NodeId;
using troupe::examples::LatencyHistogram;
using troupe::examples::LoadReport;

// What the controller actor learned, read by the main thread.
class Board {
 public:
  void Progress(uint32_t pair, uint64_t acked, uint64_t bytes) {
    troupe::MutexLock lock(&mu_);
    progress_[pair] = {acked, bytes};
  }
  void Report(LoadReport report) {
    troupe::MutexLock lock(&mu_);
    const uint32_t pair = report.pair_id();
    reports_.emplace(pair, std::move(report));
  }
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
      if (sender == node && !reports_.contains(pair)) {
        LoadReport report;
        report.set_pair_id(pair);
        report.set_problem(absl::StrCat("the session to its sender, node ", node, ", died"));
        reports_.emplace(pair, std::move(report));
      }
    }
  }
  void SetSender(uint32_t pair, NodeId node) {
    troupe::MutexLock lock(&mu_);
    senders_[pair] = node;
  }

  // Returns the acked events and bytes summed over the pairs: the larger of a pair's last
  // progress and its report (a pair given up on has an empty report).
  std::pair<uint64_t, uint64_t> Totals() const {
    troupe::MutexLock lock(&mu_);
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> latest = progress_;
    for (const auto& [pair, report] : reports_) {
      std::pair<uint64_t, uint64_t>& value = latest[pair];
      value.first = std::max(value.first, report.acked());
      value.second = std::max(value.second, report.bytes());
    }
    std::pair<uint64_t, uint64_t> sum{0, 0};
    for (const auto& [pair, value] : latest) {
      sum.first += value.first;
      sum.second += value.second;
    }
    return sum;
  }
  size_t reported() const {
    troupe::MutexLock lock(&mu_);
    return reports_.size();
  }
  std::map<uint32_t, LoadReport> reports() const {
    troupe::MutexLock lock(&mu_);
    return reports_;
  }

 private:
  mutable troupe::Mutex mu_;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> progress_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, LoadReport> reports_ ABSL_GUARDED_BY(mu_);
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
    const troupe::examples::LoadProgress& progress = ev.Get()->record;
    board_->Progress(progress.pair_id(), progress.acked(), progress.bytes());
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

struct Pair {
  uint32_t id = 0;
  NodeId sender = 0;
  NodeId receiver = 0;
};

double Micros(uint64_t nanos) { return static_cast<double>(nanos) / 1e3; }

// Prints the final table; returns the reasons the run failed (empty: it passed).
std::vector<std::string> PrintTable(const std::vector<Pair>& pairs,
                                    const std::map<uint32_t, LoadReport>& reports) {
  std::vector<std::string> failures;
  std::printf("\n%4s %-7s %11s %11s %8s %9s %9s %9s %7s %5s\n", "pair", "route", "events",
              "events/s", "MB/s", "p50 us", "p99 us", "p99.9 us", "lost", "dup");
  LatencyHistogram all;
  uint64_t total_events = 0;
  uint64_t total_lost = 0;
  uint64_t total_dup = 0;
  double total_rate = 0;
  double total_mbps = 0;
  for (const Pair& pair : pairs) {
    const std::string route = absl::StrCat(pair.sender, "->", pair.receiver);
    auto it = reports.find(pair.id);
    if (it == reports.end()) {
      std::printf("%4u %-7s %11s\n", pair.id, route.c_str(), "no report");
      failures.push_back(absl::StrCat("pair ", pair.id, " (", route, "): no report"));
      continue;
    }
    const LoadReport& r = it->second;
    if (r.sent() == 0 && !r.problem().empty()) {
      std::printf("%4u %-7s %11s\n", pair.id, route.c_str(), "no report");
      failures.push_back(absl::StrCat("pair ", pair.id, " (", route, "): ", r.problem()));
      continue;
    }
    LatencyHistogram rtt;
    troupe::examples::AddHistogramProto(r.rtt(), &rtt);
    all.Merge(rtt);
    const double seconds = std::max(1e-9, static_cast<double>(r.elapsed_ns()) / 1e9);
    const double rate = static_cast<double>(r.acked()) / seconds;
    const double mbps = static_cast<double>(r.bytes()) / seconds / 1e6;
    const uint64_t lost = r.sent() - std::min(r.sent(), r.acked());
    const uint64_t dup = r.dups() + r.reorders();
    total_events += r.acked();
    total_lost += lost;
    total_dup += dup;
    total_rate += rate;
    total_mbps += mbps;
    std::printf("%4u %-7s %11llu %11.0f %8.2f %9.1f %9.1f %9.1f %7llu %5llu\n", pair.id,
                route.c_str(), static_cast<unsigned long long>(r.acked()), rate, mbps,
                Micros(rtt.Percentile(0.5)), Micros(rtt.Percentile(0.99)),
                Micros(rtt.Percentile(0.999)), static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(dup));
    std::string why;
    if (!r.problem().empty()) {
      why = r.problem();
    } else if (r.sent() == 0) {
      why = "sent nothing";
    } else if (r.acked() != r.sent()) {
      why = absl::StrCat(lost, " of ", r.sent(), " events not acknowledged");
    } else if (r.dups() != 0 || r.gaps() != 0 || r.reorders() != 0) {
      why = absl::StrCat("receiver saw ", r.dups(), " duplicates and ", r.gaps(),
                         " gaps; sender saw ", r.reorders(), " acks out of order");
    }
    if (!why.empty()) {
      failures.push_back(absl::StrCat("pair ", pair.id, " (", route, "): ", why));
    }
  }
  std::printf("%4s %-7s %11llu %11.0f %8.2f %9.1f %9.1f %9.1f %7llu %5llu\n", "all", "",
              static_cast<unsigned long long>(total_events), total_rate, total_mbps,
              Micros(all.Percentile(0.5)), Micros(all.Percentile(0.99)),
              Micros(all.Percentile(0.999)), static_cast<unsigned long long>(total_lost),
              static_cast<unsigned long long>(total_dup));
  return failures;
}

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
    return 2;
  }

  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "troupe_loadgen: %s\n", absl::StrCat(config.status().message()).c_str());
    return 2;
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
    return 2;
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
    return absl::IsInvalidArgument(node.status()) ? 2 : 1;
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
    return 1;
  }
  watcher.Poll(stderr);
  std::printf("cluster up: %zu nodes (sessions with %zu in %.2f s; this loadgen is node %u)\n",
              k + 1, k, absl::ToDoubleSeconds(absl::Now() - connect_start), self);

  // -- the load ---------------------------------------------------------------------------------
  std::vector<Pair> pairs;
  pairs.reserve(static_cast<size_t>(pair_count));
  for (int i = 0; i < pair_count; ++i) {
    pairs.push_back({.id = static_cast<uint32_t>(i + 1),
                     .sender = others[static_cast<size_t>(i) % k],
                     .receiver = others[static_cast<size_t>(i + 1) % k]});
  }
  std::printf("load: %d pair(s), %d B payload, window %d, %d s\n", pair_count, payload, window,
              seconds);
  std::fflush(stdout);
  for (const Pair& pair : pairs) {
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

  const absl::Time load_start = absl::Now();
  const absl::Time report_deadline = load_start + absl::Seconds(seconds + 15);
  std::pair<uint64_t, uint64_t> last{0, 0};
  for (int tick = 1; board.reported() < pairs.size(); ++tick) {
    // A little after each whole second: the senders' progress events are sent on the second.
    const absl::Time next = load_start + absl::Seconds(tick) + absl::Milliseconds(300);
    if (next > report_deadline) {
      std::printf("troupe_loadgen: %zu of %zu pair(s) reported within %d s\n", board.reported(),
                  pairs.size(), seconds + 15);
      break;
    }
    while (absl::Now() < next && board.reported() < pairs.size()) {
      if (!wait(std::min(absl::Milliseconds(100), next - absl::Now()))) {
        return 1;
      }
    }
    if (board.reported() == pairs.size()) {
      break;
    }
    if (tick > seconds) {
      continue;  // the pairs are done sending; waiting for their reports
    }
    // Progress is cumulative as of each sender's whole seconds: the difference is one second.
    const std::pair<uint64_t, uint64_t> totals = board.Totals();
    std::printf("  %2d s: %10llu events/s %8.2f MB/s\n", tick,
                static_cast<unsigned long long>(totals.first - last.first),
                static_cast<double>(totals.second - last.second) / 1e6);
    last = totals;
  }

  watcher.PrintCounters(stderr);
  const std::vector<std::string> failures = PrintTable(pairs, board.reports());
  if (!failures.empty()) {
    std::printf("FAILED:\n");
    for (const std::string& failure : failures) {
      std::printf("  %s\n", failure.c_str());
    }
    return 1;
  }
  std::printf("OK: every event acknowledged once, in order\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  troupe::examples::BlockTerminationSignals();
  absl::SetProgramUsageMessage(
      "Load-test controller: a cluster node that drives sender→receiver pairs and prints the "
      "throughput and round-trip times.");
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run();
}
