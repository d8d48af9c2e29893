// SPDX-License-Identifier: Apache-2.0
//
// Mailbox kinds through a running system: every kind chosen per Register keeps each sender's events
// in order from several threads, lets several actors share one mailbox, and never delivers a dead
// actor's events to the actor that reuses its mailbox. The pool's `default_mailbox` applies when
// Register names no kind, and the Priority kind reorders by class end to end.
#include <atomic>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/mailbox_kind.h"
#include "actors/sync.h"
#include "proto/config.pb.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::Recorder;
using testutil::WaitTimeout;

constexpr MailboxKind kKinds[] = {MailboxKind::kLockFree, MailboxKind::kSimple,
                                  MailboxKind::kRevolving, MailboxKind::kHTSwap,
                                  MailboxKind::kPriority};

class MailboxKindSystemTest : public ::testing::TestWithParam<MailboxKind> {
 protected:
  RegisterOptions Options() const {
    RegisterOptions options;
    options.mailbox = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(AllKinds, MailboxKindSystemTest, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<MailboxKind>& info) {
                           return std::string(MailboxKindName(info.param));
                         });

// Checks that EvValue numbers from each sender arrive as 0, 1, 2, ...; notifies after `expected`.
class PerSenderChecker : public Actor {
 public:
  PerSenderChecker(int64_t expected, std::atomic<int64_t>* errors, std::atomic<int64_t>* progress,
                   troupe::Notification* done)
      : Actor(&PerSenderChecker::StateWork),
        expected_(expected),
        errors_(errors),
        progress_(progress),
        done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvValue, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvValue> ev) {
    const uint64_t sender = ev->sender().local_id();
    if (sender >= next_.size()) {
      next_.resize(sender + 1, 0);
    }
    if (static_cast<int64_t>(ev.Get()->value) != next_[sender]) {
      errors_->fetch_add(1, std::memory_order_relaxed);
    }
    next_[sender] = static_cast<int64_t>(ev.Get()->value) + 1;
    progress_->store(++received_, std::memory_order_relaxed);
    if (received_ == expected_) {
      done_->Notify();
    }
  }

  const int64_t expected_;
  std::atomic<int64_t>* errors_;
  std::atomic<int64_t>* progress_;
  troupe::Notification* done_;
  std::vector<int64_t> next_;
  int64_t received_ = 0;
};

TEST_P(MailboxKindSystemTest, KeepsEachSendersOrderFromSeveralThreads) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  constexpr int kThreads = 4;
  const int64_t per_thread = testutil::Scaled(50'000, 2'000);
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> progress{0};
  troupe::Notification done;
  const ActorId checker = system->Register(
      std::make_unique<PerSenderChecker>(per_thread * kThreads, &errors, &progress, &done),
      Options());
  ASSERT_TRUE(checker);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // A made-up sender per thread: the checker keys its sequences by sender.
      const ActorId sender(1, 0, static_cast<uint64_t>(t + 1), 1);
      for (int64_t i = 0; i < per_thread; ++i) {
        system->Send(checker, std::make_unique<EvValue>(static_cast<uint64_t>(i)), kNoFlags, 0,
                     sender);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(WaitTimeout()))
      << "handled " << progress.load() << " of " << per_thread * kThreads
      << "; counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(errors.load(), 0);
}

// Two actors on one mailbox; each handler checks that nobody else runs in that mailbox.
class SharingActor : public Actor {
 public:
  SharingActor(std::atomic<int>* running, std::atomic<int>* overlaps, std::atomic<int64_t>* handled,
               ActorId* sibling, troupe::Notification* spawned)
      : Actor(&SharingActor::StateWork),
        running_(running),
        overlaps_(overlaps),
        handled_(handled),
        sibling_(sibling),
        spawned_(spawned) {}

 private:
  void Bootstrap() override {
    if (spawned_ != nullptr) {
      *sibling_ = RegisterWithSameMailbox(
          std::make_unique<SharingActor>(running_, overlaps_, handled_, nullptr, nullptr));
      spawned_->Notify();
    }
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    if (running_->fetch_add(1, std::memory_order_acq_rel) != 0) {
      overlaps_->fetch_add(1, std::memory_order_relaxed);
    }
    handled_->fetch_add(1, std::memory_order_relaxed);
    running_->fetch_sub(1, std::memory_order_acq_rel);
  }

  std::atomic<int>* running_;
  std::atomic<int>* overlaps_;
  std::atomic<int64_t>* handled_;
  ActorId* sibling_;
  troupe::Notification* spawned_;
};

