// SPDX-License-Identifier: Apache-2.0
//
// One troupe::node::Node through the installed node layer: its config read by
// troupe::node::ParseConfig, which refuses a bad etcd field by name, started with a monitoring
// server on a free port and shut down; exits 0 when all of it went as documented.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "node/config.h"
#include "node/monitoring.h"
#include "node/node.h"

int main() {
  const absl::StatusOr<troupe::proto::ActorSystemConfig> refused =
      troupe::node::ParseConfig(R"(interconnect { etcd { endpoint: "127.0.0.1:2379" } })");
  if (refused.ok() ||
      refused.status().message().find("interconnect.etcd.endpoint") == std::string::npos) {
    std::fprintf(stderr, "consumer_node: a bad etcd endpoint was not refused by name: %s\n",
                 refused.status().ToString().c_str());
    return 1;
  }
  const absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::node::ParseConfig(R"(node_id: 3 monitoring { port: 0 })");
  if (!config.ok()) {
    std::fprintf(stderr, "consumer_node: %s\n", config.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node = troupe::node::Node::Start(*config);
  if (!node.ok()) {
    std::fprintf(stderr, "consumer_node: %s\n", node.status().ToString().c_str());
    return 1;
  }
  if ((*node)->id() != 3 || (*node)->monitoring() == nullptr ||
      (*node)->monitoring()->port() == 0) {
    std::fprintf(stderr, "consumer_node: node %u without its monitoring server\n", (*node)->id());
    return 1;
  }
  const troupe::node::Node::ShutdownReport report = (*node)->Shutdown(absl::Seconds(1));
  if (!report.flushed) {
    std::fprintf(stderr, "consumer_node: a node without peers did not stop flushed\n");
    return 1;
  }
  std::printf("consumer_node: node 3 served monitoring and stopped\n");
  return 0;
}
