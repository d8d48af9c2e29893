// SPDX-License-Identifier: Apache-2.0
//
// Supervision (actors/supervision.h) on TestRuntime, in simulated time: each directive (resume,
// restart, stop, escalate), the default strategy, one-for-one and all-for-one, restart limits and
// exponential backoff, a restart keeping the id and the queued events, a failing Bootstrap,
// escalation to a top-level actor, post-order ends of a parent's tree, and a parent whose children
// come and go.
#include "actors/supervision.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testutil::EvKick;
using testutil::EvValue;
using testutil::kEvKick;
using testutil::kEvValue;

using Journal = std::vector<std::string>;

// Journals its start (with the simulated time since `epoch`), each EvValue with how many this
// instance has handled, and its end. EvValue{0} throws; so does Bootstrap when `fail_starts` > 0
// (counting down).
class Worker final : public Actor {
 public:
  Worker(std::string name, Journal* journal, absl::Time epoch, int* fail_starts = nullptr)
      : Actor(&Worker::StateWork),
        name_(std::move(name)),
        journal_(journal),
        epoch_(epoch),
        fail_starts_(fail_starts) {}
  ~Worker() override { journal_->push_back("end " + name_); }

 private:
  void Bootstrap() override {
    journal_->push_back(
        absl::StrCat("start ", name_, " at ", absl::FormatDuration(Now() - epoch_)));
    if (fail_starts_ != nullptr && *fail_starts_ > 0) {
      --*fail_starts_;
      throw std::runtime_error("bootstrap fails on purpose");
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvValue: {
        const uint64_t value = ev->Get<EvValue>()->value;
        if (value == 0) {
          throw std::runtime_error("worker fails on purpose");
        }
        journal_->push_back(absl::StrCat(name_, " got ", value, " (", ++handled_, ")"));
        break;
      }
      default:
        Unhandled(ev);
    }
  }

  std::string name_;
  Journal* journal_;
  absl::Time epoch_;
  int* fail_starts_;
  int handled_ = 0;
};

// Supervises workers "a" and "b" (restartable unless `plain`), and "c" under "b" when `deep`.
// EvKick ends it. Its own start and end are journaled as "start sup"/"end sup".
class Supervisor final : public Actor {
 public:
  struct Options {
    SupervisorStrategy strategy;
    bool plain = false;
    bool deep = false;
    int* fail_starts = nullptr;
  };
  Supervisor(Options options, Journal* journal, absl::Time epoch, std::vector<ActorId>* children)
      : Actor(&Supervisor::StateWork),
        options_(std::move(options)),
        journal_(journal),
        epoch_(epoch),
        children_(children) {}
  ~Supervisor() override { journal_->push_back("end sup"); }

  SupervisorStrategy supervisor_strategy() const override { return options_.strategy; }

 private:
  void Bootstrap() override {
    journal_->push_back("start sup");
    for (const char* name : {"a", "b"}) {
      if (options_.plain) {
        children_->push_back(
            Register(std::make_unique<Worker>(name, journal_, epoch_, options_.fail_starts)));
      } else if (options_.deep && std::string(name) == "b") {
        children_->push_back(RegisterRestartable(
            [this] { return std::make_unique<Middle>(journal_, epoch_, children_); }));
      } else {
        children_->push_back(RegisterRestartable([this, name] {
          return std::make_unique<Worker>(name, journal_, epoch_, options_.fail_starts);
        }));
      }
    }
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvKick) {
      PassAway();
    } else {
      Unhandled(ev);
    }
  }

  // "b" of a deep tree: supervises "c".
  class Middle final : public Actor {
   public:
    Middle(Journal* journal, absl::Time epoch, std::vector<ActorId>* children)
        : Actor(&Middle::StateWork), journal_(journal), epoch_(epoch), children_(children) {}
    ~Middle() override { journal_->push_back("end b"); }

   private:
    void Bootstrap() override {
      children_->push_back(Register(std::make_unique<Worker>("c", journal_, epoch_)));
    }
    TROUPE_STATE(StateWork) { Unhandled(ev); }
    Journal* journal_;
    absl::Time epoch_;
    std::vector<ActorId>* children_;
  };

  Options options_;
  Journal* journal_;
  absl::Time epoch_;
  std::vector<ActorId>* children_;
};

struct Tree {
  explicit Tree(Supervisor::Options options) {
    supervisor = runtime.Register(
        std::make_unique<Supervisor>(std::move(options), &journal, epoch, &children));
    EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
    journal.clear();
  }
  void Value(size_t child, uint64_t value) {
    runtime.Send(children[child], std::make_unique<EvValue>(value));
  }
  DispatchResult Run() { return runtime.DispatchEvents(); }

  // Before the runtime: the actors it destroys last write to them.
  Journal journal;
  std::vector<ActorId> children;
  TestRuntime runtime{{.config = testutil::SmallConfig()}};
  absl::Time epoch = runtime.node().Now();
  ActorId supervisor;
};