TEST_P(MailboxKindSystemTest, SeveralActorsShareOneMailbox) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::atomic<int64_t> handled{0};
  ActorId sibling;
  troupe::Notification spawned;
  const ActorId owner = system->Register(
      std::make_unique<SharingActor>(&running, &overlaps, &handled, &sibling, &spawned), Options());
  ASSERT_TRUE(spawned.WaitForNotificationWithTimeout(WaitTimeout()));
  ASSERT_EQ(sibling.hint(), owner.hint());
  const int64_t per_actor = testutil::Scaled(20'000, 1'000);
  std::thread other([&] {
    for (int64_t i = 0; i < per_actor; ++i) {
      system->Send(sibling, std::make_unique<EvValue>(static_cast<uint64_t>(i)));
    }
  });
  for (int64_t i = 0; i < per_actor; ++i) {
    system->Send(owner, std::make_unique<EvValue>(static_cast<uint64_t>(i)));
  }
  other.join();
  EXPECT_TRUE(testutil::WaitUntil([&] { return handled.load() == 2 * per_actor; }))
      << "handled " << handled.load() << " of " << 2 * per_actor;
  EXPECT_EQ(overlaps.load(), 0) << "two actors of one mailbox ran at once";
}

// Registers a Recorder (on the kind under test) for each EvValue{i} into `inboxes[i]` and
// publishes its id in `ids[i]`. Running on the worker that freed a mailbox, it gets that worker's
// cached free hints (MailboxTable::HintCache), as a spawning actor would.
class KindSpawner : public Actor {
 public:
  struct Shared {
    std::vector<std::unique_ptr<Inbox>> inboxes;
    troupe::Mutex mu;
    std::vector<ActorId> ids ABSL_GUARDED_BY(mu);
  };
  KindSpawner(Shared* shared, RegisterOptions options)
      : Actor(&KindSpawner::StateWork), shared_(shared), options_(options) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvValue) {
      Unhandled(ev);
      return;
    }
    const uint64_t i = ev->Get<EvValue>()->value;
    const ActorId id = Register(std::make_unique<Recorder>(shared_->inboxes[i].get()), options_);
    troupe::MutexLock lock(&shared_->mu);
    shared_->ids[i] = id;
  }

  Shared* shared_;
  RegisterOptions options_;
};

