// SPDX-License-Identifier: Apache-2.0
//
// troupe_cluster: runs a whole cluster on this machine. Writes a config for nodes 1..N on
// 127.0.0.1 plus the load generator as node N+1 (with --node_config, that file's settings over
// it), starts N troupe_node processes (stdout and stderr to <workdir>/node-<i>.log), runs
// troupe_loadgen in the foreground (its table on our stdout, its log in <workdir>/loadgen.log),
// then stops every node and exits with the load generator's status.
//
// Membership (--membership): `static` (the default) writes the node table into the config.
// `etcd` starts etcd (--etcd_binary) on two free loopback ports with its data in
// <workdir>/etcd-data, and writes a config with its endpoint and no table and no node_id: each
// node gets its id from etcd (in start order: troupe_cluster starts the nodes one after the other
// and learns each id from troupe_node --id_file), listens on a free port and follows the others
// as they join and leave; the load generator waits for the N nodes in etcd. Unless --churn=false,
// one more node joins half-way through the load and node N leaves (SIGTERM, a clean stop) at
// three quarters; both are printed and logged like chaos actions, and the load generator gives the
// joined node a pair and times its first event. etcd is stopped and its data removed at the end.
//
// No process outlives it: children get SIGTERM if the launcher dies (PR_SET_PDEATHSIG); when the
// load generator ends, on SIGINT/SIGTERM, or when a node dies early, every child gets SIGTERM,
// then SIGKILL after 5 s, and is reaped (etcd last). A node that dies early, or does not exit
// cleanly (status 0) on SIGTERM, fails the run; the tail of its log is printed.
//
// Chaos (--chaos=kill:2@1,restart:2@2): at each time after the load start (chaos.h) it SIGKILLs
// the node's process, or starts it again with the same command line (id, port, config; with etcd
// the node comes back with a new id, as a joined node). With etcd, join@T starts one more node
// and leave:I@T stops node I with SIGTERM. Each action is printed and appended to
// <workdir>/chaos.csv, which troupe_loadgen puts in the report. A node killed or stopped on
// purpose does not fail the run (one that left must exit 0), nor do losses on the pairs touching
// a killed node (one that leaves costs its pairs nothing: loadtest.h); anything else does, as does
// an action the load ended before.
//
// Readiness: a node is up when its monitoring server answers GET /readyz 200 (node.h: started, a
// session with every member). The port is the one troupe_cluster gave it (--monitoring_port) with
// static membership, or with etcd the one in the URL the node writes to its id file. Without a
// chaos plan or a roll, the run fails when a node of the start is not ready within 30 s.
//
// Rolling restart (--roll=T): T seconds after the load start, every node in start order: once it
// answers /readyz 200 it gets SIGTERM (it leaves the cluster: troupe_node ends its load senders,
// then Node::Shutdown) and must exit 0 within 20 s; it is started again with the same command line
// (same id, port and config; with etcd a new id, learnt from its id file), run by --roll_binary
// with --roll_node_flags appended; it must answer /readyz 200 within 30 s; then the next node.
// Each leave and ready is printed and appended to chaos.csv (roll-leave, roll-ready), which the
// load generator turns into the report's roll lines: restarts, events lost (any fails the run),
// events refused while their node was leaving (reported, not lost), and the RTT p99 of the seconds
// from the first leave to the last ready next to the whole run's. A step that fails, or a roll
// the load ends before, fails the run; --roll goes with neither --chaos nor the etcd churn.
//
// The work directory is --workdir (made with its parents) or a new one under $TMPDIR (/tmp when
// unset). The load's flags (--payload, --rate, --window, --baseline, --report) go to the load
// generator, with the nodes' pids (--node_pids: their CPU seconds in the report) and this
// program's command line; several payload sizes and a bad baseline are refused before any
// process starts.
//
// Exit status (cli.h): the load generator's (0 passed, 1 failed), 1 when a node failed, 2 on a
// bad flag, 3 on a bad --node_config (or a node that found its config bad).
//
//   troupe_cluster --nodes=3 --seconds=5 [--report=/tmp/run1]
//   troupe_cluster --nodes=2 --pairs=1 --window=1 --low_latency   # the round trip, busy-polled
//   troupe_cluster --nodes=3 --seconds=6 --chaos=kill:2@2,restart:2@3 --report=/tmp/chaos
//   troupe_cluster --membership=etcd --nodes=3 --seconds=6   # node 5 joins at 3 s, 3 leaves
//   troupe_cluster --nodes=3 --seconds=8 --roll=1 --report=/tmp/roll   # restart all, in turn
//   troupe_cluster --nodes=3 --seconds=8 --roll=1 --roll_binary=/opt/new/troupe_node
//                  --roll_node_flags="--run_seconds=0"   # the restarted nodes: a new version
#include <httplib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

#include "actors/version.h"
#include "chaos.h"
#include "child_process.h"
#include "cli.h"
#include "interconnect/testing/free_ports.h"
#include "load_summary.h"
#include "local_etcd.h"
#include "node/config.h"
#include "node_runner.h"
#include "proto/config.pb.h"

ABSL_FLAG(int, nodes, 3, "troupe_node processes (node ids 1..N; the load generator is N+1)");
ABSL_FLAG(std::string, membership, "static",
          "static: the config lists every node; etcd: start a local etcd, the nodes register "
          "there (ids from etcd, free ports), and one node joins and one leaves during the load "
          "(see --churn)");
ABSL_FLAG(bool, churn, true,
          "with --membership=etcd and no --chaos: one more node joins half-way through the load "
          "and node N leaves (a clean stop) at three quarters");
ABSL_FLAG(std::string, etcd_binary, "etcd",
          "etcd to run with --membership=etcd (PATH is searched)");
ABSL_FLAG(int, base_port, 0,
          "node i listens on base_port + i - 1; 0 picks free loopback ports (static membership)");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(std::string, payload, "64",
          "payload bytes per data event; several comma-separated sizes (64,1024,65536) run one "
          "phase per size, each --seconds long (not with --chaos, --roll or the etcd churn)");
ABSL_FLAG(uint64_t, rate, 0,
          "open loop: data events per second per pair on a fixed schedule, latency from each "
          "event's intended send time (troupe_loadgen --rate); 0: closed loop (--window)");
ABSL_FLAG(std::string, baseline, "",
          "an earlier --report directory to compare this run with (troupe_loadgen --baseline); "
          "checked before any process starts");
ABSL_FLAG(int, window, 256, "data events in flight per pair, at most");
ABSL_FLAG(int, pairs, 0, "sender→receiver pairs; 0 means one per node");
ABSL_FLAG(bool, low_latency, false,
          "the low-latency setting: no IC pool (proxies and socket I/O share the actors' User "
          "worker) and idle workers spin 1 ms before they park (a core each while traffic flows)");
ABSL_FLAG(std::string, node_config, "",
          "a config file (protobuf text, proto/config.proto) whose settings go over the one "
          "troupe_cluster writes, for every process: a field it sets replaces troupe_cluster's, "
          "sections merge field by field, lists (pools) are replaced whole. It must leave out "
          "interconnect.nodes and monitoring.port, which troupe_cluster assigns");
ABSL_FLAG(std::string, chaos, "",
          "faults to inject, comma-separated ACTION:NODE@SECONDS after the load start: kill "
          "(SIGKILL) or restart (same id, port and config) node 1..N, at a time below --seconds, "
          "e.g. kill:2@1,restart:2@2.5; with --membership=etcd also join@SECONDS (one more node) "
          "and leave:NODE@SECONDS (SIGTERM, a clean stop). Losses on pairs touching a node killed "
          "or gone are expected; anything else still fails the run");
ABSL_FLAG(double, roll, -1,
          "a rolling restart, SECONDS after the load start (below --seconds; -1: none): each node "
          "in turn, once it is ready (GET /readyz 200), leaves (SIGTERM; it must exit 0), starts "
          "again (same id, port and config with static membership; a new id with etcd) and must "
          "be ready again before the next one. The run fails on any loss or a node not ready in "
          "time; the report gives the RTT p99 during the roll. Not with --chaos; with "
          "--membership=etcd it replaces the churn");
ABSL_FLAG(std::string, roll_binary, "",
          "the troupe_node the nodes run once restarted by --roll (the new version); empty: "
          "--node_binary's");
ABSL_FLAG(std::string, roll_node_flags, "",
          "extra flags for the nodes restarted by --roll only, whitespace-separated (no quoting), "
          "after troupe_cluster's own (a later value wins), e.g. \"--run_seconds=0\"; leave "
          "--config, --node_id, --id_file and --monitoring_port alone: the roll relies on them");
ABSL_FLAG(std::string, workdir, "",
          "where the config and the logs go (made with its parents when missing); empty makes a "
          "new directory under $TMPDIR (/tmp when unset)");
ABSL_FLAG(std::string, report, "",
          "have troupe_loadgen write its figures, plots and report.html into this directory");
