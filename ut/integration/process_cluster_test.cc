// SPDX-License-Identifier: Apache-2.0
//
// The interconnect across real processes: `troupe_node` processes (examples/) and this test's own
// node, over loopback TCP. Remote send and reply through services, a process killed (kill -9)
// and restarted, a node leaving (SIGTERM) and coming back as its peers' GET /readyz sees it,
// connection cuts mid-stream through a relay, a node of another cluster, garbage on a node's
// port. Every wait is bounded; every child is killed and reaped by the fixture (and
// gets SIGKILL if this process dies: PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "bench/process_memory.h"
#include "examples/loadtest.h"
#include "examples/node_runner.h"
#include "interconnect/interconnect.h"
#include "interconnect/tcp_transport.h"
#include "ut/actors/test_util.h"
#include "ut/integration/fault_proxy.h"
#include "ut/integration/socket_util.h"
#include "ut/interconnect/ic_test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TROUPE_SANITIZED_BUILD 1  // a sanitizer's allocator keeps freed memory: RSS tells nothing
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TROUPE_SANITIZED_BUILD 1
#endif
#endif

#ifndef TROUPE_NODE_BINARY
#error "TROUPE_NODE_BINARY must name the troupe_node executable"
#endif

namespace troupe::interconnect {
namespace {

using examples::EvEchoPing;
using examples::kEvEchoPong;
using testutil::Inbox;
using testutil::Received;
using testutil::Recorder;

// This process is node 3 of every cluster here; the troupe_node processes are nodes 1 and 2.
constexpr NodeId kSelf = 3;

// One troupe_node child process.
class NodeProcess {
 public:
  // `id_path`: troupe_node --id_file, where it writes its id and its metrics URL once up.
  NodeProcess(const std::string& config_path, NodeId node, const std::string& log_path,
              const std::string& id_path) {
    // Everything the child needs is built before fork: between fork and exec a child of a
    // threaded process may only make async-signal-safe calls (no malloc).
    const std::string config_flag = "--config=" + config_path;
    const std::string node_flag = absl::StrCat("--node_id=", node);
    const std::string id_flag = "--id_file=" + id_path;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) {
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
      }
      ::execl(TROUPE_NODE_BINARY, TROUPE_NODE_BINARY, config_flag.c_str(), node_flag.c_str(),
              id_flag.c_str(), "--run_seconds=120", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork failed";
  }
  ~NodeProcess() { Kill(SIGKILL); }
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;
  NodeProcess(NodeProcess&&) = delete;
  NodeProcess& operator=(NodeProcess&&) = delete;

  // Sends `signal` without waiting (SIGSTOP, SIGCONT).
  void Signal(int signal) const {
    if (pid_ > 0) {
      ::kill(pid_, signal);
    }
  }

