// SPDX-License-Identifier: Apache-2.0
//
// troupe_loadgen: the controller of a load test, itself a node of the cluster. Waits until a
// session with every other node is up — the nodes of the static table, or with etcd membership
// the --expect_nodes others etcd lists — starts `--pairs` sender→receiver pairs (pair i:
// sender others[i % K], receiver others[(i + 1) % K]), prints a line for every second of the run
// (events/s, MB/s, RTT p50 and p99 of all pairs) and, at the end, a table per pair (events,
// events/s, MB/s of payload, RTT percentiles, lost, duplicated, undelivered, unsure) and what RTT
// measures. With --report=DIR it also writes the figures, plots and report.html there
// (load_report.h). Exits 0 only when every pair reported, every event sent was acknowledged once
// and in order; 2 on a bad flag, 3 on a bad config (cli.h). Under troupe_cluster --chaos (and
// --membership=etcd) it writes the load's start time to --load_start_file and reads the faults
// injected and the membership changes from --chaos_log at the end (chaos.h): losses on a pair
// touching a node killed or gone are then expected.
//
// A node that leaves gracefully costs nothing (loadtest.h): a pair sending to it pauses and resumes
// once it is back, the events it refused while leaving counted as undelivered, not lost; a pair
// it sends for ends cleanly first, and the controller starts a new pair for the route when the node
// is back (it pings the node until its next incarnation answers), or, when a pair's receiver left
// the membership for good (etcd), one from the same sender to another member. Under troupe_cluster
// --roll the chaos log's roll-leave and roll-ready rows give the roll's lines: restarts, events
// lost (any fails the run), events refused while their node was leaving, and the RTT p99 of the
// seconds from the first leave to the last ready next to the whole run's.
//
// It follows the membership (a Watch on its nameservice): a node that joins during the load gets
// an echo ping at once — its answer is the first event back from the node, whose time the report
// gives — and a pair of its own, from it to the first node of the load still a member, for the
// rest of the run, with its own row in the table.
//
// --rate=N makes the load an open loop (open_loop.h): N events/s per pair on a fixed schedule,
// latency from each event's intended send time. --payload=64,1024 runs one phase per size.
// Every report carries the run's metadata and summary.json (load_summary.h); --baseline=DIR sets
// the run beside an earlier report, checked before the load starts.
//
//   troupe_loadgen --config=cluster.conf --node_id=4 --seconds=5 [--report=/tmp/run1]
//   troupe_loadgen --config=cluster.conf --node_id=4 --rate=50000 --window=1024 --report=/tmp/r2
//   troupe_loadgen --config=cluster.conf --node_id=4 --baseline=/tmp/run1 --report=/tmp/run3
//   troupe_loadgen --config=etcd.conf --expect_nodes=3 --seconds=5   # membership in etcd
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "actors/sync.h"
#include "chaos.h"
#include "cli.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "load_report.h"
#include "load_summary.h"
#include "loadtest.h"
#include "node/node.h"
#include "node_runner.h"
#include "open_loop.h"

ABSL_FLAG(std::string, config, "", "cluster config (protobuf text, proto/config.proto)");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's node_id");
ABSL_FLAG(int, pairs, 0, "sender→receiver pairs; 0 means one per other node");
ABSL_FLAG(std::string, payload, "64",
          "payload bytes per data event; several comma-separated sizes (64,1024,65536) run one "
          "phase per size, each --seconds long, one after the other");
ABSL_FLAG(uint64_t, rate, 0,
          "open loop: data events per second per pair on a fixed schedule (event i due at the "
          "pair's start + i / rate), latency measured from each event's intended send time, an "
          "event due while the window is full sent once there is room; 0: closed loop, --window "
          "events in flight per pair");
ABSL_FLAG(std::string, baseline, "",
          "an earlier report's directory (--report): its summary.json and per-second figures go "
          "beside this run's, a table of the key figures with the ratio new/baseline and the "
          "plots overlaid; checked before the load starts");
ABSL_FLAG(std::string, node_pids, "",
          "NODE:PID,... of the node processes on this host (troupe_cluster passes them): the "
          "report gives each one's CPU seconds over the load");
ABSL_FLAG(std::string, launcher_command, "",
          "the command line of what started this load generator (troupe_cluster passes its "
          "own), for the report's metadata");
ABSL_FLAG(int, window, 256, "data events in flight per pair, at most");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(
    int, connect_timeout_s, 30,
    "how long to wait for the other nodes (with etcd: to be members) and a session with each");
ABSL_FLAG(int, expect_nodes, 0,
          "with etcd membership (interconnect.etcd): the other nodes to wait for, besides this "
          "one; the load runs between them. Unused with a static table");
ABSL_FLAG(std::string, id_file, "",
          "once the node is up, write its id into this file (useful when etcd chooses it)");
ABSL_FLAG(std::string, report, "",
          "write the figures (CSV), plots (gnuplot) and report.html into this directory");
ABSL_FLAG(std::string, load_start_file, "",
          "write the wall-clock time the load starts at into this file (troupe_cluster --chaos "
          "times its faults from it)");
ABSL_FLAG(std::string, chaos_log, "",
          "the faults injected and the nodes that joined or left during the run (chaos.csv of "
          "troupe_cluster --chaos or --membership=etcd), read at the "
          "end: shown in the report, and losses on pairs touching a node killed or gone are "
          "expected; the start of each node that joined times its first event");

namespace {

using troupe::NodeId;
using troupe::examples::kExitConfig;
using troupe::examples::kExitFailed;
using troupe::examples::kExitOk;
using troupe::examples::kExitUsage;
using troupe::examples::LoadPair;
using troupe::examples::LoadReport;

// Sent to the controller by the nameservice's watch: the membership changed.
enum : troupe::EventType {
  kEvMembersChanged = troupe::EventSpaceBegin(troupe::kUserEventSpace + 0x101),
};
struct EvMembersChanged final : troupe::EventLocal<EvMembersChanged, kEvMembersChanged> {};

// How to start a pair for a node that joins once the load runs.
struct LoadPlan {
  absl::Time start;
  absl::Time end;
  uint32_t payload = 0;
  uint32_t window = 0;
  uint64_t rate = 0;  // open loop's events/s per pair; 0: closed loop
  // The nodes of the load and this one: a member not among them has joined.
  std::set<NodeId> known;
  // Where a joined node's pair sends, in order of preference while members: the load's nodes,
  // then the nodes that joined.
  std::vector<NodeId> receivers;
};

// A node that joined during the load, as the controller saw it.
struct Join {
  NodeId node = 0;
  // When this node's nameservice listed it.
  absl::Time seen;
  // When its answer to the echo ping came back: the first event back from it.
  std::optional<absl::Time> first_event;
  // The pair started for it; id 0 when none (the load was ending, or no receiver was left).
  LoadPair pair;
  // Why no answer came, when the ping was reported undelivered.
  std::string problem;
};

// The LoadStart of a joined node's pair.
struct JoinStart {
  LoadPair pair;
  uint32_t payload = 0;
  uint32_t window = 0;
  uint64_t rate = 0;
  uint64_t duration_ms = 0;
  int64_t first_second_end_ns = 0;
  int64_t end_ns = 0;
};

// What the controller actor learned, read by the main thread: the figures (load_report.h) of each
// phase (a payload size), the pairs of the current one (those of the load, then those of joined
// nodes) and the nodes that joined.
class Board {
 public:
  Board() { phases_.push_back(std::make_unique<troupe::examples::LoadFigures>()); }

  // Returns the current phase's figures (thread-safe themselves; they live as long as the board).
  troupe::examples::LoadFigures& figures() {
    troupe::MutexLock lock(&mu_);
    return *phases_.back();
  }
  // Starts the figures of the next phase; once every pair of the current one reported, so that
  // nothing of it comes later.
  void NewPhase() {
    troupe::MutexLock lock(&mu_);
    phases_.push_back(std::make_unique<troupe::examples::LoadFigures>());
  }

