// SPDX-License-Identifier: Apache-2.0
//
// troupe_node: runs one node of a cluster from a protobuf text config: the echo service, the
// load-test actors (examples/loadtest.h) and the interconnect. Logs sessions coming up and going
// down and runs until SIGINT or SIGTERM (or --run_seconds), then stops cleanly and exits 0.
// A bad config prints the field at fault and exits 2.
//
//   troupe_node --config=cluster.conf --node_id=2
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor_system.h"
#include "examples/loadtest.h"
#include "examples/node_runner.h"
#include "interconnect/interconnect.h"

ABSL_FLAG(std::string, config, "",
          "node config (protobuf text, proto/config.proto) with the node table");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's node_id");
ABSL_FLAG(int, run_seconds, 0, "stop after this many seconds; 0 runs until SIGINT or SIGTERM");

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  troupe::examples::BlockTerminationSignals();
  absl::SetProgramUsageMessage(
      "Runs one node of a Troupe cluster (echo and load-test services) until SIGINT or SIGTERM.");
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int run_seconds = absl::GetFlag(FLAGS_run_seconds);
  if (run_seconds < 0) {
    std::fprintf(stderr, "troupe_node: --run_seconds: must be 0 or more, got %d\n", run_seconds);
    return 2;
  }

  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "troupe_node: %s\n", absl::StrCat(config.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> system =
      troupe::ActorSystem::Create(*config);
  if (!system.ok()) {
    std::fprintf(stderr, "troupe_node: %s\n", absl::StrCat(system.status().message()).c_str());
    return 2;
  }
  troupe::examples::EnableSessionLogs();
  const troupe::NodeId self = (*system)->node_id();
  if (absl::Status status = troupe::examples::RegisterNodeServices(system->get()); !status.ok()) {
    std::fprintf(stderr, "troupe_node: node %u: %s\n", self, status.ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<troupe::interconnect::Interconnect>> ic =
      troupe::interconnect::Interconnect::Start(system->get());
  if (!ic.ok()) {
    std::fprintf(stderr, "troupe_node: node %u: %s\n", self,
                 absl::StrCat(ic.status().message()).c_str());
    return absl::IsInvalidArgument(ic.status()) ? 2 : 1;
  }
  std::printf("troupe_node: node %u up, listening on port %u, %d nodes in the table\n", self,
              (*ic)->port(), (*system)->config().interconnect().nodes_size());

  troupe::examples::SessionWatcher watcher(self, ic->get());
  const absl::Time deadline =
      run_seconds > 0 ? absl::Now() + absl::Seconds(run_seconds) : absl::InfiniteFuture();
  int signal = 0;
  while (signal == 0 && absl::Now() < deadline) {
    signal = troupe::examples::WaitForTerminationSignal(
        std::min(absl::Milliseconds(200), deadline - absl::Now()));
    watcher.Poll(stdout);
  }
  std::printf(
      "troupe_node: node %u stopping (%s)\n", self,
      (signal != 0 ? troupe::examples::SignalName(signal) : "--run_seconds elapsed").c_str());
  watcher.PrintCounters(stdout);
  ic->reset();  // before the system it routes for
  (*system)->Stop();
  system->reset();
  std::printf("troupe_node: node %u stopped\n", self);
  return 0;
}
