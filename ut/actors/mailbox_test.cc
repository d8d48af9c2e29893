// SPDX-License-Identifier: Apache-2.0
//
// The mailbox conformance suite: every mailbox kind (actors/mailbox_kind.h) passes the same typed
// tests on internal::Mailbox — FIFO per writer, the idle/scheduled activation protocol, TryLock,
// a multi-writer stress test with 1, 2 and 8 writers that counts every hand-over, and a no-loss,
// no-duplicate run over millions of events. Then what only some kinds promise: priority order,
// lanes swept in turn, one cache line for the default kind.
#include "actors/internal/mailbox.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/event.h"
#include "actors/events.h"
#include "actors/mailbox_kind.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using internal::Mailbox;
using testutil::kEvValue;

// The sender id of test writer `w` (the Revolving kind picks a lane by sender).
ActorId WriterId(uint64_t w) { return ActorId(1, 0, 1000 + w, 1); }

// A bodyless handle whose cookie identifies it.
EventHandle* NewHandle(uint64_t cookie, ActorId sender = ActorId(), uint32_t flags = kNoFlags,
                       EventType type = kEvValue) {
  return new EventHandle(type, ActorId(), sender, flags, cookie);
}

// Pops one handle, returns its cookie and frees it; -1 when Pop returned nullptr.
int64_t PopCookie(Mailbox& mailbox) {
  std::unique_ptr<EventHandle> ev(mailbox.Pop());
  return ev == nullptr ? -1 : static_cast<int64_t>(ev->cookie());
}

// Frees whatever is left (a failed assertion must not leak under ASan).
void Drain(Mailbox& mailbox) {
  while (EventHandle* ev = mailbox.Pop()) {
    delete ev;
  }
}

template <MailboxKind kKindValue>
struct Kind {
  static constexpr MailboxKind kKind = kKindValue;
};

using AllKinds = ::testing::Types<Kind<MailboxKind::kLockFree>, Kind<MailboxKind::kSimple>,
                                  Kind<MailboxKind::kRevolving>, Kind<MailboxKind::kHTSwap>,
                                  Kind<MailboxKind::kPriority>>;

class KindNames {
 public:
  template <typename T>
  static std::string GetName(int /*index*/) {
    return std::string(MailboxKindName(T::kKind));
  }
};

template <typename T>
class MailboxConformanceTest : public ::testing::Test {
 protected:
  MailboxConformanceTest() { mailbox_.InitKind(T::kKind); }
  ~MailboxConformanceTest() override { Drain(mailbox_); }

  // Pushes `count` events from writer `w` (cookies (w << 32) | seq).
  void PushFrom(uint64_t w, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      mailbox_.Push(NewHandle((w << 32) | static_cast<uint64_t>(i), WriterId(w)));
    }
  }

  Mailbox mailbox_;
};

TYPED_TEST_SUITE(MailboxConformanceTest, AllKinds, KindNames);

TYPED_TEST(MailboxConformanceTest, StartsIdleAndEmpty) {
  Mailbox& mailbox = this->mailbox_;
  EXPECT_EQ(mailbox.kind(), TypeParam::kKind);
  EXPECT_TRUE(mailbox.IsIdle());
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_EQ(mailbox.Pop(), nullptr);
  EXPECT_FALSE(mailbox.HasActors());
  EXPECT_GE(mailbox.FootprintBytes(), sizeof(Mailbox));
}

