// SPDX-License-Identifier: Apache-2.0
//
// troupe_node: runs one node of a cluster from a protobuf text config: the echo service, the
// load-test actors (examples/loadtest.h), the interconnect and the monitoring server (GET /metrics
// on a free port unless --monitoring_port or the config says otherwise). Logs sessions coming up
// and going down and runs until SIGINT or SIGTERM (or --run_seconds), then stops cleanly and
// exits 0; before it leaves the cluster it ends its load senders cleanly (StopLoadSenders,
// loadtest.h). The membership is the config's static table (interconnect.nodes) or etcd
// (interconnect.etcd): then a config without node_id gets its id from etcd, and the node leaves
// the cluster when it stops. Its first line names its id; --id_file also writes it to a file
// (troupe_cluster reads it).
// --testing_protocol and --testing_features make it announce another release's protocol versions
// and features (interconnect/protocol.h), for mixed-version tests.
// A bad flag exits 2; a bad config prints the field at fault and exits 3 (cli.h).
//
//   troupe_node --config=cluster.conf --node_id=2
//   troupe_node --config=etcd.conf --id_file=/tmp/node.id     # the id from etcd
//   troupe_node --config=etcd.conf --listen_host=0.0.0.0 --advertise_host=10.0.0.7
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor_system.h"
#include "cli.h"
#include "interconnect/interconnect.h"
#include "interconnect/protocol.h"
#include "loadtest.h"
#include "node/node.h"
#include "node_runner.h"

ABSL_FLAG(std::string, config, "",
          "node config (protobuf text, proto/config.proto) with the node table");
ABSL_FLAG(uint32_t, node_id, 0, "this node's id; 0 keeps the config's node_id");
ABSL_FLAG(int, run_seconds, 0, "stop after this many seconds; 0 runs until SIGINT or SIGTERM");
ABSL_FLAG(int, monitoring_port, 0,
          "port of GET /metrics (Prometheus text) unless the config sets monitoring.port: 0 takes "
          "a free port (printed at start), -1 serves none");
ABSL_FLAG(std::string, listen_host, "",
          "address the interconnect binds (interconnect.listen.host), e.g. 0.0.0.0; empty keeps "
          "the config's");
ABSL_FLAG(std::string, advertise_host, "",
          "host name or address the other nodes dial (interconnect.advertise.host; etcd "
          "membership), required when the node listens on a wildcard address; empty keeps the "
          "config's");
ABSL_FLAG(uint32_t, advertise_port, 0,
          "port the other nodes dial (interconnect.advertise.port; etcd membership), when a NAT "
          "or container maps the listen port; 0 keeps the config's (default: the port bound)");
ABSL_FLAG(std::string, id_file, "",
          "once the node is up, write its id into this file (useful when etcd chooses it), and "
          "on a second line the URL of its metrics");

ABSL_FLAG(std::string, testing_protocol, "",
          "for tests that play another release: the protocol versions to announce, N or "
          "OLDEST..NEWEST (empty: this build's); frames stay this build's");
ABSL_FLAG(std::string, testing_features, "build",
          "for tests that play another release: the features to announce, comma-separated "
          "(\"none\": none; \"build\": this build's)");

