// SPDX-License-Identifier: Apache-2.0
//
// counters_node: one node of the sharded counters service (counters.h). It runs a troupe::node
// Node from a config file, as troupe_node does, and hosts the entity kind "counter"
// (node/sharding.h): the counters whose keys it owns live here, their state saved to and loaded
// from --store_dir. On SIGINT or SIGTERM it hands its counters off first (ShardRegionLeave: each
// saves, the others take the node out of placement), then stops the node (Node::Shutdown).
// It takes the flags troupe_cluster gives a node (--config, --node_id, --id_file,
// --monitoring_port), so `troupe_cluster --node_binary=counters_node` runs a cluster of them.
//
// Exit status (cli.h): 0 after a clean stop, 1 when the node failed or did not hand off in time,
// 2 on a bad flag, 3 on a bad config.
//
//   counters_node --config=etcd.conf --id_file=/tmp/node.id   # store: <config's folder>/counters
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "cli.h"
#include "counters.h"
#include "node/node.h"
#include "node/sharding.h"
#include "node_runner.h"

ABSL_FLAG(std::string, config, "", "node config (protobuf text, proto/config.proto)");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's (or, with etcd, etcd's)");
ABSL_FLAG(int, monitoring_port, 0,
          "port of the status page and GET /metrics unless the config sets monitoring.port: 0 "
          "takes a free port, -1 serves none");
ABSL_FLAG(std::string, id_file, "",
          "once the node is up, write its id (and on a second line its metrics URL) here");
ABSL_FLAG(int, run_seconds, 0, "stop after this many seconds; 0 runs until SIGINT or SIGTERM");
ABSL_FLAG(std::string, store_dir, "",
          "where counters save their state, one file per key; empty: 'counters' next to --config");
ABSL_FLAG(
    int, passivate_ms, 2000,
    "a counter without an update for this long is passivated (saved, then stopped); 0: never");
ABSL_FLAG(int, leave_timeout_s, 20, "how long the hand-off at the stop may take");

int main(int argc, char** argv) {
  troupe::examples::BlockTerminationSignals();
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Runs one node of the sharded counters service until SIGINT or SIGTERM (or --run_seconds), "
      "then hands its counters off and stops.");
  using troupe::examples::kExitConfig;
  using troupe::examples::kExitFailed;
  using troupe::examples::kExitOk;
  using troupe::examples::kExitUsage;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int run_seconds = absl::GetFlag(FLAGS_run_seconds);
  const int monitoring_port = absl::GetFlag(FLAGS_monitoring_port);
  const int passivate_ms = absl::GetFlag(FLAGS_passivate_ms);
  const int leave_timeout_s = absl::GetFlag(FLAGS_leave_timeout_s);
  if (run_seconds < 0 || passivate_ms < 0 || leave_timeout_s < 1 || monitoring_port < -1 ||
      monitoring_port > 65535) {
    std::fprintf(stderr,
                 "counters_node: --run_seconds and --passivate_ms must be 0 or more, "
                 "--leave_timeout_s 1 or more, --monitoring_port -1 to 65535\n");
    return kExitUsage;
  }
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) {
    std::fprintf(stderr, "counters_node: --config: required\n");
    return kExitUsage;
  }
  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(config_path, absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "counters_node: %s\n", std::string(config.status().message()).c_str());
    return kExitConfig;
  }
  if (!config->monitoring().has_port() && monitoring_port >= 0) {
    config->mutable_monitoring()->set_port(static_cast<uint32_t>(monitoring_port));
  }
  std::string store_dir = absl::GetFlag(FLAGS_store_dir);
  if (store_dir.empty()) {
    store_dir = (std::filesystem::absolute(config_path).parent_path() / "counters").string();
  }

  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node =
      troupe::node::Node::Start(*config, {.on_system_start = nullptr, .interconnect = {}});
  if (!node.ok()) {
    std::fprintf(stderr, "counters_node: %s\n", std::string(node.status().message()).c_str());
    return absl::IsInvalidArgument(node.status()) ? kExitConfig : kExitFailed;
  }
  const troupe::NodeId self = (*node)->id();
  troupe::ActorSystem& system = (*node)->system();
  troupe::node::ShardingOptions options;
  options.passivate_after = absl::Milliseconds(passivate_ms);
  absl::StatusOr<troupe::ActorId> region = troupe::node::StartShardRegion(
      system, troupe::examples::kCounterKind, (*node)->interconnect()->nameservice(),
      troupe::examples::CounterFactory(std::make_shared<troupe::examples::CounterStore>(store_dir)),
      options);
  if (!region.ok()) {
    std::fprintf(stderr, "counters_node: node %u: %s\n", self,
                 std::string(region.status().message()).c_str());
    (*node)->Shutdown(absl::Seconds(5));
    return kExitFailed;
  }
  std::string metrics;
  if (const troupe::node::MonitoringServer* monitoring = (*node)->monitoring()) {
    metrics = monitoring->url() + "/metrics";
  }
  std::printf("counters_node: node %u up, hosting \"%s\" (state in %s), %zu members\n", self,
              std::string(troupe::examples::kCounterKind).c_str(), store_dir.c_str(),
              (*node)->interconnect()->nameservice()->Members().size());
  if (const std::string id_file = absl::GetFlag(FLAGS_id_file); !id_file.empty()) {
    if (absl::Status written = troupe::examples::WriteNodeIdFile(id_file, self, metrics);
        !written.ok()) {
      std::fprintf(stderr, "counters_node: --id_file: %s\n",
                   std::string(written.message()).c_str());
      (*node)->Shutdown(absl::Seconds(5));
      return kExitFailed;
    }
  }

  const absl::Time deadline =
      run_seconds > 0 ? absl::Now() + absl::Seconds(run_seconds) : absl::InfiniteFuture();
  int signal = 0;
  while (signal == 0 && absl::Now() < deadline) {
    signal = troupe::examples::WaitForTerminationSignal(
        std::min(absl::Milliseconds(200), deadline - absl::Now()));
  }
  std::printf(
      "counters_node: node %u stopping (%s): handing its counters off\n", self,
      (signal != 0 ? troupe::examples::SignalName(signal) : "--run_seconds elapsed").c_str());
  int status = kExitOk;
  absl::StatusOr<uint64_t> left = troupe::node::ShardRegionLeave(
      system, troupe::examples::kCounterKind, absl::Seconds(leave_timeout_s));
  if (left.ok()) {
    std::printf("counters_node: node %u handed off %llu counters\n", self,
                static_cast<unsigned long long>(*left));
  } else {
    std::printf("counters_node: node %u: hand-off: %s\n", self,
                std::string(left.status().message()).c_str());
    status = kExitFailed;
  }
  const troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(5));
  std::printf("counters_node: node %u stopped (%s)\n", self,
              report.flushed ? "every remote event acknowledged"
                             : absl::StrCat(report.reported, " remote events reported").c_str());
  return status;
}
