// SPDX-License-Identifier: Apache-2.0
//
// Ordering and exclusivity: events from one sender to one recipient are handled in send order; a
// mailbox is run by one thread at a time, also when two actors share it.
//
// PerSenderOrderHoldsUnderEverySeed and PerSenderOrderHoldsAcrossNodesUnderEverySeed run the
// per-sender order check on troupe::testing::TestRuntime over 50 seeds each: every seed is another
// replayable interleaving of actor senders, the test body and (across nodes) link deliveries, so
// the order is checked over many schedules, not over the few a loaded machine happens to produce.
// The other tests use real threads on purpose: they test the multi-threaded machinery itself
// (concurrent writers into one mailbox, idle/active transitions raced by two workers, one thread
// per mailbox at a time), which a one-thread runtime cannot exercise. They wait with deadlines,
// never sleep.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_events.pb.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvKick;
using testutil::EvValue;
using testutil::MakeSystem;
using testutil::Scaled;
using testutil::WaitTimeout;

enum : EventType {
  kEvSeq = EventSpaceBegin(kUserEventSpace + 4),
  kEvOrderingTestEnd,
};
static_assert(InEventSpace(kEvOrderingTestEnd - 1, kUserEventSpace + 4));

// A numbered protobuf event: what crosses nodes (EvValue is local and cannot).
struct EvSeq final : EventPB<EvSeq, ut::TestPayload, kEvSeq> {};

// Makes the event a sender sends as number `seq`.
using MakeSeqEvent = std::unique_ptr<EventBase> (*)(int64_t seq);

std::unique_ptr<EventBase> MakeValue(int64_t seq) {
  return std::make_unique<EvValue>(static_cast<uint64_t>(seq));
}

std::unique_ptr<EventBase> MakeSeq(int64_t seq) {
  auto ev = std::make_unique<EvSeq>();
  ev->record.set_seq(static_cast<uint64_t>(seq));
  return ev;
}

// Flags overlapping handler runs: Enter() returns false when another thread is inside.
class OverlapDetector {
 public:
  void Enter() {
    // acq_rel: pairs with Leave's release; a second thread inside sees `true` here.
    if (inside_.exchange(true, std::memory_order_acq_rel)) {
      overlaps_.fetch_add(1, std::memory_order_relaxed);
    }
    const std::thread::id self = std::this_thread::get_id();
    if (last_thread_.load(std::memory_order_relaxed) != self) {
      migrations_.fetch_add(1, std::memory_order_relaxed);
      last_thread_.store(self, std::memory_order_relaxed);
    }
  }
  void Leave() { inside_.store(false, std::memory_order_release); }

  uint64_t overlaps() const { return overlaps_.load(std::memory_order_relaxed); }
  uint64_t migrations() const { return migrations_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> inside_{false};
  std::atomic<uint64_t> overlaps_{0};
  std::atomic<std::thread::id> last_thread_{};
  std::atomic<uint64_t> migrations_{0};
};

// Burns a little CPU inside a handler so that an overlap, if the runtime allowed one, is likely.
void BusyWork() {
  volatile uint64_t x = 0;
  for (int i = 0; i < 200; ++i) {
    x = x * 31 + static_cast<uint64_t>(i);
  }
}

struct OrderReport {
  absl::flat_hash_map<ActorId, int64_t> counts;
  int64_t violations = 0;
  int64_t total = 0;
};

// Checks that each sender's numbers arrive as 0, 1, 2, ...; publishes its findings to
// `report` and notifies `done` after `expected` events. Lives inside one actor (actor-confined).
class SequenceCheck {
 public:
  SequenceCheck(int64_t expected, OrderReport* report, troupe::Notification* done,
                OverlapDetector* overlap)
      : expected_(expected), report_(report), done_(done), overlap_(overlap) {}

  void Check(const ActorId& sender, int64_t seq) {
    if (overlap_ != nullptr) {
      overlap_->Enter();
      BusyWork();
    }
    auto [it, inserted] = last_.try_emplace(sender, -1);
    if (seq != it->second + 1) {
      ++violations_;
    }
    it->second = seq;
    ++counts_[sender];
    ++total_;
    if (overlap_ != nullptr) {
      overlap_->Leave();
    }
    if (total_ == expected_) {
      report_->counts = counts_;
      report_->violations = violations_;
      report_->total = total_;
      done_->Notify();
    }
  }