namespace {

// How long the load senders get to collect their acknowledgements before the node leaves.
constexpr absl::Duration kStopSendersTimeout = absl::Seconds(3);

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  troupe::examples::BlockTerminationSignals();
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Runs one node of a Troupe cluster (echo and load-test services) until SIGINT or SIGTERM "
      "(or --run_seconds), then stops it cleanly. A config that cannot be read or fails "
      "validation is reported with the field at fault (exit 3).");
  using troupe::examples::kExitConfig;
  using troupe::examples::kExitFailed;
  using troupe::examples::kExitUsage;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int run_seconds = absl::GetFlag(FLAGS_run_seconds);
  if (run_seconds < 0) {
    std::fprintf(stderr, "troupe_node: --run_seconds: must be 0 or more, got %d\n", run_seconds);
    return kExitUsage;
  }
  const int monitoring_port = absl::GetFlag(FLAGS_monitoring_port);
  if (monitoring_port < -1 || monitoring_port > 65535) {
    std::fprintf(stderr, "troupe_node: --monitoring_port: must be -1 to 65535, got %d\n",
                 monitoring_port);
    return kExitUsage;
  }
  absl::StatusOr<troupe::interconnect::ProtocolRange> protocol =
      troupe::examples::ParseTestingProtocol(absl::GetFlag(FLAGS_testing_protocol),
                                             absl::GetFlag(FLAGS_testing_features));
  if (!protocol.ok()) {
    std::fprintf(stderr, "troupe_node: %s\n", absl::StrCat(protocol.status().message()).c_str());
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_advertise_port) > 65535) {
    std::fprintf(stderr, "troupe_node: --advertise_port: must be 0 to 65535, got %u\n",
                 absl::GetFlag(FLAGS_advertise_port));
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr,
                 "troupe_node: --config: required (a protobuf text file with the node "
                 "table)\n");
    return kExitUsage;
  }

  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id),
                                       {.listen_host = absl::GetFlag(FLAGS_listen_host),
                                        .advertise_host = absl::GetFlag(FLAGS_advertise_host),
                                        .advertise_port = absl::GetFlag(FLAGS_advertise_port)});
  if (!config.ok()) {
    std::fprintf(stderr, "troupe_node: %s\n", absl::StrCat(config.status().message()).c_str());
    return kExitConfig;
  }
  // The example node serves its metrics by default (the library's default is off).
  if (!config->monitoring().has_port() && monitoring_port >= 0) {
    config->mutable_monitoring()->set_port(static_cast<uint32_t>(monitoring_port));
  }
  // Services are registered before the interconnect starts: a peer never finds them missing.
  troupe::node::NodeOptions options;
  options.interconnect.protocol = *protocol;
  options.on_system_start = [](troupe::ActorSystem& system) {
    troupe::examples::EnableSessionLogs();
    return troupe::examples::RegisterNodeServices(&system);
  };
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node =
      troupe::node::Node::Start(*config, std::move(options));
  if (!node.ok()) {
    const std::string who = config->has_node_id() ? absl::StrCat("node ", config->node_id())
                                                  : std::string("node (id from etcd)");
    std::fprintf(stderr, "troupe_node: %s: %s\n", who.c_str(),
                 absl::StrCat(node.status().message()).c_str());
    return absl::IsInvalidArgument(node.status()) ? kExitConfig : kExitFailed;
  }
  const troupe::NodeId self = (*node)->id();
  troupe::interconnect::Interconnect* ic = (*node)->interconnect();
  if (config->interconnect().has_etcd()) {
    const troupe::proto::EtcdConfig& etcd = config->interconnect().etcd();
    const std::string endpoints =
        etcd.endpoint().empty() ? absl::StrJoin(etcd.endpoints(), ", ") : etcd.endpoint();
    const troupe::proto::InterconnectConfig& used = (*node)->system().config().interconnect();
    const std::string dialled =
        used.listen().client()
            ? std::string(" (a client: it only dials)")
            : absl::StrCat(
                  ", dialled at ",
                  used.advertise().host().empty() ? used.listen().host() : used.advertise().host(),
                  ":", used.advertise().has_port() ? used.advertise().port() : ic->port());
    std::printf("troupe_node: node %u up, listening on port %u%s, %zu members in etcd at %s\n",
                self, ic->port(), dialled.c_str(), ic->nameservice()->Members().size(),
                endpoints.c_str());
  } else {
    std::printf("troupe_node: node %u up, listening on port %u, %d nodes in the table\n", self,
                ic->port(), (*node)->system().config().interconnect().nodes_size());
  }
  if (!absl::GetFlag(FLAGS_testing_protocol).empty() ||
      absl::GetFlag(FLAGS_testing_features) != "build") {
    std::printf(
        "troupe_node: node %u announces protocol versions %u..%u, features: %s (testing)\n", self,
        protocol->oldest, protocol->newest,
        protocol->features.empty() ? "none" : absl::StrJoin(protocol->features, ",").c_str());
  }
  std::string metrics;
  if (const troupe::node::MonitoringServer* monitoring = (*node)->monitoring()) {
    std::printf("troupe_node: node %u status page at %s/, metrics at %s/metrics\n", self,
                monitoring->url().c_str(), monitoring->url().c_str());
    metrics = monitoring->url() + "/metrics";
  }
  if (const std::string id_file = absl::GetFlag(FLAGS_id_file); !id_file.empty()) {
    if (absl::Status written = troupe::examples::WriteNodeIdFile(id_file, self, metrics);
        !written.ok()) {
      std::fprintf(stderr, "troupe_node: --id_file: %s\n", absl::StrCat(written.message()).c_str());
      (*node)->Shutdown(absl::Seconds(5));
      return kExitFailed;
    }
  }

  troupe::examples::SessionWatcher watcher(self, ic);
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
  // The load senders end first, cleanly, while the cluster still routes to this node: their
  // acknowledgements come back and the controller gets their reports (loadtest.h).
  if (const size_t running =
          troupe::examples::StopLoadSenders(&(*node)->system(), kStopSendersTimeout);
      running != 0) {
    std::printf("troupe_node: node %u: %zu load sender(s) still running after %s; leaving\n", self,
                running, absl::FormatDuration(kStopSendersTimeout).c_str());
  }
  watcher.PrintCounters(stdout);
  // Events still held for peers get a few seconds to be acknowledged; the rest are reported.
  const troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(5));
  const std::string fate =
      report.flushed ? "every remote event acknowledged"
                     : absl::StrCat(report.reported, " remote events reported undelivered");
  std::printf("troupe_node: node %u stopped (%s)\n", self, fate.c_str());
  return troupe::examples::kExitOk;
}
