// SPDX-License-Identifier: Apache-2.0
#include "interconnect/testing/scenario.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

#include "interconnect/nameservice.h"
#include "interconnect/testing/scenario_internal.h"

namespace troupe::testing {

namespace {

constexpr absl::Duration kTick = absl::Milliseconds(10);
constexpr uint16_t kBasePort = 7000;

// Failures recorded by GoogleTest so far: the running test's, else the ad hoc ones (outside a
// test, as in a campaign binary's main()).
int RecordedFailures() {
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  const ::testing::TestInfo* info = unit->current_test_info();
  const ::testing::TestResult* result =
      info != nullptr ? info->result() : &unit->ad_hoc_test_result();
  int failures = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    failures += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failures;
}

uint64_t MixHash(uint64_t hash, uint64_t value) {
  // splitmix64 of the pair: stable across processes and builds.
  uint64_t z = hash ^ (value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

// -- ScenarioContext ------------------------------------------------------------------------------

TestRuntime& ScenarioContext::rt() {
  return scenario_->borrowed != nullptr ? *scenario_->borrowed : *scenario_->runtime;
}
uint32_t ScenarioContext::nodes() const { return scenario_->n; }
bool ScenarioContext::IsAlive(NodeId node) const {
  const TestRuntime* rt =
      scenario_->borrowed != nullptr ? scenario_->borrowed : scenario_->runtime.get();
  return rt != nullptr && rt->IsAlive(node);
}
bool ScenarioContext::WasStopped(NodeId node) const {
  return scenario_->last_stop[node] != absl::InfinitePast();
}
bool ScenarioContext::LossFree() const { return scenario_->kind != Scenario::Kind::kChaos; }
uint64_t ScenarioContext::Overloaded() const {
  uint64_t overloaded = 0;
  for (const auto& ic : scenario_->ics) {
    if (ic != nullptr) {
      for (const interconnect::SessionCounters& session : ic->Counters()) {
        overloaded += session.overloaded;
      }
    }
  }
  return overloaded;
}
absl::Time ScenarioContext::LastStop(NodeId node) const { return scenario_->last_stop[node]; }
const proto::InterconnectConfig& ScenarioContext::config(NodeId node) const {
  return scenario_->configs[node];
}
std::mt19937_64& ScenarioContext::rng() { return scenario_->rng; }
uint64_t ScenarioContext::Uniform(uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(scenario_->rng);
}
bool ScenarioContext::Chance(double p) {
  return std::uniform_real_distribution<double>(0, 1)(scenario_->rng) < p;
}
NodeId ScenarioContext::RandomNode(NodeId except) {
  if (scenario_->n <= 1 || except == 0) {
    return static_cast<NodeId>(Uniform(1, scenario_->n));
  }
  const auto node = static_cast<NodeId>(Uniform(1, scenario_->n - 1));
  return node >= except ? node + 1 : node;
}
void ScenarioContext::Mix(uint64_t value) { scenario_->hash = MixHash(scenario_->hash, value); }

// -- Scenario -------------------------------------------------------------------------------------

Scenario::Scenario(uint64_t seed_value, ScenarioOptions options_value,
                   const WorkloadFactory& factory)
    : seed(seed_value),
      options(std::move(options_value)),
      rng(MixHash(seed_value, 0x5ce9a210)),
      context(this),
      network(nullptr) {
  const uint32_t lo = std::clamp<uint32_t>(options.min_nodes, 2, 7);
  const uint32_t hi = std::clamp<uint32_t>(options.max_nodes, lo, 7);
  n = static_cast<uint32_t>(context.Uniform(lo, hi));
  latency = absl::Microseconds(static_cast<int64_t>(context.Uniform(20, 2000)));
  network = std::make_unique<interconnect::PipeNetwork>(latency);
  const uint64_t kind_roll = context.Uniform(0, 9);
  kind = !options.faults || kind_roll == 0        ? Kind::kCalm
         : kind_roll <= 3 || !options.node_faults ? Kind::kLinks
                                                  : Kind::kChaos;
  workloads = factory();
  last_stop.assign(n + 1, absl::InfinitePast());
  ics.resize(n + 1);
  configs.resize(n + 1);
  fixed_mailboxes.assign(n + 1, 0);
  // The node table, the same for every node; the joiner (membership changes) starts outside the
  // others' tables and comes and goes.
  proto::ActorSystemConfig base;
  base.mutable_scheduler()->set_resolution_us(1000);
  base.mutable_log()->set_level(options.log_level);
  proto::InterconnectConfig& ic = *base.mutable_interconnect();
  ic.set_cluster_id("sim");
  ic.set_heartbeat_interval_ms(100);
  ic.set_dead_peer_timeout_ms(1000);
  ic.set_max_redial_delay_ms(800);
  std::vector<interconnect::NodeEndpoint> members;
  for (NodeId node = 1; node <= n; ++node) {
    proto::NodeAddress& address = *ic.add_nodes();
    address.set_node_id(node);
    address.set_host("node");
    address.set_port(kBasePort + node);
    members.push_back(
        {.node = node, .host = "node", .port = static_cast<uint16_t>(kBasePort + node)});
  }
  // Limits: most nodes run the defaults; some are smaller (mismatched limits, overload).
  for (NodeId node = 1; node <= n; ++node) {
    proto::InterconnectConfig& mine = configs[node];
    mine = ic;
    if (context.Chance(0.25)) {
      mine.set_max_event_size(static_cast<uint32_t>(context.Uniform(64, 512)) << 10);
    }
    if (context.Chance(0.25)) {
      mine.set_max_unacked_bytes(context.Uniform(64, 256) << 10);
      const uint64_t event = mine.has_max_event_size() ? mine.max_event_size() : 8u << 20;
      mine.set_max_queued_bytes(
          std::max(2 * mine.max_unacked_bytes(), event + mine.max_unacked_bytes()) +
          (context.Uniform(0, 512) << 10));
    }
    // The defaults, spelled out: the workloads read the limits from here.
    if (!mine.has_max_event_size()) {
      mine.set_max_event_size(8u << 20);
    }
    if (!mine.has_max_unacked_bytes()) {
      mine.set_max_unacked_bytes(16u << 20);
    }
    if (!mine.has_max_queued_bytes()) {
      mine.set_max_queued_bytes(
          std::max<uint64_t>({uint64_t{64} << 20, 2 * mine.max_unacked_bytes(),
                              uint64_t{mine.max_event_size()} + mine.max_unacked_bytes()}));
    }
  }
  joiner = kind == Kind::kChaos && n >= 3 && context.Chance(0.3) ? n : 0;
  nameservices.resize(n + 1);
  for (NodeId node = 1; node <= n; ++node) {
    std::vector<interconnect::NodeEndpoint> view;
    for (const interconnect::NodeEndpoint& member : members) {
      if (member.node != joiner || node == joiner) {
        view.push_back(member);
      }
    }
    nameservices[node] = std::make_shared<interconnect::StaticNameservice>(view);
  }
  all_members = members;

  TestRuntimeOptions runtime_options;
  runtime_options.nodes = n;
  runtime_options.seed = seed;
  runtime_options.simulated_interconnect = false;
  runtime_options.config = base;
  runtime_options.trace_capacity = 64;
  runtime_options.tune_node = [this](NodeId node, proto::ActorSystemConfig& config) {
    *config.mutable_interconnect() = configs[node];
  };
  runtime_options.on_node_start = [this](TestRuntime& rt, NodeId node) { StartNode(rt, node); };
  failures_before = RecordedFailures();
  runtime = std::make_unique<TestRuntime>(std::move(runtime_options));
}

Scenario::~Scenario() {
  for (auto& ic : ics) {
    ic.reset();
  }
  runtime.reset();
  workloads.clear();
}

void Scenario::StartNode(TestRuntime& rt, NodeId node) {
  ActorSystem& system = rt.node(node);
  interconnect::InterconnectOptions ic_options;
  ic_options.transport = std::shared_ptr<interconnect::Transport>(network->TransportFor(&system));
  ic_options.incarnation = uint64_t{node} * 1000 + rt.incarnation(node);
  ic_options.nameservice = nameservices[node];
  absl::StatusOr<std::unique_ptr<interconnect::Interconnect>> ic =
      interconnect::Interconnect::Start(&system, std::move(ic_options));
  if (!ic.ok()) {
    violations.push_back(
        absl::StrCat("node ", node, ": the interconnect did not start: ", ic.status().ToString()));
    return;
  }
  ics[node] = std::move(*ic);
  fixed_mailboxes[node] = system.Counters().live_mailboxes - ics[node]->Counters().size();
  // The runtime is being constructed at the first starts: the context reaches it through here.
  borrowed = &rt;
  for (const std::unique_ptr<Workload>& workload : workloads) {
    workload->OnNodeStart(context, node);
  }
  borrowed = nullptr;
}

void Scenario::Note(const std::string& what) {
  absl::StrAppend(&faults_text, faults_text.empty() ? "" : ",", what);
  context.Mix(std::hash<std::string>{}(what));
}

void Scenario::StopNode(NodeId node, bool graceful) {
  if (!runtime->IsAlive(node)) {
    return;
  }
  ics[node].reset();
  if (graceful) {
    // The closed interconnect reports what it held; let the node's proxies do it.
    (void)runtime->AdvanceTime(absl::Milliseconds(20));
  }
  if (runtime->IsAlive(node)) {
    runtime->KillNode(node);
  }
  last_stop[node] = runtime->Now();
}

void Scenario::RestartNode(NodeId node) {
  if (!runtime->IsAlive(node)) {
    runtime->RestartNode(node);
  }
}

void Scenario::DrawFaults() {
  const std::vector<interconnect::ConnectionId> connections = network->ConnectionIds();
  auto any_connection = [&]() -> interconnect::ConnectionId {
    return connections[context.Uniform(0, connections.size() - 1)];
  };
  const absl::Time now = runtime->Now();
  const bool links = kind == Kind::kLinks;
  if (!connections.empty() && context.Chance(0.03)) {
    network->Cut(any_connection());
    Note("cut");
  }
  if (!connections.empty() && context.Chance(links ? 0.01 : 0.02)) {
    network->CorruptNextWrite(any_connection(), static_cast<uint32_t>(context.Uniform(0, 3)));
    Note("corrupt");
  }
  // Links: one hold at a time, each under half the dead-peer timeout, 200 ms apart.
  const bool may_hold = !links || now > holds_until + absl::Milliseconds(200);
  if (!connections.empty() && may_hold && context.Chance(0.02)) {
    const interconnect::ConnectionId id = any_connection();
    network->Stall(id);
    const absl::Time until =
        now + absl::Milliseconds(static_cast<int64_t>(context.Uniform(10, links ? 400 : 600)));
    holds_until = until;
    later.push_back({until, [this, id] { network->Resume(id); }});
    Note("stall");
  } else if (may_hold && context.Chance(0.015)) {
    const NodeId a = context.RandomNode();
    const NodeId b = context.RandomNode(a);
    network->Partition(a, b);
    const absl::Time until =
        now + absl::Milliseconds(static_cast<int64_t>(context.Uniform(50, links ? 450 : 1500)));
    holds_until = until;
    later.push_back({until, [this, a, b] { network->Heal(a, b); }});
    Note(absl::StrCat("partition", a, "-", b));
  }
  if (links) {
    return;
  }
  if (context.Chance(0.012)) {
    const NodeId node = context.RandomNode();
    const bool graceful = context.Chance(0.4);
    if (runtime->IsAlive(node)) {
      StopNode(node, graceful);
      later.push_back(
          {runtime->Now() + absl::Milliseconds(static_cast<int64_t>(context.Uniform(50, 1200))),
           [this, node] { RestartNode(node); }});
      Note(absl::StrCat(graceful ? "shutdown" : "kill", node));
    }
  }
  if (joiner != 0 && context.Chance(0.02)) {
    const bool join = !joined;
    joined = join;
    for (NodeId node = 1; node <= n; ++node) {
      if (node == joiner) {
        continue;
      }
      if (join) {
        nameservices[node]->Set(all_members[joiner - 1]);
      } else {
        nameservices[node]->Remove(joiner);
      }
    }
    Note(absl::StrCat(join ? "join" : "leave", joiner));
  }
}

void Scenario::RunDue(bool all) {
  std::stable_sort(later.begin(), later.end(),
                   [](const Later& a, const Later& b) { return a.at < b.at; });
  while (!later.empty() && (all || later.front().at <= runtime->Now())) {
    Later next = std::move(later.front());
    later.erase(later.begin());
    next.action();
  }
}

void Scenario::SampleMemory() {
  for (NodeId node = 1; node <= n; ++node) {
    if (ics[node] == nullptr) {
      continue;
    }
    for (const interconnect::SessionCounters& session : ics[node]->Counters()) {
      peak_held = std::max(peak_held, session.held_bytes);
      if (session.held_bytes > configs[node].max_queued_bytes()) {
        violations.push_back(absl::StrCat(
            "node ", node, " holds ", session.held_bytes, " bytes for node ", session.peer,
            ", above max_queued_bytes ", configs[node].max_queued_bytes()));
      }
    }
  }
}

bool Scenario::Advance(absl::Duration duration) {
  ::testing::AssertionResult advanced = runtime->AdvanceTime(duration, 5'000'000);
  if (!advanced) {
    violations.push_back(absl::StrCat("the runtime did not reach +", absl::FormatDuration(duration),
                                      " (a livelock?)"));
    return false;
  }
  return true;
}

void Scenario::Run() {
  const absl::Time end = runtime->Now() + options.run_time;
  while (runtime->Now() < end && violations.empty()) {
    RunDue(false);
    if (kind != Kind::kCalm) {
      DrawFaults();
    }
    for (const std::unique_ptr<Workload>& workload : workloads) {
      workload->Tick(context);
    }
    SampleMemory();
    if (!Advance(kTick)) {
      return;
    }
  }
  // The calm: no new work, every fault healed, every node up and in every table.
  for (const std::unique_ptr<Workload>& workload : workloads) {
    workload->Quiesce(context);
  }
  RunDue(true);
  network->HealAll();
  for (const interconnect::ConnectionId id : network->ConnectionIds()) {
    network->Resume(id);
  }
  if (joiner != 0 && !joined) {
    for (NodeId node = 1; node < n; ++node) {
      nameservices[node]->Set(all_members[joiner - 1]);
    }
  }
  for (NodeId node = 1; node <= n; ++node) {
    RestartNode(node);
  }
  if (!Advance(options.settle_time)) {
    return;
  }
  for (const std::unique_ptr<Workload>& workload : workloads) {
    workload->Finish(context);
  }
  if (!Advance(options.settle_time)) {
    return;
  }
  for (const std::unique_ptr<Workload>& workload : workloads) {
    workload->Check(context, &violations);
  }
  for (const std::unique_ptr<Workload>& workload : workloads) {
    workload->Teardown(context);
  }
  if (!Advance(absl::Seconds(1))) {
    return;
  }
  CheckCluster();
}

void Scenario::CheckCluster() {
  size_t sessions = 0;
  for (NodeId node = 1; node <= n; ++node) {
    if (!runtime->IsAlive(node) || ics[node] == nullptr) {
      violations.push_back(absl::StrCat("node ", node, " is not running after the calm"));
      continue;
    }
    const std::vector<interconnect::SessionCounters> counters = ics[node]->Counters();
    for (const interconnect::SessionCounters& session : counters) {
      ++sessions;
      if (session.held_bytes != 0 || session.queued_events != 0 || session.unacked_bytes != 0) {
        violations.push_back(absl::StrFormat(
            "node %d still holds %d bytes (%d events queued, %d bytes unacknowledged) for node %d",
            node, session.held_bytes, session.queued_events, session.unacked_bytes, session.peer));
      }
      if (!session.up) {
        violations.push_back(
            absl::StrCat("no session between node ", node, " and node ", session.peer));
      }
    }
    const uint64_t live = runtime->node(node).Counters().live_mailboxes;
    const uint64_t expected = fixed_mailboxes[node] + counters.size();
    if (live != expected) {
      violations.push_back(absl::StrCat("node ", node, " has ", live, " live mailboxes, expected ",
                                        expected, " (the interconnect's own): leaked actors"));
    }
  }
  // The interconnect's own timers: heartbeats, dead-peer checks and bytes on their way.
  const size_t timer_bound = 4 * size_t{sessions} + 2 * size_t{n};
  if (runtime->PendingTimers() > timer_bound) {
    violations.push_back(absl::StrCat(runtime->PendingTimers(), " pending timers, more than the ",
                                      timer_bound, " the interconnect keeps: leaked timers"));
  }
  const int failures = RecordedFailures() - failures_before;
  if (failures > 0) {
    violations.push_back(absl::StrCat(failures, " failure(s) recorded by the test runtime"));
  }
}

ScenarioResult Scenario::Result() {
  ScenarioResult result;
  result.seed = seed;
  result.violations = violations;
  result.steps = runtime->steps();
  result.fingerprint = MixHash(hash, runtime->TraceFingerprint());
  std::vector<std::string> parts;
  constexpr std::array<const char*, 3> kKinds = {"calm", "links", "chaos"};
  parts.push_back(absl::StrFormat("%s nodes=%d latency=%s%s peak_held=%d steps=%d timers=%d",
                                  kKinds[static_cast<int>(kind)], n, absl::FormatDuration(latency),
                                  joiner != 0 ? absl::StrCat(" joiner=", joiner) : "", peak_held,
                                  result.steps, runtime->PendingTimers()));
  parts.push_back(absl::StrCat("faults=[", faults_text, "]"));
  for (const std::unique_ptr<Workload>& workload : workloads) {
    parts.push_back(absl::StrCat(workload->name(), ": ", workload->Summary()));
  }
  result.summary = absl::StrJoin(parts, "\n  ");
  result.replay = absl::StrCat(options.replay_prefix, " --seed=", seed);
  if (!result.ok()) {
    absl::StrAppend(&result.summary, "\n", runtime->Describe(30));
  }
  return result;
}

ScenarioResult RunScenario(uint64_t seed, const ScenarioOptions& options,
                           const WorkloadFactory& workloads) {
  Scenario scenario(seed, options, workloads);
  if (scenario.violations.empty()) {
    scenario.Run();
  }
  return scenario.Result();
}

}  // namespace troupe::testing