  void Report(LoadReport report) { figures().SetReport(std::move(report)); }
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
    troupe::examples::LoadFigures& figures = *phases_.back();
    for (const LoadPair& pair : pairs_) {
      if (pair.sender == node && !figures.has_report(pair.id)) {
        LoadReport report;
        report.set_pair_id(pair.id);
        report.set_problem(absl::StrCat("the session to its sender, node ", node, ", died"));
        figures.SetReport(std::move(report));  // a report that came meanwhile stays
      }
    }
  }

  // Fixes the load's pairs and how to start one for a node that joins; before any LoadStart.
  void StartLoad(LoadPlan plan, std::vector<LoadPair> pairs) {
    troupe::MutexLock lock(&mu_);
    plan_ = std::move(plan);
    pairs_ = std::move(pairs);
    // A phase after the first starts afresh: its nodes are the members then.
    joins_.clear();
    awaiting_.clear();
    restarted_.clear();
  }
  std::vector<LoadPair> pairs() const {
    troupe::MutexLock lock(&mu_);
    return pairs_;
  }
  std::vector<Join> joins() const {
    troupe::MutexLock lock(&mu_);
    std::vector<Join> out;
    for (const auto& [node, join] : joins_) {
      out.push_back(join);
    }
    return out;
  }

  // Notes that `node` is a member at `now` (`present`: every member that listens). Returns the
  // pair to start when it has just joined (a member the load did not know), with id 0 when it
  // gets none; nullopt when the load has not started or the node is known.
  std::optional<JoinStart> Member(NodeId node, absl::Time now, const std::set<NodeId>& present) {
    troupe::MutexLock lock(&mu_);
    if (!plan_ || plan_->known.contains(node)) {
      return std::nullopt;
    }
    plan_->known.insert(node);
    plan_->receivers.push_back(node);  // a later joiner may send to it
    Join& join = joins_[node];
    join.node = node;
    join.seen = now;
    JoinStart start;
    NodeId receiver = 0;
    for (const NodeId candidate : plan_->receivers) {
      if (candidate != node && present.contains(candidate)) {
        receiver = candidate;
        break;
      }
    }
    if (receiver == 0 || plan_->end - now < kShortestJoinPair) {
      return start;
    }
    start = NewPair(node, receiver, now);
    join.pair = start.pair;
    return start;
  }

  // Notes that pair `pair`'s sender node left cleanly (LoadReport.sender_left): its route gets a
  // new pair once the node is back (Rejoined).
  void SenderLeft(uint32_t pair) {
    troupe::MutexLock lock(&mu_);
    for (const LoadPair& known : pairs_) {
      if (known.id == pair) {
        awaiting_.push_back(known);
      }
    }
  }
  // Whether a pair sent by `node` waits for it to come back.
  bool Awaits(NodeId node) const {
    troupe::MutexLock lock(&mu_);
    return std::any_of(awaiting_.begin(), awaiting_.end(),
                       [node](const LoadPair& pair) { return pair.sender == node; });
  }
  // `node` is back after it left: returns a new pair for each route it sent on (none when the
  // load is ending), and forgets them.
  std::vector<JoinStart> Rejoined(NodeId node, absl::Time now) {
    troupe::MutexLock lock(&mu_);
    std::vector<JoinStart> starts;
    for (auto it = awaiting_.begin(); it != awaiting_.end();) {
      if (it->sender != node) {
        ++it;
        continue;
      }
      if (plan_ && plan_->end - now >= kShortestJoinPair) {
        starts.push_back(NewPair(node, it->receiver, now));
        restarted_.push_back(absl::StrFormat(
            "pair %u (%u->%u) continues as pair %u from second %u", it->id, it->sender,
            it->receiver, starts.back().pair.id, starts.back().pair.first_second));
      }
      it = awaiting_.erase(it);
    }
    return starts;
  }
  // Pair `pair`'s receiver left the cluster for good (LoadReport.receiver_left): returns a new
  // pair from its sender to the first of `present` (members that listen) that is neither the
  // sender, this node nor the receiver, preferring the load's nodes; nullopt when there is none or
  // the load is ending.
  std::optional<JoinStart> Reroute(uint32_t pair, NodeId self, const std::set<NodeId>& present,
                                   absl::Time now) {
    troupe::MutexLock lock(&mu_);
    const auto old = std::find_if(pairs_.begin(), pairs_.end(),
                                  [pair](const LoadPair& known) { return known.id == pair; });
    if (!plan_ || old == pairs_.end() || plan_->end - now < kShortestJoinPair) {
      return std::nullopt;
    }
    const LoadPair from = *old;
    NodeId receiver = 0;
    for (const NodeId candidate : present) {
      if (candidate != from.sender && candidate != self && candidate != from.receiver) {
        receiver = candidate;
        break;
      }
    }
    if (receiver == 0) {
      return std::nullopt;
    }
    JoinStart start = NewPair(from.sender, receiver, now);
    restarted_.push_back(absl::StrFormat(
        "pair %u (%u->%u) continues as pair %u (%u->%u) from second %u: its receiver left", from.id,
        from.sender, from.receiver, start.pair.id, from.sender, receiver, start.pair.first_second));
    return start;
  }
  // One line per pair continued by a new one after its sender's node came back.
  std::vector<std::string> restarted() const {
    troupe::MutexLock lock(&mu_);
    return restarted_;
  }
  // The answer to `node`'s echo ping came at `at`.
  void FirstEvent(NodeId node, absl::Time at) {
    troupe::MutexLock lock(&mu_);
    if (auto it = joins_.find(node); it != joins_.end() && !it->second.first_event) {
      it->second.first_event = at;
    }
  }
  void PingFailed(NodeId node, std::string problem) {
    troupe::MutexLock lock(&mu_);
    if (auto it = joins_.find(node); it != joins_.end() && it->second.problem.empty()) {
      it->second.problem = std::move(problem);
    }
  }

 private:
  // A node that joins less than this before the end gets no pair (it could not show a second).
  static constexpr absl::Duration kShortestJoinPair = absl::Milliseconds(300);

  mutable troupe::Mutex mu_;
  std::vector<std::unique_ptr<troupe::examples::LoadFigures>> phases_ ABSL_GUARDED_BY(mu_);
  std::optional<LoadPlan> plan_ ABSL_GUARDED_BY(mu_);
  std::vector<LoadPair> pairs_ ABSL_GUARDED_BY(mu_);
  std::map<NodeId, Join> joins_ ABSL_GUARDED_BY(mu_);
  // Pairs whose sender's node left, until it is back.
  std::vector<LoadPair> awaiting_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> restarted_ ABSL_GUARDED_BY(mu_);

