// SPDX-License-Identifier: Apache-2.0
//
// What the node benchmarks share (router_bench, topics_bench, sharding_bench): the config of one
// node of a cluster on 127.0.0.1 with small pools, and a way to stop on a setup error.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "actors/actor_id.h"
#include "proto/config.pb.h"

namespace troupe::node::bench_util {

// Returns the config of node `node` of a cluster on 127.0.0.1 where node i + 1 listens on
// ports[i] (no interconnect section when `ports` is empty: a node alone), with `User` and `IC`
// pools of one worker each that spin `spin_us` before they park: two nodes' workers share this
// machine's two cores.
inline proto::ActorSystemConfig LoopbackNodeConfig(NodeId node, const std::vector<uint16_t>& ports,
                                                   const std::string& cluster_id,
                                                   uint32_t spin_us) {
  proto::ActorSystemConfig config;
  config.set_node_id(node);
  for (const char* name : {"User", "IC"}) {
    proto::PoolConfig* pool = config.add_pools();
    pool->set_name(name);
    pool->set_threads(1);
    pool->set_spin_time_us(spin_us);
  }
  if (ports.empty()) {
    return config;
  }
  proto::InterconnectConfig& ic = *config.mutable_interconnect();
  ic.set_cluster_id(cluster_id);
  for (size_t i = 0; i < ports.size(); ++i) {
    proto::NodeAddress& address = *ic.add_nodes();
    address.set_node_id(static_cast<NodeId>(i + 1));
    address.set_host("127.0.0.1");
    address.set_port(ports[i]);
  }
  return config;
}

// Aborts with `status` printed unless it is OK: a benchmark whose cluster cannot start measures
// nothing.
inline void CheckOrAbort(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::abort();
  }
}

}  // namespace troupe::node::bench_util