ABSL_FLAG(std::string, node_binary, "", "troupe_node to run; empty: the one next to this binary");
ABSL_FLAG(std::string, loadgen_binary, "",
          "troupe_loadgen to run; empty: the one next to this binary");
ABSL_FLAG(std::string, prometheus_targets, "",
          "write the nodes' monitoring addresses to this file, as a Prometheus file_sd target "
          "list (deploy/prometheus/prometheus.yml), once they are known");

namespace {

using troupe::examples::ChaosAction;
using troupe::examples::ChaosEvent;
using troupe::examples::Child;
using troupe::examples::ErrorText;
using troupe::examples::kExitConfig;
using troupe::examples::kExitFailed;
using troupe::examples::kExitOk;
using troupe::examples::kExitUsage;
using troupe::examples::LocalEtcd;

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// How long a node started with etcd membership may take to say its id (troupe_node --id_file).
constexpr absl::Duration kIdTimeout = absl::Seconds(30);
// How long a node may take to be ready (GET /readyz 200): after the start, and before and after
// its restart in a roll.
constexpr absl::Duration kReadyTimeout = absl::Seconds(30);
// How long a node told to leave in a roll may take to exit (its drain is bounded by 3 s for the
// load senders and 5 s for the interconnect, troupe_node.cc).
constexpr absl::Duration kLeaveTimeout = absl::Seconds(20);

// Asks `base_url` (http://host:port of a node's monitoring server) GET /readyz, bounded by half
// a second; returns the HTTP status (0 when nothing answered) and sets `*answer` to what it said.
int Readyz(const std::string& base_url, std::string* answer) {
  httplib::Client client(base_url);
  client.set_connection_timeout(0, 500'000);
  client.set_read_timeout(0, 500'000);
  client.set_write_timeout(0, 500'000);
  const httplib::Result result = client.Get("/readyz");
  if (!result) {
    *answer = result.error() == httplib::Error::Connection
                  ? absl::StrCat("cannot connect to ", base_url)
                  : absl::StrCat("no answer (", httplib::to_string(result.error()), ")");
    return 0;
  }
  *answer = std::string(absl::StripTrailingAsciiWhitespace(result->body));
  return result->status;
}

// Returns the config every process shares: the node table for `ports` (node i on ports[i - 1],
// the last one the load generator's; node i's monitoring server on monitoring[i - 1], so the
// status pages link to each other), or with `etcd` set, that endpoint and no table.
std::string ClusterConfig(const std::vector<uint16_t>& ports,
                          const std::vector<uint16_t>& monitoring, const std::string& etcd) {
  std::string text = absl::StrCat(
      etcd.empty()
          ? absl::StrCat("# Written by troupe_cluster: nodes 1..", ports.size() - 1,
                         " and the load generator (node ", ports.size(),
                         ") on 127.0.0.1. Each process sets its\n"
                         "# node_id with --node_id. Small pools: the whole cluster shares the "
                         "machine.\n"
                         "node_id: 1\n")
          : absl::StrCat("# Written by troupe_cluster: the nodes and the load generator find "
                         "each other in etcd (",
                         etcd,
                         "):\n# no node_id (etcd gives each one), no node table, free ports. "
                         "Small pools: the whole\n# cluster shares the machine.\n"),
      "default_pool: \"User\"\n"
      "pools { name: \"System\" threads: 1 spin_time_us: 20 }\n",
      absl::GetFlag(FLAGS_low_latency)
          ? "# Low latency: proxies and socket I/O run on the User worker, which busy-polls.\n"
            "pools { name: \"User\" threads: 1 spin_time_us: 1000 }\n"
          : "pools { name: \"User\" threads: 1 spin_time_us: 20 }\n"
            "pools { name: \"IC\" threads: 1 spin_time_us: 20 }\n",
      "scheduler { resolution_us: 1000 }\n"
      "log { level: \"info\" }\n"
      "interconnect {\n"
      "  cluster_id: \"local\"\n"
      "  # Generous: four processes share a small machine (and maybe a sanitizer). The launcher\n"
      "  # notices a dead node by itself, at once.\n"
      "  dead_peer_timeout_ms: 10000\n");
  if (!etcd.empty()) {
    absl::StrAppend(&text,
                    "  # A node that dies is gone from the others' tables lease_ttl_s after its "
                    "last\n  # keep-alive; one that stops cleanly at once.\n"
                    "  etcd { endpoint: \"",
                    etcd,
                    "\" lease_ttl_s: 5 }\n"
                    "  listen { host: \"127.0.0.1\" port: 0 }\n}\n");
    return text;
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    absl::StrAppend(
        &text, "  nodes { node_id: ", i + 1, " host: \"127.0.0.1\" port: ", ports[i],
        i < monitoring.size() ? absl::StrCat(" monitoring_port: ", monitoring[i]) : std::string(),
        " }\n");
  }
  absl::StrAppend(&text, "}\n");
  return text;
}

// Returns the directory of this binary (for the default --node_binary and --loadgen_binary).
std::string OwnDirectory(const char* argv0) {
  std::string path = argv0;
  if (!absl::StrContains(path, '/')) {
    std::array<char, 4096> buffer{};
    const ssize_t size = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
    path = size > 0 ? std::string(buffer.data(), static_cast<size_t>(size)) : std::string("./x");
  }
  return path.substr(0, path.rfind('/'));
}

// Sets every field `from` sets in `to`: singular messages field by field, anything else
// (scalars, lists, maps) replaced whole.
void Overlay(const google::protobuf::Message& from, google::protobuf::Message* to) {
  const google::protobuf::Reflection* reflection = from.GetReflection();
  std::unique_ptr<google::protobuf::Message> rest(from.New());
  rest->CopyFrom(from);
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(from, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
        !field->is_repeated()) {
      Overlay(reflection->GetMessage(from, field), reflection->MutableMessage(to, field));
      reflection->ClearField(rest.get(), field);
    } else {
      reflection->ClearField(to, field);
    }
  }
  to->MergeFrom(*rest);  // what is left: the replaced fields, into cleared ones
}

// Returns the text of the cluster's config: ClusterConfig, with --node_config over it.
// kInvalidArgument / kNotFound name the file and the field at fault.
absl::StatusOr<std::string> NodeConfigText(const std::vector<uint16_t>& ports,
                                           const std::vector<uint16_t>& monitoring,
                                           const std::string& etcd) {
  const std::string text = ClusterConfig(ports, monitoring, etcd);
  const std::string path = absl::GetFlag(FLAGS_node_config);
  if (path.empty()) {
    return text;
  }
  absl::StatusOr<troupe::proto::ActorSystemConfig> user = troupe::node::LoadConfigFile(path);
  if (!user.ok()) {
    return user.status();
  }
  if (user->interconnect().nodes_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": interconnect.nodes: leave it out, troupe_cluster writes the node table"));
  }
  if (user->monitoring().has_port()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": monitoring.port: leave it out, troupe_cluster gives each node a port"));
  }
  if (!etcd.empty() && user->has_node_id()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": node_id: leave it out, etcd gives each node its id"));
  }
  if (!user->interconnect().etcd().endpoint().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": interconnect.etcd.endpoint: leave it out, troupe_cluster "
                     "--membership=etcd starts etcd and writes its endpoint"));
  }
  absl::StatusOr<troupe::proto::ActorSystemConfig> merged = troupe::node::ParseConfig(text);
  if (!merged.ok()) {
    return merged.status();
  }
  Overlay(*user, &*merged);
  if (absl::Status valid = troupe::node::ValidateConfig(*merged); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " over troupe_cluster's config: ", valid.message()));
  }
  std::string merged_text;
  google::protobuf::TextFormat::PrintToString(*merged, &merged_text);
  if (!etcd.empty()) {
    return absl::StrCat(
        "# Written by troupe_cluster: its config for the nodes and the load "
        "generator, members in etcd (",
        etcd, "), with ", path, " over it.\n", merged_text);
  }
  return absl::StrCat("# Written by troupe_cluster: its config for nodes 1..", ports.size() - 1,
                      " and the load generator (node ", ports.size(), ") with ", path,
                      " over it.\n# Each process sets its node_id with --node_id.\n", merged_text);
}