SupervisorStrategy Deciding(SupervisorDirective directive) {
  SupervisorStrategy strategy;
  strategy.decide = [directive](const ChildFailure&) { return directive; };
  strategy.min_backoff = absl::ZeroDuration();
  return strategy;
}

TEST(SupervisionTest, ByDefaultAChildWithAFactoryIsRestartedKeepingItsIdAndQueue) {
  Tree tree({});
  tree.Value(0, 1);
  tree.Value(0, 0);  // fails: dropped
  tree.Value(0, 2);  // queued behind the failure: handled by the new instance
  tree.Value(0, 3);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal,
            (Journal{"a got 1 (1)", "end a", "start a at 1ms", "a got 2 (1)", "a got 3 (2)"}))
      << "the default backoff is 1 ms";
  // Same id: a later send reaches the new instance.
  tree.Value(0, 4);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal.back(), "a got 4 (3)");
}

TEST(SupervisionTest, ByDefaultAChildWithoutAFactoryIsStopped) {
  Tree tree({.strategy = {}, .plain = true});
  tree.Value(0, 0);
  tree.Value(0, 5);  // held, then reported undelivered when the child ends
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal, (Journal{"end a"}));
  tree.Value(1, 1);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal.back(), "b got 1 (1)");  // the sibling is untouched
  EXPECT_EQ(tree.runtime.node().Counters().failed_actors, 1u);
}

TEST(SupervisionTest, ResumeKeepsTheInstanceAndItsState) {
  Tree tree({.strategy = Deciding(SupervisorDirective::kResume)});
  tree.Value(0, 1);
  tree.Value(0, 0);
  tree.Value(0, 2);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal, (Journal{"a got 1 (1)", "a got 2 (2)"}));
}

TEST(SupervisionTest, StopEndsTheFailedChildOnly) {
  Tree tree({.strategy = Deciding(SupervisorDirective::kStop)});
  tree.Value(0, 0);
  tree.Value(1, 1);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  std::sort(tree.journal.begin(), tree.journal.end());  // a and b run in either order
  EXPECT_EQ(tree.journal, (Journal{"b got 1 (1)", "end a"}));
}

TEST(SupervisionTest, AllForOneRestartsEverySibling) {
  SupervisorStrategy strategy = Deciding(SupervisorDirective::kRestart);
  strategy.scope = SupervisorStrategy::Scope::kAllForOne;
  Tree tree({.strategy = strategy});
  tree.Value(1, 1);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  tree.Value(0, 0);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  tree.Value(1, 2);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  // b's count starts again: it is a new instance too.
  EXPECT_EQ(tree.journal.back(), "b got 2 (1)");
  EXPECT_EQ(std::count(tree.journal.begin(), tree.journal.end(), "end b"), 1);
  EXPECT_EQ(std::count(tree.journal.begin(), tree.journal.end(), "end a"), 1);
}

TEST(SupervisionTest, RestartsBackOffExponentiallyAndPastTheLimitTheChildStopsAndTheParentFails) {
  SupervisorStrategy strategy;
  strategy.max_restarts = 3;
  strategy.within = absl::Minutes(1);
  strategy.min_backoff = absl::Milliseconds(100);
  Tree tree({.strategy = strategy});
  for (int i = 0; i < 4; ++i) {
    tree.Value(0, 0);
    ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  }
  // 100 ms, then 200 ms, then 400 ms after each failure; the fourth failure is one too many: the
  // child is stopped and the failure escalates to the top-level supervisor, which ends after its
  // children (post-order).
  ASSERT_GE(tree.journal.size(), 6u);
  EXPECT_EQ(tree.journal[0], "end a");
  EXPECT_EQ(tree.journal[1], "start a at 100ms");
  EXPECT_EQ(tree.journal[3], "start a at 300ms");
  EXPECT_EQ(tree.journal[5], "start a at 700ms");
  EXPECT_EQ(tree.journal.back(), "end sup");
  EXPECT_NE(std::find(tree.journal.begin(), tree.journal.end(), "end b"), tree.journal.end());
  EXPECT_EQ(tree.runtime.node().Counters().failed_actors, 5u);  // four children, one supervisor
}

TEST(SupervisionTest, EscalateFailsTheParentWhichEndsAfterItsChildren) {
  Tree tree({.strategy = Deciding(SupervisorDirective::kEscalate)});
  tree.Value(0, 0);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  ASSERT_EQ(tree.journal.size(), 3u);
  EXPECT_EQ(tree.journal.back(), "end sup");
}

TEST(SupervisionTest, AFailingBootstrapIsRestartedLikeAHandler) {
  int fail_starts = 0;
  Tree tree({.strategy = {}, .fail_starts = &fail_starts});
  fail_starts = 2;
  tree.Value(0, 0);  // fails; the next two starts fail too
  tree.Value(0, 7);
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(tree.journal.back(), "a got 7 (1)");
  EXPECT_EQ(std::count(tree.journal.begin(), tree.journal.end(), "end a"), 3);
}