  // Returns the LoadStart of a new pair `sender`->`receiver` starting `now`, in the run's
  // current second, and adds it to the pairs.
  JoinStart NewPair(NodeId sender, NodeId receiver, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JoinStart start;
    // The run's second it starts in; seconds are (start + k - 1 s, start + k s].
    const int64_t into = std::max<int64_t>(0, absl::ToInt64Nanoseconds(now - plan_->start));
    const auto second = static_cast<uint32_t>(into / 1'000'000'000 + 1);
    start.pair = {.id = static_cast<uint32_t>(pairs_.size() + 1),
                  .sender = sender,
                  .receiver = receiver,
                  .first_second = second};
    start.payload = plan_->payload;
    start.window = plan_->window;
    start.rate = plan_->rate;
    start.duration_ms = static_cast<uint64_t>(absl::ToInt64Milliseconds(plan_->end - now));
    start.first_second_end_ns = absl::ToUnixNanos(plan_->start + absl::Seconds(second));
    start.end_ns = absl::ToUnixNanos(plan_->end);
    pairs_.push_back(start.pair);
    return start;
  }
};

// Returns the LoadStart of `pair`; `rate` 0 is the closed loop.
std::unique_ptr<troupe::examples::EvLoadStart> MakeLoadStart(const LoadPair& pair, uint32_t payload,
                                                             uint32_t window, uint64_t rate,
                                                             uint64_t duration_ms,
                                                             const troupe::ActorId& controller) {
  auto start = std::make_unique<troupe::examples::EvLoadStart>();
  start->record.set_rate_per_s(rate);
  start->record.set_pair_id(pair.id);
  start->record.set_receiver(pair.receiver);
  start->record.set_payload_bytes(payload);
  start->record.set_window(window);
  start->record.set_duration_ms(duration_ms);
  *start->record.mutable_controller() = troupe::examples::ToWords(controller);
  return start;
}

// Receives progress and reports for the main thread. LoadStarts are sent in its name (the
// cookie is the pair id) with kTrackDelivery | kSubscribeOnSession, so it also learns when one is
// undelivered or when a sender node's session dies. It follows the membership (EvMembersChanged
// from the nameservice's watch): a node that joins during the load gets an echo ping (cookie: the
// node) and a pair.
class Controller final : public troupe::Actor {
 public:
  // `rejoins`: a node whose pairs ended because it left comes back with the same id (a static
  // table), so its routes get new pairs then; with etcd it comes back as a new node (a join).
  Controller(Board* board, NodeId self,
             std::shared_ptr<troupe::interconnect::Nameservice> nameservice, bool rejoins)
      : Actor(&Controller::StateWork),
        board_(board),
        self_(self),
        nameservice_(std::move(nameservice)),
        rejoins_(rejoins) {}

 private:
  // EchoPing.seq of a join's ping and of a probe of a node that left.
  static constexpr uint64_t kJoinPing = 1;
  static constexpr uint64_t kRejoinProbe = 2;
  // The cookie of a probe: the node, with this bit.
  static constexpr uint64_t kProbeBit = uint64_t{1} << 32;
  static constexpr absl::Duration kProbeInterval = absl::Milliseconds(100);

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(troupe::examples::EvLoadProgress, HandleProgress);
      TROUPE_HFUNC(troupe::examples::EvLoadReport, HandleReport);
      TROUPE_HFUNC(troupe::examples::EvEchoPong, HandlePong);
      TROUPE_HFUNC(EvMembersChanged, HandleMembersChanged);
      TROUPE_HFUNC(troupe::EvUndelivered, HandleUndelivered);
      TROUPE_HFUNC(troupe::EvNodeDisconnected, HandleDisconnected);
      TROUPE_HFUNC(troupe::EvWakeup, HandleWakeup);
      TROUPE_IGNORE(troupe::kEvNodeConnected);
      default:
        Unhandled(ev);
    }
  }

  void HandleProgress(troupe::EventPtr<troupe::examples::EvLoadProgress> ev) {
    board_->figures().AddSecond(ev.Get()->record);
  }
  void HandleReport(troupe::EventPtr<troupe::examples::EvLoadReport> ev) {
    troupe::examples::LoadReport& report = ev.Get()->record;
    if (report.receiver_left()) {
      if (std::optional<JoinStart> start =
              board_->Reroute(report.pair_id(), self_, Present(), absl::Now())) {
        StartPairs({*start});
      }
    }
    if (report.sender_left() && rejoins_) {
      board_->SenderLeft(report.pair_id());
      // The session ended before the report came (seldom): the node may be back already.
      const NodeId sender = ev->sender().node_id();
      if (left_.erase(sender) > 0) {
        Probe(sender);
      }
    }
    board_->Report(std::move(report));
  }
  void HandlePong(troupe::EventPtr<troupe::examples::EvEchoPong> ev) {
    const NodeId node = ev.Get()->record.node();
    if (ev.Get()->record.seq() == kRejoinProbe) {
      probing_.erase(node);
      StartPairs(board_->Rejoined(node, absl::Now()));
      return;
    }
    board_->FirstEvent(node, absl::Now());
  }
  void HandleWakeup(troupe::EventPtr<troupe::EvWakeup> ev) {
    const auto node = static_cast<NodeId>(ev.Get()->tag);
    if (probing_.contains(node)) {
      Probe(node);
    }
  }

  // Pings `node` until it answers: only its next incarnation can (the one that left said goodbye
  // before this is sent, and refuses every send while leaving).
  void Probe(NodeId node) {
    probing_.insert(node);
    auto ping = std::make_unique<troupe::examples::EvEchoPing>();
    ping->record.set_node(node);
    ping->record.set_seq(kRejoinProbe);
    Send(troupe::examples::kEchoService.WithNode(node), std::move(ping), troupe::kTrackDelivery,
         kProbeBit | node);
  }

  void StartPairs(const std::vector<JoinStart>& starts) {
    for (const JoinStart& join : starts) {
      auto start = MakeLoadStart(join.pair, join.payload, join.window, join.rate, join.duration_ms,
                                 SelfId());
      start->record.set_first_second(join.pair.first_second);
      start->record.set_first_second_end_ns(join.first_second_end_ns);
      start->record.set_end_ns(join.end_ns);
      // The sender's node may be back before its session to the receiver is up.
      start->record.set_await_receiver(true);
      TROUPE_LOG(kInfo, kUser) << "node " << join.pair.sender << " is back: pair " << join.pair.id
                               << " (" << join.pair.sender << "->" << join.pair.receiver
                               << ") from second " << join.pair.first_second;
      Send(troupe::examples::kLoadSenderService.WithNode(join.pair.sender), std::move(start),
           troupe::kTrackDelivery | troupe::kSubscribeOnSession, join.pair.id);
    }
  }
  void HandleUndelivered(troupe::EventPtr<troupe::EvUndelivered> ev) {
    const std::string why =
        absl::StrCat("undelivered (", troupe::UndeliveredReasonName(ev.Get()->reason), ")");
    if (ev.Get()->source_type == troupe::examples::kEvLoadStart) {
      board_->StartFailed(static_cast<uint32_t>(ev->cookie()), absl::StrCat("LoadStart ", why));
    } else if (ev.Get()->source_type == troupe::examples::kEvEchoPing &&
               (ev->cookie() & kProbeBit) != 0) {
      // Not back yet: ping again.
      ScheduleWakeup(kProbeInterval, ev->cookie() & ~kProbeBit);
    } else if (ev.Get()->source_type == troupe::examples::kEvEchoPing) {
      board_->PingFailed(static_cast<NodeId>(ev->cookie()), absl::StrCat("echo ping ", why));
    }
  }

  void HandleDisconnected(troupe::EventPtr<troupe::EvNodeDisconnected> ev) {
    const NodeId node = ev.Get()->node;
    board_->SenderLost(node);
    if (ev.Get()->left && rejoins_) {
      if (board_->Awaits(node)) {
        Probe(node);  // the pairs it sent reported before it left
      } else {
        left_.insert(node);
      }
    }
  }

  // Returns the members that listen (this node too).
  std::set<NodeId> Present() const {
    std::set<NodeId> present;
    for (const troupe::interconnect::NodeEndpoint& member : nameservice_->Members()) {
      if (!member.client) {
        present.insert(member.node);
      }
    }
    return present;
  }

  void HandleMembersChanged(troupe::EventPtr<EvMembersChanged> /*ev*/) {
    const absl::Time now = absl::Now();
    const std::set<NodeId> present = Present();
    for (const NodeId node : present) {
      if (node == self_) {
        continue;
      }
      const std::optional<JoinStart> join = board_->Member(node, now, present);
      if (!join) {
        continue;
      }
      // Queued at the node's proxy until the session is up: the answer times the whole join.
      auto ping = std::make_unique<troupe::examples::EvEchoPing>();
      ping->record.set_node(node);
      ping->record.set_seq(kJoinPing);
      Send(troupe::examples::kEchoService.WithNode(node), std::move(ping),
           troupe::kTrackDelivery | troupe::kSubscribeOnSession, node);
      if (join->pair.id == 0) {
        TROUPE_LOG(kInfo, kUser) << "node " << node << " joined: too late for a pair of its own";
        continue;
      }
      auto start = MakeLoadStart(join->pair, join->payload, join->window, join->rate,
                                 join->duration_ms, SelfId());
      start->record.set_first_second(join->pair.first_second);
      start->record.set_first_second_end_ns(join->first_second_end_ns);
      start->record.set_end_ns(join->end_ns);
      TROUPE_LOG(kInfo, kUser) << "node " << node << " joined: pair " << join->pair.id << " ("
                               << node << "->" << join->pair.receiver << ") from second "
                               << join->pair.first_second;
      Send(troupe::examples::kLoadSenderService.WithNode(node), std::move(start),
           troupe::kTrackDelivery | troupe::kSubscribeOnSession, join->pair.id);
    }
  }

  Board* board_;
  const NodeId self_;
  const std::shared_ptr<troupe::interconnect::Nameservice> nameservice_;
  const bool rejoins_;
  // Nodes being pinged until they are back, and nodes that left before their pairs reported.
  std::set<NodeId> probing_;
  std::set<NodeId> left_;
};