 private:
  const int64_t expected_;
  OrderReport* report_;
  troupe::Notification* done_;
  OverlapDetector* overlap_;
  absl::flat_hash_map<ActorId, int64_t> last_;
  absl::flat_hash_map<ActorId, int64_t> counts_;
  int64_t violations_ = 0;
  int64_t total_ = 0;
};

// An actor that runs a SequenceCheck over every EvValue and EvSeq it receives.
class OrderChecker : public Actor {
 public:
  OrderChecker(int64_t expected, OrderReport* report, troupe::Notification* done,
               OverlapDetector* overlap)
      : Actor(&OrderChecker::StateWork), check_(expected, report, done, overlap) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvValue, HandleValue);
      TROUPE_HFUNC(EvSeq, HandleSeq);
      default:
        Unhandled(ev);
    }
  }
  void HandleValue(EventPtr<EvValue> ev) {
    check_.Check(ev->sender(), static_cast<int64_t>(ev.Get()->value));
  }
  void HandleSeq(EventPtr<EvSeq> ev) {
    check_.Check(ev->sender(), static_cast<int64_t>(ev.Get()->record.seq()));
  }

  SequenceCheck check_;
};

// Sends 0..count-1 (as EvValue, or what `make` makes) to every target in batches, yielding to its
// mailbox between batches with a self-addressed EvKick so that senders interleave.
class SeqSender : public Actor {
 public:
  SeqSender(std::vector<ActorId> targets, int64_t count, int batch, MakeSeqEvent make = MakeValue)
      : Actor(&SeqSender::StateWork),
        targets_(std::move(targets)),
        count_(count),
        batch_(batch),
        make_(make) {}

 private:
  void Bootstrap() override { Send(SelfId(), std::make_unique<EvKick>()); }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_CFUNC(testutil::kEvKick, SendBatch);
      default:
        Unhandled(ev);
    }
  }

  void SendBatch() {
    for (int i = 0; i < batch_ && next_ < count_; ++i, ++next_) {
      for (const ActorId& target : targets_) {
        Send(target, make_(next_));
      }
    }
    if (next_ < count_) {
      Send(SelfId(), std::make_unique<EvKick>());
    }
  }

  const std::vector<ActorId> targets_;
  const int64_t count_;
  const int batch_;
  const MakeSeqEvent make_;
  int64_t next_ = 0;
};

// A fake sender id for an external thread: never registered, distinct per thread.
ActorId ExternalSender(int thread) {
  return ActorId(0, 0, 0xE0000000u + static_cast<uint64_t>(thread), 0x7FFFFF00u);
}

struct Traffic {
  int actor_senders = 4;
  int thread_senders = 4;
  int64_t per_sender = 0;
};

// Starts `traffic.actor_senders` SeqSenders (spread over every pool) and
// `traffic.thread_senders` external threads, each sending 0..per_sender-1 to every target.
// Returns the threads; the caller joins them.
std::vector<std::thread> StartTraffic(ActorSystem& system, const std::vector<ActorId>& targets,
                                      const Traffic& traffic, std::vector<ActorId>* senders) {
  const uint32_t pools = static_cast<uint32_t>(system.config().pools_size());
  for (int a = 0; a < traffic.actor_senders; ++a) {
    RegisterOptions options;
    options.pool = static_cast<uint32_t>(a) % pools;
    const ActorId id = system.Register(
        std::make_unique<SeqSender>(targets, traffic.per_sender, 16 + 16 * (a % 3)), options);
    EXPECT_TRUE(id);
    senders->push_back(id);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < traffic.thread_senders; ++t) {
    senders->push_back(ExternalSender(t));
    threads.emplace_back([&system, targets, t, n = traffic.per_sender] {
      const ActorId me = ExternalSender(t);
      for (int64_t i = 0; i < n; ++i) {
        for (const ActorId& target : targets) {
          system.Send(target, std::make_unique<EvValue>(static_cast<uint64_t>(i)), kNoFlags, 0, me);
        }
      }
    });
  }
  return threads;
}

void JoinAll(std::vector<std::thread>& threads) {
  for (auto& t : threads) {
    t.join();
  }
}

TEST(OrderingTest, PreservesPerSenderOrderUnderConcurrency) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Traffic traffic;
  traffic.per_sender = Scaled(20'000, 1'000);
  const int64_t expected = traffic.per_sender * (traffic.actor_senders + traffic.thread_senders);
  OrderReport report;
  troupe::Notification done;
  const ActorId receiver =
      system->Register(std::make_unique<OrderChecker>(expected, &report, &done, nullptr));
  ASSERT_TRUE(receiver);
  std::vector<ActorId> senders;
  std::vector<std::thread> threads = StartTraffic(*system, {receiver}, traffic, &senders);
  const bool finished = done.WaitForNotificationWithTimeout(WaitTimeout());
  JoinAll(threads);
  ASSERT_TRUE(finished) << "receiver did not get all " << expected
                        << " events; counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(report.violations, 0) << "some sender's events arrived out of order";
  EXPECT_EQ(report.total, expected);
  ASSERT_EQ(report.counts.size(), senders.size());
  for (const ActorId& sender : senders) {
    EXPECT_EQ(report.counts[sender], traffic.per_sender) << "sender " << sender;
  }
}