  // Sends `signal` and reaps the process; returns its wait status.
  int Kill(int signal) {
    if (pid_ <= 0) {
      return 0;
    }
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// Nodes 1 and 2 as processes, node 3 in this process. Each node may see a peer at another port
// (a FaultProxy in between).
class ProcessCluster {
 public:
  ProcessCluster() : dir_(::testing::TempDir() + "troupe-process-cluster-" + Unique()), ports_(3) {
    ::mkdir(dir_.c_str(), 0755);
  }
  ~ProcessCluster() {
    for (auto& [node, process] : processes_) {
      process.reset();
    }
    ic_.reset();
    if (system_ != nullptr) {
      system_->Stop();
    }
  }
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;
  ProcessCluster(ProcessCluster&&) = delete;
  ProcessCluster& operator=(ProcessCluster&&) = delete;

  uint16_t port(NodeId node) const { return ports_.port(node); }
  void Redirect(NodeId node, NodeId peer, uint16_t port) { ports_.Redirect(node, peer, port); }

  // Adjusts this process's own node config before StartSelf.
  void TuneSelf(std::function<void(proto::InterconnectConfig&)> tune) {
    tune_self_ = std::move(tune);
  }

  proto::ActorSystemConfig ConfigFor(NodeId node, const std::string& cluster) const {
    proto::ActorSystemConfig config = ports_.ConfigFor(node, cluster);
    for (const char* name : {"User", "IC"}) {
      proto::PoolConfig* pool = config.add_pools();
      pool->set_name(name);
      pool->set_threads(1);
      pool->set_spin_time_us(5);
    }
    config.mutable_interconnect()->set_heartbeat_interval_ms(100);
    config.mutable_interconnect()->set_dead_peer_timeout_ms(timeout_ms_);
    return config;
  }

  void set_timeout_ms(uint64_t ms) { timeout_ms_ = ms; }

  // Starts (or restarts) node 1 or 2 as a troupe_node process.
  void StartProcess(NodeId node, const std::string& cluster = "test") {
    const std::string path = absl::StrCat(dir_, "/node", node, ".conf");
    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(ConfigFor(node, cluster), &text));
    std::ofstream(path) << text;
    ::unlink(IdPath(node).c_str());  // a restarted process serves its monitoring on a new port
    processes_[node] = std::make_unique<NodeProcess>(path, node, LogPath(node), IdPath(node));
  }
  void SignalProcess(NodeId node, int signal) { processes_[node]->Signal(signal); }
  int KillProcess(NodeId node, int signal) {
    const int status = processes_[node]->Kill(signal);
    processes_.erase(node);
    return status;
  }
  std::string LogPath(NodeId node) const { return absl::StrCat(dir_, "/node", node, ".log"); }
  std::string IdPath(NodeId node) const { return absl::StrCat(dir_, "/node", node, ".id"); }

  // Asks node 1 or 2 GET /readyz (at its monitoring URL, from its id file; the port is free-picked)
  // until it answers `want`, at most `timeout`; sets `*answer` to the last body or why none came.
  bool WaitReadyz(NodeId node, int want, absl::Duration timeout, std::string* answer) const {
    return testutil::Eventually(
        [&] {
          std::string metrics;
          if (examples::ReadNodeIdFile(IdPath(node), &metrics) != node) {
            *answer = "no id file yet";
            return false;
          }
          httplib::Client client(std::string(absl::StripSuffix(metrics, "/metrics")));
          client.set_connection_timeout(1, 0);
          client.set_read_timeout(1, 0);
          const httplib::Result result = client.Get("/readyz");
          if (!result) {
            *answer = absl::StrCat("no answer: ", httplib::to_string(result.error()));
            return false;
          }
          *answer = absl::StrCat(result->status, " ", result->body);
          return result->status == want;
        },
        timeout);
  }
  std::string Log(NodeId node) const {
    std::ifstream in(LogPath(node));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Starts this process's node 3.
  void StartSelf() {
    proto::ActorSystemConfig config = ConfigFor(kSelf, "test");
    if (tune_self_) {
      tune_self_(*config.mutable_interconnect());
    }
    system_ = testutil::MakeSystem(config);
    ASSERT_NE(system_, nullptr);
    auto ic = Interconnect::Start(system_.get());
    ASSERT_TRUE(ic.ok()) << ic.status();
    ic_ = std::move(*ic);
    me_ = system_->Register(std::make_unique<Recorder>(&inbox_));
  }

  // Sends an echo ping to `node`; the pong lands in inbox().
  void Ping(NodeId node, uint64_t seq, uint32_t flags = kNoFlags) {
    auto ping = std::make_unique<EvEchoPing>();
    ping->record.set_node(node);
    ping->record.set_seq(seq);
    system_->Send(ServiceId("echo", node), std::move(ping), flags, seq, me_);
  }

  SessionCounters Session(NodeId peer) const {
    for (const SessionCounters& counters : ic_->Counters()) {
      if (counters.peer == peer) {
        return counters;
      }
    }
    return {};
  }

  // What a failed wait prints: this node's sessions and each process's log.
  std::string Describe() const {
    std::string text;
    if (ic_ != nullptr) {
      for (const SessionCounters& c : ic_->Counters()) {
        absl::StrAppend(&text, "node 3 <-> node ", c.peer, ": up ", c.up, ", connected ",
                        c.connected, ", sessions ", c.sessions, ", connections ", c.connections,
                        ", events sent ", c.events_sent, ", received ", c.events_received,
                        ", queued ", c.queued_events, ", unacked bytes ", c.unacked_bytes,
                        ", held bytes ", c.held_bytes, "\n");
      }
    }
    for (const auto& [node, process] : processes_) {
      absl::StrAppend(&text, "--- node ", node, " log ---\n", Log(node));
    }
    return text;
  }

  Inbox& inbox() { return inbox_; }
  const ActorId& inbox_actor() const { return me_; }
  ActorSystem& system() { return *system_; }

 private:
  static std::string Unique() {
    return absl::StrCat(::getpid(), "-", absl::ToUnixNanos(absl::Now()));
  }

  const std::string dir_;
  testutil::LoopbackPorts ports_;
  uint64_t timeout_ms_ = 10000;
  std::function<void(proto::InterconnectConfig&)> tune_self_;
  std::map<NodeId, std::unique_ptr<NodeProcess>> processes_;
  std::unique_ptr<ActorSystem> system_;
  std::unique_ptr<Interconnect> ic_;
  Inbox inbox_;
  ActorId me_;
};

size_t PongsFrom(const Inbox& inbox, NodeId node) {
  size_t count = 0;
  for (const Received& pong : inbox.OfType(kEvEchoPong)) {
    count += pong.sender.node_id() == node ? 1 : 0;
  }
  return count;
}

TEST(ProcessClusterTest, SendAndReplyThroughServicesOfOtherProcesses) {
  ProcessCluster cluster;
  cluster.StartProcess(1);
  cluster.StartProcess(2);
  cluster.StartSelf();
  cluster.Ping(1, 1);
  cluster.Ping(2, 2);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30))) << cluster.Describe();
  EXPECT_EQ(PongsFrom(cluster.inbox(), 1), 1u);
  EXPECT_EQ(PongsFrom(cluster.inbox(), 2), 1u);
  EXPECT_TRUE(cluster.inbox().OfType(kEvUndelivered).empty());
}

TEST(ProcessClusterTest, KilledProcessIsReportedAndItsRestartGetsANewSession) {
  ProcessCluster cluster;
  cluster.set_timeout_ms(1000);
  cluster.StartProcess(2);
  cluster.StartSelf();
  cluster.Ping(2, 1, kSubscribeOnSession);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30))) << cluster.Describe();
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvNodeConnected, 1, absl::Seconds(5)));
  cluster.KillProcess(2, SIGKILL);
  cluster.Ping(2, 2, kTrackDelivery);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvNodeDisconnected, 1, absl::Seconds(30)));
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvUndelivered, 1, absl::Seconds(5)));
  const Received lost = cluster.inbox().OfType(kEvUndelivered)[0];
  EXPECT_EQ(lost.reason, UndeliveredReason::kDisconnected);
  EXPECT_EQ(lost.undelivered_cookie, 2u);

  cluster.StartProcess(2);
  cluster.Ping(2, 3, kSubscribeOnSession);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvNodeConnected, 2, absl::Seconds(30)));
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30))) << cluster.Describe();
  EXPECT_EQ(cluster.Session(2).sessions, 2u) << "the restarted process is a new session";
}

