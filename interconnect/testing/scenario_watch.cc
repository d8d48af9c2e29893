// SPDX-License-Identifier: Apache-2.0
//
// The watch workload of the scenario runner (scenario_workloads.h): supervisors whose children
// end, throw (restarted twice, stopped the third time) or live on, and watchers of them across
// nodes; every watch must end in exactly one EvTerminated.
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/supervision.h"
#include "interconnect/testing/scenario_workloads.h"

namespace troupe::testing::scenario_internal {

namespace {

struct ChildRecord {
  ActorId id;
  absl::Time at;
  uint32_t booms = 0;
};

struct WatchRecord {
  NodeId watcher_node = 0;
  ActorId target;
  absl::Time at;
  uint32_t notices = 0;
  TerminationReason reason = TerminationReason::kStopped;
  // The target is a child (index into children), or none (a service nobody registered).
  int64_t child = -1;
};

struct WatchLedger {
  std::vector<ChildRecord> children;
  std::vector<WatchRecord> watches;
  // Watch index by (watcher, target).
  std::map<std::pair<ActorId, ActorId>, size_t> by_pair;
  std::vector<std::string> errors;
  // Supervisors that ended before Finish asked them to, and those that died with their node.
  std::vector<ActorId> ended_early;
  std::set<ActorId> lost_with_node;
  bool finishing = false;
};

struct EvSimSpawn final : EventLocal<EvSimSpawn, kEvSimSpawn> {
  EvSimSpawn(size_t index_value, absl::Duration lifetime_value)
      : index(index_value), lifetime(lifetime_value) {}
  size_t index;
  absl::Duration lifetime;
};

struct EvSimWatch final : EventLocal<EvSimWatch, kEvSimWatch> {
  explicit EvSimWatch(size_t index_value) : index(index_value) {}
  size_t index;
};

// Ends after `lifetime` (never when zero); throws on every EvSimData.
class Child final : public Actor {
 public:
  explicit Child(absl::Duration lifetime) : Actor(&Child::StateWork), lifetime_(lifetime) {}

 private:
  void Bootstrap() override {
    if (lifetime_ > absl::ZeroDuration()) {
      ScheduleWakeup(lifetime_);
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvWakeup:
        PassAway();
        break;
      case kEvSimData:
        throw std::runtime_error("boom (the scenario's watch workload)");
      default:
        Unhandled(ev);
    }
  }

  absl::Duration lifetime_;
};

class Supervisor final : public Actor {
 public:
  explicit Supervisor(WatchLedger* ledger) : Actor(&Supervisor::StateWork), ledger_(ledger) {}
  ~Supervisor() override {
    if (!ledger_->finishing) {
      ledger_->ended_early.push_back(SelfId());
    }
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  Supervisor(Supervisor&&) = delete;
  Supervisor& operator=(Supervisor&&) = delete;

  SupervisorStrategy supervisor_strategy() const override {
    SupervisorStrategy strategy;
    strategy.decide = [this](const ChildFailure& failure) {
      const uint32_t failures = ++failures_[failure.child];
      return failures < 3 ? SupervisorDirective::kRestart : SupervisorDirective::kStop;
    };
    strategy.max_restarts = 1000;
    strategy.min_backoff = absl::Milliseconds(1);
    strategy.max_backoff = absl::Milliseconds(20);
    return strategy;
  }

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvSimSpawn) {
      Unhandled(ev);
      return;
    }
    const EvSimSpawn* spawn = ev->Get<EvSimSpawn>();
    const absl::Duration lifetime = spawn->lifetime;
    ChildRecord& record = ledger_->children[spawn->index];
    record.id = RegisterRestartable([lifetime] { return std::make_unique<Child>(lifetime); });
    record.at = Now();
  }

  WatchLedger* ledger_;
  mutable std::map<ActorId, uint32_t> failures_;
};

class Watcher final : public Actor {
 public:
  explicit Watcher(WatchLedger* ledger) : Actor(&Watcher::StateWork), ledger_(ledger) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvSimWatch: {
        WatchRecord& record = ledger_->watches[ev->Get<EvSimWatch>()->index];
        record.at = Now();
        ledger_->by_pair[{SelfId(), record.target}] = ev->Get<EvSimWatch>()->index;
        Watch(record.target);
        break;
      }
      case kEvTerminated: {
        const EvTerminated* notice = ev->Get<EvTerminated>();
        auto it = ledger_->by_pair.find({SelfId(), notice->target()});
        if (it == ledger_->by_pair.end()) {
          ledger_->errors.push_back(absl::StrCat("EvTerminated for ", notice->target().ToString(),
                                                 ", which ", SelfId().ToString(),
                                                 " never watched"));
          break;
        }
        WatchRecord& record = ledger_->watches[it->second];
        ++record.notices;
        record.reason = notice->reason();
        break;
      }
      default:
        Unhandled(ev);
    }
  }

  WatchLedger* ledger_;
};

class WatchWorkload final : public Workload {
 public:
  std::string name() const override { return "watches"; }

  void OnNodeStart(ScenarioContext& context, NodeId node) override {
    supervisors_.resize(context.nodes() + 1);
    watchers_.resize(context.nodes() + 1);
    if (!supervisors_[node].IsEmpty()) {
      ledger_.lost_with_node.insert(supervisors_[node]);  // the previous incarnation's
    }
    ActorSystem& system = context.rt().node(node);
    supervisors_[node] = system.Register(std::make_unique<Supervisor>(&ledger_));
    watchers_[node] = system.Register(std::make_unique<Watcher>(&ledger_));
  }