TEST(OrderingTest, HandlesOneEventAtATimePerMailbox) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Traffic traffic;
  traffic.per_sender = Scaled(10'000, 500);
  const int64_t expected = traffic.per_sender * (traffic.actor_senders + traffic.thread_senders);
  OverlapDetector overlap;
  OrderReport report;
  troupe::Notification done;
  const ActorId receiver =
      system->Register(std::make_unique<OrderChecker>(expected, &report, &done, &overlap));
  ASSERT_TRUE(receiver);
  std::vector<ActorId> senders;
  std::vector<std::thread> threads = StartTraffic(*system, {receiver}, traffic, &senders);
  const bool finished = done.WaitForNotificationWithTimeout(WaitTimeout());
  JoinAll(threads);
  ASSERT_TRUE(finished) << "counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(overlap.overlaps(), 0u) << "two threads ran the same mailbox at once";
  EXPECT_EQ(report.total, expected);
  EXPECT_EQ(report.violations, 0);
  RecordProperty("thread_switches", static_cast<int>(overlap.migrations()));
}

// Many short activations: external threads send one event at a time and yield, so the receiver's
// mailbox goes idle and is re-activated constantly, with both User workers competing for it. A
// worker that lost the mailbox while going idle and then took it back must not resume with stale
// state; a gap, duplicate or hang here means two workers consumed the same queue.
TEST(OrderingTest, SurvivesConstantIdleTransitions) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  constexpr int kThreads = 4;
  const int64_t per_thread = Scaled(100'000, 5'000);
  const int64_t expected = per_thread * kThreads;
  OrderReport report;
  troupe::Notification done;
  OverlapDetector overlap;
  const ActorId receiver =
      system->Register(std::make_unique<OrderChecker>(expected, &report, &done, &overlap));
  ASSERT_TRUE(receiver);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&system, receiver, t, per_thread] {
      const ActorId me = ExternalSender(t);
      for (int64_t i = 0; i < per_thread; ++i) {
        system->Send(receiver, std::make_unique<EvValue>(static_cast<uint64_t>(i)), kNoFlags, 0,
                     me);
        std::this_thread::yield();
      }
    });
  }
  const bool finished = done.WaitForNotificationWithTimeout(WaitTimeout());
  JoinAll(threads);
  ASSERT_TRUE(finished) << "receiver did not get all " << expected
                        << " events; counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(report.violations, 0) << "events lost, duplicated or reordered";
  EXPECT_EQ(report.total, expected);
  EXPECT_EQ(overlap.overlaps(), 0u) << "two threads ran the same mailbox at once";
  EXPECT_EQ(system->Counters().dropped_events, 0u);
}

// An OrderChecker that, in Bootstrap, registers a second OrderChecker on its own mailbox; both
// report through the one overlap detector.
class MailboxParent : public Actor {
 public:
  MailboxParent(int64_t expected_each, OverlapDetector* overlap, OrderReport* parent_report,
                troupe::Notification* parent_done, OrderReport* child_report,
                troupe::Notification* child_done, ActorId* child_id, troupe::Notification* spawned)
      : Actor(&MailboxParent::StateWork),
        check_(expected_each, parent_report, parent_done, overlap),
        expected_each_(expected_each),
        overlap_(overlap),
        child_report_(child_report),
        child_done_(child_done),
        child_id_(child_id),
        spawned_(spawned) {}

 private:
  void Bootstrap() override {
    *child_id_ = RegisterWithSameMailbox(
        std::make_unique<OrderChecker>(expected_each_, child_report_, child_done_, overlap_));
    spawned_->Notify();
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvValue, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvValue> ev) {
    check_.Check(ev->sender(), static_cast<int64_t>(ev.Get()->value));
  }

  SequenceCheck check_;
  const int64_t expected_each_;
  OverlapDetector* overlap_;
  OrderReport* child_report_;
  troupe::Notification* child_done_;
  ActorId* child_id_;
  troupe::Notification* spawned_;
};