// Returns `binary` when it names a path, else the first executable `binary` on PATH; empty when
// there is none.
std::string FindBinary(const std::string& binary) {
  if (absl::StrContains(binary, '/')) {
    return ::access(binary.c_str(), X_OK) == 0 ? binary : std::string();
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", binary);
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// The processes of the cluster: the nodes in start order (slots 0..N-1), the load generator
// (slot N), then the nodes started by joins; with each node's id, 0 until it is known.
struct Processes {
  std::vector<Child> children;
  std::vector<troupe::NodeId> ids;
  size_t nodes = 0;  // N
  size_t loadgen() const { return nodes; }
};

// Returns a node's id file (troupe_node --id_file) in `workdir`.
std::string IdFile(const std::string& workdir, size_t slot) {
  return absl::StrCat(workdir, "/node-", slot + 1, ".id");
}

// Carries out a chaos plan against the node processes, timed from the load start that
// troupe_loadgen writes to `start_file`; appends each action to `log` (chaos.h). A node started
// by a join (or, with etcd, a restart) gets its row once it has written its id.
class Chaos {
 public:
  // `join` is the command line of a node started by a join, but its id file and monitoring port.
  Chaos(std::vector<ChaosAction> plan, std::string start_file, std::string log, bool etcd,
        std::string workdir, std::vector<std::string> join)
      : plan_(std::move(plan)),
        start_file_(std::move(start_file)),
        log_(std::move(log)),
        etcd_(etcd),
        workdir_(std::move(workdir)),
        join_(std::move(join)) {}

  // Returns how long to wait before the next action is due, at most `cap`.
  absl::Duration Wait(absl::Duration cap) const {
    if (!pending_.empty()) {
      cap = std::min(cap, absl::Milliseconds(20));  // a joining node's id comes soon
    }
    if (!start_ || next_ >= plan_.size()) {
      return cap;
    }
    return std::clamp(*start_ + plan_[next_].at - absl::Now(), absl::ZeroDuration(), cap);
  }

  // Carries out the actions due and writes the rows whose node id came. Returns false when a
  // node could not be started, did not say its id within kIdTimeout, or the log not written.
  bool Step(Processes& processes, const sigset_t& child_mask) {
    if (next_ < plan_.size() && !start_) {
      start_ = troupe::examples::ReadLoadStart(start_file_);
    }
    while (start_ && next_ < plan_.size() && absl::Now() >= *start_ + plan_[next_].at) {
      if (!Act(plan_[next_++], processes, child_mask)) {
        return false;
      }
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      const troupe::NodeId id = troupe::examples::ReadNodeIdFile(IdFile(workdir_, it->slot));
      if (id == 0) {
        if (absl::Now() - it->since > kIdTimeout) {
          std::printf("troupe_cluster: chaos: %s (pid %d) did not say its id within %s\n",
                      processes.children[it->slot].name.c_str(), processes.children[it->slot].pid,
                      absl::FormatDuration(kIdTimeout).c_str());
          return false;
        }
        ++it;
        continue;
      }
      processes.ids[it->slot] = id;
      processes.children[it->slot].name = absl::StrCat("node ", id);
      it->event.node = id;
      if (it->event.action == "join") {
        std::printf("troupe_cluster: membership: node %u joined (pid %d), started at %.2f s\n", id,
                    processes.children[it->slot].pid, it->event.second);
      } else {
        std::printf(
            "troupe_cluster: chaos: restarted node %zu as node %u (pid %d), started at %.2f s\n",
            it->slot + 1, id, processes.children[it->slot].pid, it->event.second);
      }
      if (!Record(it->event)) {
        return false;
      }
      it = pending_.erase(it);
    }
    return true;
  }

  // Whether the node in `slot` is down on purpose (killed, or left).
  bool down(size_t slot) const { return down_.contains(slot); }
  // Whether the node in `slot` left (it must have exited 0).
  bool left(size_t slot) const { return left_.contains(slot); }
  // Actions not carried out yet, and rows still waiting for a node's id.
  size_t pending() const { return plan_.size() - next_ + pending_.size(); }

 private:
  // A row waiting for the id of the node started in `slot`.
  struct Pending {
    size_t slot = 0;
    ChaosEvent event;
    absl::Time since;
  };

  bool Act(const ChaosAction& action, Processes& processes, const sigset_t& child_mask) {
    ChaosEvent event{.second = absl::ToDoubleSeconds(absl::Now() - *start_),
                     .node = action.node,
                     .action = troupe::examples::ChaosKindName(action.kind)};
    if (action.kind == ChaosAction::Kind::kJoin) {
      const size_t slot = processes.children.size();
      Child child{.name = absl::StrCat("joining node (slot ", slot + 1, ")"),
                  .log = absl::StrCat(workdir_, "/node-", slot + 1, ".log"),
                  .args = join_};
      child.args.push_back("--id_file=" + IdFile(workdir_, slot));
      child.args.emplace_back("--monitoring_port=0");
      ::unlink(IdFile(workdir_, slot).c_str());
      if (!troupe::examples::Spawn({.log_stdout = true, .own_group = true}, child_mask, &child)) {
        return false;
      }
      event.pid = child.pid;
      processes.children.push_back(std::move(child));
      processes.ids.push_back(0);
      pending_.push_back({.slot = slot, .event = event, .since = absl::Now()});
      return true;
    }
    const size_t slot = action.node - 1;
    Child& child = processes.children[slot];
    event.node = processes.ids[slot];
    switch (action.kind) {
      case ChaosAction::Kind::kKill:
        if (!child.running) {
          return true;  // it died by itself: the supervisor reports that
        }
        event.pid = child.pid;
        troupe::examples::KillNow(&child);
        down_.insert(slot);
        std::printf("troupe_cluster: chaos: killed node %u (pid %d) at %.2f s\n", event.node,
                    child.pid, event.second);
        break;
      case ChaosAction::Kind::kLeave:
        if (!child.running) {
          return true;
        }
        event.pid = child.pid;
        ::kill(child.pid, SIGTERM);  // reaped by the supervisor, which checks the exit status
        down_.insert(slot);
        left_.insert(slot);
        std::printf("troupe_cluster: membership: node %u leaves (SIGTERM to pid %d) at %.2f s\n",
                    event.node, child.pid, event.second);
        break;
      case ChaosAction::Kind::kRestart:
        std::ofstream(child.log, std::ios::app)
            << "---- troupe_cluster: chaos: node " << action.node << " restarted at "
            << event.second << " s ----\n";
        if (etcd_) {
          ::unlink(IdFile(workdir_, slot).c_str());  // the new process gets a new id
        }
        if (!troupe::examples::Spawn({.log_stdout = true, .own_group = true, .append = true},
                                     child_mask, &child)) {
          return false;
        }
        down_.erase(slot);
        left_.erase(slot);
        event.pid = child.pid;
        if (etcd_) {
          processes.ids[slot] = 0;
          pending_.push_back({.slot = slot, .event = event, .since = absl::Now()});
          return true;
        }
        std::printf("troupe_cluster: chaos: restarted node %u (pid %d) at %.2f s\n", action.node,
                    child.pid, event.second);
        break;
      case ChaosAction::Kind::kJoin:
        break;
    }
    return Record(event);
  }

  bool Record(const ChaosEvent& event) {
    std::ofstream out(log_, std::ios::app);
    out << troupe::examples::ChaosCsvRow(event);
    if (!out.flush()) {
      std::printf("troupe_cluster: cannot write %s\n", log_.c_str());
      return false;
    }
    return true;
  }

  const std::vector<ChaosAction> plan_;
  const std::string start_file_;
  const std::string log_;
  const bool etcd_;
  const std::string workdir_;
  const std::vector<std::string> join_;
  size_t next_ = 0;
  std::optional<absl::Time> start_;
  std::set<size_t> down_;
  std::set<size_t> left_;
  std::vector<Pending> pending_;
};

// Returns where the node in `slot` serves its monitoring (http://127.0.0.1:PORT): the port
// troupe_cluster gave it with static membership, or with etcd the URL in its id file ("" until
// it wrote it).
std::string MonitoringUrl(const std::vector<uint16_t>& metrics_ports, const std::string& workdir,
                          size_t slot) {
  if (slot < metrics_ports.size()) {
    return absl::StrCat("http://127.0.0.1:", metrics_ports[slot]);
  }
  std::string metrics;
  troupe::examples::ReadNodeIdFile(IdFile(workdir, slot), &metrics);
  return std::string(absl::StripSuffix(metrics, "/metrics"));
}

// A rolling restart (--roll), stepped by the supervisor like the chaos plan: from `at` after the
// load start, node after node (slots 0..N-1):
//   | phase       | waits for                       | then                                      |
//   |-------------|---------------------------------|-------------------------------------------|
//   | kWaiting    | the load start + `at`           | kCheckReady with the first node           |
//   | kCheckReady | GET /readyz 200 (kReadyTimeout) | SIGTERM, a roll-leave row; kLeaving       |
//   | kLeaving    | its exit (kLeaveTimeout), 0     | the same command again (the roll's binary |
//   |             |                                 | and extra flags); kStarting with etcd,    |
//   |             |                                 | else kReady                               |
//   | kStarting   | its id file (kIdTimeout)        | kReady                                    |
//   | kReady      | GET /readyz 200 (kReadyTimeout) | a roll-ready row; the next node, or kDone |
// Anything else ends the roll as failed, saying why.
class Roll {
 public:
  struct Options {
    std::optional<absl::Duration> at;  // none: no roll
    std::string binary;                // what the restarted nodes run
    std::vector<std::string> extra;    // their extra flags
    bool etcd = false;
    std::string workdir;
    std::string start_file;
    std::string log;
    std::vector<uint16_t> metrics_ports;  // static membership: each node's monitoring port
  };

  explicit Roll(Options options)
      : options_(std::move(options)), phase_(options_.at ? Phase::kWaiting : Phase::kOff) {}

  // Returns how long to wait before the next step, at most `cap`.
  absl::Duration Wait(absl::Duration cap) const {
    switch (phase_) {
      case Phase::kOff:
      case Phase::kDone:
        return cap;
      case Phase::kWaiting:
        if (!start_) {
          return std::min(cap, absl::Milliseconds(20));
        }
        return std::clamp(*start_ + *options_.at - absl::Now(), absl::ZeroDuration(), cap);
      default:
        return std::min(cap, absl::Milliseconds(50));
    }
  }

  // Carries out what is due. Returns why the roll failed ("" while it goes well).
  std::string Step(Processes& processes, const sigset_t& child_mask) {
    const absl::Time now = absl::Now();
    switch (phase_) {
      case Phase::kOff:
      case Phase::kDone:
        return "";
      case Phase::kWaiting:
        if (!start_) {
          start_ = troupe::examples::ReadLoadStart(options_.start_file);
        }
        if (start_ && now >= *start_ + *options_.at) {
          std::printf("troupe_cluster: roll: restarting %zu node(s) in turn at %.2f s\n",
                      processes.nodes, Seconds(now));
          Enter(Phase::kCheckReady);
        }
        return "";
      case Phase::kCheckReady:
        return CheckReady(processes);
      case Phase::kLeaving:
        return Leaving(processes, child_mask);
      case Phase::kStarting: {
        const troupe::NodeId id = troupe::examples::ReadNodeIdFile(IdFile(options_.workdir, slot_));
        if (id == 0) {
          return now - since_ > kIdTimeout
                     ? absl::StrCat(processes.children[slot_].name, " (pid ",
                                    processes.children[slot_].pid, ") did not say its id within ",
                                    absl::FormatDuration(kIdTimeout))
                     : "";
        }
        processes.ids[slot_] = id;
        processes.children[slot_].name = absl::StrCat("node ", id);
        Enter(Phase::kReady);
        return "";
      }
      case Phase::kReady:
        return Ready(processes);
    }
    return "";
  }

  // Whether the node in `slot` is down on purpose (it left and is not started again yet).
  bool down(size_t slot) const { return phase_ == Phase::kLeaving && slot == slot_; }
  // Nodes the roll has not restarted yet (0 without a roll, and once it is done).
  size_t pending(size_t nodes) const {
    return phase_ == Phase::kOff || phase_ == Phase::kDone ? 0 : nodes - slot_;
  }
  // Whether a roll was asked for.
  bool enabled() const { return phase_ != Phase::kOff; }

 private:
  enum class Phase { kOff, kWaiting, kCheckReady, kLeaving, kStarting, kReady, kDone };

  double Seconds(absl::Time t) const { return absl::ToDoubleSeconds(t - *start_); }

  void Enter(Phase phase) {
    phase_ = phase;
    since_ = absl::Now();
  }

  // Asks the node in `slot_` GET /readyz; true on 200, else keeps what it said in last_answer_.
  bool IsReady() {
    const std::string url = MonitoringUrl(options_.metrics_ports, options_.workdir, slot_);
    if (url.empty()) {
      last_answer_ = "its monitoring URL is not known yet";
      return false;
    }
    std::string answer;
    const int status = Readyz(url, &answer);
    last_answer_ = status == 0 ? answer : absl::StrCat(status, " \"", answer, "\"");
    return status == 200;
  }

  std::string CheckReady(Processes& processes) {
    Child& child = processes.children[slot_];
    if (!IsReady()) {
      return absl::Now() - since_ > kReadyTimeout
                 ? absl::StrCat(child.name, " was not ready before its leave within ",
                                absl::FormatDuration(kReadyTimeout),
                                " (GET /readyz: ", last_answer_, ")")
                 : "";
    }
    const absl::Time now = absl::Now();
    leave_at_ = now;
    ::kill(child.pid, SIGTERM);  // reaped by the supervisor; Leaving checks the exit status
    std::printf("troupe_cluster: roll: node %u leaves (SIGTERM to pid %d) at %.2f s\n",
                processes.ids[slot_], child.pid, Seconds(now));
    Enter(Phase::kLeaving);
    return Record({.second = Seconds(now),
                   .node = processes.ids[slot_],
                   .action = std::string(troupe::examples::kRollLeave),
                   .pid = child.pid});
  }

  std::string Leaving(Processes& processes, const sigset_t& child_mask) {
    Child& child = processes.children[slot_];
    if (child.running) {
      return absl::Now() - since_ > kLeaveTimeout
                 ? absl::StrCat(child.name, " (pid ", child.pid, ") did not exit within ",
                                absl::FormatDuration(kLeaveTimeout), " of SIGTERM")
                 : "";
    }
    if (!(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)) {
      troupe::examples::PrintTail(child.log);
      return absl::StrCat(child.name, " (pid ", child.pid, ") did not exit cleanly when it left: ",
                          troupe::examples::Describe(child.status));
    }
    const absl::Time now = absl::Now();
    std::printf("troupe_cluster: roll: node %u exited 0 after %.2f s\n", processes.ids[slot_],
                absl::ToDoubleSeconds(now - leave_at_));
    std::ofstream(child.log, std::ios::app)
        << "---- troupe_cluster: roll: node " << processes.ids[slot_] << " restarted at "
        << Seconds(now) << " s ----\n";
    child.args[0] = options_.binary;
    child.args.insert(child.args.end(), options_.extra.begin(), options_.extra.end());
    if (options_.etcd) {
      ::unlink(IdFile(options_.workdir, slot_).c_str());  // the new process gets a new id
    }
    if (!troupe::examples::Spawn({.log_stdout = true, .own_group = true, .append = true},
                                 child_mask, &child)) {
      return absl::StrCat("could not start ", child.name, " again");
    }
    std::printf("troupe_cluster: roll: node %u started again (pid %d, %s)\n", processes.ids[slot_],
                child.pid, absl::StrJoin(child.args, " ").c_str());
    Enter(options_.etcd ? Phase::kStarting : Phase::kReady);
    return "";
  }

  std::string Ready(Processes& processes) {
    Child& child = processes.children[slot_];
    if (!IsReady()) {
      return absl::Now() - since_ > kReadyTimeout
                 ? absl::StrCat(child.name, " (pid ", child.pid, ") was not ready within ",
                                absl::FormatDuration(kReadyTimeout),
                                " of its restart (GET /readyz: ", last_answer_, ")")
                 : "";
    }
    const absl::Time now = absl::Now();
    std::printf(
        "troupe_cluster: roll: node %u ready again (GET /readyz 200) at %.2f s, %.2f s "
        "after its leave\n",
        processes.ids[slot_], Seconds(now), absl::ToDoubleSeconds(now - leave_at_));
    if (std::string why = Record({.second = Seconds(now),
                                  .node = processes.ids[slot_],
                                  .action = std::string(troupe::examples::kRollReady),
                                  .pid = child.pid});
        !why.empty()) {
      return why;
    }
    if (first_leave_ == absl::InfinitePast()) {
      first_leave_ = leave_at_;
    }
    if (++slot_ == processes.nodes) {
      std::printf("troupe_cluster: roll: every node restarted, from %.2f s to %.2f s (%.2f s)\n",
                  Seconds(first_leave_), Seconds(now), absl::ToDoubleSeconds(now - first_leave_));
      Enter(Phase::kDone);
    } else {
      Enter(Phase::kCheckReady);
    }
    return "";
  }

  std::string Record(const ChaosEvent& event) const {
    std::ofstream out(options_.log, std::ios::app);
    out << troupe::examples::ChaosCsvRow(event);
    return out.flush() ? "" : absl::StrCat("cannot write ", options_.log);
  }

  const Options options_;
  Phase phase_;
  std::optional<absl::Time> start_;
  size_t slot_ = 0;
  absl::Time since_;
  absl::Time leave_at_;
  absl::Time first_leave_ = absl::InfinitePast();
  std::string last_answer_;
};

// Waits, while the supervisor runs, for every node of the start to be ready (GET /readyz 200),
// at most kReadyTimeout from when it was made, and prints when they are. Off with a chaos plan (a
// node killed on purpose leaves the others not ready) and with a roll (which asks each node
// before its leave).
class StartupReadiness {
 public:
  StartupReadiness(bool enabled, std::vector<uint16_t> metrics_ports, std::string workdir)
      : enabled_(enabled),
        metrics_ports_(std::move(metrics_ports)),
        workdir_(std::move(workdir)),
        since_(absl::Now()) {}

  // Returns how long to wait before the next question, at most `cap`.
  absl::Duration Wait(absl::Duration cap) const {
    return enabled_ ? std::min(cap, absl::Milliseconds(50)) : cap;
  }

  // Asks the next node not known ready. Returns why the nodes are not all ready in time ("" while
  // they may still be, and once they are).
  std::string Step(const Processes& processes) {
    if (!enabled_) {
      return "";
    }
    std::string answer;
    const std::string url = MonitoringUrl(metrics_ports_, workdir_, next_);
    const int status = url.empty() ? 0 : Readyz(url, &answer);
    if (status == 200) {
      if (++next_ == processes.nodes) {
        std::printf("troupe_cluster: every node ready (GET /readyz 200) %.2f s after the start\n",
                    absl::ToDoubleSeconds(absl::Now() - since_));
        enabled_ = false;
      }
      return "";
    }
    if (absl::Now() - since_ > kReadyTimeout) {
      return absl::StrCat(processes.children[next_].name, " was not ready within ",
                          absl::FormatDuration(kReadyTimeout), " of the start (GET /readyz: ",
                          status == 0 ? answer : absl::StrCat(status, " \"", answer, "\""), ")");
    }
    return "";
  }

 private:
  bool enabled_;
  const std::vector<uint16_t> metrics_ports_;
  const std::string workdir_;
  const absl::Time since_;
  size_t next_ = 0;
};

// Waits until the node in `slot` has written its id (troupe_node --id_file), at most
// kIdTimeout. Returns why not: it ended, a signal came, the time ran out.
std::string WaitForId(Processes& processes, size_t slot, const std::string& id_file,
                      const sigset_t& signals) {
  const absl::Time deadline = absl::Now() + kIdTimeout;
  while ((processes.ids[slot] = troupe::examples::ReadNodeIdFile(id_file)) == 0) {
    const int signal = troupe::examples::WaitSignal(signals, absl::Milliseconds(10));
    if (signal == SIGINT || signal == SIGTERM) {
      return absl::StrCat("interrupted (", troupe::examples::SignalText(signal), ")");
    }
    troupe::examples::Reap(processes.children);
    const Child& child = processes.children[slot];
    if (!child.running) {
      troupe::examples::PrintTail(child.log);
      return absl::StrCat(child.name, " (pid ", child.pid, ") ended before it had an id: ",
                          troupe::examples::Describe(child.status));
    }
    if (absl::Now() > deadline) {
      return absl::StrCat(child.name, " (pid ", child.pid, ") had no id after ",
                          absl::FormatDuration(kIdTimeout));
    }
  }
  return "";
}

// -- the steps of a run: flags, binaries, ports and files, processes, supervision, exit status --

// What the flags ask for, checked.
struct ClusterFlags {
  int nodes = 0;
  int base_port = 0;
  int seconds = 0;
  bool etcd = false;
  std::string chaos_plan;  // as given, or the default churn with etcd
  std::vector<ChaosAction> plan;
  std::optional<absl::Duration> roll;  // --roll
  std::vector<std::string> roll_flags;
  // The load generator writes the load start and reads the chaos log.
  bool logged() const { return !plan.empty() || roll.has_value(); }
  // This program's command line, for the report's metadata.
  std::string command_line;
};

// Checks the load's own flags before any process starts, as troupe_loadgen would: the payload
// sizes (several: not with a chaos plan or a roll, whose times count from one load's start) and
// the baseline (its summary.json and per-second figures). Prints the problem and returns
// kExitUsage on a bad one, kExitOk otherwise.
int ReadLoadFlags(const ClusterFlags& flags) {
  absl::StatusOr<std::vector<uint32_t>> sizes =
      troupe::examples::ParsePayloadSizes(absl::GetFlag(FLAGS_payload));
  if (!sizes.ok()) {
    std::fprintf(stderr, "troupe_cluster: %s\n", absl::StrCat(sizes.status().message()).c_str());
    return kExitUsage;
  }
  if (sizes->size() > 1 && flags.logged()) {
    std::fprintf(stderr,
                 "troupe_cluster: --payload with several sizes: not with --chaos, --roll or the "
                 "etcd churn (add --churn=false)\n");
    return kExitUsage;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_baseline); !dir.empty()) {
    if (absl::StatusOr<troupe::examples::Baseline> baseline = troupe::examples::ReadBaseline(dir);
        !baseline.ok()) {
      std::fprintf(stderr, "troupe_cluster: --baseline=%s: %s\n", dir.c_str(),
                   absl::StrCat(baseline.status().message()).c_str());
      return kExitUsage;
    }
  }
  return kExitOk;
}

// Reads and checks the flags that shape the run. Prints the problem and returns kExitUsage on a
// bad one, kExitOk otherwise.
int ReadFlags(ClusterFlags* flags) {
  const int nodes = flags->nodes = absl::GetFlag(FLAGS_nodes);
  const int base_port = flags->base_port = absl::GetFlag(FLAGS_base_port);
  const int seconds = flags->seconds = absl::GetFlag(FLAGS_seconds);
  if (nodes < 1 || nodes > 1000 || base_port < 0 || base_port + nodes > 65535 || seconds < 1) {
    std::fprintf(stderr,
                 "troupe_cluster: --nodes must be 1 to 1000, --seconds at least 1, --base_port 0 "
                 "or such that every node's port fits in 1..65535\n");
    return kExitUsage;
  }
  const std::string membership = absl::GetFlag(FLAGS_membership);
  if (membership != "static" && membership != "etcd") {
    std::fprintf(stderr, "troupe_cluster: --membership: static or etcd, got '%s'\n",
                 membership.c_str());
    return kExitUsage;
  }
  const bool etcd = flags->etcd = membership == "etcd";
  if (etcd && base_port != 0) {
    std::fprintf(stderr,
                 "troupe_cluster: --base_port: static membership only (with etcd every node "
                 "takes a free port)\n");
    return kExitUsage;
  }
  std::string& chaos_plan = flags->chaos_plan = absl::GetFlag(FLAGS_chaos);
  if (const double roll = absl::GetFlag(FLAGS_roll); roll != -1) {
    if (!(roll >= 0 && roll < seconds)) {
      std::fprintf(stderr,
                   "troupe_cluster: --roll: seconds after the load start, from 0 to below "
                   "--seconds (%d), or -1 for none; got %g\n",
                   seconds, roll);
      return kExitUsage;
    }
    if (!chaos_plan.empty()) {
      std::fprintf(stderr, "troupe_cluster: --roll and --chaos: one or the other\n");
      return kExitUsage;
    }
    flags->roll = absl::Seconds(roll);
  } else if (!absl::GetFlag(FLAGS_roll_binary).empty() ||
             !absl::GetFlag(FLAGS_roll_node_flags).empty()) {
    std::fprintf(stderr, "troupe_cluster: --roll_binary and --roll_node_flags need --roll\n");
    return kExitUsage;
  }
  for (absl::string_view flag : absl::StrSplit(absl::GetFlag(FLAGS_roll_node_flags),
                                               absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    if (!absl::StartsWith(flag, "-")) {
      std::fprintf(stderr, "troupe_cluster: --roll_node_flags: '%s' is not a flag (want --a=b)\n",
                   std::string(flag).c_str());
      return kExitUsage;
    }
    flags->roll_flags.emplace_back(flag);
  }
  if (etcd && chaos_plan.empty() && absl::GetFlag(FLAGS_churn) && !flags->roll) {
    // Half-way through, one more node; at three quarters, the last node of the start leaves
    // (with one node only, it stays: the load needs it).
    chaos_plan = absl::StrCat("join@", seconds / 2.0);
    if (nodes >= 2) {
      absl::StrAppend(&chaos_plan, ",leave:", nodes, "@", seconds * 0.75);
    }
  }
  if (!chaos_plan.empty()) {
    absl::StatusOr<std::vector<ChaosAction>> parsed =
        troupe::examples::ParseChaosPlan(chaos_plan, nodes, seconds);
    if (!parsed.ok()) {
      std::fprintf(stderr, "troupe_cluster: %s\n", absl::StrCat(parsed.status().message()).c_str());
      return kExitUsage;
    }
    flags->plan = std::move(*parsed);
  }
  for (const ChaosAction& action : flags->plan) {
    if (!etcd &&
        (action.kind == ChaosAction::Kind::kJoin || action.kind == ChaosAction::Kind::kLeave)) {
      std::fprintf(stderr, "troupe_cluster: --chaos: %s needs --membership=etcd\n",
                   troupe::examples::ChaosKindName(action.kind).c_str());
      return kExitUsage;
    }
  }
  return ReadLoadFlags(*flags);
}

// The signals the run waits for (SIGINT, SIGTERM, SIGCHLD), blocked before any child exists so
// that they arrive through sigtimedwait, and the mask before, which children get back before exec.
struct Signals {
  sigset_t wait;
  sigset_t original;
};

Signals BlockSignals() {
  Signals signals;
  sigemptyset(&signals.wait);
  sigaddset(&signals.wait, SIGINT);
  sigaddset(&signals.wait, SIGTERM);
  sigaddset(&signals.wait, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &signals.wait, &signals.original);
  return signals;
}

// The programs the run starts.
struct Binaries {
  std::string node;
  std::string roll;  // what nodes restarted by --roll run
  std::string loadgen;
  std::string etcd;  // with --membership=etcd only
  // The nodes (first and rolled) are this build's version: the config may use fields older ones
  // refuse (the node table's monitoring_port).
  bool same_version = true;
};

// Returns the version a troupe_node binary prints with --version ("0.1.0" from "troupe_node
// (Troupe) 0.1.0 ..."), or "" when it prints none.
std::string NodeVersion(const std::string& binary) {
  const std::string command =
      absl::StrCat("'", absl::StrReplaceAll(binary, {{"'", "'\\''"}}), "' --version 2>/dev/null");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return "";
  }
  std::array<char, 512> line{};
  const bool read = std::fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr;
  ::pclose(pipe);
  const std::vector<std::string> words = absl::StrSplit(line.data(), ' ', absl::SkipWhitespace());
  return read && words.size() >= 3 ? std::string(absl::StripTrailingAsciiWhitespace(words[2]))
                                   : std::string();
}

// Finds the binaries: the flags', or troupe_node and troupe_loadgen next to this one, and etcd on
// the PATH. Prints the problem and returns kExitUsage when one is missing, kExitOk otherwise.
int FindBinaries(const char* argv0, bool etcd, Binaries* binaries) {
  const std::string dir = OwnDirectory(argv0);
  binaries->node = absl::GetFlag(FLAGS_node_binary);
  binaries->loadgen = absl::GetFlag(FLAGS_loadgen_binary);
  if (binaries->node.empty()) {
    binaries->node = dir + "/troupe_node";
  }
  if (binaries->loadgen.empty()) {
    binaries->loadgen = dir + "/troupe_loadgen";
  }
  binaries->roll = absl::GetFlag(FLAGS_roll_binary);
  if (binaries->roll.empty()) {
    binaries->roll = binaries->node;
  }
  for (const std::string& binary : {binaries->node, binaries->loadgen, binaries->roll}) {
    if (::access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr,
                   "troupe_cluster: %s: %s (see --node_binary, --loadgen_binary, --roll_binary)\n",
                   binary.c_str(), ErrorText(errno).c_str());
      return kExitUsage;
    }
  }
  const std::string own(troupe::Version().version);
  for (const std::string& binary : {binaries->node, binaries->roll}) {
    if (const std::string version = NodeVersion(binary); version != own) {
      binaries->same_version = false;
      std::printf(
          "troupe_cluster: %s is version %s, not %s: the node table leaves out monitoring_port, "
          "so the status pages do not link to each other\n",
          binary.c_str(), version.empty() ? "unknown" : version.c_str(), own.c_str());
    }
  }
  if (etcd) {
    binaries->etcd = FindBinary(absl::GetFlag(FLAGS_etcd_binary));
    if (binaries->etcd.empty()) {
      std::fprintf(stderr,
                   "troupe_cluster: --etcd_binary=%s: not found (scripts/setup.sh installs "
                   "etcd-server)\n",
                   absl::GetFlag(FLAGS_etcd_binary).c_str());
      return kExitUsage;
    }
  }
  return kExitOk;
}