  void Tick(ScenarioContext& context) override {
    if (quiet_) {
      return;
    }
    if (context.Chance(0.3)) {
      const NodeId node = context.RandomNode();
      if (context.IsAlive(node)) {
        const absl::Duration lifetime =
            context.Chance(0.3)
                ? absl::ZeroDuration()
                : absl::Milliseconds(static_cast<int64_t>(context.Uniform(20, 1500)));
        ledger_.children.push_back({});
        SendOn(context, node, supervisors_[node],
               std::make_unique<EvSimSpawn>(ledger_.children.size() - 1, lifetime));
      }
    }
    if (context.Chance(0.4)) {
      const NodeId node = context.RandomNode();
      const bool nobody = context.Chance(0.1);
      if (context.IsAlive(node) && (nobody || !ledger_.children.empty())) {
        WatchRecord record;
        record.watcher_node = node;
        if (nobody) {
          record.target = ServiceId("sim-nobody", context.RandomNode());
        } else {
          record.child = static_cast<int64_t>(context.Uniform(0, ledger_.children.size() - 1));
          record.target = ledger_.children[record.child].id;
        }
        if (!record.target.IsEmpty() && watched_[node].insert(record.target).second) {
          ledger_.watches.push_back(record);
          SendOn(context, node, watchers_[node],
                 std::make_unique<EvSimWatch>(ledger_.watches.size() - 1));
        }
      }
    }
    if (context.Chance(0.3) && !ledger_.children.empty()) {
      ChildRecord& child = ledger_.children[context.Uniform(0, ledger_.children.size() - 1)];
      if (!child.id.IsEmpty() && context.IsAlive(child.id.node_id())) {
        ++child.booms;
        SendOn(context, child.id.node_id(), child.id, std::make_unique<EvSimData>());
      }
    }
  }

  void Quiesce(ScenarioContext& /*context*/) override { quiet_ = true; }

  void Finish(ScenarioContext& context) override {
    ledger_.finishing = true;
    for (NodeId node = 1; node < supervisors_.size(); ++node) {
      SendOn(context, node, supervisors_[node], std::make_unique<EvPoison>());
    }
  }

  void Teardown(ScenarioContext& context) override {
    for (NodeId node = 1; node < watchers_.size(); ++node) {
      SendOn(context, node, watchers_[node], std::make_unique<EvPoison>());
    }
  }

  void Check(ScenarioContext& context, std::vector<std::string>* violations) override {
    for (const std::string& error : ledger_.errors) {
      violations->push_back("watches: " + error);
    }
    for (const ActorId& supervisor : ledger_.ended_early) {
      if (!ledger_.lost_with_node.contains(supervisor)) {
        violations->push_back(absl::StrCat("watches: supervisor ", supervisor.ToString(),
                                           " ended before the scenario finished"));
      }
    }
    for (size_t i = 0; i < ledger_.watches.size(); ++i) {
      const WatchRecord& r = ledger_.watches[i];
      context.Mix((uint64_t{r.notices} << 32) | static_cast<uint64_t>(r.reason));
      const std::string what = absl::StrFormat("watches: watch #%d of %s from node %d", i,
                                               r.target.ToString(), r.watcher_node);
      if (r.notices > 1) {
        violations->push_back(absl::StrCat(what, ": ", r.notices, " EvTerminated"));
      }
      if (r.at == absl::Time() || r.at <= context.LastStop(r.watcher_node)) {
        continue;  // the watcher's node died (the watcher with it)
      }
      if (r.notices == 0) {
        violations->push_back(absl::StrCat(what, ": no EvTerminated"));
        continue;
      }
      if (r.reason == TerminationReason::kNodeLost && context.LossFree()) {
        violations->push_back(absl::StrCat(what, ": node-lost, though no session ended"));
      }
      if (r.reason == TerminationReason::kFailed &&
          (r.child < 0 || ledger_.children[r.child].booms < 3)) {
        violations->push_back(absl::StrCat(what, ": failed after fewer than three throws"));
      }
    }
  }

  std::string Summary() const override {
    std::map<TerminationReason, uint64_t> reasons;
    for (const WatchRecord& r : ledger_.watches) {
      if (r.notices > 0) {
        ++reasons[r.reason];
      }
    }
    std::string out =
        absl::StrCat("children=", ledger_.children.size(), " watches=", ledger_.watches.size());
    for (const auto& [reason, count] : reasons) {
      absl::StrAppend(&out, " ", TerminationReasonName(reason), "=", count);
    }
    return out;
  }

 private:
  static void SendOn(ScenarioContext& context, NodeId node, const ActorId& to,
                     std::unique_ptr<EventBase> event) {
    context.rt().Send(std::make_unique<EventHandle>(to, ActorId(), std::move(event)), node);
  }

  WatchLedger ledger_;
  std::vector<ActorId> supervisors_;
  std::vector<ActorId> watchers_;
  std::map<NodeId, std::set<ActorId>> watched_;
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Workload> MakeWatchWorkload() { return std::make_unique<WatchWorkload>(); }

}  // namespace troupe::testing::scenario_internal
