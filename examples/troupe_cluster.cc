// SPDX-License-Identifier: Apache-2.0
//
// troupe_cluster: runs a whole cluster on this machine. Writes a config for nodes 1..N on
// 127.0.0.1 plus the load generator as node N+1, starts N troupe_node processes (stdout and stderr
// to <workdir>/node-<i>.log), runs troupe_loadgen in the foreground (its table on our stdout, its
// log in <workdir>/loadgen.log), then stops every node and exits with the load generator's status.
//
// No process outlives it: children get SIGTERM if the launcher dies (PR_SET_PDEATHSIG); when the
// load generator ends, on SIGINT/SIGTERM, or when a node dies early, every child gets SIGTERM,
// then SIGKILL after 5 s, and is reaped. A node that dies early, or does not exit cleanly (status
// 0) on SIGTERM, fails the run; the tail of its log is printed.
//
//   troupe_cluster --nodes=3 --seconds=5 [--report=/tmp/run1]
//   troupe_cluster --nodes=2 --pairs=1 --window=1 --low_latency   # the round trip, busy-polled
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "interconnect/tcp_transport.h"

ABSL_FLAG(int, nodes, 3, "troupe_node processes (node ids 1..N; the load generator is N+1)");
ABSL_FLAG(int, base_port, 0, "node i listens on base_port + i - 1; 0 picks free loopback ports");
ABSL_FLAG(int, seconds, 5, "how long each pair sends");
ABSL_FLAG(int, payload, 64, "payload bytes per data event");
ABSL_FLAG(int, window, 256, "data events in flight per pair, at most");
ABSL_FLAG(int, pairs, 0, "sender→receiver pairs; 0 means one per node");
ABSL_FLAG(bool, low_latency, false,
          "the low-latency setting: no IC pool (proxies and socket I/O share the actors' User "
          "worker) and idle workers spin 1 ms before they park (a core each while traffic flows)");
ABSL_FLAG(std::string, workdir, "",
          "where the config and the logs go; empty makes a new directory under /tmp");
ABSL_FLAG(std::string, report, "",
          "have troupe_loadgen write its figures, plots and report.html into this directory");
ABSL_FLAG(std::string, node_binary, "", "troupe_node to run; empty: the one next to this binary");
ABSL_FLAG(std::string, loadgen_binary, "",
          "troupe_loadgen to run; empty: the one next to this binary");

namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
constexpr absl::Duration kStopGrace = absl::Seconds(5);

struct Child {
  std::string name;
  std::string log;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

// strerror and strsignal are not thread-safe (this program has one thread, but say so anyway).
std::string ErrorText(int error) {
  std::array<char, 256> buffer{};
  return strerror_r(error, buffer.data(), buffer.size());  // the GNU strerror_r
}

std::string SignalText(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? absl::StrCat("SIG", name) : absl::StrCat("signal ", signal);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by ", SignalText(WTERMSIG(status)));
  }
  return absl::StrCat("wait status ", status);
}

// Prints the last `lines` lines of `path`.
void PrintTail(const std::string& path, size_t lines = 15) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) {
      tail.pop_front();
    }
  }
  std::printf("---- last %zu line(s) of %s\n", tail.size(), path.c_str());
  for (const std::string& line : tail) {
    std::printf("  | %s\n", line.c_str());
  }
  std::printf("----\n");
}

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

// Starts `args` with stderr (and stdout when `log_stdout`) appended to `child->log`. A child
// in a new process group (`own_group`) is out of reach of the terminal's Ctrl-C: the launcher
// stops it. Returns false (and says why) when the log cannot be opened or fork fails.
bool Spawn(const std::vector<std::string>& args, bool log_stdout, bool own_group,
           const sigset_t& child_mask, Child* child) {
  const int log = ::open(child->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) {
    std::printf("troupe_cluster: %s: %s\n", child->log.c_str(), ErrorText(errno).c_str());
    return false;
  }
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) {
      ::_exit(1);  // the launcher died before prctl took effect
    }
    if (own_group) {
      ::setpgid(0, 0);
      if (null >= 0) {
        ::dup2(null, STDIN_FILENO);
      }
    }
    ::dup2(log, STDERR_FILENO);
    if (log_stdout) {
      ::dup2(log, STDOUT_FILENO);
    }
    ::pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
    ::execv(argv[0], argv.data());
    constexpr std::string_view kExecFailed = "troupe_cluster: exec failed\n";
    (void)!::write(STDERR_FILENO, kExecFailed.data(), kExecFailed.size());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log);
  if (null >= 0) {
    ::close(null);
  }
  if (pid < 0) {
    std::printf("troupe_cluster: fork: %s\n", ErrorText(fork_errno).c_str());
    return false;
  }
  if (own_group) {
    ::setpgid(pid, pid);  // also here: no window in which a terminal signal reaches it
  }
  child->pid = pid;
  child->running = true;
  return true;
}

