// SPDX-License-Identifier: Apache-2.0
//
// Scenario: a simulation campaign over the real interconnect. For each seed, a random cluster
// (2 to 7 nodes of a TestRuntime, each with a real Interconnect over one PipeNetwork, in simulated
// time), random workloads and random faults; at the end, the invariants the docs promise are
// checked. A seed fixes the whole run: the same seed gives the same trace (and fingerprint).
// Target troupe::scenario (reports through GoogleTest like troupe::testing).
//
// One scenario, RunScenario(seed):
//   0. The kind of seed: calm (no fault, one in ten), links (cuts, corruption, stalls and
//      partitions shorter than the dead-peer timeout, one hold at a time: no session ends; three
//      in ten) or chaos (every fault).
//   1. The cluster: 2 to 7 nodes; link latency 20 us to 2 ms; heartbeats every 100 ms, a dead
//      peer after 1 s; sometimes nodes with smaller limits than their peers (max_event_size,
//      max_unacked_bytes, max_queued_bytes: mismatched limits and overload); sometimes changing
//      membership (the last node leaves the others' nameservices and joins them again).
//   2. The run (ScenarioOptions::run_time): every tick (10 ms) each workload's Tick drives its
//      actors, and faults are drawn: connection cuts, a corrupted byte, stalls, partitions (both
//      directions' bytes wait and no connection forms, as a cable pulled out), a node killed and
//      restarted later, a node shut down gracefully (its interconnect closed first, then the
//      node) and restarted later. Held bytes are sampled against max_queued_bytes.
//   3. The calm: every workload's Quiesce (no new work), faults healed, dead nodes restarted,
//      `settle_time` of simulated time; then every workload's Finish (end its actors) and another
//      `settle_time`.
//   4. The checks: each workload's Check, its Teardown and a second more; then the cluster's own:
//      every session up between every two members, its held bytes, queued events and
//      unacknowledged bytes back to 0; every node's live mailboxes back to what it had before the
//      workloads started; pending timers within the interconnect's own; no GoogleTest failure
//      recorded meanwhile (the test runtime's own checks).
//
// A failed scenario's result carries the violations and a one-line replay command
// (`<replay_prefix> --seed=N`). ScenarioMain is a ready main() for a campaign binary:
//   troupe_sim --seed=N                 one seed, its summary and fingerprint
//   troupe_sim --seeds=K [--start=S]    seeds S..S+K-1 (S defaults to 1); seeds/second at the end
//   troupe_sim ... --run_ms=M           simulated run time per scenario (default 1500)
//   troupe_sim ... --log=info           the nodes' log level (default error)
// It exits 1 when a seed fails, printing each failing seed's replay line.
//
// Your own actors: implement Workload (set them up in OnNodeStart, drive them in Tick, end them in
// Finish, check in Check) and pass a factory; the built-in workloads are MakeBuiltinWorkloads().
//
// Thread-safety: thread-compatible; everything runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/testing/pipe_network.h"

namespace troupe::testing {

class Scenario;

// What a workload sees of the running scenario.
class ScenarioContext {
 public:
  explicit ScenarioContext(Scenario* scenario) : scenario_(scenario) {}

  // The test runtime running the nodes.
  TestRuntime& rt();
  uint32_t nodes() const;
  bool IsAlive(NodeId node) const;
  // Whether `node` was killed or shut down at some point of this scenario (events to or from its
  // actors may then be lost unreported: acknowledged by the node, not yet handled, when it died).
  bool WasStopped(NodeId node) const;
  // When `node` last stopped (InfinitePast when it never did).
  absl::Time LastStop(NodeId node) const;
  // Whether this scenario's faults all leave every session alive (calm seeds, and seeds with only
  // cuts, corruption and holds of bytes shorter than the dead-peer timeout, one at a time): then
  // nothing is lost, and every tracked event is delivered unless refused for its size or the
  // peer's budget (kTooLarge, kOverloaded); no watch ends with kNodeLost.
  bool LossFree() const;
  // Events the interconnects refused with kOverloaded so far, summed over the live nodes' sessions.
  uint64_t Overloaded() const;
  // The node's interconnect config as the node runs it (limits differ between nodes).
  const proto::InterconnectConfig& config(NodeId node) const;
  // The workloads' generator, seeded from the scenario's seed (the runtime's is its own).
  std::mt19937_64& rng();
  // A uniform number in [lo, hi].
  uint64_t Uniform(uint64_t lo, uint64_t hi);
  // True with probability `p`.
  bool Chance(double p);
  // A random node in 1..nodes(), other than `except` when given (and nodes() > 1).
  NodeId RandomNode(NodeId except = 0);
  // Mixes `value` into the scenario's fingerprint (outcomes a replay must reproduce).
  void Mix(uint64_t value);