// The ports of a static table: one per process (the load generator's last) and each node's one
// for GET /metrics (troupe_node --monitoring_port). Both empty with etcd.
struct Ports {
  std::vector<uint16_t> table;
  std::vector<uint16_t> metrics;
};

// Picks the ports in one go, so that they differ. With etcd the nodes bind port 0 for both: a port
// picked here and released could be the one a node's listener gets. kExitFailed when no free
// port could be picked.
int PickPorts(const ClusterFlags& flags, Ports* ports) {
  if (flags.etcd) {
    return kExitOk;
  }
  const auto count = static_cast<size_t>(flags.nodes);
  absl::StatusOr<std::vector<uint16_t>> free =
      troupe::interconnect::FreeLoopbackPorts(flags.base_port == 0 ? 2 * count + 1 : count);
  if (!free.ok()) {
    std::printf("troupe_cluster: cannot pick free ports: %s\n",
                std::string(free.status().message()).c_str());
    return kExitFailed;
  }
  if (flags.base_port == 0) {
    ports->table.assign(free->begin(), free->begin() + static_cast<std::ptrdiff_t>(count) + 1);
    ports->metrics.assign(free->begin() + static_cast<std::ptrdiff_t>(count) + 1, free->end());
  } else {
    for (int i = 0; i <= flags.nodes; ++i) {
      ports->table.push_back(static_cast<uint16_t>(flags.base_port + i));
    }
    ports->metrics = std::move(*free);
  }
  return kExitOk;
}