// Reaps every child that has ended; returns true when one did.
bool Reap(std::vector<Child>& children) {
  bool any = false;
  for (Child& child : children) {
    if (child.running && ::waitpid(child.pid, &child.status, WNOHANG) == child.pid) {
      child.running = false;
      any = true;
    }
  }
  return any;
}

// Waits up to `timeout` for SIGINT, SIGTERM or SIGCHLD (all blocked); returns the signal or 0.
int WaitSignal(const sigset_t& set, absl::Duration timeout) {
  const timespec wait = absl::ToTimespec(timeout);
  const int signal = ::sigtimedwait(&set, nullptr, &wait);
  return signal > 0 ? signal : 0;
}

// SIGTERM to every running child, SIGKILL to those still running after kStopGrace; reaps all.
void StopAll(std::vector<Child>& children, const sigset_t& set) {
  for (Child& child : children) {
    if (child.running) {
      ::kill(child.pid, SIGTERM);
    }
  }
  const absl::Time deadline = absl::Now() + kStopGrace;
  while (absl::Now() < deadline) {
    Reap(children);
    bool running = false;
    for (const Child& child : children) {
      running = running || child.running;
    }
    if (!running) {
      return;
    }
    (void)WaitSignal(set, absl::Milliseconds(20));
  }
  for (Child& child : children) {
    if (child.running) {
      std::printf("troupe_cluster: %s (pid %d) ignored SIGTERM for %s: SIGKILL\n",
                  child.name.c_str(), child.pid, absl::FormatDuration(kStopGrace).c_str());
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &child.status, 0);
      child.running = false;
    }
  }
}