// Returns what the run's title says of the faults and membership changes.
std::string ChaosTitle(const std::vector<troupe::examples::ChaosEvent>& chaos) {
  bool faults = false;
  bool changes = false;
  bool roll = false;
  for (const troupe::examples::ChaosEvent& event : chaos) {
    if (event.action == troupe::examples::kRollLeave ||
        event.action == troupe::examples::kRollReady) {
      roll = true;
      continue;
    }
    const bool change = event.action == "join" || event.action == "leave";
    changes = changes || change;
    faults = faults || !change;
  }
  if (roll) {
    return faults || changes ? ", with a rolling restart and other changes"
                             : ", with a rolling restart";
  }
  if (faults && changes) {
    return ", with faults injected and nodes joining and leaving";
  }
  if (faults) {
    return ", with faults injected";
  }
  return changes ? ", with nodes joining and leaving" : "";
}

// Returns the members that listen, but `self`, in id order.
std::vector<NodeId> OtherMembers(const troupe::interconnect::Nameservice& nameservice,
                                 NodeId self) {
  std::vector<NodeId> others;
  for (const troupe::interconnect::NodeEndpoint& member : nameservice.Members()) {
    if (member.node != self && !member.client) {
      others.push_back(member.node);
    }
  }
  return others;
}

// -- the steps of a run: flags and config, the node, the cluster up, the load, the report -------

// What the flags ask for, checked.
struct LoadFlags {
  // The payload sizes, one phase each, and the current phase's.
  std::vector<uint32_t> payloads;
  int payload = 0;
  uint64_t rate = 0;
  int window = 0;
  int seconds = 0;
  int connect_timeout_s = 0;
  int expect_nodes = 0;
  std::string chaos_log;
  std::optional<troupe::examples::Baseline> baseline;
  std::vector<std::pair<std::string, pid_t>> node_pids;
};

// Reads and checks the flags. Prints the problem and returns kExitUsage on a bad one, kExitOk
// otherwise.
int ReadFlags(LoadFlags* flags) {
  absl::StatusOr<std::vector<uint32_t>> payloads =
      troupe::examples::ParsePayloadSizes(absl::GetFlag(FLAGS_payload));
  if (!payloads.ok()) {
    std::fprintf(stderr, "troupe_loadgen: %s\n", absl::StrCat(payloads.status().message()).c_str());
    return kExitUsage;
  }
  flags->payloads = std::move(*payloads);
  flags->payload = static_cast<int>(flags->payloads.front());
  flags->rate = absl::GetFlag(FLAGS_rate);
  if (flags->rate > troupe::examples::OpenLoopSchedule::kMaxRate) {
    std::fprintf(stderr, "troupe_loadgen: --rate: at most %s events/s per pair, got %s\n",
                 absl::StrCat(troupe::examples::OpenLoopSchedule::kMaxRate).c_str(),
                 absl::StrCat(flags->rate).c_str());
    return kExitUsage;
  }
  flags->window = absl::GetFlag(FLAGS_window);
  flags->seconds = absl::GetFlag(FLAGS_seconds);
  flags->connect_timeout_s = absl::GetFlag(FLAGS_connect_timeout_s);
  flags->expect_nodes = absl::GetFlag(FLAGS_expect_nodes);
  if (flags->window < 1 || flags->seconds < 1 || flags->connect_timeout_s < 1 ||
      absl::GetFlag(FLAGS_pairs) < 0 || flags->expect_nodes < 0) {
    std::fprintf(stderr,
                 "troupe_loadgen: --window, --seconds and --connect_timeout_s must be >= 1, "
                 "--pairs and --expect_nodes >= 0\n");
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr, "troupe_loadgen: --config: required (the cluster config)\n");
    return kExitUsage;
  }
  flags->chaos_log = absl::GetFlag(FLAGS_chaos_log);
  if (!flags->chaos_log.empty() && !troupe::examples::ReadChaosLog(flags->chaos_log).ok()) {
    std::fprintf(stderr, "troupe_loadgen: --chaos_log=%s: cannot be read\n",
                 flags->chaos_log.c_str());
    return kExitUsage;
  }
  if (flags->payloads.size() > 1 && !flags->chaos_log.empty()) {
    std::fprintf(stderr,
                 "troupe_loadgen: --payload with several sizes: not with --chaos_log (the faults "
                 "are timed from one load's start)\n");
    return kExitUsage;
  }
  absl::StatusOr<std::vector<std::pair<std::string, pid_t>>> pids =
      troupe::examples::ParseNodePids(absl::GetFlag(FLAGS_node_pids));
  if (!pids.ok()) {
    std::fprintf(stderr, "troupe_loadgen: %s\n", absl::StrCat(pids.status().message()).c_str());
    return kExitUsage;
  }
  flags->node_pids = std::move(*pids);
  if (const std::string dir = absl::GetFlag(FLAGS_baseline); !dir.empty()) {
    absl::StatusOr<troupe::examples::Baseline> baseline = troupe::examples::ReadBaseline(dir);
    if (!baseline.ok()) {
      std::fprintf(stderr, "troupe_loadgen: --baseline=%s: %s\n", dir.c_str(),
                   absl::StrCat(baseline.status().message()).c_str());
      return kExitUsage;
    }
    flags->baseline = std::move(*baseline);
  }
  return kExitOk;
}

// Loads this node's config and checks that it names other nodes to load (a table with another
// node, or etcd with --expect_nodes). kExitConfig or kExitUsage when not, kExitOk otherwise.
int ReadConfig(const LoadFlags& flags, troupe::proto::ActorSystemConfig* out) {
  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "troupe_loadgen: %s\n", absl::StrCat(config.status().message()).c_str());
    return kExitConfig;
  }
  const bool etcd = config->interconnect().has_etcd();
  if (etcd && flags.expect_nodes < 1) {
    std::fprintf(stderr,
                 "troupe_loadgen: --expect_nodes: required with etcd membership (the other "
                 "nodes to wait for)\n");
    return kExitUsage;
  }
  if (!etcd) {
    const NodeId self = config->node_id();
    bool others = false;
    for (const troupe::proto::NodeAddress& node : config->interconnect().nodes()) {
      others = others || node.node_id() != self;
    }
    if (!others) {
      std::fprintf(stderr, "troupe_loadgen: interconnect.nodes lists no node but this one (%u)\n",
                   self);
      return kExitConfig;
    }
  }
  *out = std::move(*config);
  return kExitOk;
}

// This load generator as a node: the node, its id and its controller actor.
struct LoadNode {
  std::unique_ptr<troupe::node::Node> node;
  NodeId self = 0;
  bool etcd = false;  // membership in etcd
  troupe::ActorId controller;
};