TEST(OrderingTest, SharedMailboxActorsNeverOverlap) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Traffic traffic;
  traffic.per_sender = Scaled(5'000, 300);
  const int64_t expected_each =
      traffic.per_sender * (traffic.actor_senders + traffic.thread_senders);
  OverlapDetector overlap;
  OrderReport parent_report;
  OrderReport child_report;
  troupe::Notification parent_done;
  troupe::Notification child_done;
  troupe::Notification spawned;
  ActorId child;
  const ActorId parent = system->Register(
      std::make_unique<MailboxParent>(expected_each, &overlap, &parent_report, &parent_done,
                                      &child_report, &child_done, &child, &spawned));
  ASSERT_TRUE(parent);
  ASSERT_TRUE(spawned.WaitForNotificationWithTimeout(WaitTimeout()));
  ASSERT_TRUE(child);
  EXPECT_NE(child, parent);
  EXPECT_EQ(child.hint(), parent.hint()) << "RegisterWithSameMailbox must share the mailbox";
  EXPECT_EQ(child.pool(), parent.pool());

  // Every sender alternates between the two actors of the one mailbox.
  std::vector<ActorId> senders;
  std::vector<std::thread> threads = StartTraffic(*system, {parent, child}, traffic, &senders);
  const bool finished = parent_done.WaitForNotificationWithTimeout(WaitTimeout()) &&
                        child_done.WaitForNotificationWithTimeout(WaitTimeout());
  JoinAll(threads);
  ASSERT_TRUE(finished) << "counters: " << testutil::DescribeCounters(*system);
  EXPECT_EQ(overlap.overlaps(), 0u) << "actors sharing a mailbox ran in parallel";
  EXPECT_EQ(parent_report.total, expected_each);
  EXPECT_EQ(child_report.total, expected_each);
  EXPECT_EQ(parent_report.violations, 0);
  EXPECT_EQ(child_report.violations, 0);
  RecordProperty("thread_switches", static_cast<int>(overlap.migrations()));
}

// -- the same checks on TestRuntime, over many seeds ----------------------------------------------

constexpr uint64_t kSeeds = 50;

// Checks one receiver's report after an idle run: every sender's `per_sender` events arrived, in
// order.
void ExpectInOrder(const char* receiver, const troupe::Notification& done,
                   const OrderReport& report, const std::vector<ActorId>& senders,
                   int64_t per_sender) {
  ASSERT_TRUE(done.HasBeenNotified())
      << receiver << " did not get all " << per_sender * static_cast<int64_t>(senders.size())
      << " events";
  EXPECT_EQ(report.violations, 0) << receiver << ": some sender's events arrived out of order";
  EXPECT_EQ(report.total, per_sender * static_cast<int64_t>(senders.size())) << receiver;
  EXPECT_EQ(report.counts.size(), senders.size()) << receiver;
  for (const ActorId& sender : senders) {
    auto it = report.counts.find(sender);
    EXPECT_EQ(it == report.counts.end() ? 0 : it->second, per_sender)
        << receiver << ", sender " << sender;
  }
}

