// SPDX-License-Identifier: Apache-2.0
//
// troupe_cluster: runs a whole cluster on this machine. Writes a config for nodes 1..N on
// 127.0.0.1 plus the load generator as node N+1 (with --node_config, that file's settings over
// it), starts N troupe_node processes (stdout and stderr to <workdir>/node-<i>.log), runs
// troupe_loadgen in the foreground (its table on our stdout, its log in <workdir>/loadgen.log),
// then stops every node and exits with the load generator's status.
//
// No process outlives it: children get SIGTERM if the launcher dies (PR_SET_PDEATHSIG); when the
// load generator ends, on SIGINT/SIGTERM, or when a node dies early, every child gets SIGTERM,
// then SIGKILL after 5 s, and is reaped. A node that dies early, or does not exit cleanly (status
// 0) on SIGTERM, fails the run; the tail of its log is printed.
//
// Chaos (--chaos=kill:2@1,restart:2@2): at each time after the load start (chaos.h) it SIGKILLs
// the node's process, or starts it again with the same command line (id, port, config). Each
// action is printed and appended to <workdir>/chaos.csv, which troupe_loadgen puts in the report.
// A node killed on purpose does not fail the run, nor do losses on the pairs touching it;
// anything else does, as does an action the load ended before.
//
// Exit status (cli.h): the load generator's (0 passed, 1 failed), 1 when a node failed, 2 on a
// bad flag, 3 on a bad --node_config (or a node that found its config bad).
//
//   troupe_cluster --nodes=3 --seconds=5 [--report=/tmp/run1]
//   troupe_cluster --nodes=2 --pairs=1 --window=1 --low_latency   # the round trip, busy-polled
//   troupe_cluster --nodes=3 --seconds=6 --chaos=kill:2@2,restart:2@3 --report=/tmp/chaos
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
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

#include "actors/config.h"
#include "chaos.h"
#include "child_process.h"
#include "cli.h"
#include "interconnect/tcp_transport.h"
#include "proto/config.pb.h"

ABSL_FLAG(int, nodes, 3, "troupe_node processes (node ids 1..N; the load generator is N+1)");
ABSL_FLAG(int, base_port, 0, "node i listens on base_port + i - 1; 0 picks free loopback ports");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(int, payload, 64, "payload bytes per data event");
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
          "e.g. kill:2@1,restart:2@2.5. Losses on pairs touching a killed node are expected; "
          "anything else still fails the run");
ABSL_FLAG(std::string, workdir, "",
          "where the config and the logs go; empty makes a new directory under /tmp");
ABSL_FLAG(std::string, report, "",
          "have troupe_loadgen write its figures, plots and report.html into this directory");
ABSL_FLAG(std::string, node_binary, "", "troupe_node to run; empty: the one next to this binary");
ABSL_FLAG(std::string, loadgen_binary, "",
          "troupe_loadgen to run; empty: the one next to this binary");