// Makes the work directory (--workdir with its parents, or a fresh one under $TMPDIR, /tmp when
// unset or empty). kExitUsage when --workdir cannot be made, kExitFailed when a fresh one cannot.
int MakeWorkdir(std::string* workdir) {
  *workdir = absl::GetFlag(FLAGS_workdir);
  if (workdir->empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    while (base.size() > 1 && base.back() == '/') {
      base.pop_back();
    }
    std::string pattern = absl::StrCat(base, "/troupe-cluster-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::printf("troupe_cluster: cannot make a work directory in %s ($TMPDIR): %s\n",
                  base.c_str(), ErrorText(errno).c_str());
      return kExitFailed;
    }
    *workdir = pattern;
    return kExitOk;
  }
  std::error_code error;
  std::filesystem::create_directories(*workdir, error);
  if (error) {
    std::fprintf(stderr, "troupe_cluster: --workdir=%s: %s\n", workdir->c_str(),
                 error.message().c_str());
    return kExitUsage;
  }
  return kExitOk;
}

// The files of a run in its work directory.
struct RunFiles {
  explicit RunFiles(const std::string& workdir)
      : config(workdir + "/cluster.conf"),
        chaos_log(workdir + "/chaos.csv"),
        load_start(workdir + "/load_start") {}
  std::string config;      // every process's config
  std::string chaos_log;   // chaos.h's CSV, with a plan
  std::string load_start;  // written by troupe_loadgen when the load starts
};