// Four actor senders with different batch sizes (on different pools) and two senders in the test
// body write to an actor of its own and to two actors sharing a mailbox. The body's sends are
// spread between dispatch steps, so they land at different points of the actors' work.
TEST(OrderingTest, PerSenderOrderHoldsUnderEverySeed) {
  constexpr int kActorSenders = 4;
  constexpr int kBodySenders = 2;
  constexpr int64_t kPerSender = 100;
  constexpr int64_t kExpected = kPerSender * (kActorSenders + kBodySenders);
  std::set<uint64_t> fingerprints;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    testing::TestRuntime runtime({.seed = seed, .config = testutil::SmallConfig()});
    OrderReport single_report;
    OrderReport parent_report;
    OrderReport child_report;
    troupe::Notification single_done;
    troupe::Notification parent_done;
    troupe::Notification child_done;
    troupe::Notification spawned;
    ActorId child;
    const ActorId single = runtime.Register(
        std::make_unique<OrderChecker>(kExpected, &single_report, &single_done, nullptr));
    const ActorId parent = runtime.Register(
        std::make_unique<MailboxParent>(kExpected, nullptr, &parent_report, &parent_done,
                                        &child_report, &child_done, &child, &spawned));
    ASSERT_TRUE(runtime.DispatchUntil([&spawned] { return spawned.HasBeenNotified(); }));
    ASSERT_EQ(child.hint(), parent.hint()) << "RegisterWithSameMailbox must share the mailbox";
    const std::vector<ActorId> targets = {single, parent, child};

    std::vector<ActorId> senders;
    const uint32_t pools = static_cast<uint32_t>(runtime.node().config().pools_size());
    for (int a = 0; a < kActorSenders; ++a) {
      RegisterOptions options;
      options.pool = static_cast<uint32_t>(a) % pools;
      senders.push_back(runtime.Register(
          std::make_unique<SeqSender>(targets, kPerSender, 1 + 3 * a), /*node=*/1, options));
    }
    for (int64_t i = 0; i < kPerSender; ++i) {
      for (int t = 0; t < kBodySenders; ++t) {
        for (const ActorId& target : targets) {
          runtime.Send(target, MakeValue(i), ExternalSender(t));
        }
      }
      // Let a few handlers run before the body's next sends.
      for (int64_t step = 0; step < i % 5; ++step) {
        if (!runtime.Step()) {
          break;
        }
      }
    }
    for (int t = 0; t < kBodySenders; ++t) {
      senders.push_back(ExternalSender(t));
    }
    ASSERT_EQ(runtime.DispatchEvents(), testing::DispatchResult::kIdle);
    ExpectInOrder("single", single_done, single_report, senders, kPerSender);
    ExpectInOrder("parent", parent_done, parent_report, senders, kPerSender);
    ExpectInOrder("child", child_done, child_report, senders, kPerSender);
    fingerprints.insert(runtime.TraceFingerprint());
    if (HasFailure()) {
      break;  // the failing seed's runtime is the last to print its trace
    }
  }
  // Fifty seeds that gave the same few runs would check the same interleaving over and over.
  if (!HasFailure()) {
    EXPECT_GE(fingerprints.size(), kSeeds - 5) << "the seeds barely change the interleaving";
  }
}

// Three nodes, each with a receiver, an actor sender and a sender in the test body (an edge
// actor's id, so its events leave from its node); every sender writes to all three receivers.
// Links have latency and jitter, so remote events arrive late and interleave with local ones.
TEST(OrderingTest, PerSenderOrderHoldsAcrossNodesUnderEverySeed) {
  constexpr NodeId kNodes = 3;
  constexpr int64_t kPerSender = 60;
  constexpr int64_t kExpected = kPerSender * 2 * kNodes;
  std::set<uint64_t> fingerprints;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    testing::TestRuntime runtime({.nodes = kNodes,
                                  .seed = seed,
                                  .config = testutil::SmallConfig(),
                                  .latency = absl::Microseconds(200),
                                  .jitter = absl::Milliseconds(2)});
    std::array<OrderReport, kNodes> reports;
    std::array<troupe::Notification, kNodes> done;
    std::vector<ActorId> receivers;
    for (NodeId node = 1; node <= kNodes; ++node) {
      receivers.push_back(runtime.Register(
          std::make_unique<OrderChecker>(kExpected, &reports[node - 1], &done[node - 1], nullptr),
          node));
      ASSERT_EQ(receivers.back().node_id(), node);
    }
    std::vector<ActorId> senders;
    std::vector<ActorId> edges;
    for (NodeId node = 1; node <= kNodes; ++node) {
      senders.push_back(
          runtime.Register(std::make_unique<SeqSender>(receivers, kPerSender,
                                                       1 + 2 * static_cast<int>(node), MakeSeq),
                           node));
      edges.push_back(runtime.AllocateEdgeActor(node));
      senders.push_back(edges.back());
    }
    for (int64_t i = 0; i < kPerSender; ++i) {
      for (const ActorId& edge : edges) {
        for (const ActorId& receiver : receivers) {
          runtime.Send(receiver, MakeSeq(i), edge);
        }
      }
      // Let a few handlers run before the body's next sends.
      for (int64_t step = 0; step < i % 7; ++step) {
        if (!runtime.Step()) {
          break;
        }
      }
    }
    ASSERT_EQ(runtime.DispatchEvents(), testing::DispatchResult::kIdle);
    for (NodeId node = 1; node <= kNodes; ++node) {
      const std::string name = absl::StrCat("receiver on node ", node);
      ExpectInOrder(name.c_str(), done[node - 1], reports[node - 1], senders, kPerSender);
      EXPECT_EQ(runtime.EdgeEventCount(edges[node - 1]), 0u) << "something came back to a sender";
    }
    fingerprints.insert(runtime.TraceFingerprint());
    if (HasFailure()) {
      break;  // the failing seed's runtime is the last to print its trace
    }
  }
  if (!HasFailure()) {
    EXPECT_GE(fingerprints.size(), kSeeds - 5) << "the seeds barely change the interleaving";
  }
}

}  // namespace
}  // namespace troupe