namespace {

using troupe::examples::ChaosAction;
using troupe::examples::ChaosEvent;
using troupe::examples::Child;
using troupe::examples::ErrorText;
using troupe::examples::kExitConfig;
using troupe::examples::kExitFailed;
using troupe::examples::kExitOk;
using troupe::examples::kExitUsage;

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

std::string ClusterConfig(const std::vector<uint16_t>& ports) {
  std::string text = absl::StrCat(
      "# Written by troupe_cluster: nodes 1..", ports.size() - 1, " and the load generator (node ",
      ports.size(),
      ") on 127.0.0.1. Each process sets its\n"
      "# node_id with --node_id. Small pools: the whole cluster shares the machine.\n"
      "node_id: 1\n"
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
  for (size_t i = 0; i < ports.size(); ++i) {
    absl::StrAppend(&text, "  nodes { node_id: ", i + 1, " host: \"127.0.0.1\" port: ", ports[i],
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
absl::StatusOr<std::string> NodeConfigText(const std::vector<uint16_t>& ports) {
  const std::string text = ClusterConfig(ports);
  const std::string path = absl::GetFlag(FLAGS_node_config);
  if (path.empty()) {
    return text;
  }
  absl::StatusOr<troupe::proto::ActorSystemConfig> user = troupe::LoadConfigFile(path);
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
  absl::StatusOr<troupe::proto::ActorSystemConfig> merged = troupe::ParseConfig(text);
  if (!merged.ok()) {
    return merged.status();
  }
  Overlay(*user, &*merged);
  if (absl::Status valid = troupe::ValidateConfig(*merged); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " over troupe_cluster's config: ", valid.message()));
  }
  std::string merged_text;
  google::protobuf::TextFormat::PrintToString(*merged, &merged_text);
  return absl::StrCat("# Written by troupe_cluster: its config for nodes 1..", ports.size() - 1,
                      " and the load generator (node ", ports.size(), ") with ", path,
                      " over it.\n# Each process sets its node_id with --node_id.\n", merged_text);
}

// Carries out a chaos plan against the node processes, timed from the load start that
// troupe_loadgen writes to `start_file`; appends each action to `log` (chaos.h).
class Chaos {
 public:
  Chaos(std::vector<ChaosAction> plan, std::string start_file, std::string log)
      : plan_(std::move(plan)), start_file_(std::move(start_file)), log_(std::move(log)) {}

  // Returns how long to wait before the next action is due, at most `cap`.
  absl::Duration Wait(absl::Duration cap) const {
    if (!start_ || next_ >= plan_.size()) {
      return cap;
    }
    return std::clamp(*start_ + plan_[next_].at - absl::Now(), absl::ZeroDuration(), cap);
  }

  // Carries out the actions due; `nodes[i]` is node i + 1. Returns false when a node could not
  // be restarted or the log not written.
  bool Step(std::vector<Child>& nodes, const sigset_t& child_mask) {
    if (next_ < plan_.size() && !start_) {
      start_ = troupe::examples::ReadLoadStart(start_file_);
    }
    while (start_ && next_ < plan_.size() && absl::Now() >= *start_ + plan_[next_].at) {
      const ChaosAction& action = plan_[next_++];
      Child& child = nodes[action.node - 1];
      ChaosEvent event{.second = absl::ToDoubleSeconds(absl::Now() - *start_),
                       .node = action.node,
                       .action = troupe::examples::ChaosKindName(action.kind)};
      if (action.kind == ChaosAction::Kind::kKill) {
        if (!child.running) {
          continue;  // it died by itself: the supervisor reports that
        }
        event.pid = child.pid;
        troupe::examples::KillNow(&child);
        down_.insert(action.node);
        std::printf("troupe_cluster: chaos: killed node %u (pid %d) at %.2f s\n", action.node,
                    child.pid, event.second);
      } else {
        std::ofstream(child.log, std::ios::app)
            << "---- troupe_cluster: chaos: node " << action.node << " restarted at "
            << event.second << " s ----\n";
        if (!troupe::examples::Spawn({.log_stdout = true, .own_group = true, .append = true},
                                     child_mask, &child)) {
          return false;
        }
        down_.erase(action.node);
        event.pid = child.pid;
        std::printf("troupe_cluster: chaos: restarted node %u (pid %d) at %.2f s\n", action.node,
                    child.pid, event.second);
      }
      std::ofstream out(log_, std::ios::app);
      out << troupe::examples::ChaosCsvRow(event);
      if (!out.flush()) {
        std::printf("troupe_cluster: cannot write %s\n", log_.c_str());
        return false;
      }
    }
    return true;
  }

  // Whether node `node` is down on purpose.
  bool down(uint32_t node) const { return down_.contains(node); }
  // Actions not carried out yet.
  size_t pending() const { return plan_.size() - next_; }

 private:
  const std::vector<ChaosAction> plan_;
  const std::string start_file_;
  const std::string log_;
  size_t next_ = 0;
  std::optional<absl::Time> start_;
  std::set<uint32_t> down_;
};

int Run(const char* argv0) {
  const int nodes = absl::GetFlag(FLAGS_nodes);
  const int base_port = absl::GetFlag(FLAGS_base_port);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  if (nodes < 1 || nodes > 1000 || base_port < 0 || base_port + nodes > 65535 || seconds < 1) {
    std::fprintf(stderr,
                 "troupe_cluster: --nodes must be 1 to 1000, --seconds at least 1, --base_port 0 "
                 "or such that every node's port fits in 1..65535\n");
    return kExitUsage;
  }
  std::vector<ChaosAction> plan;
  if (const std::string chaos = absl::GetFlag(FLAGS_chaos); !chaos.empty()) {
    absl::StatusOr<std::vector<ChaosAction>> parsed =
        troupe::examples::ParseChaosPlan(chaos, nodes, seconds);
    if (!parsed.ok()) {
      std::fprintf(stderr, "troupe_cluster: %s\n", absl::StrCat(parsed.status().message()).c_str());
      return kExitUsage;
    }
    plan = std::move(*parsed);
  }

  // Blocked before any child exists: they arrive through sigtimedwait. Children get the original
  // mask back before exec.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  sigset_t original;
  ::pthread_sigmask(SIG_BLOCK, &signals, &original);

  const std::string dir = OwnDirectory(argv0);
  std::string node_binary = absl::GetFlag(FLAGS_node_binary);
  std::string loadgen_binary = absl::GetFlag(FLAGS_loadgen_binary);
  if (node_binary.empty()) {
    node_binary = dir + "/troupe_node";
  }
  if (loadgen_binary.empty()) {
    loadgen_binary = dir + "/troupe_loadgen";
  }
  for (const std::string& binary : {node_binary, loadgen_binary}) {
    if (::access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "troupe_cluster: %s: %s (see --node_binary, --loadgen_binary)\n",
                   binary.c_str(), ErrorText(errno).c_str());
      return kExitUsage;
    }
  }

  std::vector<uint16_t> ports;
  if (base_port == 0) {
    absl::StatusOr<std::vector<uint16_t>> free =
        troupe::interconnect::FreeLoopbackPorts(static_cast<size_t>(nodes) + 1);
    if (!free.ok()) {
      std::printf("troupe_cluster: cannot pick free ports: %s\n",
                  std::string(free.status().message()).c_str());
      return kExitFailed;
    }
    ports = std::move(*free);
  } else {
    for (int i = 0; i <= nodes; ++i) {
      ports.push_back(static_cast<uint16_t>(base_port + i));
    }
  }
  // Each node serves GET /metrics on a port of its own (troupe_node --monitoring_port).
  absl::StatusOr<std::vector<uint16_t>> metrics_ports =
      troupe::interconnect::FreeLoopbackPorts(static_cast<size_t>(nodes));
  if (!metrics_ports.ok()) {
    std::printf("troupe_cluster: cannot pick free ports: %s\n",
                std::string(metrics_ports.status().message()).c_str());
    return kExitFailed;
  }
  absl::StatusOr<std::string> config_text = NodeConfigText(ports);
  if (!config_text.ok()) {
    std::fprintf(stderr, "troupe_cluster: --node_config: %s\n",
                 absl::StrCat(config_text.status().message()).c_str());
    return kExitConfig;
  }
  std::string workdir = absl::GetFlag(FLAGS_workdir);
  if (workdir.empty()) {
    std::string pattern = "/tmp/troupe-cluster-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::printf("troupe_cluster: mkdtemp: %s\n", ErrorText(errno).c_str());
      return kExitFailed;
    }
    workdir = pattern;
  } else if (::mkdir(workdir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "troupe_cluster: --workdir=%s: %s\n", workdir.c_str(),
                 ErrorText(errno).c_str());
    return kExitUsage;
  }
  const std::string config = workdir + "/cluster.conf";
  const std::string chaos_log = workdir + "/chaos.csv";
  const std::string load_start = workdir + "/load_start";
  ::unlink(load_start.c_str());  // a workdir used before has one from the last run
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out.flush()) {
      std::printf("troupe_cluster: cannot write %s\n", path.c_str());
      return false;
    }
    return true;
  };
  if (!write(config, *config_text) ||
      (!plan.empty() && !write(chaos_log, absl::StrCat(troupe::examples::kChaosCsvHeader, "\n")))) {
    return kExitFailed;
  }

  // children[0..nodes-1] are the nodes, children[nodes] the load generator.
  std::vector<Child> children;
  for (int i = 1; i <= nodes; ++i) {
    children.push_back({.name = absl::StrCat("node ", i),
                        .log = absl::StrCat(workdir, "/node-", i, ".log"),
                        .args = {node_binary, "--config=" + config, absl::StrCat("--node_id=", i),
                                 absl::StrCat("--monitoring_port=", (*metrics_ports)[i - 1])}});
  }
  const int pairs = absl::GetFlag(FLAGS_pairs) > 0 ? absl::GetFlag(FLAGS_pairs) : nodes;
  Child loadgen_child{
      .name = "troupe_loadgen",
      .log = workdir + "/loadgen.log",
      .args = {loadgen_binary, "--config=" + config, absl::StrCat("--node_id=", nodes + 1),
               absl::StrCat("--pairs=", pairs),
               absl::StrCat("--payload=", absl::GetFlag(FLAGS_payload)),
               absl::StrCat("--window=", absl::GetFlag(FLAGS_window)),
               absl::StrCat("--seconds=", seconds)}};
  if (!absl::GetFlag(FLAGS_report).empty()) {
    loadgen_child.args.push_back("--report=" + absl::GetFlag(FLAGS_report));
  }
  if (!plan.empty()) {
    loadgen_child.args.push_back("--load_start_file=" + load_start);
    loadgen_child.args.push_back("--chaos_log=" + chaos_log);
  }
  children.push_back(std::move(loadgen_child));
  std::vector<std::string> port_list;
  port_list.reserve(ports.size());
  for (const uint16_t port : ports) {
    port_list.push_back(absl::StrCat(port));
  }
  std::printf(
      "troupe_cluster: %d node(s) and the load generator (node %d) on 127.0.0.1, ports %s\n"
      "troupe_cluster: config %s, logs %s/node-<i>.log and loadgen.log\n",
      nodes, nodes + 1, absl::StrJoin(port_list, " ").c_str(), config.c_str(), workdir.c_str());
  std::printf("troupe_cluster: metrics at http://127.0.0.1:{%s}/metrics (nodes 1..%d)\n",
              absl::StrJoin(*metrics_ports, ",").c_str(), nodes);
  if (!plan.empty()) {
    std::printf("troupe_cluster: chaos: %s (seconds after the load start), logged to %s\n",
                absl::GetFlag(FLAGS_chaos).c_str(), chaos_log.c_str());
  }

  bool failed = false;
  std::string why;
  for (int i = 0; i < nodes && !failed; ++i) {
    failed =
        !troupe::examples::Spawn({.log_stdout = true, .own_group = true}, original, &children[i]);
  }
  if (!failed) {
    failed = !troupe::examples::Spawn({}, original, &children[nodes]);
  }
  if (failed) {
    why = "could not start every process";
  }

  Chaos chaos(plan, load_start, chaos_log);
  Child& loadgen = children[nodes];
  std::optional<size_t> died;
  while (!failed) {
    const int signal = troupe::examples::WaitSignal(signals, chaos.Wait(kPollInterval));
    if (signal == SIGINT || signal == SIGTERM) {
      failed = true;
      why = absl::StrCat("interrupted (", troupe::examples::SignalText(signal), ")");
      break;
    }
    troupe::examples::Reap(children);
    if (!loadgen.running) {
      break;
    }
    if (!chaos.Step(children, original)) {
      failed = true;
      why = "a chaos action failed";
      break;
    }
    for (size_t i = 0; i < static_cast<size_t>(nodes); ++i) {
      if (!children[i].running && !chaos.down(static_cast<uint32_t>(i + 1))) {
        died = i;
      }
    }
    if (died) {
      failed = true;
      why = absl::StrCat(
          children[*died].name, " (pid ", children[*died].pid,
          ") died during the run: ", troupe::examples::Describe(children[*died].status));
      break;
    }
  }
  if (failed) {
    std::printf("troupe_cluster: %s; stopping every process\n", why.c_str());
  }
  if (died) {
    troupe::examples::PrintTail(children[*died].log);
  }

  // Children still running at this point are the ones told to stop; only they may report their
  // exit at shutdown.
  std::vector<bool> told(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    told[i] = children[i].running;
  }
  troupe::examples::StopAll(children, signals);
  ::pthread_sigmask(SIG_SETMASK, &original, nullptr);

  int code = kExitFailed;
  if (died && WIFEXITED(children[*died].status) &&
      WEXITSTATUS(children[*died].status) == kExitConfig) {
    code = kExitConfig;  // the node found its config bad
  }
  if (!failed) {
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
    // A node that does not exit 0 on SIGTERM (a crash at shutdown, a sanitizer report) fails the
    // run too.
    for (size_t i = 0; i < static_cast<size_t>(nodes); ++i) {
      if (told[i] && !(WIFEXITED(children[i].status) && WEXITSTATUS(children[i].status) == 0)) {
        std::printf("troupe_cluster: %s did not stop cleanly: %s\n", children[i].name.c_str(),
                    troupe::examples::Describe(children[i].status).c_str());
        troupe::examples::PrintTail(children[i].log);
        code = kExitFailed;
      }
    }
  }
  std::printf("troupe_cluster: every process stopped; exit %d\n", code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Runs a local Troupe cluster (troupe_node processes) and a load test (troupe_loadgen) "
      "against it, then stops every process; with --chaos, kills and restarts nodes during the "
      "load. Exits 0 when every event was acknowledged once, in order (under --chaos: on every "
      "pair clear of the killed nodes) and every node ran and stopped cleanly, 1 otherwise.");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run(argv[0]);
}