// Writes `text` to `path`; false (printed) when it cannot.
bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) {
    std::printf("troupe_cluster: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// Writes the cluster's config and, with a plan, the chaos log's header; removes the load start
// file a workdir used before has from its last run.
bool WriteRunFiles(const ClusterFlags& flags, const Ports& ports, const Binaries& binaries,
                   const std::string& etcd_endpoint, const RunFiles& files) {
  absl::StatusOr<std::string> config_text = NodeConfigText(
      ports.table, binaries.same_version ? ports.metrics : std::vector<uint16_t>(), etcd_endpoint);
  ::unlink(files.load_start.c_str());
  return config_text.ok() && WriteFile(files.config, *config_text) &&
         (!flags.logged() ||
          WriteFile(files.chaos_log, absl::StrCat(troupe::examples::kChaosCsvHeader, "\n")));
}

// Starts etcd for the run (with --membership=etcd); false (printed, etcd stopped) when it could
// not start.
bool StartEtcd(const std::string& binary, const std::string& workdir, const Signals& signals,
               LocalEtcd* local_etcd) {
  if (std::string problem = local_etcd->Start(binary, workdir, signals.wait, signals.original);
      !problem.empty()) {
    std::printf("troupe_cluster: etcd (%s): %s\n", binary.c_str(), problem.c_str());
    local_etcd->Stop();
    return false;
  }
  std::printf("troupe_cluster: etcd at %s (pid %d, data %s, log %s/etcd.log)\n",
              local_etcd->endpoint().c_str(), local_etcd->pid(), local_etcd->data().c_str(),
              workdir.c_str());
  return true;
}

// The node processes of the start (slots 0..nodes-1), not yet started.
void AddNodes(const ClusterFlags& flags, const Ports& ports, const std::string& node_binary,
              const std::string& workdir, const RunFiles& files, Processes* processes) {
  for (int i = 1; i <= flags.nodes; ++i) {
    Child child{.name = absl::StrCat("node ", i),
                .log = absl::StrCat(workdir, "/node-", i, ".log"),
                .args = {node_binary, "--config=" + files.config,
                         absl::StrCat("--monitoring_port=",
                                      flags.etcd ? 0 : ports.metrics[static_cast<size_t>(i - 1)])}};
    if (flags.etcd) {
      child.args.push_back("--id_file=" + IdFile(workdir, static_cast<size_t>(i - 1)));
      ::unlink(IdFile(workdir, static_cast<size_t>(i - 1)).c_str());
    } else {
      child.args.push_back(absl::StrCat("--node_id=", i));
    }
    processes->children.push_back(std::move(child));
    processes->ids.push_back(flags.etcd ? 0 : static_cast<troupe::NodeId>(i));
  }
}

// The load generator's process (slot `nodes`), not yet started.
void AddLoadgen(const ClusterFlags& flags, const std::string& loadgen_binary,
                const std::string& workdir, const RunFiles& files, Processes* processes) {
  const int pairs = absl::GetFlag(FLAGS_pairs) > 0 ? absl::GetFlag(FLAGS_pairs) : flags.nodes;
  Child loadgen{
      .name = "troupe_loadgen",
      .log = workdir + "/loadgen.log",
      .args = {loadgen_binary, "--config=" + files.config, absl::StrCat("--pairs=", pairs),
               absl::StrCat("--payload=", absl::GetFlag(FLAGS_payload)),
               absl::StrCat("--rate=", absl::GetFlag(FLAGS_rate)),
               absl::StrCat("--window=", absl::GetFlag(FLAGS_window)),
               absl::StrCat("--seconds=", flags.seconds),
               "--launcher_command=" + flags.command_line}};
  if (flags.etcd) {
    loadgen.args.push_back(absl::StrCat("--expect_nodes=", flags.nodes));
    loadgen.args.push_back("--id_file=" + workdir + "/loadgen.id");
    ::unlink((workdir + "/loadgen.id").c_str());
  } else {
    loadgen.args.push_back(absl::StrCat("--node_id=", flags.nodes + 1));
  }
  if (!absl::GetFlag(FLAGS_report).empty()) {
    loadgen.args.push_back("--report=" + absl::GetFlag(FLAGS_report));
  }
  if (!absl::GetFlag(FLAGS_baseline).empty()) {
    loadgen.args.push_back("--baseline=" + absl::GetFlag(FLAGS_baseline));
  }
  if (flags.logged()) {
    loadgen.args.push_back("--load_start_file=" + files.load_start);
    loadgen.args.push_back("--chaos_log=" + files.chaos_log);
  }
  processes->children.push_back(std::move(loadgen));
  processes->ids.push_back(flags.etcd ? 0 : static_cast<troupe::NodeId>(flags.nodes + 1));
}

// Prints each node's status page and metrics, one line a node, from the base URLs of their
// monitoring servers (http://host:port; empty: not known), in node order (`ids`; empty: 1..N), and
// writes them to --prometheus_targets when it is set.
void PrintMonitoring(const std::vector<std::string>& urls,
                     const std::vector<troupe::NodeId>& ids = {}) {
  std::vector<std::string> targets;
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string node = absl::StrCat(ids.empty() ? i + 1 : ids[i]);
    if (urls[i].empty()) {
      std::printf("troupe_cluster: node %s: monitoring address not known\n", node.c_str());
      continue;
    }
    std::printf("troupe_cluster: node %s: status %s/  metrics %s/metrics\n", node.c_str(),
                urls[i].c_str(), urls[i].c_str());
    targets.push_back(absl::StrCat("\"", absl::StripPrefix(urls[i], "http://"), "\""));
  }
  const std::string file = absl::GetFlag(FLAGS_prometheus_targets);
  if (file.empty()) {
    return;
  }
  // Written whole to a temporary name, then renamed: Prometheus never reads half a file.
  const std::string text = absl::StrCat(R"([{"targets": [)", absl::StrJoin(targets, ", "), "]}]\n");
  const std::string partial = file + ".partial";
  if (!WriteFile(partial, text) || std::rename(partial.c_str(), file.c_str()) != 0) {
    std::fprintf(stderr, "troupe_cluster: --prometheus_targets: cannot write %s\n", file.c_str());
  } else {
    std::printf("troupe_cluster: Prometheus targets in %s\n", file.c_str());
  }
}

// Prints where the processes listen, their config, logs and metrics, and the chaos plan.
void PrintLayout(const ClusterFlags& flags, const Ports& ports, const std::string& workdir,
                 const RunFiles& files) {
  const int nodes = flags.nodes;
  if (flags.etcd) {
    std::printf(
        "troupe_cluster: %d node(s) and the load generator on 127.0.0.1, free ports, members in "
        "etcd\ntroupe_cluster: config %s, logs %s/node-<i>.log (the i-th node started) and "
        "loadgen.log\n",
        nodes, files.config.c_str(), workdir.c_str());
  } else {
    std::vector<std::string> port_list;
    port_list.reserve(ports.table.size());
    for (const uint16_t port : ports.table) {
      port_list.push_back(absl::StrCat(port));
    }
    std::printf(
        "troupe_cluster: %d node(s) and the load generator (node %d) on 127.0.0.1, ports %s\n"
        "troupe_cluster: config %s, logs %s/node-<i>.log and loadgen.log\n",
        nodes, nodes + 1, absl::StrJoin(port_list, " ").c_str(), files.config.c_str(),
        workdir.c_str());
    std::vector<std::string> urls;
    for (const uint16_t port : ports.metrics) {
      urls.push_back(absl::StrCat("http://127.0.0.1:", port));
    }
    PrintMonitoring(urls);
  }
  if (!flags.plan.empty()) {
    std::printf("troupe_cluster: %s: %s (seconds after the load start), logged to %s\n",
                absl::GetFlag(FLAGS_chaos).empty() ? "membership changes" : "chaos",
                flags.chaos_plan.c_str(), files.chaos_log.c_str());
  }
  if (flags.roll) {
    std::printf(
        "troupe_cluster: roll: every node in turn from %.2f s after the load start%s%s, logged "
        "to %s\n",
        absl::ToDoubleSeconds(*flags.roll),
        absl::GetFlag(FLAGS_roll_binary).empty()
            ? ""
            : absl::StrCat(", restarted as ", absl::GetFlag(FLAGS_roll_binary)).c_str(),
        flags.roll_flags.empty()
            ? ""
            : absl::StrCat(" with ", absl::StrJoin(flags.roll_flags, " ")).c_str(),
        files.chaos_log.c_str());
  }
}

// Prints the ids etcd gave the nodes and their metrics URLs (from their id files).
void PrintEtcdMembers(const Processes& processes, const std::string& workdir,
                      absl::Time nodes_start) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < processes.nodes; ++i) {
    ids.push_back(absl::StrCat(processes.ids[i]));
  }
  std::printf("troupe_cluster: nodes %s registered in etcd in %.2f s\n",
              absl::StrJoin(ids, " ").c_str(), absl::ToDoubleSeconds(absl::Now() - nodes_start));
  std::vector<std::string> urls;
  for (size_t i = 0; i < processes.nodes; ++i) {
    std::string url;
    troupe::examples::ReadNodeIdFile(IdFile(workdir, i), &url);
    urls.push_back(std::string(absl::StripSuffix(url, "/metrics")));
  }
  PrintMonitoring(urls, processes.ids);
}

