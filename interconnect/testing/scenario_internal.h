// SPDX-License-Identifier: Apache-2.0
//
// Scenario: the state of one run of RunScenario (scenario.h), shared by ScenarioContext. Private
// to troupe::scenario; not installed.
//
// Thread-safety: thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/testing/pipe_network.h"
#include "interconnect/testing/scenario.h"

namespace troupe::testing {

class Scenario {
 public:
  Scenario(uint64_t seed, ScenarioOptions options, const WorkloadFactory& factory);
  ~Scenario();
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;
  Scenario(Scenario&&) = delete;
  Scenario& operator=(Scenario&&) = delete;

  // The run phase, the calm and the checks.
  void Run();
  ScenarioResult Result();

  // An action due at a simulated time (a stall's resume, a partition's heal, a restart).
  struct Later {
    absl::Time at;
    std::function<void()> action;
  };

  uint64_t seed;
  ScenarioOptions options;
  std::mt19937_64 rng;
  ScenarioContext context;
  uint32_t n = 0;
  absl::Duration latency;
  std::unique_ptr<interconnect::PipeNetwork> network;
  std::vector<std::unique_ptr<Workload>> workloads;
  // Per node (index 0 unused): its interconnect config, nameservice, interconnect, when it last
  // stopped, and its mailboxes that are not proxies (listener, services) right after its start.
  std::vector<proto::InterconnectConfig> configs;
  std::vector<std::shared_ptr<interconnect::StaticNameservice>> nameservices;
  std::vector<interconnect::NodeEndpoint> all_members;
  std::vector<std::unique_ptr<interconnect::Interconnect>> ics;
  std::vector<absl::Time> last_stop;
  std::vector<uint64_t> fixed_mailboxes;
  // The kind of seed (scenario.h): no faults, link faults that end no session, or every fault.
  enum class Kind : uint8_t { kCalm, kLinks, kChaos };
  Kind kind = Kind::kChaos;
  // Links: the end of the current stall or partition (one at a time).
  absl::Time holds_until = absl::InfinitePast();
  // The node that leaves and joins the others' nameservices (0: membership stays).
  NodeId joiner = 0;
  bool joined = false;
  std::unique_ptr<TestRuntime> runtime;
  // The runtime while it is being constructed (its first node starts run inside).
  TestRuntime* borrowed = nullptr;
  std::vector<Later> later;
  std::vector<std::string> violations;
  std::string faults_text;
  uint64_t hash = 0;
  uint64_t peak_held = 0;
  int failures_before = 0;

 private:
  void StartNode(TestRuntime& rt, NodeId node);
  void StopNode(NodeId node, bool graceful);
  void RestartNode(NodeId node);
  void DrawFaults();
  void RunDue(bool all);
  void SampleMemory();
  bool Advance(absl::Duration duration);
  void CheckCluster();
  void Note(const std::string& what);
};

}  // namespace troupe::testing
