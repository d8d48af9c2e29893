// SPDX-License-Identifier: Apache-2.0
//
// The interconnect across real processes: `troupe_node` processes (examples/) and this test's own
// node, over loopback TCP. Remote send and reply through services, a process killed (kill -9)
// and restarted, connection cuts mid-stream through a relay, a node of another cluster, garbage
// on a node's port. Every wait is bounded; every child is killed and reaped by the fixture (and
// gets SIGKILL if this process dies: PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "examples/loadtest.h"
#include "interconnect/interconnect.h"
#include "interconnect/tcp_transport.h"
#include "ut/actors/test_util.h"
#include "ut/integration/fault_proxy.h"
#include "ut/integration/socket_util.h"
#include "ut/interconnect/ic_test_util.h"

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
  NodeProcess(const std::string& config_path, NodeId node, const std::string& log_path) {
    // Everything the child needs is built before fork: between fork and exec a child of a
    // threaded process may only make async-signal-safe calls (no malloc).
    const std::string config_flag = "--config=" + config_path;
    const std::string node_flag = absl::StrCat("--node_id=", node);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) {
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
      }
      ::execl(TROUPE_NODE_BINARY, TROUPE_NODE_BINARY, config_flag.c_str(), node_flag.c_str(),
              "--run_seconds=120", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork failed";
  }
  ~NodeProcess() { Kill(SIGKILL); }
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;
  NodeProcess(NodeProcess&&) = delete;
  NodeProcess& operator=(NodeProcess&&) = delete;

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
    processes_[node] = std::make_unique<NodeProcess>(path, node, LogPath(node));
  }
  int KillProcess(NodeId node, int signal) {
    const int status = processes_[node]->Kill(signal);
    processes_.erase(node);
    return status;
  }
  std::string LogPath(NodeId node) const { return absl::StrCat(dir_, "/node", node, ".log"); }
  std::string Log(NodeId node) const {
    std::ifstream in(LogPath(node));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Starts this process's node 3.
  void StartSelf() {
    system_ = testutil::MakeSystem(ConfigFor(kSelf, "test"));
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

  Inbox& inbox() { return inbox_; }
  ActorSystem& system() { return *system_; }

 private:
  static std::string Unique() {
    return absl::StrCat(::getpid(), "-", absl::ToUnixNanos(absl::Now()));
  }

  const std::string dir_;
  testutil::LoopbackPorts ports_;
  uint64_t timeout_ms_ = 10000;
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
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30)));
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
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30)));
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
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30)));
  EXPECT_EQ(cluster.Session(2).sessions, 2u) << "the restarted process is a new session";
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
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30)));
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
  EXPECT_FALSE(cluster.Session(2).up);
}

TEST(ProcessClusterTest, GarbageOnAProcessPortLeavesItServing) {
  ProcessCluster cluster;
  cluster.StartProcess(1);
  cluster.StartSelf();
  cluster.Ping(1, 1);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 1, absl::Seconds(30)));
  EXPECT_TRUE(testutil::PeerClosesAfter(cluster.port(1), std::string(4096, '\x5a')))
      << "node 1 did not close the connection";
  cluster.Ping(1, 2);
  ASSERT_TRUE(cluster.inbox().WaitForType(kEvEchoPong, 2, absl::Seconds(30)));
  EXPECT_EQ(cluster.Session(1).sessions, 1u);
  EXPECT_NE(cluster.Log(1).find("refused incoming connection"), std::string::npos)
      << cluster.Log(1);
}

}  // namespace
}  // namespace troupe::interconnect