// Starts the nodes, then the load generator. With etcd, one node at a time: each takes the next
// id, so node-<i>.log is node i's on a fresh etcd. Returns why not all started ("" when they did).
std::string StartProcesses(bool etcd, const std::string& workdir, const Signals& signals,
                           Processes* processes) {
  std::vector<Child>& children = processes->children;
  const absl::Time nodes_start = absl::Now();
  for (size_t i = 0; i < processes->nodes; ++i) {
    if (!troupe::examples::Spawn({.log_stdout = true, .own_group = true}, signals.original,
                                 &children[i])) {
      return "could not start every process";
    }
    if (etcd) {
      std::string why = WaitForId(*processes, i, IdFile(workdir, i), signals.wait);
      children[i].name = absl::StrCat("node ", processes->ids[i]);
      if (!why.empty()) {
        return why;
      }
    }
  }
  if (etcd) {
    PrintEtcdMembers(*processes, workdir, nodes_start);
  }
  // The load generator reads each node's CPU time over the load (/proc/PID/stat).
  std::vector<std::string> pids;
  for (size_t i = 0; i < processes->nodes; ++i) {
    pids.push_back(absl::StrCat(processes->ids[i], ":", children[i].pid));
  }
  children[processes->loadgen()].args.push_back("--node_pids=" + absl::StrJoin(pids, ","));
  if (!troupe::examples::Spawn({}, signals.original, &children[processes->loadgen()])) {
    return "could not start every process";
  }
  return "";
}

// How the run went while the load generator ran.
struct Outcome {
  std::string why;             // why the run failed ("" when it did not)
  std::optional<size_t> died;  // the node that died during the run
  bool failed() const { return !why.empty(); }
};

