// SPDX-License-Identifier: Apache-2.0
//
// internal::Mailbox: FIFO, the idle/scheduled activation protocol, and a multi-writer stress test
// that counts every hand-over; then FIFO through a running system.
#include "actors/internal/mailbox.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using internal::Mailbox;
using testutil::kEvValue;

// A bodyless handle whose cookie identifies it.
EventHandle* NewHandle(uint64_t cookie) {
  return new EventHandle(kEvValue, ActorId(), ActorId(), kNoFlags, cookie);
}

// Pops one handle, returns its cookie and frees it; -1 when Pop returned nullptr.
int64_t PopCookie(Mailbox& mailbox) {
  std::unique_ptr<EventHandle> ev(mailbox.Pop());
  return ev == nullptr ? -1 : static_cast<int64_t>(ev->cookie());
}

TEST(MailboxTest, StartsIdleAndEmpty) {
  Mailbox mailbox;
  EXPECT_TRUE(mailbox.IsIdle());
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_EQ(mailbox.Pop(), nullptr);
  EXPECT_FALSE(mailbox.HasActors());
}

TEST(MailboxTest, FirstPushActivatesIdleMailboxOnlyOnce) {
  Mailbox mailbox;
  EXPECT_TRUE(mailbox.Push(NewHandle(1)));
  EXPECT_FALSE(mailbox.IsIdle());
  EXPECT_FALSE(mailbox.IsEmpty());
  for (uint64_t i = 2; i <= 10; ++i) {
    EXPECT_FALSE(mailbox.Push(NewHandle(i))) << "push " << i << " activated a scheduled mailbox";
  }
  for (int64_t i = 1; i <= 10; ++i) {
    EXPECT_EQ(PopCookie(mailbox), i);
  }
  EXPECT_EQ(PopCookie(mailbox), -1);
  EXPECT_TRUE(mailbox.TryIdle());
  EXPECT_TRUE(mailbox.IsIdle());
  // The next push after going idle activates it again.
  EXPECT_TRUE(mailbox.Push(NewHandle(11)));
  EXPECT_FALSE(mailbox.Push(NewHandle(12)));
  EXPECT_EQ(PopCookie(mailbox), 11);
  EXPECT_EQ(PopCookie(mailbox), 12);
  EXPECT_TRUE(mailbox.TryIdle());
}

TEST(MailboxTest, PopsInFifoOrder) {
  Mailbox mailbox;
  constexpr int64_t kCount = 10000;
  for (int64_t i = 0; i < kCount; ++i) {
    mailbox.Push(NewHandle(static_cast<uint64_t>(i)));
  }
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(PopCookie(mailbox), i);
  }
  EXPECT_EQ(PopCookie(mailbox), -1);
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_TRUE(mailbox.TryIdle());
}

TEST(MailboxTest, KeepsFifoAcrossDrainAndRefill) {
  // Exercises the stub re-insertion: the queue empties and refills many times.
  Mailbox mailbox;
  uint64_t next_push = 0;
  int64_t next_pop = 0;
  for (int round = 0; round < 200; ++round) {
    const int pushes = 1 + round % 5;
    for (int i = 0; i < pushes; ++i) {
      mailbox.Push(NewHandle(next_push++));
    }
    const int pops = round % 3 == 0 ? pushes : 1;
    for (int i = 0; i < pops; ++i) {
      ASSERT_EQ(PopCookie(mailbox), next_pop++);
    }
  }
  while (next_pop < static_cast<int64_t>(next_push)) {
    ASSERT_EQ(PopCookie(mailbox), next_pop++);
  }
  EXPECT_EQ(PopCookie(mailbox), -1);
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_TRUE(mailbox.TryIdle());
}

TEST(MailboxTest, TryIdleKeepsMailboxWhenWorkArrived) {
  Mailbox mailbox;
  ASSERT_TRUE(mailbox.Push(NewHandle(1)));
  EXPECT_EQ(PopCookie(mailbox), 1);
  EXPECT_EQ(PopCookie(mailbox), -1);
  // A writer pushes between the reader's last Pop and its TryIdle: no activation for the writer...
  EXPECT_FALSE(mailbox.Push(NewHandle(2)));
  // ...so the reader must keep the mailbox (TryIdle false) and find the event.
  EXPECT_FALSE(mailbox.TryIdle());
  EXPECT_FALSE(mailbox.IsIdle());
  EXPECT_EQ(PopCookie(mailbox), 2);
  EXPECT_TRUE(mailbox.TryIdle());
  EXPECT_TRUE(mailbox.IsIdle());
}