// A node is ready (GET /readyz 200) once its sessions with every member are up; when a member
// leaves (SIGTERM, a clean exit) its peers are not ready, naming it, until it is back: what a
// rolling restart waits on before it goes to the next node.
TEST(ProcessClusterTest, ReadyzFollowsAMemberLeavingAndComingBack) {
  ProcessCluster cluster;
  cluster.StartProcess(1);
  cluster.StartProcess(2);
  cluster.StartSelf();
  std::string answer;
  for (const NodeId node : {1, 2}) {
    ASSERT_TRUE(cluster.WaitReadyz(node, 200, absl::Seconds(30), &answer))
        << "node " << node << ": " << answer << "\n"
        << cluster.Describe();
  }
  const int status = cluster.KillProcess(2, SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cluster.Log(2);
  ASSERT_TRUE(cluster.WaitReadyz(1, 503, absl::Seconds(30), &answer)) << answer << "\n"
                                                                      << cluster.Describe();
  EXPECT_TRUE(absl::StrContains(answer, "node 2")) << answer;
  cluster.StartProcess(2);
  for (const NodeId node : {2, 1}) {
    ASSERT_TRUE(cluster.WaitReadyz(node, 200, absl::Seconds(30), &answer))
        << "node " << node << " after node 2's restart: " << answer << "\n"
        << cluster.Describe();
  }
}

// Only SIGINT and SIGTERM end a node: SIGHUP, SIGUSR1 and SIGUSR2 leave it serving, and a SIGTERM
// after them is still a clean stop.
TEST(ProcessClusterTest, OnlyTheTerminatingSignalsEndANode) {
  ProcessCluster cluster;
  cluster.StartProcess(2);
  cluster.StartSelf();
  cluster.Ping(2, 1);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30))) << cluster.Describe();
  for (const int signal : {SIGHUP, SIGUSR1, SIGUSR2}) {
    cluster.SignalProcess(2, signal);
  }
  cluster.Ping(2, 2);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30))) << cluster.Describe();
  const int status = cluster.KillProcess(2, SIGTERM);
  EXPECT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << "\n"
                                 << cluster.Log(2);
  EXPECT_EQ(WEXITSTATUS(status), 0) << cluster.Log(2);
}