// Starts the node, writes its id (--id_file) and registers the controller, which writes to
// `board`. kExitConfig or kExitFailed (printed) when one of them fails, kExitOk otherwise.
int StartNode(const troupe::proto::ActorSystemConfig& config, Board* board, LoadNode* out) {
  troupe::node::NodeOptions options;
  options.on_system_start = [](troupe::ActorSystem& /*system*/) {
    troupe::examples::EnableSessionLogs();
    return absl::OkStatus();
  };
  // The node stops on every path out of Run: the interconnect drains, then the system stops.
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node =
      troupe::node::Node::Start(config, std::move(options));
  if (!node.ok()) {
    const std::string who = config.has_node_id() ? absl::StrCat("node ", config.node_id())
                                                 : std::string("node (id from etcd)");
    std::fprintf(stderr, "troupe_loadgen: %s: %s\n", who.c_str(),
                 absl::StrCat(node.status().message()).c_str());
    return absl::IsInvalidArgument(node.status()) ? kExitConfig : kExitFailed;
  }
  out->node = std::move(*node);
  out->self = out->node->id();
  out->etcd = config.interconnect().has_etcd();
  if (const std::string id_file = absl::GetFlag(FLAGS_id_file); !id_file.empty()) {
    if (absl::Status written = troupe::examples::WriteNodeIdFile(id_file, out->self);
        !written.ok()) {
      std::printf("troupe_loadgen: --id_file: %s\n", absl::StrCat(written.message()).c_str());
      return kExitFailed;
    }
  }
  // The controller only ever hears back from what it sends: registered after the start is soon
  // enough, and it knows the node's id then.
  absl::StatusOr<troupe::ActorId> registered = out->node->system().TryRegister(
      std::make_unique<Controller>(board, out->self, out->node->interconnect()->nameservice(),
                                   /*rejoins=*/!out->etcd));
  if (!registered.ok()) {
    std::printf("troupe_loadgen: the controller: %s\n",
                absl::StrCat(registered.status().message()).c_str());
    return kExitFailed;
  }
  out->controller = *registered;
  return kExitOk;
}

// Sleeps on the main thread unless a termination signal comes, printing session changes.
class Waiter {
 public:
  explicit Waiter(troupe::examples::SessionWatcher* watcher) : watcher_(watcher) {}
  // Sleeps `d`; returns false (printed) when a termination signal came.
  bool Wait(absl::Duration d) {
    const int signal = troupe::examples::WaitForTerminationSignal(d);
    watcher_->Poll(stderr);
    if (signal != 0) {
      std::printf("troupe_loadgen: interrupted (%s)\n",
                  troupe::examples::SignalName(signal).c_str());
    }
    return signal == 0;
  }
  // Prints session changes since the last call.
  void Poll() { watcher_->Poll(stderr); }

 private:
  troupe::examples::SessionWatcher* watcher_;
};

// Waits for the cluster: with etcd, until --expect_nodes other nodes are listed; then for a
// session with every member. Each node registers its services before it listens (troupe_node): a
// session up means its services answer. Sets the other members, in id order. kExitOk or
// kExitFailed (printed).
int WaitForCluster(const LoadFlags& flags, const LoadNode& load_node, Waiter& waiter,
                   std::vector<NodeId>* others) {
  const troupe::interconnect::Nameservice& nameservice =
      *load_node.node->interconnect()->nameservice();
  const bool etcd = load_node.etcd;
  const absl::Time connect_start = absl::Now();
  const absl::Time connect_deadline = connect_start + absl::Seconds(flags.connect_timeout_s);
  if (etcd) {
    size_t members = 0;
    while ((members = OtherMembers(nameservice, load_node.self).size()) <
           static_cast<size_t>(flags.expect_nodes)) {
      if (absl::Now() > connect_deadline) {
        std::printf("troupe_loadgen: %zu of %d other node(s) in etcd after %d s\n", members,
                    flags.expect_nodes, flags.connect_timeout_s);
        return kExitFailed;
      }
      if (!waiter.Wait(absl::Milliseconds(20))) {
        return kExitFailed;
      }
    }
  }
  if (absl::Status up = load_node.node->WaitForPeers(
          std::max(absl::Milliseconds(1), connect_deadline - absl::Now()));
      !up.ok()) {
    std::printf("troupe_loadgen: %s\n", absl::StrCat(up.message()).c_str());
    return kExitFailed;
  }
  waiter.Poll();
  *others = OtherMembers(nameservice, load_node.self);
  if (others->empty()) {
    std::printf("troupe_loadgen: no other node is a member\n");
    return kExitFailed;
  }
  std::printf("cluster up: %zu nodes (sessions with %zu in %.2f s; this loadgen is node %u%s)\n",
              others->size() + 1, others->size(),
              absl::ToDoubleSeconds(absl::Now() - connect_start), load_node.self,
              etcd ? ", membership in etcd" : "");
  return kExitOk;
}

// Returns the load's pairs: pair i sends from the i-th other node to the next one, round robin.
std::vector<LoadPair> MakePairs(const std::vector<NodeId>& others, int pair_count) {
  const size_t k = others.size();
  std::vector<LoadPair> pairs;
  pairs.reserve(static_cast<size_t>(pair_count));
  for (int i = 0; i < pair_count; ++i) {
    pairs.push_back({.id = static_cast<uint32_t>(i + 1),
                     .sender = others[static_cast<size_t>(i) % k],
                     .receiver = others[static_cast<size_t>(i + 1) % k]});
  }
  return pairs;
}

// Starts the load and sets when it started: from then on a member the load does not know has
// joined, so the controller hears of every membership change from the watch set in `membership`
// (and of the membership once now: a node may have joined since `others` was read);
// --load_start_file is written; each pair's sender gets its LoadStart. kExitOk or kExitFailed
// (printed).
int StartLoad(const LoadFlags& flags, const LoadNode& load_node, const std::vector<NodeId>& others,
              const std::vector<LoadPair>& pairs, Board* board,
              troupe::interconnect::NameserviceWatch* membership, absl::Time* started) {
  troupe::ActorSystem& system = load_node.node->system();
  const troupe::ActorId controller = load_node.controller;
  *membership = load_node.node->interconnect()->nameservice()->Watch(
      [&system, controller] { system.Send(controller, std::make_unique<EvMembersChanged>()); });
  const absl::Time load_start = *started = absl::Now();
  LoadPlan plan{.start = load_start,
                .end = load_start + absl::Seconds(flags.seconds),
                .payload = static_cast<uint32_t>(flags.payload),
                .window = static_cast<uint32_t>(flags.window),
                .rate = flags.rate,
                .known = {others.begin(), others.end()},
                .receivers = others};
  plan.known.insert(load_node.self);
  board->StartLoad(std::move(plan), pairs);
  system.Send(controller, std::make_unique<EvMembersChanged>());
  if (const std::string path = absl::GetFlag(FLAGS_load_start_file); !path.empty()) {
    if (absl::Status written = troupe::examples::WriteLoadStart(path, load_start); !written.ok()) {
      std::printf("troupe_loadgen: --load_start_file: %s\n",
                  absl::StrCat(written.message()).c_str());
      return kExitFailed;
    }
  }
  for (const LoadPair& pair : pairs) {
    system.Send(troupe::examples::kLoadSenderService.WithNode(pair.sender),
                MakeLoadStart(pair, static_cast<uint32_t>(flags.payload),
                              static_cast<uint32_t>(flags.window), flags.rate,
                              static_cast<uint64_t>(flags.seconds) * 1000, controller),
                troupe::kTrackDelivery | troupe::kSubscribeOnSession, pair.id, controller);
  }
  return kExitOk;
}

// Prints the load's progress as the controller learns it: each second's line once every pair
// sent its figures for it (or ended), and a joined node's line once its first event is back.
class Progress {
 public:
  // `target`: the open loop's events/s of all pairs (0: closed loop), for the seconds' lines.
  Progress(Board* board, absl::Time load_start, uint64_t target)
      : board_(board), load_start_(load_start), target_(target) {}

