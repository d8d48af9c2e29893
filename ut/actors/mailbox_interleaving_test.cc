// SPDX-License-Identifier: Apache-2.0
//
// The activation protocol through adversarial interleavings, deterministically.
//
// 1. A stateless model checker drives the real internal::Mailbox of every kind through its steps
//    (a writer's PushEvent and ActivateAfterPush; a reader's Pop, BeginIdle + StoreIdle, and
//    FinishIdle), one step at a time on one thread, over every interleaving of small scenarios
//    (and over seeded random interleavings of larger ones). Each step's outcome is checked against
//    the protocol: an ActivateAfterPush that wins while someone owns the mailbox is a double
//    activation; a run that ends with events queued in an idle mailbox lost a wake-up; every event
//    is popped once, in order per writer.
// 2. The deterministic test runtime runs actors on every kind in seeded random orders: senders
//    that send, forward and spawn, checking order per sender and that nothing is lost.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/event.h"
#include "actors/internal/mailbox.h"
#include "actors/mailbox_kind.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using internal::Mailbox;

constexpr MailboxKind kInterleavedKinds[] = {MailboxKind::kLockFree, MailboxKind::kSimple,
                                             MailboxKind::kRevolving, MailboxKind::kHTSwap,
                                             MailboxKind::kPriority};

std::string KindName(const ::testing::TestParamInfo<MailboxKind>& info) {
  return std::string(MailboxKindName(info.param));
}

// -- 1. the model checker ---------------------------------------------------------------------

// Chooses among the enabled steps: replays a prefix, then takes the first option, recording how
// many there were so that Advance can move to the next schedule (depth-first, every schedule once).
// With a generator instead, it picks at random.
class Chooser {
 public:
  explicit Chooser(std::mt19937_64* random = nullptr) : random_(random) {}

  uint32_t Choose(uint32_t options) {
    if (random_ != nullptr) {
      const auto pick = static_cast<uint32_t>((*random_)() % options);
      trace_.push_back(pick);
      return pick;
    }
    if (position_ < schedule_.size()) {
      return schedule_[position_++];
    }
    schedule_.push_back(0);
    options_.push_back(options);
    ++position_;
    return 0;
  }

  // Moves to the next schedule; false when every schedule was played.
  bool Advance() {
    position_ = 0;
    while (!schedule_.empty()) {
      if (schedule_.back() + 1 < options_.back()) {
        ++schedule_.back();
        return true;
      }
      schedule_.pop_back();
      options_.pop_back();
    }
    return false;
  }

  // The choices of the current run, for failure messages.
  std::string Trace() const { return absl::StrJoin(random_ != nullptr ? trace_ : schedule_, ","); }

 private:
  std::mt19937_64* random_;
  // Depth-first mode: the choices of the current run and how many options each had.
  std::vector<uint32_t> schedule_;
  std::vector<uint32_t> options_;
  // Random mode: the choices made.
  std::vector<uint32_t> trace_;
  size_t position_ = 0;
};

struct Scenario {
  int writers = 2;
  int pushes = 2;
};