// Node 1 (a process) reaches this node through a relay that cuts every connection several times
// while pings stream: every pong comes back once, in order, on one session.
TEST(ProcessClusterTest, CutsMidStreamBetweenProcessesLoseNothing) {
  ProcessCluster cluster;
  testutil::FaultProxy relay(cluster.port(kSelf));
  cluster.Redirect(1, kSelf, relay.port());
  cluster.StartProcess(1);
  cluster.StartSelf();
  cluster.Ping(1, 1);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30))) << cluster.Describe();
  const uint64_t count = testutil::Scaled(20000, 2000);
  for (uint64_t seq = 2; seq <= count; ++seq) {
    cluster.Ping(1, seq);
    if (seq % (count / 5) == 0) {
      relay.Cut();
    }
  }
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, count, absl::Seconds(60)))
      << PongsFrom(cluster.inbox(), 1) << " of " << count;
  absl::SleepFor(absl::Milliseconds(100));
  const std::vector<Received> pongs = cluster.inbox().OfType(kEvEchoPong);
  ASSERT_EQ(pongs.size(), count);
  for (uint64_t i = 0; i < count; ++i) {
    ASSERT_EQ(pongs[i].cookie, i + 1) << "pong " << i;
  }
  EXPECT_GE(relay.cuts(), 4u);
  EXPECT_EQ(cluster.Session(1).sessions, 1u) << "the session outlived its connections";
}