  // Prints the seconds complete so far (all of them when `all`).
  void PrintSeconds(bool all) {
    for (const troupe::examples::LoadSecond& second :
         board_->figures().TakeSeconds(board_->pairs(), all)) {
      std::printf("%s\n", troupe::examples::FormatSecond(second, target_).c_str());
    }
  }

  // Prints the joined nodes whose first event came back since the last call.
  void PrintJoins() {
    for (const Join& join : board_->joins()) {
      if (!join.first_event || printed_.contains(join.node)) {
        continue;
      }
      printed_.insert(join.node);
      std::string pair = "no pair (the load was ending)";
      if (join.pair.id != 0) {
        pair = absl::StrFormat("pair %u (%u->%u) from second %u", join.pair.id, join.node,
                               join.pair.receiver, join.pair.first_second);
      }
      std::printf("  node %u joined at %.2f s: first event back at %.2f s; %s\n", join.node,
                  absl::ToDoubleSeconds(join.seen - load_start_),
                  absl::ToDoubleSeconds(*join.first_event - load_start_), pair.c_str());
    }
  }

  // Whether a joined node still owes its first event (and nothing said it will not come).
  bool JoinsPending() const {
    for (const Join& join : board_->joins()) {
      if (!join.first_event && join.problem.empty()) {
        return true;
      }
    }
    return false;
  }

 private:
  Board* board_;
  absl::Time load_start_;
  uint64_t target_;
  std::set<NodeId> printed_;
};

// Follows the load until every pair reported (at most --seconds + 15 s), printing its progress;
// then gives a node that joined near the end 5 s to send its first event. kExitOk, or
// kExitFailed on a termination signal.
int FollowLoad(const LoadFlags& flags, Board* board, Waiter& waiter, Progress& progress) {
  troupe::examples::LoadFigures& figures = board->figures();
  const absl::Time report_deadline = absl::Now() + absl::Seconds(flags.seconds + 15);
  size_t pair_total = 0;
  while (figures.reported() < (pair_total = board->pairs().size())) {
    if (absl::Now() > report_deadline) {
      std::printf("troupe_loadgen: %zu of %zu pair(s) reported within %d s\n", figures.reported(),
                  pair_total, flags.seconds + 15);
      break;
    }
    if (!waiter.Wait(absl::Milliseconds(100))) {
      return kExitFailed;
    }
    progress.PrintJoins();
    progress.PrintSeconds(/*all=*/false);
  }
  progress.PrintSeconds(/*all=*/true);
  const absl::Time joins_deadline = absl::Now() + absl::Seconds(5);
  while (progress.JoinsPending() && absl::Now() < joins_deadline) {
    if (!waiter.Wait(absl::Milliseconds(50))) {
      return kExitFailed;
    }
  }
  progress.PrintJoins();
  return kExitOk;
}

// Reads the chaos log (complete now: troupe_cluster times its faults before the load's end) and
// the nodes it killed or saw leave, by id. kExitOk, or kExitFailed (printed).
int ReadChaos(const std::string& chaos_log, std::vector<troupe::examples::ChaosEvent>* chaos,
              std::map<uint32_t, std::string>* gone) {
  if (chaos_log.empty()) {
    return kExitOk;
  }
  absl::StatusOr<std::vector<troupe::examples::ChaosEvent>> read =
      troupe::examples::ReadChaosLog(chaos_log);
  if (!read.ok()) {
    std::printf("troupe_loadgen: --chaos_log: %s\n", absl::StrCat(read.status().message()).c_str());
    return kExitFailed;
  }
  *chaos = std::move(*read);
  for (const troupe::examples::ChaosEvent& event : *chaos) {
    if (event.action == "kill") {
      (*gone)[event.node] = "was killed";
    } else if (event.action == "leave") {
      (*gone)[event.node] = "left";
    }
  }
  return kExitOk;
}

// Returns a line per joined node: how long from its process's start (chaos.csv) to its first
// event back. A joined node whose first event never came, and a join of the chaos log the
// controller never saw, are failures in `verdict`.
std::vector<std::string> JoinLines(const std::vector<Join>& joined,
                                   const std::vector<troupe::examples::ChaosEvent>& chaos,
                                   absl::Time load_start, troupe::examples::LoadVerdict* verdict) {
  std::vector<std::string> joins;
  std::vector<NodeId> seen;
  for (const Join& join : joined) {
    seen.push_back(join.node);
    const troupe::examples::ChaosEvent* started = nullptr;
    for (const troupe::examples::ChaosEvent& event : chaos) {
      if (event.node == join.node && (event.action == "join" || event.action == "restart")) {
        started = &event;
      }
    }
    const std::string pair =
        join.pair.id == 0 ? std::string("no pair (the load was ending)")
                          : absl::StrFormat("pair %u (%u->%u) from second %u", join.pair.id,
                                            join.node, join.pair.receiver, join.pair.first_second);
    if (!join.first_event) {
      const std::string why = join.problem.empty() ? "no answer to the echo ping" : join.problem;
      verdict->failures.push_back(
          absl::StrFormat("node %u joined at %.2f s: no event came back (%s)", join.node,
                          absl::ToDoubleSeconds(join.seen - load_start), why));
      continue;
    }
    const double first = absl::ToDoubleSeconds(*join.first_event - load_start);
    const double listed = absl::ToDoubleSeconds(join.seen - load_start);
    if (started != nullptr) {
      joins.push_back(absl::StrFormat(
          "node %u joined: first event %.2f s after its start (started at %.2f s, in this node's "
          "table at %.2f s, first event at %.2f s); %s",
          join.node, first - started->second, started->second, listed, first, pair));
    } else {
      joins.push_back(absl::StrFormat(
          "node %u joined: first event %.2f s after it came into this node's table (at %.2f s); "
          "%s",
          join.node, first - listed, listed, pair));
    }
  }
  for (const troupe::examples::ChaosEvent& event : chaos) {
    if (event.action == "join" && std::find(seen.begin(), seen.end(), event.node) == seen.end()) {
      verdict->failures.push_back(
          absl::StrFormat("node %u joined at %.2f s but never came into the load generator's table",
                          event.node, event.second));
    }
  }
  return joins;
}

