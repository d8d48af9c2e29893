// SPDX-License-Identifier: Apache-2.0
//
// EtcdServer: one etcd member on 127.0.0.1 for tests (/usr/bin/etcd, Debian's etcd-server), on
// free loopback ports, with its data in a temporary directory that it keeps across Stop and
// Start (a restart) and removes when destroyed. Alone it is a one-member cluster; several make
// one cluster when each is given the same Cluster() string before it starts. With Tls, clients
// must come over https:// with a certificate signed by the CA (--client-cert-auth).
//
// Only the process it started is ever signalled (by its pid), and every wait is bounded
// (test_process.h).
//
// Thread-safety: thread-compatible (the test's thread).
//
// Example (a three-member cluster):
//
//   std::vector<std::unique_ptr<EtcdServer>> members;
//   for (const char* name : {"a", "b", "c"}) members.push_back(std::make_unique<EtcdServer>(name));
//   const std::string cluster = EtcdServer::Cluster(members);
//   for (auto& member : members) member->Launch(cluster);
//   for (auto& member : members) ASSERT_TRUE(member->WaitServing());
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "interconnect/testing/free_ports.h"
#include "node/internal/etcd_client.h"
#include "ut/integration/test_process.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::testutil {

inline constexpr std::string_view kEtcdBinary = "/usr/bin/etcd";

class EtcdServer {
 public:
  // The server's side of TLS: its certificate and key, and the CA its clients' certificates
  // must be signed by. `client` is what the test's own probe presents.
  struct Tls {
    std::string ca_file;
    std::string cert_file;
    std::string key_file;
    node::internal::EtcdTlsFiles client;
  };

  explicit EtcdServer(std::string name = "troupe-test", std::optional<Tls> tls = std::nullopt)
      : name_(std::move(name)),
        tls_(std::move(tls)),
        dir_(::testing::TempDir() + "troupe-etcd-" + std::to_string(::getpid()) + "-" + name_) {
    absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(2);
    EXPECT_TRUE(ports.ok()) << ports.status();
    if (ports.ok()) {
      client_port_ = (*ports)[0];
      peer_port_ = (*ports)[1];
    }
    std::filesystem::remove_all(dir_);
  }
  ~EtcdServer() {
    Stop();
    std::filesystem::remove_all(dir_);
  }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;
  EtcdServer(EtcdServer&&) = delete;
  EtcdServer& operator=(EtcdServer&&) = delete;

  // The --initial-cluster of `members`: "name=peer URL,...".
  static std::string Cluster(const std::vector<std::unique_ptr<EtcdServer>>& members) {
    std::vector<std::string> parts;
    for (const std::unique_ptr<EtcdServer>& member : members) {
      parts.push_back(absl::StrCat(member->name_, "=", member->peer_url()));
    }
    return absl::StrJoin(parts, ",");
  }

  std::string endpoint() const {
    return absl::StrCat(tls_.has_value() ? "https" : "http", "://127.0.0.1:", client_port_);
  }
  uint16_t client_port() const { return client_port_; }
  std::string peer_url() const { return absl::StrCat("http://127.0.0.1:", peer_port_); }
  pid_t pid() const { return process_.pid(); }

  // Starts etcd alone and waits (up to 20 s) until it answers; false (with the log's tail) if
  // not.
  bool Start() {
    Launch("");
    return WaitServing();
  }

  // Starts the process (a member of `cluster`, Cluster()'s string; empty: alone) and returns at
  // once.
  void Launch(const std::string& cluster) {
    const std::string client = endpoint();
    const std::string peer = peer_url();
    std::vector<std::string> args = {
        std::string(kEtcdBinary),
        "--name=" + name_,
        "--data-dir=" + dir_ + "/data",
        "--listen-client-urls=" + client,
        "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer,
        "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=" + (cluster.empty() ? absl::StrCat(name_, "=", peer) : cluster),
        "--logger=zap",
        "--log-level=error"};
    if (tls_.has_value()) {
      args.push_back("--cert-file=" + tls_->cert_file);
      args.push_back("--key-file=" + tls_->key_file);
      args.push_back("--trusted-ca-file=" + tls_->ca_file);
      args.push_back("--client-cert-auth");
    }
    std::filesystem::create_directories(dir_);
    process_.Launch(std::move(args), dir_ + "/etcd.log");
  }

  // Waits until the member answers a range request (up to `timeout`); false (with the log's
  // tail) if it does not.
  bool WaitServing(absl::Duration timeout = absl::Seconds(20)) {
    node::internal::EtcdClient probe(
        std::make_shared<node::internal::EtcdEndpoints>(std::vector<std::string>{endpoint()}),
        absl::Milliseconds(500), tls_.has_value() ? tls_->client : node::internal::EtcdTlsFiles{});
    const bool up = Eventually([&] { return probe.Range("/troupe-probe").ok(); }, timeout);
    if (!up) {
      ADD_FAILURE() << "etcd " << name_ << " did not answer at " << endpoint() << "; its log:\n"
                    << process_.LogTail();
    }
    return up;
  }

  // Ends etcd (SIGTERM, then SIGKILL after 5 s) and reaps it.
  void Stop() { process_.Stop(); }
  // Kills etcd at once (SIGKILL), as a crash or a lost machine would, and reaps it.
  void Kill() { process_.Kill(); }

 private:
  const std::string name_;
  const std::optional<Tls> tls_;
  const std::string dir_;
  uint16_t client_port_ = 0;
  uint16_t peer_port_ = 0;
  TestProcess process_;
};

}  // namespace troupe::testutil