// Plays one interleaving of `scenario` on a fresh mailbox of `kind`; returns "" or what went
// wrong.
std::string PlayOnce(MailboxKind kind, const Scenario& scenario, Chooser& chooser) {
  Mailbox mailbox;
  mailbox.InitKind(kind);

  struct Writer {
    int pushed = 0;
    bool activating = false;  // published, ActivateAfterPush not yet called
  };
  enum class Phase { kPop, kIdle, kFinish };
  struct Reader {
    Phase phase = Phase::kPop;
    uint64_t token = 0;
  };
  std::vector<Writer> writers(static_cast<size_t>(scenario.writers));
  std::vector<Reader> readers;
  // True while some reader holds the mailbox (between an activation and its StoreIdle).
  bool owned = false;
  std::vector<int> next_seq(writers.size(), 0);
  int popped = 0;
  std::string error;

  auto fail = [&](const std::string& what) {
    if (error.empty()) {
      error = what;
    }
  };

  while (error.empty()) {
    // Enabled steps: every unfinished writer, then every reader.
    std::vector<int> enabled_writers;
    for (size_t w = 0; w < writers.size(); ++w) {
      if (writers[w].pushed < scenario.pushes || writers[w].activating) {
        enabled_writers.push_back(static_cast<int>(w));
      }
    }
    const size_t options = enabled_writers.size() + readers.size();
    if (options == 0) {
      break;
    }
    const uint32_t pick = chooser.Choose(static_cast<uint32_t>(options));
    if (pick < enabled_writers.size()) {
      const auto w = static_cast<size_t>(enabled_writers[pick]);
      Writer& writer = writers[w];
      if (!writer.activating) {
        const uint64_t cookie = (w << 32) | static_cast<uint64_t>(writer.pushed);
        mailbox.PushEvent(new EventHandle(testutil::kEvValue, ActorId(), ActorId(1, 0, 100 + w, 1),
                                          kNoFlags, cookie));
        ++writer.pushed;
        writer.activating = true;
      } else {
        writer.activating = false;
        if (mailbox.ActivateAfterPush()) {
          if (owned) {
            fail(absl::StrCat("writer ", w, " activated a mailbox another reader holds"));
          }
          owned = true;
          readers.push_back(Reader{});
        }
      }
      continue;
    }
    const size_t r = pick - enabled_writers.size();
    Reader& reader = readers[r];
    switch (reader.phase) {
      case Phase::kPop: {
        std::unique_ptr<EventHandle> ev(mailbox.Pop());
        if (ev == nullptr) {
          reader.phase = Phase::kIdle;
          break;
        }
        const uint64_t w = ev->cookie() >> 32;
        const auto seq = static_cast<int>(ev->cookie() & 0xFFFFFFFF);
        if (w >= next_seq.size() || seq != next_seq[w]) {
          fail(absl::StrCat("popped writer ", w, " event ", seq, " out of order"));
        } else {
          ++next_seq[w];
        }
        ++popped;
        break;
      }
      case Phase::kIdle:
        reader.token = mailbox.BeginIdle();
        mailbox.StoreIdle();
        owned = false;
        reader.phase = Phase::kFinish;
        break;
      case Phase::kFinish:
        if (mailbox.FinishIdle(reader.token)) {
          readers.erase(readers.begin() + static_cast<std::ptrdiff_t>(r));
        } else {
          if (owned) {
            fail("a reader took back a mailbox a writer had activated");
          }
          owned = true;
          reader.phase = Phase::kPop;
        }
        break;
    }
  }
  const int total = scenario.writers * scenario.pushes;
  if (error.empty() && popped != total) {
    fail(absl::StrCat("popped ", popped, " of ", total, " events: a wake-up was lost"));
  }
  if (error.empty() && !(mailbox.IsIdle() && mailbox.IsEmpty())) {
    fail("the mailbox did not end idle and empty");
  }
  while (EventHandle* ev = mailbox.Pop()) {
    delete ev;
  }
  return error;
}

class ActivationInterleavingTest : public ::testing::TestWithParam<MailboxKind> {};

INSTANTIATE_TEST_SUITE_P(AllKinds, ActivationInterleavingTest,
                         ::testing::ValuesIn(kInterleavedKinds), KindName);

// Plays every interleaving of `scenario`; returns how many there were (0 after a failure).
uint64_t ExploreAll(MailboxKind kind, const Scenario& scenario) {
  Chooser chooser;
  uint64_t runs = 0;
  do {
    ++runs;
    const std::string error = PlayOnce(kind, scenario, chooser);
    if (!error.empty()) {
      ADD_FAILURE() << MailboxKindName(kind) << ", " << scenario.writers << " writers x "
                    << scenario.pushes << " pushes, schedule [" << chooser.Trace()
                    << "]: " << error;
      return 0;
    }
  } while (chooser.Advance());
  return runs;
}

TEST_P(ActivationInterleavingTest, EveryInterleavingOfSmallScenarios) {
  // Each scenario is explored completely; the counts show how many schedules that was.
  const Scenario scenarios[] = {{1, 3}, {2, 1}, {3, 1}};
  for (const Scenario& scenario : scenarios) {
    const uint64_t runs = ExploreAll(GetParam(), scenario);
    ASSERT_GT(runs, 0u);
    RecordProperty(absl::StrCat("schedules_", scenario.writers, "x", scenario.pushes),
                   static_cast<int>(runs));
  }
}