// Returns the rolling restart's lines (troupe_cluster --roll: the roll-leave and roll-ready rows of
// the chaos log), empty without one: how many nodes restarted and when, the events lost (sent,
// neither acknowledged nor reported undelivered) and those reported undelivered because their
// node was leaving, and the RTT p99 of the seconds the roll spans (from the first leave to the
// last node ready) next to the whole run's. A loss, or a node that left and was not ready again,
// is a failure in `verdict`.
std::vector<std::string> RollLines(const std::vector<troupe::examples::ChaosEvent>& chaos,
                                   const troupe::examples::LoadFigures& figures,
                                   const std::vector<std::string>& restarted,
                                   troupe::examples::LoadVerdict* verdict) {
  size_t leaves = 0;
  size_t readies = 0;
  double first = 0;
  double last = 0;
  for (const troupe::examples::ChaosEvent& event : chaos) {
    if (event.action == troupe::examples::kRollLeave) {
      first = leaves++ == 0 ? event.second : std::min(first, event.second);
    } else if (event.action == troupe::examples::kRollReady) {
      ++readies;
      last = std::max(last, event.second);
    }
  }
  if (leaves == 0) {
    return {};
  }
  uint64_t sent = 0;
  uint64_t lost = 0;
  uint64_t leave_undelivered = 0;
  uint64_t pauses = 0;
  for (const auto& [id, report] : figures.reports()) {
    sent += report.sent();
    lost += report.sent() - std::min(report.sent(), report.acked() + report.undelivered());
    leave_undelivered += report.leave_undelivered();
    pauses += report.pauses();
  }
  // Second k covers (k - 1 s, k s] after the load start: the roll's seconds are those it touches.
  const auto from = static_cast<uint32_t>(first) + 1;
  const auto to = std::max(from, static_cast<uint32_t>(std::ceil(last)));
  troupe::examples::LatencyHistogram during;
  troupe::examples::LatencyHistogram whole;
  for (const troupe::examples::LoadSecond& second : figures.seconds()) {
    whole.Merge(second.rtt);
    if (second.second >= from && second.second <= to) {
      during.Merge(second.rtt);
    }
  }
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "rolling restart: %zu node(s) left and %zu were ready again; first leave at %.2f s, last "
      "ready at %.2f s (%.2f s)",
      leaves, readies, first, last, std::max(0.0, last - first)));
  lines.push_back(absl::StrFormat(
      "lost: %u of %u tracked events; undelivered because their node was leaving: %u (reported, "
      "not lost); pairs paused %u time(s) while their receiver's node restarted, %zu continued "
      "on a new pair (their sender's node back, or their receiver gone)",
      lost, sent, leave_undelivered, pauses, restarted.size()));
  lines.push_back(absl::StrFormat(
      "RTT p99 during the roll (seconds %u-%u): %.1f us (%u round trips); whole run: %.1f us (%u)",
      from, to, static_cast<double>(during.Percentile(0.99)) / 1e3, during.count(),
      static_cast<double>(whole.Percentile(0.99)) / 1e3, whole.count()));
  for (const std::string& line : restarted) {
    lines.push_back(absl::StrCat("  ", line));
  }
  if (readies < leaves) {
    verdict->failures.push_back(absl::StrFormat(
        "rolling restart: %zu node(s) left but only %zu were ready again", leaves, readies));
  }
  if (lost != 0) {
    verdict->failures.push_back(absl::StrFormat("rolling restart: %u tracked event(s) lost", lost));
  }
  return lines;
}

// One phase of the run (a payload size) once it ended: what the report says of it and its figures.
struct Phase {
  troupe::examples::LoadRunInfo run;
  troupe::examples::LoadFigures* figures = nullptr;
  // Every pair reported: the next phase may start.
  bool complete = false;
};

// Sets `phase`'s comparison with the baseline's phase of the same payload size (or its only one).
void CompareWithBaseline(const troupe::examples::Baseline& baseline, Phase* phase) {
  troupe::examples::LoadRunInfo& run = phase->run;
  const std::optional<size_t> index = baseline.PhaseFor(run.payload);
  if (!index) {
    std::printf("baseline %s: no phase with a %u B payload to compare with\n", baseline.dir.c_str(),
                run.payload);
    return;
  }
  if (const uint32_t other = baseline.summary.phases(static_cast<int>(*index)).payload_bytes();
      other != run.payload) {
    std::printf("baseline %s: its only phase has a %u B payload, compared with this %u B one\n",
                baseline.dir.c_str(), other, run.payload);
  }
  run.baseline_dir = baseline.dir;
  run.baseline_per_second = baseline.per_second[*index];
  run.comparison =
      troupe::examples::Compare(baseline.summary.phases(static_cast<int>(*index)),
                                troupe::examples::SummarizePhase(run, *phase->figures));
}

// Writes the report (--report): one phase's in the directory itself; several phases each in
// payload-<bytes>/ and an index over them (load_summary.h). kExitOk or kExitFailed (printed).
int WriteReports(const std::string& dir, const troupe::examples::LoadRunInfo& whole,
                 std::vector<Phase>& phases) {
  if (phases.size() == 1) {
    absl::StatusOr<std::string> html =
        troupe::examples::WriteLoadReport(dir, phases[0].run, *phases[0].figures);
    if (!html.ok()) {
      std::printf("troupe_loadgen: report: %s\n", absl::StrCat(html.status().message()).c_str());
      return kExitFailed;
    }
    std::printf("report: %s\n", html->c_str());
    return kExitOk;
  }
  std::vector<troupe::examples::PhaseSummary> summaries;
  for (Phase& phase : phases) {
    const std::string sub = absl::StrCat("payload-", phase.run.payload);
    absl::StatusOr<std::string> html =
        troupe::examples::WriteLoadReport(absl::StrCat(dir, "/", sub), phase.run, *phase.figures);
    if (!html.ok()) {
      std::printf("troupe_loadgen: report: %s\n", absl::StrCat(html.status().message()).c_str());
      return kExitFailed;
    }
    troupe::examples::PhaseSummary summary =
        troupe::examples::SummarizePhase(phase.run, *phase.figures);
    summary.set_per_second_csv(absl::StrCat(sub, "/", summary.per_second_csv()));
    summary.set_report_html(absl::StrCat(sub, "/", summary.report_html()));
    summaries.push_back(std::move(summary));
  }
  absl::StatusOr<std::string> index =
      troupe::examples::WriteRunIndex(dir, troupe::examples::SummarizeRun(whole, summaries));
  if (!index.ok()) {
    std::printf("troupe_loadgen: report: %s\n", absl::StrCat(index.status().message()).c_str());
    return kExitFailed;
  }
  std::printf("report: %s\n", index->c_str());
  return kExitOk;
}

// Prints the comparison with the baseline, writes the report (--report) and prints the verdict:
// what chaos explains, what failed, or OK. Returns the run's exit status.
int Report(const troupe::examples::LoadRunInfo& whole, std::vector<Phase>& phases) {
  std::vector<troupe::examples::ComparisonRow> comparison;
  for (const Phase& phase : phases) {
    comparison.insert(comparison.end(), phase.run.comparison.begin(), phase.run.comparison.end());
  }
  if (!comparison.empty()) {
    std::printf("%s", troupe::examples::ComparisonText(comparison, whole.baseline_dir).c_str());
  }
  if (const std::string dir = absl::GetFlag(FLAGS_report); !dir.empty()) {
    if (int code = WriteReports(dir, whole, phases); code != kExitOk) {
      return code;
    }
  }
  const troupe::examples::LoadRunInfo& run = whole;
  if (!run.expected.empty()) {
    std::printf("expected under chaos (a node the pair touches was killed or left):\n");
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
  if (run.expected.empty() && (!run.roll.empty() || run.leave_undelivered > 0)) {
    std::printf(
        "OK%s: no tracked event lost (each acknowledged once, in order, or reported undelivered "
        "while its node was leaving)\n",
        run.roll.empty() ? "" : " through the rolling restart");
    return kExitOk;
  }
  std::printf(run.expected.empty()
                  ? "OK: every event acknowledged once, in order\n"
                  : "OK under chaos: every pair clear of the nodes killed or gone had every event "
                    "acknowledged once, in order\n");
  return kExitOk;
}

// Once a phase's load ended: reads the chaos log, prints the pairs' table and the joined nodes.
// Returns the phase, or kExitFailed when the chaos log cannot be read.
absl::StatusOr<troupe::examples::LoadRunInfo> Conclude(const LoadFlags& flags, int pair_count,
                                                       size_t nodes, absl::Time load_start,
                                                       const std::vector<LoadPair>& pairs,
                                                       Board* board) {
  std::vector<troupe::examples::ChaosEvent> chaos;
  std::map<uint32_t, std::string> gone;
  if (int code = ReadChaos(flags.chaos_log, &chaos, &gone); code != kExitOk) {
    return absl::FailedPreconditionError("--chaos_log");
  }
  troupe::examples::LoadVerdict verdict =
      troupe::examples::PrintLoadTable(pairs, board->figures().reports(), gone, flags.rate);
  std::vector<std::string> joins = JoinLines(board->joins(), chaos, load_start, &verdict);
  for (const std::string& line : joins) {
    std::printf("%s\n", line.c_str());
  }
  std::vector<std::string> roll = RollLines(chaos, board->figures(), board->restarted(), &verdict);
  for (const std::string& line : roll) {
    std::printf("%s\n", line.c_str());
  }
  uint64_t leave_undelivered = 0;
  for (const auto& [id, report] : board->figures().reports()) {
    leave_undelivered += report.leave_undelivered();
  }
  if (roll.empty()) {
    for (const std::string& line : board->restarted()) {
      std::printf("%s\n", line.c_str());
    }
  }
  troupe::examples::LoadRunInfo run;
  run.title = absl::StrFormat(
      "%d pair(s) on %zu node(s)%s, %d B payload, %s, window %d, %d s%s", pair_count, nodes,
      joins.empty() ? "" : absl::StrCat(" and ", joins.size(), " joined"), flags.payload,
      flags.rate == 0 ? std::string("closed loop")
                      : absl::StrCat("open loop at ", flags.rate, " events/s per pair"),
      flags.window, flags.seconds, ChaosTitle(chaos));
  run.pairs = pairs;
  run.failures = std::move(verdict.failures);
  run.chaos = std::move(chaos);
  run.joins = std::move(joins);
  run.expected = std::move(verdict.expected);
  run.roll = std::move(roll);
  run.leave_undelivered = leave_undelivered;
  run.payload = static_cast<uint32_t>(flags.payload);
  run.window = static_cast<uint32_t>(flags.window);
  run.seconds = static_cast<uint32_t>(flags.seconds);
  run.rate = flags.rate;
  return run;
}

// Returns every flag of this program with its value (the report's metadata).
std::map<std::string, std::string> OwnFlags() {
  std::map<std::string, std::string> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "troupe_loadgen")) {
      flags[std::string(name)] = flag->CurrentValue();
    }
  }
  return flags;
}