// Waits for the load generator to end, carrying out the chaos plan meanwhile. Ends early on
// SIGINT or SIGTERM, a chaos action that fails, a node that dies unasked, or etcd dying.
Outcome Supervise(const Signals& signals, LocalEtcd* local_etcd, Chaos& chaos, Roll& roll,
                  StartupReadiness& readiness, Processes& processes) {
  std::vector<Child>& children = processes.children;
  Outcome outcome;
  while (true) {
    const int signal = troupe::examples::WaitSignal(
        signals.wait, std::min({chaos.Wait(kPollInterval), roll.Wait(kPollInterval),
                                readiness.Wait(kPollInterval)}));
    if (signal == SIGINT || signal == SIGTERM) {
      outcome.why = absl::StrCat("interrupted (", troupe::examples::SignalText(signal), ")");
      return outcome;
    }
    troupe::examples::Reap(children);
    if (!children[processes.loadgen()].running) {
      return outcome;
    }
    if (!chaos.Step(processes, signals.original)) {
      outcome.why = "a chaos action failed";
      return outcome;
    }
    if (std::string why = roll.Step(processes, signals.original); !why.empty()) {
      outcome.why = absl::StrCat("roll failed: ", why);
      return outcome;
    }
    if (std::string why = readiness.Step(processes); !why.empty()) {
      outcome.why = why;
      return outcome;
    }
    for (size_t i = 0; i < children.size(); ++i) {
      if (i != processes.loadgen() && !children[i].running && !chaos.down(i) && !roll.down(i)) {
        outcome.died = i;
      }
    }
    if (outcome.died) {
      const Child& dead = children[*outcome.died];
      outcome.why =
          absl::StrCat(dead.name, " (pid ", dead.pid,
                       ") died during the run: ", troupe::examples::Describe(dead.status));
      return outcome;
    }
    if (local_etcd != nullptr && !local_etcd->running()) {
      outcome.why = "etcd died during the run";
      return outcome;
    }
  }
}

// The run's exit status once every process stopped: the load generator's; kExitFailed when chaos
// actions were left or a node told to stop (at the end or when it left) did not exit 0;
// kExitConfig when a node that died found its config bad.
int ExitStatus(const Outcome& outcome, const Processes& processes, const std::vector<bool>& told,
               const Chaos& chaos, const Roll& roll) {
  const std::vector<Child>& children = processes.children;
  int code = kExitFailed;
  if (outcome.died && WIFEXITED(children[*outcome.died].status) &&
      WEXITSTATUS(children[*outcome.died].status) == kExitConfig) {
    code = kExitConfig;  // the node found its config bad
  }
  if (outcome.failed()) {
    return code;
  }
  const Child& loadgen = children[processes.loadgen()];
  code = WIFEXITED(loadgen.status) ? WEXITSTATUS(loadgen.status) : kExitFailed;
  if (code != kExitOk) {
    std::printf("troupe_cluster: troupe_loadgen ended with %s\n",
                troupe::examples::Describe(loadgen.status).c_str());
    troupe::examples::PrintTail(loadgen.log);
  }
  if (chaos.pending() > 0) {
    std::printf("troupe_cluster: chaos: %zu action(s) not carried out: the load ended first\n",
                chaos.pending());
    code = kExitFailed;
  }
  if (const size_t left = roll.pending(processes.nodes); left > 0) {
    std::printf(
        "troupe_cluster: roll failed: %zu node(s) not restarted and ready again before the load "
        "ended (a longer --seconds or an earlier --roll)\n",
        left);
    code = kExitFailed;
  }
  // A node that does not exit 0 on SIGTERM (a crash at shutdown, a sanitizer report), told at
  // the end or when it left, fails the run too.
  for (size_t i = 0; i < children.size(); ++i) {
    if (i == processes.loadgen() || !(told[i] || chaos.left(i))) {
      continue;
    }
    if (!(WIFEXITED(children[i].status) && WEXITSTATUS(children[i].status) == 0)) {
      std::printf("troupe_cluster: %s did not stop cleanly%s: %s\n", children[i].name.c_str(),
                  chaos.left(i) && !told[i] ? " when it left" : "",
                  troupe::examples::Describe(children[i].status).c_str());
      troupe::examples::PrintTail(children[i].log);
      code = kExitFailed;
    }
  }
  return code;
}

// Stops every process still running (and etcd, last); returns which were running, the ones told
// to stop: only they may report their exit at shutdown.
std::vector<bool> StopEverything(const Signals& signals, const std::string& workdir,
                                 LocalEtcd* local_etcd, Processes& processes) {
  std::vector<bool> told(processes.children.size());
  for (size_t i = 0; i < processes.children.size(); ++i) {
    told[i] = processes.children[i].running;
  }
  troupe::examples::StopAll(processes.children, signals.wait);
  if (local_etcd != nullptr) {
    local_etcd->Stop();
    std::printf("troupe_cluster: etcd stopped, %s removed\n", (workdir + "/etcd-data").c_str());
  }
  ::pthread_sigmask(SIG_SETMASK, &signals.original, nullptr);
  return told;
}

// Prepares the run (flags, binaries, ports, config, work directory, etcd); kExitOk or the exit
// status of what went wrong.
int Prepare(const char* argv0, const ClusterFlags& flags, const Signals& signals,
            Binaries* binaries, Ports* ports, std::string* workdir, LocalEtcd* local_etcd) {
  if (int code = FindBinaries(argv0, flags.etcd, binaries); code != kExitOk) {
    return code;
  }
  if (int code = PickPorts(flags, ports); code != kExitOk) {
    return code;
  }
  // The config is checked before etcd starts (with a stand-in endpoint): a bad --node_config
  // exits 3 at once.
  if (absl::StatusOr<std::string> check =
          NodeConfigText(ports->table, ports->metrics, flags.etcd ? "http://127.0.0.1:1" : "");
      !check.ok()) {
    std::fprintf(stderr, "troupe_cluster: --node_config: %s\n",
                 absl::StrCat(check.status().message()).c_str());
    return kExitConfig;
  }
  if (int code = MakeWorkdir(workdir); code != kExitOk) {
    return code;
  }
  if (flags.etcd && !StartEtcd(binaries->etcd, *workdir, signals, local_etcd)) {
    ::pthread_sigmask(SIG_SETMASK, &signals.original, nullptr);
    return kExitFailed;
  }
  return kExitOk;
}

int Run(const char* argv0, std::string command_line) {
  ClusterFlags flags;
  flags.command_line = std::move(command_line);
  if (int code = ReadFlags(&flags); code != kExitOk) {
    return code;
  }
  const Signals signals = BlockSignals();
  Binaries binaries;
  Ports ports;
  std::string workdir;
  LocalEtcd local_etcd;  // stopped last, after every node (a node that stops leaves through it)
  if (int code = Prepare(argv0, flags, signals, &binaries, &ports, &workdir, &local_etcd);
      code != kExitOk) {
    return code;
  }
  const RunFiles files(workdir);
  if (!WriteRunFiles(flags, ports, binaries, flags.etcd ? local_etcd.endpoint() : "", files)) {
    return kExitFailed;
  }

  // Slots 0..nodes-1 are the nodes, `nodes` the load generator, then the nodes that join.
  Processes processes;
  processes.nodes = static_cast<size_t>(flags.nodes);
  processes.children.reserve(processes.nodes + 1 + flags.plan.size());
  AddNodes(flags, ports, binaries.node, workdir, files, &processes);
  AddLoadgen(flags, binaries.loadgen, workdir, files, &processes);
  PrintLayout(flags, ports, workdir, files);

  Outcome outcome;
  outcome.why = StartProcesses(flags.etcd, workdir, signals, &processes);
  Chaos chaos(flags.plan, files.load_start, files.chaos_log, flags.etcd, workdir,
              {binaries.node, "--config=" + files.config});
  Roll roll({.at = flags.roll,
             .binary = binaries.roll,
             .extra = flags.roll_flags,
             .etcd = flags.etcd,
             .workdir = workdir,
             .start_file = files.load_start,
             .log = files.chaos_log,
             .metrics_ports = ports.metrics});
  StartupReadiness readiness(flags.plan.empty() && !flags.roll, ports.metrics, workdir);
  if (!outcome.failed()) {
    outcome =
        Supervise(signals, flags.etcd ? &local_etcd : nullptr, chaos, roll, readiness, processes);
  }
  if (outcome.failed()) {
    std::printf("troupe_cluster: %s; stopping every process\n", outcome.why.c_str());
  }
  if (outcome.died) {
    troupe::examples::PrintTail(processes.children[*outcome.died].log);
  }

  const std::vector<bool> told =
      StopEverything(signals, workdir, flags.etcd ? &local_etcd : nullptr, processes);
  const int code = ExitStatus(outcome, processes, told, chaos, roll);
  std::printf("troupe_cluster: every process stopped; exit %d\n", code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Runs a local Troupe cluster (troupe_node processes) and a load test (troupe_loadgen) "
      "against it, then stops every process; with --chaos, kills and restarts nodes during the "
      "load; with --membership=etcd, the nodes find each other in a local etcd and one joins "
      "and one leaves during the load; with --roll, restarts every node in turn under the load, "
      "each step gated on GET /readyz. Exits 0 when every event was acknowledged once, in order, "
      "or reported undelivered while its node was leaving (under --chaos: on every pair clear of "
      "the nodes killed) and every node ran and stopped cleanly, 1 otherwise.");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run(argv[0], troupe::examples::CommandLine(argc, argv));
}
