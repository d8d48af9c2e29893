// SPDX-License-Identifier: Apache-2.0
//
// PipeCluster: N nodes of a TestRuntime, each running the real Interconnect over one in-memory
// PipeNetwork (interconnect/testing/), with an echo service (ServiceId "echo") on every node. The
// session and membership tests share it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/protocol.h"
#include "interconnect/testing/pipe_network.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::interconnect {

inline constexpr ActorId kEcho = ServiceId("echo");

// Dispatch bounds for the session tests: `time` of simulated time, a generous step count.
inline testing::DispatchOptions Within(absl::Duration time) {
  testing::DispatchOptions options;
  options.max_time = time;
  options.max_events = 5'000'000;
  return options;
}

// N nodes of a TestRuntime, each with a real Interconnect over one PipeNetwork.
struct PipeCluster {
  // `tune` adjusts every node's interconnect config, `tune_node` one node's (limits or cluster ids
  // that differ). `nameservices[node]`, when given, replaces node's table from the config (index
  // 0 unused). `protocols[node]`, when given, is what node announces in its handshakes.
  using TuneNode = std::function<void(NodeId node, proto::InterconnectConfig& config)>;
  explicit PipeCluster(uint32_t nodes, uint64_t seed = 1,
                       const std::function<void(proto::InterconnectConfig&)>& tune = nullptr,
                       absl::Duration latency = absl::Microseconds(50),
                       std::vector<std::shared_ptr<Nameservice>> nameservices = {},
                       TuneNode tune_node = nullptr, std::vector<ProtocolRange> protocols = {})
      : network(latency), names(std::move(nameservices)), protocols(std::move(protocols)) {
    std::vector<uint16_t> ports;
    for (uint32_t i = 1; i <= nodes; ++i) {
      ports.push_back(static_cast<uint16_t>(7000 + i));
    }
    testing::TestRuntimeOptions options;
    options.nodes = nodes;
    options.seed = seed;
    options.simulated_interconnect = false;
    options.config = testutil::ClusterConfig("node", ports);
    if (tune) {
      tune(*options.config.mutable_interconnect());
    }
    if (tune_node) {
      options.tune_node = [tune_node](NodeId node, proto::ActorSystemConfig& config) {
        tune_node(node, *config.mutable_interconnect());
      };
    }
    ics.resize(nodes + 1);
    options.on_node_start = [this](testing::TestRuntime& rt, NodeId node) {
      ActorSystem& system = rt.node(node);
      InterconnectOptions ic_options;
      ic_options.transport = std::shared_ptr<Transport>(network.TransportFor(&system));
      ic_options.incarnation = node * 1000 + rt.incarnation(node);
      if (node < names.size()) {
        ic_options.nameservice = names[node];
      }
      if (node < this->protocols.size()) {
        ic_options.protocol = this->protocols[node];
      }
      absl::StatusOr<std::unique_ptr<Interconnect>> ic =
          Interconnect::Start(&system, std::move(ic_options));
      ASSERT_TRUE(ic.ok()) << ic.status();
      ics[node] = std::move(*ic);
      ASSERT_TRUE(
          system.RegisterService(kEcho, system.Register(std::make_unique<testutil::Echo>())).ok());
    };
    runtime = std::make_unique<testing::TestRuntime>(std::move(options));
  }
  ~PipeCluster() {
    for (auto& ic : ics) {
      ic.reset();
    }
  }
  PipeCluster(const PipeCluster&) = delete;
  PipeCluster& operator=(const PipeCluster&) = delete;
  PipeCluster(PipeCluster&&) = delete;
  PipeCluster& operator=(PipeCluster&&) = delete;

  SessionCounters Session(NodeId node, NodeId peer) const {
    for (const SessionCounters& counters : ics[node]->Counters()) {
      if (counters.peer == peer) {
        return counters;
      }
    }
    return {};
  }
  bool HasSession(NodeId node, NodeId peer) const {
    for (const SessionCounters& counters : ics[node]->Counters()) {
      if (counters.peer == peer) {
        return true;
      }
    }
    return false;
  }
  bool Up(NodeId a, NodeId b) const { return Session(a, b).connected && Session(b, a).connected; }

  void CutAll() {
    for (const ConnectionId id : network.ConnectionIds()) {
      network.Cut(id);
    }
  }

  PipeNetwork network;
  std::vector<std::shared_ptr<Nameservice>> names;
  std::vector<ProtocolRange> protocols;
  std::vector<std::unique_ptr<Interconnect>> ics;
  std::unique_ptr<testing::TestRuntime> runtime;
};

}  // namespace troupe::interconnect