// Returns the run as a whole over its phases: the first phase's parameters, a title naming every
// size, and every phase's failures and expected losses (prefixed with the size when several).
troupe::examples::LoadRunInfo WholeRun(const std::vector<Phase>& phases, const LoadFlags& flags,
                                       const troupe::examples::RunMetadata* metadata) {
  troupe::examples::LoadRunInfo whole = phases.front().run;
  whole.metadata = metadata;
  if (flags.baseline) {
    whole.baseline_dir = flags.baseline->dir;
  }
  if (phases.size() == 1) {
    return whole;
  }
  whole.title = absl::StrFormat(
      "%zu pair(s), payloads %s B, %s, window %d, %d s each", whole.pairs.size(),
      absl::StrJoin(flags.payloads, ", "),
      flags.rate == 0 ? std::string("closed loop")
                      : absl::StrCat("open loop at ", flags.rate, " events/s per pair"),
      flags.window, flags.seconds);
  whole.failures.clear();
  whole.expected.clear();
  whole.comparison.clear();
  whole.leave_undelivered = 0;
  for (const Phase& phase : phases) {
    for (const std::string& failure : phase.run.failures) {
      whole.failures.push_back(absl::StrCat(phase.run.payload, " B: ", failure));
    }
    for (const std::string& line : phase.run.expected) {
      whole.expected.push_back(absl::StrCat(phase.run.payload, " B: ", line));
    }
    whole.comparison.insert(whole.comparison.end(), phase.run.comparison.begin(),
                            phase.run.comparison.end());
    whole.leave_undelivered += phase.run.leave_undelivered;
  }
  if (phases.size() < flags.payloads.size()) {
    whole.failures.push_back(absl::StrFormat(
        "%zu of %zu payload size(s) ran: a phase's pairs did not all report, so the next could "
        "not start cleanly",
        phases.size(), flags.payloads.size()));
  }
  return whole;
}

// Runs one phase: its pairs between `others`, followed to their reports, and concluded. Sets
// `phase` (its `complete` false when a pair did not report); kExitOk or the exit status.
int RunPhase(const LoadFlags& flags, const LoadNode& load_node, const std::vector<NodeId>& others,
             Board* board, Waiter& waiter, Phase* phase) {
  const int pair_count =
      absl::GetFlag(FLAGS_pairs) > 0 ? absl::GetFlag(FLAGS_pairs) : static_cast<int>(others.size());
  std::vector<LoadPair> pairs = MakePairs(others, pair_count);
  std::printf("load: %d pair(s), %d B payload, %s, window %d, %d s\n", pair_count, flags.payload,
              flags.rate == 0
                  ? "closed loop"
                  : absl::StrCat("open loop at ", flags.rate, " events/s per pair").c_str(),
              flags.window, flags.seconds);
  std::fflush(stdout);
  troupe::interconnect::NameserviceWatch membership;
  absl::Time load_start;
  if (int code = StartLoad(flags, load_node, others, pairs, board, &membership, &load_start);
      code != kExitOk) {
    return code;
  }
  Progress progress(board, load_start, flags.rate * static_cast<uint64_t>(pair_count));
  if (int code = FollowLoad(flags, board, waiter, progress); code != kExitOk) {
    return code;
  }
  membership.Cancel();
  pairs = board->pairs();  // with the pairs of the nodes that joined
  phase->figures = &board->figures();
  phase->complete = phase->figures->reported() >= pairs.size();
  absl::StatusOr<troupe::examples::LoadRunInfo> run =
      Conclude(flags, pair_count, others.size(), load_start, pairs, board);
  if (!run.ok()) {
    return kExitFailed;
  }
  phase->run = std::move(*run);
  if (flags.baseline) {
    CompareWithBaseline(*flags.baseline, phase);
  }
  return kExitOk;
}

int Run(const std::string& command_line) {
  Board board;  // outlives the system, whose controller actor writes to it
  LoadFlags flags;
  troupe::proto::ActorSystemConfig config;
  if (int code = ReadFlags(&flags); code != kExitOk) {
    return code;
  }
  if (int code = ReadConfig(flags, &config); code != kExitOk) {
    return code;
  }
  LoadNode load_node;  // the node stops on every path out of here
  if (int code = StartNode(config, &board, &load_node); code != kExitOk) {
    return code;
  }
  troupe::examples::SessionWatcher watcher(load_node.self, load_node.node->interconnect());
  Waiter waiter(&watcher);
  std::vector<NodeId> others;  // in id order
  if (int code = WaitForCluster(flags, load_node, waiter, &others); code != kExitOk) {
    return code;
  }
  std::string config_text;
  google::protobuf::TextFormat::PrintToString(config, &config_text);
  troupe::examples::RunMetadata metadata = troupe::examples::StartMetadata(
      command_line, absl::GetFlag(FLAGS_launcher_command), OwnFlags(), std::move(config_text));
  const troupe::examples::CpuMeter cpu(flags.node_pids);
  const absl::Time started = absl::Now();
  std::vector<Phase> phases;
  for (size_t i = 0; i < flags.payloads.size(); ++i) {
    if (i > 0) {
      board.NewPhase();
      // The members now: a node that joined during the last phase takes part.
      others = OtherMembers(*load_node.node->interconnect()->nameservice(), load_node.self);
      std::printf("\n");
    }
    flags.payload = static_cast<int>(flags.payloads[i]);
    Phase& phase = phases.emplace_back();
    if (int code = RunPhase(flags, load_node, others, &board, waiter, &phase); code != kExitOk) {
      return code;
    }
    if (!phase.complete) {
      break;
    }
  }
  troupe::examples::FinishMetadata(cpu, absl::ToDoubleSeconds(absl::Now() - started), &metadata);
  for (Phase& phase : phases) {
    phase.run.metadata = &metadata;
  }
  watcher.PrintCounters(stderr);
  troupe::examples::LoadRunInfo whole = WholeRun(phases, flags, &metadata);
  return Report(whole, phases);
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  troupe::examples::BlockTerminationSignals();
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Load-test controller: a cluster node that drives sender→receiver pairs and prints the "
      "throughput and round-trip times. Exits 1 unless every event was acknowledged once, in "
      "order (under --chaos_log: except on pairs touching a node killed or gone).");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run(troupe::examples::CommandLine(argc, argv));
}