TYPED_TEST(MailboxConformanceTest, FirstPushActivatesIdleMailboxOnlyOnce) {
  Mailbox& mailbox = this->mailbox_;
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

TYPED_TEST(MailboxConformanceTest, PopsOneWritersEventsInFifoOrder) {
  Mailbox& mailbox = this->mailbox_;
  // Well past one Simple segment and one Revolving burst.
  constexpr int64_t kCount = 10000;
  this->PushFrom(3, kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(PopCookie(mailbox), (int64_t{3} << 32) | i);
  }
  EXPECT_EQ(PopCookie(mailbox), -1);
  EXPECT_TRUE(mailbox.IsEmpty());
}

TYPED_TEST(MailboxConformanceTest, KeepsFifoAcrossDrainAndRefill) {
  // The queue empties and refills many times: the stub re-insertion (LockFree, lanes), the stack
  // swap (HTSwap) and segment hand-over (Simple) all happen mid-stream.
  Mailbox& mailbox = this->mailbox_;
  uint64_t next_push = 0;
  int64_t next_pop = 0;
  for (int round = 0; round < 400; ++round) {
    const int pushes = 1 + round % 7;
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

TYPED_TEST(MailboxConformanceTest, KeepsFifoPerWriterWhenWritersInterleave) {
  Mailbox& mailbox = this->mailbox_;
  constexpr uint64_t kWriters = 8;
  constexpr int64_t kPerWriter = 300;
  for (int64_t i = 0; i < kPerWriter; ++i) {
    for (uint64_t w = 0; w < kWriters; ++w) {
      mailbox.Push(NewHandle((w << 32) | static_cast<uint64_t>(i), WriterId(w)));
    }
  }
  std::vector<int64_t> next(kWriters, 0);
  for (uint64_t n = 0; n < kWriters * kPerWriter; ++n) {
    const int64_t cookie = PopCookie(mailbox);
    ASSERT_GE(cookie, 0) << "pop " << n;
    const uint64_t w = static_cast<uint64_t>(cookie) >> 32;
    ASSERT_LT(w, kWriters);
    ASSERT_EQ(cookie & 0xFFFFFFFF, next[w]) << "writer " << w;
    ++next[w];
  }
  EXPECT_EQ(PopCookie(mailbox), -1);
}

TYPED_TEST(MailboxConformanceTest, TryIdleKeepsMailboxWhenWorkArrived) {
  Mailbox& mailbox = this->mailbox_;
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

TYPED_TEST(MailboxConformanceTest, PushBetweenStoreIdleAndFinishIdleActivatesOnce) {
  // The two orders of the Dekker pair, step by step.
  Mailbox& mailbox = this->mailbox_;
  ASSERT_TRUE(mailbox.Push(NewHandle(1)));
  EXPECT_EQ(PopCookie(mailbox), 1);
  EXPECT_EQ(PopCookie(mailbox), -1);
  // Reader stores kIdle; a writer publishes and wins the CAS; the reader's FinishIdle sees the
  // event but loses the CAS, so it lets go (true) and the writer owns the mailbox.
  uint64_t token = mailbox.BeginIdle();
  mailbox.StoreIdle();
  mailbox.PushEvent(NewHandle(2));
  EXPECT_TRUE(mailbox.ActivateAfterPush());
  EXPECT_TRUE(mailbox.FinishIdle(token));
  EXPECT_FALSE(mailbox.IsIdle());
  EXPECT_EQ(PopCookie(mailbox), 2);
  // Writer publishes, reader stores kIdle and sees the event first: the reader takes the mailbox
  // back and the writer's activation fails.
  mailbox.PushEvent(NewHandle(3));
  token = mailbox.BeginIdle();
  mailbox.StoreIdle();
  EXPECT_FALSE(mailbox.FinishIdle(token));
  EXPECT_FALSE(mailbox.ActivateAfterPush());
  EXPECT_EQ(PopCookie(mailbox), 3);
  EXPECT_TRUE(mailbox.TryIdle());
}

TYPED_TEST(MailboxConformanceTest, TryLockTakesOnlyAnIdleMailbox) {
  Mailbox& mailbox = this->mailbox_;
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
struct StressResult {
  bool timed_out = false;
  uint64_t double_owned = 0;
  int64_t popped = 0;
  uint64_t order_errors = 0;
  uint64_t grants = 0;
  uint64_t taken = 0;
  uint64_t idled = 0;
  int final_owners = 0;
  std::vector<int64_t> last_seq;
};

// `pause_every`: writers yield after that many pushes (0: never), so readers often drain the
// mailbox and the idle -> scheduled race happens again and again.
StressResult RunStress(Mailbox& mailbox, int writers, int64_t per_writer, int pause_every) {
  constexpr int kReaders = 2;
  StressResult result;
  std::atomic<uint64_t> granted[kReaders] = {};
  std::atomic<int> owners{0};
  std::atomic<uint64_t> double_owned{0};
  std::atomic<uint64_t> taken{0};
  std::atomic<uint64_t> idled{0};
  std::atomic<int64_t> popped{0};
  std::atomic<uint64_t> order_errors{0};
  std::atomic<bool> writers_done{false};
  std::atomic<bool> timed_out{false};
  // Owner-confined: only the thread holding the mailbox touches it.
  std::vector<int64_t> last_seq(static_cast<size_t>(writers), -1);

  auto writer = [&](int w) {
    int next_reader = w % kReaders;
    const ActorId sender = WriterId(static_cast<uint64_t>(w));
    for (int64_t i = 0; i < per_writer; ++i) {
      const uint64_t cookie = (static_cast<uint64_t>(w) << 32) | static_cast<uint64_t>(i);
      if (mailbox.Push(NewHandle(cookie, sender))) {
        // acq_rel: pairs with the readers' fetch_sub/fetch_add; a second owner shows up here.
        if (owners.fetch_add(1, std::memory_order_acq_rel) != 0) {
          double_owned.fetch_add(1, std::memory_order_relaxed);
        }
        // release: pairs with the reader's acquire load; the grant carries the ownership.
        granted[next_reader].fetch_add(1, std::memory_order_release);
        next_reader = (next_reader + 1) % kReaders;
      }
      if (pause_every > 0 && i % pause_every == pause_every - 1) {
        std::this_thread::yield();
      }
    }
  };

  auto reader = [&](int r) {
    // A reader gives up when nothing moved for WaitTimeout (no event popped by either reader),
    // not after WaitTimeout in all: on a loaded machine the whole run may take longer than that
    // while every activation still comes.
    absl::Time deadline = absl::Now() + testutil::WaitTimeout();
    int64_t seen_popped = 0;
    uint64_t consumed = 0;
    while (true) {
      if (granted[r].load(std::memory_order_acquire) == consumed) {
        // acquire: pairs with the release store after the writers were joined.
        if (writers_done.load(std::memory_order_acquire) &&
            granted[r].load(std::memory_order_acquire) == consumed) {
          return;
        }
        if (const int64_t now_popped = popped.load(std::memory_order_relaxed);
            now_popped != seen_popped) {
          seen_popped = now_popped;
          deadline = absl::Now() + testutil::WaitTimeout();
        } else if (absl::Now() > deadline) {
          timed_out.store(true, std::memory_order_relaxed);
          return;
        }
        std::this_thread::yield();
        continue;
      }
      ++consumed;
      taken.fetch_add(1, std::memory_order_relaxed);
      // This thread owns the mailbox until TryIdle() returns true.
      while (true) {
        while (EventHandle* raw = mailbox.Pop()) {
          std::unique_ptr<EventHandle> ev(raw);
          const uint64_t w = ev->cookie() >> 32;
          const int64_t seq = static_cast<int64_t>(ev->cookie() & 0xFFFFFFFFu);
          if (w >= last_seq.size() || seq != last_seq[w] + 1) {
            order_errors.fetch_add(1, std::memory_order_relaxed);
          } else {
            last_seq[w] = seq;
          }
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
      }
    }
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back(reader, r);
  }
  std::vector<std::thread> writer_threads;
  for (int w = 0; w < writers; ++w) {
    writer_threads.emplace_back(writer, w);
  }
  for (auto& t : writer_threads) {
    t.join();
  }
  writers_done.store(true, std::memory_order_release);
  for (auto& t : threads) {
    t.join();
  }
  result.timed_out = timed_out.load();
  result.double_owned = double_owned.load();
  result.popped = popped.load();
  result.order_errors = order_errors.load();
  result.grants = granted[0].load() + granted[1].load();
  result.taken = taken.load();
  result.idled = idled.load();
  result.final_owners = owners.load();
  result.last_seq = last_seq;
  return result;
}

void ExpectCleanStress(Mailbox& mailbox, int writers, int64_t per_writer, int pause_every) {
  const StressResult r = RunStress(mailbox, writers, per_writer, pause_every);
  const int64_t total = per_writer * writers;
  ASSERT_FALSE(r.timed_out) << "a reader waited " << testutil::WaitTimeout()
                            << " for an activation while no event was popped: popped " << r.popped
                            << " of " << total;
  EXPECT_EQ(r.double_owned, 0u) << "the mailbox was owned by two threads at once";
  EXPECT_EQ(r.popped, total) << "events lost or duplicated";
  EXPECT_EQ(r.order_errors, 0u) << "per-writer FIFO broken";
  for (int w = 0; w < writers; ++w) {
    EXPECT_EQ(r.last_seq[static_cast<size_t>(w)], per_writer - 1) << "writer " << w;
  }
  EXPECT_GE(r.grants, 1u);
  EXPECT_EQ(r.taken, r.grants);
  EXPECT_EQ(r.idled, r.grants) << "each activation must end with one TryIdle()==true";
  EXPECT_EQ(r.final_owners, 0);
  EXPECT_TRUE(mailbox.IsIdle());
  EXPECT_TRUE(mailbox.IsEmpty());
  EXPECT_EQ(mailbox.Pop(), nullptr);
  ::testing::Test::RecordProperty("activations", static_cast<int>(r.grants));
}

TYPED_TEST(MailboxConformanceTest, OneWriterActivatesExactlyOncePerIdlePeriod) {
  ExpectCleanStress(this->mailbox_, 1, testutil::Scaled(400'000, 10'000), 4);
}

TYPED_TEST(MailboxConformanceTest, TwoWritersActivateExactlyOncePerIdlePeriod) {
  ExpectCleanStress(this->mailbox_, 2, testutil::Scaled(200'000, 5'000), 4);
}

TYPED_TEST(MailboxConformanceTest, EightWritersActivateExactlyOncePerIdlePeriod) {
  ExpectCleanStress(this->mailbox_, 8, testutil::Scaled(50'000, 1'500), 4);
}

TYPED_TEST(MailboxConformanceTest, LosesAndDuplicatesNothingOverMillionsOfEvents) {
  // Writers never pause: long backlogs, Simple segments allocated and recycled, lanes all busy.
  const int64_t per_writer = testutil::kUnderTsan ? 60'000 : testutil::Scaled(500'000);
  ExpectCleanStress(this->mailbox_, 4, per_writer, 0);
}

// -- what only some kinds promise -----------------------------------------------------------------

TEST(MailboxKindsTest, DefaultKindIsOneCacheLineWhileIdle) {
  Mailbox mailbox;
  EXPECT_EQ(mailbox.kind(), MailboxKind::kLockFree);
  EXPECT_EQ(mailbox.FootprintBytes(), 64u);
  EXPECT_EQ(alignof(Mailbox), 64u);
}

TEST(MailboxKindsTest, EveryKindReportsItsFootprint) {
  for (MailboxKind kind : {MailboxKind::kSimple, MailboxKind::kRevolving, MailboxKind::kHTSwap,
                           MailboxKind::kPriority}) {
    Mailbox mailbox;
    mailbox.InitKind(kind);
    EXPECT_GT(mailbox.FootprintBytes(), 64u) << MailboxKindName(kind);
    EXPECT_LE(mailbox.FootprintBytes(), 1024u) << MailboxKindName(kind);
  }
}

TEST(MailboxKindsTest, PriorityHandlesClassesInOrderFifoWithin) {
  Mailbox mailbox;
  mailbox.InitKind(MailboxKind::kPriority);
  // Pushed low, normal, high, system, round-robin; cookies = class * 100 + sequence.
  const uint32_t flags[] = {kPriorityLow, kNoFlags, kPriorityHigh};
  const uint64_t classes[] = {3, 2, 1};
  const EventType system_types[] = {kEvWakeup, kEvUndelivered, kEvPoison, kEvBootstrap};
  for (uint64_t i = 0; i < 20; ++i) {
    for (int c = 0; c < 3; ++c) {
      mailbox.Push(NewHandle(classes[c] * 100 + i, WriterId(static_cast<uint64_t>(c)), flags[c]));
    }
    mailbox.Push(NewHandle(i, WriterId(9), kNoFlags, system_types[i % 4]));
  }
  // Both flags: high wins.
  mailbox.Push(NewHandle(120, WriterId(7), kPriorityHigh | kPriorityLow));
  std::vector<int64_t> got;
  for (int64_t cookie = PopCookie(mailbox); cookie >= 0; cookie = PopCookie(mailbox)) {
    got.push_back(cookie);
  }
  std::vector<int64_t> want;
  for (int64_t c = 0; c <= 3; ++c) {
    for (int64_t i = 0; i < 20; ++i) {
      want.push_back(c * 100 + i);
    }
    if (c == 1) {
      want.push_back(120);
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(mailbox.TryIdle());
}

TEST(MailboxKindsTest, PriorityNeverStarvesSystemEvents) {
  // A reader that keeps up with a stream of high-priority events still takes a system event
  // (poison here) first, however much high-priority work is queued ahead of it.
  Mailbox mailbox;
  mailbox.InitKind(MailboxKind::kPriority);
  uint64_t next = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 100; ++i) {
      mailbox.Push(NewHandle(next++, WriterId(1), kPriorityHigh));
    }
    mailbox.Push(NewHandle(1'000'000 + static_cast<uint64_t>(round), WriterId(2), kNoFlags,
                           round % 2 == 0 ? kEvPoison : kEvWakeup));
    EXPECT_EQ(PopCookie(mailbox), 1'000'000 + round) << "round " << round;
    // Take some of the high-priority backlog, not all of it.
    for (int i = 0; i < 60; ++i) {
      ASSERT_GE(PopCookie(mailbox), 0);
    }
  }
  Drain(mailbox);
  EXPECT_TRUE(mailbox.TryIdle());
}

TEST(MailboxKindsTest, RevolvingSweepsWritersInTurn) {
  // Eight senders queue 64 events each, one sender after the other. A FIFO kind hands out all of
  // the first sender's events first; Revolving alternates between lanes in bursts.
  auto first_senders = [](MailboxKind kind) {
    Mailbox mailbox;
    mailbox.InitKind(kind);
    for (uint64_t w = 0; w < 8; ++w) {
      for (uint64_t i = 0; i < 64; ++i) {
        mailbox.Push(NewHandle((w << 32) | i, WriterId(w)));
      }
    }
    std::set<uint64_t> senders;
    for (int n = 0; n < 64; ++n) {
      senders.insert(static_cast<uint64_t>(PopCookie(mailbox)) >> 32);
    }
    Drain(mailbox);
    return senders.size();
  };
  EXPECT_EQ(first_senders(MailboxKind::kLockFree), 1u);
  EXPECT_GE(first_senders(MailboxKind::kRevolving), 3u);
}

TEST(MailboxKindsTest, SimpleReusesItsSegmentsOnceWarm) {
  // A backlog that never exceeds one segment: after the first two segments exist, the writer only
  // takes back what the reader gave up (the footprint stops growing).
  Mailbox mailbox;
  mailbox.InitKind(MailboxKind::kSimple);
  size_t warm = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 20; ++i) {
      mailbox.Push(NewHandle(static_cast<uint64_t>(i)));
    }
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(PopCookie(mailbox), i);
    }
    if (round == 10) {
      warm = mailbox.FootprintBytes();
    }
    if (round > 10) {
      ASSERT_EQ(mailbox.FootprintBytes(), warm) << "round " << round;
    }
  }
  EXPECT_TRUE(mailbox.TryIdle());
}

}  // namespace
}  // namespace troupe