TEST(ProcessClusterTest, ProcessOfAnotherClusterIsRefused) {
  CapturingLogSink logs;
  ProcessCluster cluster;
  cluster.StartSelf();
  cluster.StartProcess(2, "another-cluster");  // node 2 dials node 3, which refuses it
  EXPECT_TRUE(
      testutil::Eventually([&] { return logs.Contains("belongs to cluster"); }, absl::Seconds(30)));
  // Node 2 learns why, from the refusal in node 3's answer, and backs off: pauses of 0.1, 0.2,
  // 0.4, 0.8, 1.6 s... (not a dial every heartbeat). Both sides log the reason once.
  EXPECT_TRUE(testutil::Eventually(
      [&] {
        return cluster.Log(2).find("it refused the connection: node 2 belongs to cluster") !=
               std::string::npos;
      },
      absl::Seconds(30)))
      << cluster.Log(2);
  absl::SleepFor(absl::Seconds(3));
  const int64_t refused =
      cluster.system()
          .metrics()
          .Value("troupe_interconnect_refusals_total", {{"direction", "incoming"}})
          .value_or(0);
  EXPECT_GE(refused, 3);
  EXPECT_LE(refused, 12) << "node 2 backs off";
  size_t logged = 0;
  for (const std::string& line : logs.Lines()) {
    logged += line.find("refused incoming connection from 127.0.0.1") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(logged, 1u) << "logged once per change of reason, with the remote address";
  const std::string log2 = cluster.Log(2);
  size_t pos = 0;
  size_t logged2 = 0;
  while ((pos = log2.find("it refused the connection", pos)) != std::string::npos) {
    ++logged2;
    ++pos;
  }
  EXPECT_EQ(logged2, 1u) << log2;
  EXPECT_FALSE(cluster.Session(2).up);
}

#ifndef TROUPE_SANITIZED_BUILD
// Hardening, a stopped peer: node 1 stops (SIGSTOP) and this node offers it 1 GiB in 64 KiB events.
// The bytes held for node 1 stay under max_queued_bytes: what does not fit is refused at once with
// Undelivered{kOverloaded}, and this process's RSS grows by about the bound, not the offer.
TEST(ProcessClusterTest, StoppedPeerBoundsTheSendersMemory) {
  constexpr uint64_t kBound = uint64_t{64} << 20;
  ProcessCluster cluster;
  cluster.TuneSelf([](proto::InterconnectConfig& ic) { ic.set_max_queued_bytes(kBound); });
  cluster.StartProcess(1);
  cluster.StartSelf();
  cluster.Ping(1, 1);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30))) << cluster.Describe();
  cluster.SignalProcess(1, SIGSTOP);
  const int64_t before = troupe::bench::ResidentBytes();
  ASSERT_GT(before, 0) << "/proc/self/statm is unreadable";
  int64_t peak = before;
  constexpr uint64_t kEvents = 16384;  // 1 GiB
  const ActorId inbox = cluster.inbox_actor();
  for (uint64_t seq = 1; seq <= kEvents; ++seq) {
    cluster.system().Send(ServiceId("echo", 1), testutil::MakeData(seq, 64 << 10), kTrackDelivery,
                          seq, inbox);
    if (seq % 256 == 0) {
      peak = std::max(peak, troupe::bench::ResidentBytes());
    }
  }
  ASSERT_TRUE(testutil::Eventually(
      [&] {
        peak = std::max(peak, troupe::bench::ResidentBytes());
        return cluster.inbox().OfType(EvUndelivered::kEventType).size() +
                   cluster.Session(1).queued_events >=
               kEvents - 2048;
      },
      absl::Seconds(60)));
  const SessionCounters stalled = cluster.Session(1);
  EXPECT_LE(stalled.held_bytes, kBound);
  EXPECT_GT(stalled.overloaded, kEvents / 2);
  EXPECT_LE(static_cast<uint64_t>(peak - before), kBound + (uint64_t{48} << 20))
      << "RSS before " << before << ", peak " << peak << ", held " << stalled.held_bytes;
  std::printf(
      "sender RSS growth with 1 GiB offered to a stopped peer: %.1f MiB (bound %.0f MiB, "
      "held %.1f MiB, %llu refused)\n",
      static_cast<double>(peak - before) / (1 << 20), static_cast<double>(kBound) / (1 << 20),
      static_cast<double>(stalled.held_bytes) / (1 << 20),
      static_cast<unsigned long long>(stalled.overloaded));
  cluster.SignalProcess(1, SIGCONT);
}
#endif

TEST(ProcessClusterTest, GarbageOnAProcessPortLeavesItServing) {
  ProcessCluster cluster;
  cluster.StartProcess(1);
  cluster.StartSelf();
  cluster.Ping(1, 1);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30))) << cluster.Describe();
  EXPECT_TRUE(testutil::PeerClosesAfter(cluster.port(1), std::string(4096, '\x5a')))
      << "node 1 did not close the connection";
  cluster.Ping(1, 2);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30))) << cluster.Describe();
  EXPECT_EQ(cluster.Session(1).sessions, 1u);
  EXPECT_NE(cluster.Log(1).find("refused incoming connection"), std::string::npos)
      << cluster.Log(1);
}

}  // namespace
}  // namespace troupe::interconnect
