// SPDX-License-Identifier: Apache-2.0
//
// The scenario runner (interconnect/testing/scenario.h): a seed replays to the same trace, a
// workload of one's own plugs in and its broken invariant fails the scenario with a replay line,
// and seeds that once found bugs (regression tests named after their seed).
#include "interconnect/testing/scenario.h"

#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"

namespace troupe::testing {
namespace {

std::string Describe(const ScenarioResult& result) {
  std::string out = absl::StrCat("replay: ", result.replay, "\n  ", result.summary);
  for (const std::string& violation : result.violations) {
    absl::StrAppend(&out, "\n  violation: ", violation);
  }
  return out;
}

TEST(ScenarioTest, ASeedReplaysToTheSameTrace) {
  for (const uint64_t seed : {3u, 4u}) {
    const ScenarioResult first = RunScenario(seed);
    const ScenarioResult second = RunScenario(seed);
    EXPECT_TRUE(first.ok()) << Describe(first);
    EXPECT_EQ(first.fingerprint, second.fingerprint) << seed;
    EXPECT_EQ(first.steps, second.steps) << seed;
    EXPECT_EQ(first.summary, second.summary);
    EXPECT_GT(first.steps, 1000u);
  }
  EXPECT_NE(RunScenario(5).fingerprint, RunScenario(6).fingerprint);
}

// A replay reads nothing the runtime has freed: with freed memory scribbled over (glibc's
// M_PERTURB), every seed gives the trace it gives without. Seed 4568 once failed one ctest run in
// sixty: a PipeNetwork connection's address was read after the map holding it had rehashed, and
// what the freed block held by then decided whether node 2 and node 5 ever had a session again.
// (Under ASan and TSan mallopt does nothing; their allocators report such a read themselves.)
TEST(ScenarioTest, AReplayDoesNotDependOnWhatFreedMemoryHolds) {
  for (const uint64_t seed : {4568u, 3u, 733u}) {
    const ScenarioResult plain = RunScenario(seed);
    mallopt(M_PERTURB, 0xa5);
    const ScenarioResult scribbled = RunScenario(seed);
    mallopt(M_PERTURB, 0);
    EXPECT_TRUE(plain.ok()) << Describe(plain);
    EXPECT_TRUE(scribbled.ok()) << Describe(scribbled);
    EXPECT_EQ(plain.fingerprint, scribbled.fingerprint) << seed;
    EXPECT_EQ(plain.steps, scribbled.steps) << seed;
  }
}

// A workload of one's own: a counter service on every node, pinged from the test; its invariant
// ("every ping of a node that never stopped is counted") is checked at the end.
class CounterWorkload final : public Workload {
 public:
  explicit CounterWorkload(bool lie) : lie_(lie) {}
  std::string name() const override { return "counter"; }
  void OnNodeStart(ScenarioContext& context, NodeId node) override {
    counters_.resize(context.nodes() + 1);
    counters_[node] = context.rt().node(node).Register(std::make_unique<Counter>(&counted_));
  }
  void Tick(ScenarioContext& context) override {
    const NodeId node = context.RandomNode();
    if (context.IsAlive(node)) {
      context.rt().Send(
          std::make_unique<EventHandle>(counters_[node], ActorId(), std::make_unique<EvWakeup>()),
          node);
      ++sent_;
    }
  }
  void Finish(ScenarioContext& context) override {
    for (NodeId node = 1; node < counters_.size(); ++node) {
      context.rt().Send(
          std::make_unique<EventHandle>(counters_[node], ActorId(), std::make_unique<EvPoison>()),
          node);
    }
  }
  void Check(ScenarioContext& context, std::vector<std::string>* violations) override {
    context.Mix(counted_);
    if (lie_ && counted_ != sent_ + 1) {
      violations->push_back(absl::StrCat("counted ", counted_, " of ", sent_ + 1));
    }
    if (counted_ > sent_) {
      violations->push_back(absl::StrCat("counted ", counted_, ", more than the ", sent_, " sent"));
    }
  }
  std::string Summary() const override { return absl::StrCat("sent=", sent_); }

 private:
  class Counter final : public Actor {
   public:
    explicit Counter(uint64_t* counted) : Actor(&Counter::StateWork), counted_(counted) {}

   private:
    TROUPE_STATE(StateWork) {
      if (ev->type() == kEvWakeup) {
        ++*counted_;
      } else {
        Unhandled(ev);
      }
    }
    uint64_t* counted_;
  };

  bool lie_;
  std::vector<ActorId> counters_;
  uint64_t sent_ = 0;
  uint64_t counted_ = 0;
};

TEST(ScenarioTest, AWorkloadOfOnesOwnPlugsIn) {
  ScenarioOptions options;
  options.node_faults = false;
  const ScenarioResult ok = RunScenario(7, options, [] {
    std::vector<std::unique_ptr<Workload>> workloads;
    workloads.push_back(std::make_unique<CounterWorkload>(false));
    return workloads;
  });
  EXPECT_TRUE(ok.ok()) << Describe(ok);
  EXPECT_NE(ok.summary.find("counter: sent="), std::string::npos) << ok.summary;

  options.replay_prefix = "my_sim";
  const ScenarioResult broken = RunScenario(7, options, [] {
    std::vector<std::unique_ptr<Workload>> workloads;
    workloads.push_back(std::make_unique<CounterWorkload>(true));
    return workloads;
  });
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.violations.front().find("counted"), std::string::npos);
  EXPECT_EQ(broken.replay, "my_sim --seed=7");
}

// -- seeds that found bugs ----------------------------------------------------------------------
//
// Each replays with `troupe_sim --seed=N`. Seeds 567, 1055, 4568 and 6459: a node left the others'
// membership while one of them was dialling it and came back after that dial's handshake ended;
// the dialler closed the connection but still counted the dial as in progress, so it never
// dialled again and no session came back (see also MembershipTest).

TEST(ScenarioRegressionTest, Seed567) {
  const ScenarioResult result = RunScenario(567);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

TEST(ScenarioRegressionTest, Seed1055) {
  const ScenarioResult result = RunScenario(1055);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

TEST(ScenarioRegressionTest, Seed4568) {
  const ScenarioResult result = RunScenario(4568);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

TEST(ScenarioRegressionTest, Seed6459) {
  const ScenarioResult result = RunScenario(6459);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

// Seeds 733 and 750: a peer's byte budget was spent when a watched actor ended (or a watch was
// asked for); the router refused the EvTerminated (or the EvWatch) with kOverloaded like a user
// event, so the watcher heard nothing (or kNodeLost though no session ended). The runtime's
// control events now pass the budget (interconnect/internal/router.h).

TEST(ScenarioRegressionTest, Seed733) {
  const ScenarioResult result = RunScenario(733);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

TEST(ScenarioRegressionTest, Seed750) {
  const ScenarioResult result = RunScenario(750);
  EXPECT_TRUE(result.ok()) << Describe(result);
}

}  // namespace
}  // namespace troupe::testing