TEST_P(ActivationInterleavingTest, SeededRandomInterleavingsOfLargerScenarios) {
  const int runs = static_cast<int>(testutil::Scaled(20'000, 2'000));
  for (const Scenario& scenario : {Scenario{3, 6}, Scenario{6, 3}}) {
    for (int run = 0; run < runs; ++run) {
      std::mt19937_64 random(static_cast<uint64_t>(run) * 7919 + 17);
      Chooser chooser(&random);
      const std::string error = PlayOnce(GetParam(), scenario, chooser);
      ASSERT_TRUE(error.empty()) << MailboxKindName(GetParam()) << ", " << scenario.writers
                                 << " writers x " << scenario.pushes << " pushes, run " << run
                                 << ", choices [" << chooser.Trace() << "]: " << error;
    }
  }
}

// -- 2. the deterministic test runtime ----------------------------------------------------------

// Records, per sender, the EvValue numbers it gets; counts them.
class InterleavingChecker : public Actor {
 public:
  InterleavingChecker(int64_t* received, int64_t* errors)
      : Actor(&InterleavingChecker::StateWork), received_(received), errors_(errors) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(testutil::EvValue, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<testutil::EvValue> ev) {
    const ActorId sender = ev->sender();
    int64_t& next = next_[sender.local_id()];
    if (static_cast<int64_t>(ev.Get()->value) != next) {
      ++*errors_;
    }
    next = static_cast<int64_t>(ev.Get()->value) + 1;
    ++*received_;
  }

  int64_t* received_;
  int64_t* errors_;
  absl::flat_hash_map<uint64_t, int64_t> next_;
};

// On each kick sends a burst of numbered values to the checker, then kicks itself again until it
// has sent `total`; the bursts of several senders interleave as the runtime's seed decides.
class BurstSender : public Actor {
 public:
  BurstSender(ActorId target, int64_t total, uint64_t burst_seed)
      : Actor(&BurstSender::StateWork), target_(target), total_(total), burst_(burst_seed) {}

 private:
  void Bootstrap() override { Send(SelfId(), std::make_unique<testutil::EvKick>()); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != testutil::kEvKick) {
      Unhandled(ev);
      return;
    }
    burst_ = burst_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const int64_t burst = 1 + static_cast<int64_t>((burst_ >> 33) % 9);
    for (int64_t i = 0; i < burst && sent_ < total_; ++i) {
      Send(target_, std::make_unique<testutil::EvValue>(static_cast<uint64_t>(sent_++)));
    }
    if (sent_ < total_) {
      Send(SelfId(), std::make_unique<testutil::EvKick>());
    }
  }

  const ActorId target_;
  const int64_t total_;
  uint64_t burst_;
  int64_t sent_ = 0;
};

class MailboxKindSimulationTest : public ::testing::TestWithParam<MailboxKind> {};

INSTANTIATE_TEST_SUITE_P(AllKinds, MailboxKindSimulationTest,
                         ::testing::ValuesIn(kInterleavedKinds), KindName);

TEST_P(MailboxKindSimulationTest, SendersInterleaveWithoutLossOrReorderingUnderManySeeds) {
  constexpr int kSenders = 5;
  constexpr int64_t kPerSender = 300;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    testing::TestRuntimeOptions options;
    options.seed = seed;
    testing::TestRuntime runtime(options);
    int64_t received = 0;
    int64_t errors = 0;
    RegisterOptions kind;
    kind.mailbox = GetParam();
    const ActorId checker =
        runtime.Register(std::make_unique<InterleavingChecker>(&received, &errors), 1, kind);
    for (int s = 0; s < kSenders; ++s) {
      // The senders use the kind under test too, so its activation runs on both sides.
      runtime.Register(
          std::make_unique<BurstSender>(checker, kPerSender, seed * 31 + static_cast<uint64_t>(s)),
          1, kind);
    }
    ASSERT_TRUE(runtime.DispatchUntil([&] { return received == kSenders * kPerSender; }))
        << MailboxKindName(GetParam()) << " seed " << seed << ": received " << received;
    EXPECT_EQ(errors, 0) << MailboxKindName(GetParam()) << " seed " << seed;
    runtime.DispatchEvents();
    EXPECT_EQ(received, kSenders * kPerSender);
  }
}

}  // namespace
}  // namespace troupe