 private:
  Scenario* scenario_;
};

// A workload: actors on the cluster's nodes and the invariants they must keep.
class Workload {
 public:
  Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
  Workload(Workload&&) = delete;
  Workload& operator=(Workload&&) = delete;
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  // Registers this workload's actors on `node`: at the start and at every restart of the node
  // (the old incarnation's actors are gone). Called inside the node's start: register, do not
  // dispatch.
  virtual void OnNodeStart(ScenarioContext& context, NodeId node) = 0;
  // Called every tick of the run phase (not inside a handler): send, ask, spawn.
  virtual void Tick(ScenarioContext& context) = 0;
  // The run phase is over: start nothing new from now on.
  virtual void Quiesce(ScenarioContext& /*context*/) {}
  // Everything settled: end this workload's actors (the runtime settles once more afterwards, and
  // the cluster checks that every node is back to its mailboxes before the workloads).
  virtual void Finish(ScenarioContext& context) = 0;
  // Appends a line per broken invariant.
  virtual void Check(ScenarioContext& context, std::vector<std::string>* violations) = 0;
  // After the checks: end the actors Finish kept (observers of the others' ends).
  virtual void Teardown(ScenarioContext& /*context*/) {}
  // One line of counts for the summary ("sent=..., undelivered=...").
  virtual std::string Summary() const { return {}; }
};

// Makes a scenario's workloads, anew for each scenario.
using WorkloadFactory = std::function<std::vector<std::unique_ptr<Workload>>()>;

// The built-in workloads: tracked and untracked sends of every size (up to chunked events and
// past a node's max_event_size) to services, asks with timeouts, watches of actors that end,
// fail or live on, and supervised children that throw. They check: no event delivered twice or
// out of its sender's order or past a max_event_size; a tracked event delivered or reported
// (both only when the report says unsure), unless a node on its way stopped after it was sent;
// with LossFree(), delivered unless refused for size or budget; an ask answered, failed or timed
// out exactly once, within its timeout, never OK when the service answered late, never or
// wrongly; a watch ended by exactly one EvTerminated (kFailed only after three throws, no
// kNodeLost with LossFree()); a supervisor never ended by its children's failures.
std::vector<std::unique_ptr<Workload>> MakeBuiltinWorkloads();

struct ScenarioOptions {
  // Nodes, drawn from [min_nodes, max_nodes] (within 2..7).
  uint32_t min_nodes = 2;
  uint32_t max_nodes = 7;
  // Simulated time of the run phase (faults and workloads) and of each settling.
  absl::Duration run_time = absl::Milliseconds(1500);
  absl::Duration settle_time = absl::Seconds(4);
  // Draw faults (off: workloads only).
  bool faults = true;
  // Allow kills, graceful shutdowns and membership changes among the faults.
  bool node_faults = true;
  // The nodes' log level ("trace" to "error"): the faults make the nodes log (refusals, corrupt
  // frames, dead letters), so quiet by default; the verdicts are the violations.
  std::string log_level = "error";
  // The replay line is `<replay_prefix> --seed=N`.
  std::string replay_prefix = "troupe_sim";
};

struct ScenarioResult {
  uint64_t seed = 0;
  bool ok() const { return violations.empty(); }
  std::vector<std::string> violations;
  // The runtime's trace fingerprint mixed with the workloads' outcomes: equal for equal seeds.
  uint64_t fingerprint = 0;
  uint64_t steps = 0;
  // The cluster, the faults drawn, each workload's counts.
  std::string summary;
  // `<replay_prefix> --seed=N`.
  std::string replay;
};

// Runs one scenario.
ScenarioResult RunScenario(uint64_t seed, const ScenarioOptions& options = {},
                           const WorkloadFactory& workloads = MakeBuiltinWorkloads);

struct CampaignOptions {
  uint64_t start = 1;
  uint64_t seeds = 100;
  ScenarioOptions scenario;
  // Progress and failures go here (null: nowhere).
  std::ostream* out = nullptr;
};

struct CampaignReport {
  uint64_t run = 0;
  std::vector<uint64_t> failed;
  absl::Duration wall_time;
  double SeedsPerSecond() const;
};

// Runs seeds start..start+seeds-1; prints each failing seed's violations and replay line.
CampaignReport RunCampaign(const CampaignOptions& options,
                           const WorkloadFactory& workloads = MakeBuiltinWorkloads);

// A campaign binary's main() (flags in the file comment). Returns the exit code.
int ScenarioMain(int argc, char** argv, const WorkloadFactory& workloads = MakeBuiltinWorkloads);

}  // namespace troupe::testing