TEST(SupervisionTest, AParentThatEndsEndsItsWholeTreeFirstInPostOrder) {
  Tree tree({.strategy = {}, .deep = true});
  ASSERT_EQ(tree.children.size(), 3u);  // a, b, then c under b
  tree.runtime.Send(tree.supervisor, std::make_unique<EvKick>());
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  ASSERT_EQ(tree.journal.size(), 4u);
  // c ends before b, and everything before the supervisor.
  const auto at = [&](const std::string& line) {
    return std::find(tree.journal.begin(), tree.journal.end(), line) - tree.journal.begin();
  };
  EXPECT_LT(at("end c"), at("end b"));
  EXPECT_EQ(tree.journal.back(), "end sup");
  // Nothing of the tree is left.
  EXPECT_EQ(tree.runtime.node().Counters().live_mailboxes, 0u);
}

// A parent that spawns children in rounds, most of which end at once: the ended ones leave empty
// slots in its list of children that later spawns compact. A restart after compaction replaces the
// right child, and the parent's end still stops every live child first.
TEST(SupervisionTest, ChildrenThatComeAndGoLeaveNoTraceInTheParentsList) {
  Tree tree({});
  // Ends as soon as it starts.
  class Blink final : public Actor {
   public:
    Blink() : Actor(&Blink::StateWork) {}

   private:
    void Bootstrap() override { PassAway(); }
    TROUPE_STATE(StateWork) { Unhandled(ev); }
  };
  // Each EvValue{n} spawns n blinks around one restartable keeper "k<round>"; EvKick ends it.
  class Churner final : public Actor {
   public:
    Churner(Journal* journal, std::vector<ActorId>* keepers)
        : Actor(&Churner::StateWork), journal_(journal), keepers_(keepers) {}
    ~Churner() override { journal_->push_back("end churner"); }

   private:
    TROUPE_STATE(StateWork) {
      switch (ev->type()) {
        case kEvValue: {
          const uint64_t blinks = ev->Get<EvValue>()->value;
          for (uint64_t i = 0; i < blinks / 2; ++i) {
            Register(std::make_unique<Blink>());
          }
          const std::string name = absl::StrCat("k", keepers_->size());
          keepers_->push_back(RegisterRestartable([this, name] {
            return std::make_unique<Worker>(name, journal_, absl::UnixEpoch());
          }));
          for (uint64_t i = blinks / 2; i < blinks; ++i) {
            Register(std::make_unique<Blink>());
          }
          break;
        }
        case kEvKick:
          PassAway();
          break;
        default:
          Unhandled(ev);
      }
    }
    Journal* journal_;
    std::vector<ActorId>* keepers_;
  };

  std::vector<ActorId> keepers;
  const ActorId churner = tree.runtime.Register(std::make_unique<Churner>(&tree.journal, &keepers));
  constexpr int kRounds = 30;
  for (int round = 0; round < kRounds; ++round) {
    tree.runtime.Send(churner, std::make_unique<EvValue>(9 + round % 7));
    ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  }
  ASSERT_EQ(keepers.size(), static_cast<size_t>(kRounds));
  // Only the churner, its keepers and the tree of Tree are left.
  EXPECT_EQ(tree.runtime.node().Counters().live_mailboxes, 1u + kRounds + 3u);

  // A keeper spawned early (its slot moved by compaction) and a late one fail and are restarted
  // in place: same id, a new instance that counts from 1.
  for (const size_t k : {size_t{1}, size_t{kRounds - 2}}) {
    tree.runtime.Send(keepers[k], std::make_unique<EvValue>(0));
    tree.runtime.Send(keepers[k], std::make_unique<EvValue>(5));
    ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
    EXPECT_EQ(tree.journal.back(), absl::StrCat("k", k, " got 5 (1)"));
  }

  tree.journal.clear();
  tree.runtime.Send(churner, std::make_unique<EvKick>());
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  // Every keeper ended, each once, and before its parent.
  ASSERT_EQ(tree.journal.size(), static_cast<size_t>(kRounds) + 1);
  EXPECT_EQ(tree.journal.back(), "end churner");
  for (int k = 0; k < kRounds; ++k) {
    EXPECT_EQ(std::count(tree.journal.begin(), tree.journal.end(), absl::StrCat("end k", k)), 1)
        << "keeper " << k;
  }
  EXPECT_EQ(tree.runtime.node().Counters().live_mailboxes, 3u);
}

TEST(SupervisionTest, DetachedActorsAreNotChildren) {
  Tree tree({});
  class Spawner final : public Actor {
   public:
    explicit Spawner(Journal* journal) : Actor(&Spawner::StateWork), journal_(journal) {}

   private:
    void Bootstrap() override {
      RegisterOptions options;
      options.detached = true;
      Register(std::make_unique<Worker>("free", journal_, absl::UnixEpoch()), options);
      PassAway();
    }
    TROUPE_STATE(StateWork) { Unhandled(ev); }
    Journal* journal_;
  };
  tree.runtime.Register(std::make_unique<Spawner>(&tree.journal));
  ASSERT_EQ(tree.Run(), DispatchResult::kIdle);
  EXPECT_EQ(std::count(tree.journal.begin(), tree.journal.end(), "end free"), 0);
}

}  // namespace
}  // namespace troupe