int Run(const char* argv0) {
  const int nodes = absl::GetFlag(FLAGS_nodes);
  const int base_port = absl::GetFlag(FLAGS_base_port);
  if (nodes < 1 || nodes > 1000 || base_port < 0 || base_port + nodes > 65535 ||
      absl::GetFlag(FLAGS_seconds) < 1) {
    std::printf(
        "troupe_cluster: --nodes must be 1 to 1000, --seconds at least 1, --base_port 0 "
        "or such that every node's port fits in 1..65535\n");
    return 2;
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

  std::string workdir = absl::GetFlag(FLAGS_workdir);
  if (workdir.empty()) {
    std::string pattern = "/tmp/troupe-cluster-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::printf("troupe_cluster: mkdtemp: %s\n", ErrorText(errno).c_str());
      return 1;
    }
    workdir = pattern;
  } else if (::mkdir(workdir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::printf("troupe_cluster: --workdir=%s: %s\n", workdir.c_str(), ErrorText(errno).c_str());
    return 2;
  }

  std::vector<uint16_t> ports;
  if (base_port == 0) {
    absl::StatusOr<std::vector<uint16_t>> free =
        troupe::interconnect::FreeLoopbackPorts(static_cast<size_t>(nodes) + 1);
    if (!free.ok()) {
      std::printf("troupe_cluster: cannot pick free ports: %s\n",
                  std::string(free.status().message()).c_str());
      return 1;
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
    return 1;
  }
  const std::string config = workdir + "/cluster.conf";
  {
    std::ofstream out(config);
    out << ClusterConfig(ports);
    if (!out.flush()) {
      std::printf("troupe_cluster: cannot write %s\n", config.c_str());
      return 1;
    }
  }

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
      std::printf("troupe_cluster: %s: %s (see --node_binary, --loadgen_binary)\n", binary.c_str(),
                  ErrorText(errno).c_str());
      return 2;
    }
  }

  // children[0..nodes-1] are the nodes, children[nodes] the load generator.
  std::vector<Child> children;
  for (int i = 1; i <= nodes; ++i) {
    children.push_back(
        {.name = absl::StrCat("node ", i), .log = absl::StrCat(workdir, "/node-", i, ".log")});
  }
  children.push_back({.name = "troupe_loadgen", .log = workdir + "/loadgen.log"});
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

  bool failed = false;
  std::string why;
  for (int i = 1; i <= nodes && !failed; ++i) {
    failed = !Spawn({node_binary, "--config=" + config, absl::StrCat("--node_id=", i),
                     absl::StrCat("--monitoring_port=", (*metrics_ports)[i - 1])},
                    /*log_stdout=*/true, /*own_group=*/true, original, &children[i - 1]);
  }
  const int pairs = absl::GetFlag(FLAGS_pairs) > 0 ? absl::GetFlag(FLAGS_pairs) : nodes;
  if (!failed) {
    std::vector<std::string> loadgen_args = {
        loadgen_binary,
        "--config=" + config,
        absl::StrCat("--node_id=", nodes + 1),
        absl::StrCat("--pairs=", pairs),
        absl::StrCat("--payload=", absl::GetFlag(FLAGS_payload)),
        absl::StrCat("--window=", absl::GetFlag(FLAGS_window)),
        absl::StrCat("--seconds=", absl::GetFlag(FLAGS_seconds))};
    if (!absl::GetFlag(FLAGS_report).empty()) {
      loadgen_args.push_back("--report=" + absl::GetFlag(FLAGS_report));
    }
    failed =
        !Spawn(loadgen_args, /*log_stdout=*/false, /*own_group=*/false, original, &children[nodes]);
  }
  if (failed) {
    why = "could not start every process";
  }

  Child& loadgen = children[nodes];
  std::optional<size_t> died;
  while (!failed) {
    const int signal = WaitSignal(signals, kPollInterval);
    if (signal == SIGINT || signal == SIGTERM) {
      failed = true;
      why = absl::StrCat("interrupted (", SignalText(signal), ")");
      break;
    }
    Reap(children);
    if (!loadgen.running) {
      break;
    }
    for (size_t i = 0; i < static_cast<size_t>(nodes); ++i) {
      if (!children[i].running) {
        died = i;
      }
    }
    if (died) {
      failed = true;
      why = absl::StrCat(children[*died].name, " (pid ", children[*died].pid,
                         ") died during the run: ", Describe(children[*died].status));
      break;
    }
  }
  if (died) {
    std::printf("troupe_cluster: %s; stopping every process\n", why.c_str());
    PrintTail(children[*died].log);
  } else if (failed) {
    std::printf("troupe_cluster: %s; stopping every process\n", why.c_str());
  }

  // Children still running at this point are the ones told to stop; only they may report their
  // exit at shutdown.
  std::vector<bool> told(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    told[i] = children[i].running;
  }
  StopAll(children, signals);
  ::pthread_sigmask(SIG_SETMASK, &original, nullptr);

  int code = 1;
  if (!failed) {
    code = WIFEXITED(loadgen.status) ? WEXITSTATUS(loadgen.status) : 1;
    if (code != 0) {
      std::printf("troupe_cluster: troupe_loadgen ended with %s\n",
                  Describe(loadgen.status).c_str());
      PrintTail(loadgen.log);
    }
    // A node that does not exit 0 on SIGTERM (a crash at shutdown, a sanitizer report) fails the
    // run too.
    for (size_t i = 0; i < static_cast<size_t>(nodes); ++i) {
      if (told[i] && !(WIFEXITED(children[i].status) && WEXITSTATUS(children[i].status) == 0)) {
        std::printf("troupe_cluster: %s did not stop cleanly: %s\n", children[i].name.c_str(),
                    Describe(children[i].status).c_str());
        PrintTail(children[i].log);
        code = 1;
      }
    }
  }
  std::printf("troupe_cluster: every process stopped; exit %d\n", code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a local Troupe cluster (troupe_node processes) and a load test (troupe_loadgen) "
      "against it, then stops every process.");
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return Run(argv[0]);
}