TEST(MailboxTest, TryLockTakesOnlyAnIdleMailbox) {
  Mailbox mailbox;
  EXPECT_TRUE(mailbox.TryLock());
  EXPECT_FALSE(mailbox.IsIdle());
  EXPECT_FALSE(mailbox.TryLock());
  // The lock holder owns it: a push does not activate it.
  EXPECT_FALSE(mailbox.Push(NewHandle(7)));
  EXPECT_EQ(PopCookie(mailbox), 7);
  EXPECT_TRUE(mailbox.TryIdle());
  EXPECT_TRUE(mailbox.TryLock());
  EXPECT_TRUE(mailbox.TryIdle());
}

// Writers push concurrently; every Push that returns true hands the mailbox to one of two reader
// threads (alternately), as a pool hands it to one of its workers. The test counts hand-overs
// exactly: each `true` from Push is one activation, each activation ends with exactly one
// TryIdle() == true, and at no moment do two owners exist.
//
// The readers synchronize with nobody but the writers (per-reader grant counters) and the mailbox
// itself, and the per-writer sequence state is plain memory touched only by the current owner: if
// a hand-over lacked a happens-before edge, or a reader touched reader-only state after letting
// go, ThreadSanitizer reports it here.
TEST(MailboxTest, ConcurrentPushesActivateExactlyOncePerIdlePeriod) {
  constexpr int kWriters = 4;
  constexpr int kReaders = 2;
  const int64_t per_writer = testutil::Scaled(200'000, 5'000);
  const int64_t total = per_writer * kWriters;

  Mailbox mailbox;
  // Activations granted to each reader by Push()==true.
  std::atomic<uint64_t> granted[kReaders] = {};
  // Current owners: must only ever go 0 -> 1 -> 0.
  std::atomic<int> owners{0};
  std::atomic<uint64_t> double_owned{0};
  std::atomic<uint64_t> taken{0};
  std::atomic<uint64_t> idled{0};
  std::atomic<uint64_t> take_backs{0};
  std::atomic<uint64_t> empty_activations{0};
  std::atomic<int64_t> popped{0};
  std::atomic<uint64_t> order_errors{0};
  std::atomic<bool> writers_done{false};
  std::atomic<bool> timed_out{false};
  // Owner-confined: only the thread holding the mailbox touches it.
  std::vector<int64_t> last_seq(kWriters, -1);

  auto writer = [&](int w) {
    int next_reader = w % kReaders;
    for (int64_t i = 0; i < per_writer; ++i) {
      const uint64_t cookie = (static_cast<uint64_t>(w) << 32) | static_cast<uint64_t>(i);
      if (mailbox.Push(NewHandle(cookie))) {
        // acq_rel: pairs with the readers' fetch_sub/fetch_add; a second owner shows up here.
        if (owners.fetch_add(1, std::memory_order_acq_rel) != 0) {
          double_owned.fetch_add(1, std::memory_order_relaxed);
        }
        // release: pairs with the reader's acquire load; the grant carries the ownership.
        granted[next_reader].fetch_add(1, std::memory_order_release);
        next_reader = (next_reader + 1) % kReaders;
      }
      // Pause after short bursts so that the readers often drain the mailbox and let it go idle:
      // the idle -> scheduled race is the point of this test, not throughput.
      if ((i & 3) == 3) {
        std::this_thread::yield();
      }
    }
  };

  auto reader = [&](int r) {
    const absl::Time deadline = absl::Now() + testutil::WaitTimeout();
    uint64_t consumed = 0;
    while (true) {
      if (granted[r].load(std::memory_order_acquire) == consumed) {
        // acquire: pairs with the release store after the writers were joined.
        if (writers_done.load(std::memory_order_acquire) &&
            granted[r].load(std::memory_order_acquire) == consumed) {
          return;
        }
        if (absl::Now() > deadline) {
          timed_out.store(true, std::memory_order_relaxed);
          return;
        }
        std::this_thread::yield();
        continue;
      }
      ++consumed;
      taken.fetch_add(1, std::memory_order_relaxed);
      // This thread owns the mailbox until TryIdle() returns true.
      int64_t handled = 0;
      while (true) {
        while (EventHandle* raw = mailbox.Pop()) {
          std::unique_ptr<EventHandle> ev(raw);
          const uint64_t w = ev->cookie() >> 32;
          const int64_t seq = static_cast<int64_t>(ev->cookie() & 0xFFFFFFFFu);
          if (w >= kWriters || seq != last_seq[w] + 1) {
            order_errors.fetch_add(1, std::memory_order_relaxed);
          } else {
            last_seq[w] = seq;
          }
          ++handled;
          popped.fetch_add(1, std::memory_order_relaxed);
        }
        // Give ownership up before TryIdle: once it stores kIdle a writer may legitimately win.
        owners.fetch_sub(1, std::memory_order_acq_rel);
        if (mailbox.TryIdle()) {
          idled.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        // TryIdle took the mailbox back (work arrived); no writer can have been handed it.
        if (owners.fetch_add(1, std::memory_order_acq_rel) != 0) {
          double_owned.fetch_add(1, std::memory_order_relaxed);
        }
        take_backs.fetch_add(1, std::memory_order_relaxed);
      }
      if (handled == 0) {
        empty_activations.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };

  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back(reader, r);
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back(writer, w);
  }
  for (auto& t : writers) {
    t.join();
  }
  writers_done.store(true, std::memory_order_release);
  for (auto& t : readers) {
    t.join();
  }

  ASSERT_FALSE(timed_out.load()) << "a reader waited " << testutil::WaitTimeout()
                                 << " for an activation: popped " << popped.load() << " of "
                                 << total;
  EXPECT_EQ(double_owned.load(), 0u) << "the mailbox was owned by two threads at once";
  EXPECT_EQ(popped.load(), total) << "events lost or duplicated";
  EXPECT_EQ(order_errors.load(), 0u) << "per-writer FIFO broken";
  for (int w = 0; w < kWriters; ++w) {
    EXPECT_EQ(last_seq[w], per_writer - 1) << "writer " << w;
  }
  const uint64_t grants = granted[0].load() + granted[1].load();
  EXPECT_GE(grants, 1u);
  EXPECT_EQ(taken.load(), grants);
  EXPECT_EQ(idled.load(), grants) << "each activation must end with one TryIdle()==true";
  EXPECT_EQ(owners.load(), 0);
  EXPECT_TRUE(mailbox.IsIdle());
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_EQ(mailbox.Pop(), nullptr);
  RecordProperty("activations", static_cast<int>(grants));
  RecordProperty("take_backs", static_cast<int>(take_backs.load()));
  RecordProperty("empty_activations", static_cast<int>(empty_activations.load()));
}

// -- through a running system -------------------------------------------------------------------

// Checks that EvValue numbers arrive as 0, 1, 2, ... and notifies after `expected` of them.
class SequenceChecker : public Actor {
 public:
  SequenceChecker(int64_t expected, std::atomic<int64_t>* errors, std::atomic<int64_t>* progress,
                  troupe::Notification* done)
      : Actor(&SequenceChecker::StateWork),
        expected_(expected),
        errors_(errors),
        progress_(progress),
        done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(testutil::EvValue, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<testutil::EvValue> ev) {
    if (static_cast<int64_t>(ev.Get()->value) != next_) {
      errors_->fetch_add(1, std::memory_order_relaxed);
    }
    next_ = static_cast<int64_t>(ev.Get()->value) + 1;
    // Diagnostics only (read when the test times out).
    progress_->store(++received_, std::memory_order_relaxed);
    if (received_ == expected_) {
      done_->Notify();
    }
  }

  const int64_t expected_;
  std::atomic<int64_t>* errors_;
  std::atomic<int64_t>* progress_;
  troupe::Notification* done_;
  int64_t next_ = 0;
  int64_t received_ = 0;
};

TEST(MailboxTest, SystemDeliversOneSendersEventsInFifoOrder) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const int64_t count = testutil::Scaled(100'000, 2'000);
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> progress{0};
  troupe::Notification done;
  const ActorId checker =
      system->Register(std::make_unique<SequenceChecker>(count, &errors, &progress, &done));
  ASSERT_TRUE(checker);
  for (int64_t i = 0; i < count; ++i) {
    system->Send(checker, std::make_unique<testutil::EvValue>(static_cast<uint64_t>(i)));
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(testutil::WaitTimeout()))
      << "handled " << progress.load() << " of " << count
      << " events; counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(errors.load(), 0);
}

}  // namespace
}  // namespace troupe