TEST_P(MailboxKindSystemTest, FreedMailboxNeverDeliversToALaterActor) {
  // One User worker: the dead actor's mailbox goes to that worker's free hints, which the spawner,
  // on the same worker, reuses first.
  proto::ActorSystemConfig config = testutil::SmallConfig();
  config.mutable_pools(1)->set_threads(1);
  auto system = testutil::MakeSystem(config);
  ASSERT_NE(system, nullptr);
  Inbox sender_inbox;
  const ActorId sender = system->Register(std::make_unique<Recorder>(&sender_inbox));
  constexpr size_t kMaxCandidates = 2000;
  KindSpawner::Shared shared;
  for (size_t i = 0; i < kMaxCandidates; ++i) {
    shared.inboxes.push_back(std::make_unique<Inbox>());
  }
  {
    troupe::MutexLock lock(&shared.mu);
    shared.ids.resize(kMaxCandidates);
  }
  const ActorId spawner = system->Register(std::make_unique<KindSpawner>(&shared, Options()));
  // Kill the first actor, then spawn until a new actor lands on its mailbox (the freed mailbox
  // may still be finishing its last activation, so the first tries can get another one).
  troupe::Notification dead_destroyed;
  Inbox dead_inbox;
  const ActorId dead =
      system->Register(std::make_unique<Recorder>(&dead_inbox, &dead_destroyed), Options());
  ASSERT_TRUE(dead);
  system->Send(dead, std::make_unique<EvPoison>());
  ASSERT_TRUE(dead_destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
  // The candidates that got another mailbox stay alive: freeing them would put their hints ahead
  // of the dead one. Between attempts the worker gets a millisecond to let the dead mailbox go
  // (it may be preempted on this 2-core machine); bounded by WaitTimeout() and kMaxCandidates.
  ActorId reuser;
  size_t reuser_index = 0;
  const absl::Time deadline = absl::Now() + WaitTimeout();
  for (size_t i = 0; i < kMaxCandidates && !reuser && absl::Now() < deadline; ++i) {
    system->Send(spawner, std::make_unique<EvValue>(i));
    ActorId candidate;
    ASSERT_TRUE(testutil::WaitUntil([&] {
      troupe::MutexLock lock(&shared.mu);
      candidate = shared.ids[i];
      return static_cast<bool>(candidate);
    })) << "the spawner did not register candidate "
        << i;
    if (candidate.hint() == dead.hint()) {
      reuser = candidate;
      reuser_index = i;
    } else {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  ASSERT_TRUE(reuser) << "no later actor reused the dead actor's mailbox";
  ASSERT_NE(reuser.local_id(), dead.local_id());
  constexpr int kStale = 50;
  for (int i = 0; i < kStale; ++i) {
    system->Send(dead, std::make_unique<EvValue>(static_cast<uint64_t>(i)), kTrackDelivery,
                 static_cast<uint64_t>(i), sender);
  }
  system->Send(reuser, std::make_unique<EvValue>(999));
  ASSERT_TRUE(sender_inbox.WaitForType(kEvUndelivered, kStale));
  ASSERT_TRUE(shared.inboxes[reuser_index]->WaitForType(kEvValue, 1));
  const std::vector<testutil::Received> got = shared.inboxes[reuser_index]->OfType(kEvValue);
  ASSERT_EQ(got.size(), 1u) << "a stale event reached the later actor";
  EXPECT_EQ(got[0].value, 999u);
  for (const testutil::Received& r : sender_inbox.OfType(kEvUndelivered)) {
    EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  }
}

// -- the pool default and the Priority kind end to end ----------------------------------------

// Blocks in its first EvKick until `release` is notified, so the test can queue events behind it;
// then records the EvValue numbers in the order handled.
class GatedRecorder : public Actor {
 public:
  GatedRecorder(troupe::Notification* blocked, troupe::Notification* release, Inbox* inbox)
      : Actor(&GatedRecorder::StateWork), blocked_(blocked), release_(release), inbox_(inbox) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvPoison) {
      Unhandled(ev);  // ends the actor; the inbox may be gone by now
      return;
    }
    if (ev->type() == testutil::kEvKick) {
      blocked_->Notify();
      release_->WaitForNotificationWithTimeout(WaitTimeout());
      return;
    }
    inbox_->Add(testutil::Describe(*ev));
  }

  troupe::Notification* blocked_;
  troupe::Notification* release_;
  Inbox* inbox_;
};

// Queues normal, low, high, normal, low, high... behind a blocked handler; returns the values in
// handled order.
std::vector<uint64_t> HandledOrder(ActorSystem& system, RegisterOptions options) {
  troupe::Notification blocked;
  troupe::Notification release;
  Inbox inbox;
  const ActorId actor =
      system.Register(std::make_unique<GatedRecorder>(&blocked, &release, &inbox), options);
  system.Send(actor, std::make_unique<testutil::EvKick>());
  if (!blocked.WaitForNotificationWithTimeout(WaitTimeout())) {
    ADD_FAILURE() << "the gate never closed";
    release.Notify();
    return {};
  }
  const uint32_t flags[] = {kNoFlags, kPriorityLow, kPriorityHigh};
  for (uint64_t i = 0; i < 9; ++i) {
    system.Send(actor, std::make_unique<EvValue>(i), flags[i % 3]);
  }
  release.Notify();
  if (!inbox.WaitForType(kEvValue, 9)) {
    ADD_FAILURE() << "not every value was handled";
  }
  std::vector<uint64_t> order;
  for (const testutil::Received& r : inbox.OfType(kEvValue)) {
    order.push_back(r.value);
  }
  system.Send(actor, std::make_unique<EvPoison>());
  return order;
}

TEST(MailboxKindConfigTest, PriorityKindHandlesHighFirstAndLowLast) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  RegisterOptions priority;
  priority.mailbox = MailboxKind::kPriority;
  EXPECT_EQ(HandledOrder(*system, priority), (std::vector<uint64_t>{2, 5, 8, 0, 3, 6, 1, 4, 7}));
  // The same traffic in a FIFO kind: as sent.
  RegisterOptions fifo;
  fifo.mailbox = MailboxKind::kLockFree;
  EXPECT_EQ(HandledOrder(*system, fifo), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(MailboxKindConfigTest, PoolDefaultMailboxAppliesWhenRegisterNamesNoKind) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  for (proto::PoolConfig& pool : *config.mutable_pools()) {
    if (pool.name() == "Batch") {
      pool.set_default_mailbox(proto::MAILBOX_KIND_PRIORITY);
    }
  }
  auto system = testutil::MakeSystem(config);
  ASSERT_NE(system, nullptr);
  absl::StatusOr<uint32_t> batch = system->PoolIndex("Batch");
  ASSERT_TRUE(batch.ok());
  RegisterOptions on_batch;
  on_batch.pool = *batch;
  EXPECT_EQ(HandledOrder(*system, on_batch), (std::vector<uint64_t>{2, 5, 8, 0, 3, 6, 1, 4, 7}));
  // An explicit kind overrides the pool's default.
  on_batch.mailbox = MailboxKind::kSimple;
  EXPECT_EQ(HandledOrder(*system, on_batch), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Other pools keep the lock-free default.
  EXPECT_EQ(HandledOrder(*system, RegisterOptions{}),
            (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

// The names reach every text sink the code base uses, and at compile time (see
// NamesUndeliveredReasonsForStrCatStreamsAndStringView in delivery_test.cc for why a const char*).
TEST(MailboxKindConfigTest, NamesKindsForStrCatStreamsAndStringView) {
  static_assert(std::string_view(MailboxKindName(MailboxKind::kHTSwap)) == "HTSwap");
  EXPECT_EQ(absl::StrCat("kind ", MailboxKindName(MailboxKind::kLockFree)), "kind LockFree");
  std::ostringstream out;
  out << MailboxKindName(MailboxKind::kPoolDefault);
  EXPECT_EQ(out.str(), "PoolDefault");
  const std::string_view name = MailboxKindName(static_cast<MailboxKind>(42));
  EXPECT_EQ(name, "Invalid");
}

TEST(MailboxKindConfigTest, UnknownKindIsRefusedAtRegister) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  RegisterOptions bad;
  bad.mailbox = static_cast<MailboxKind>(42);
  Inbox inbox;
  EXPECT_FALSE(system->Register(std::make_unique<Recorder>(&inbox), bad));
}

}  // namespace
}  // namespace troupe
