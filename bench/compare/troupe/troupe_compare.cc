// SPDX-License-Identifier: Apache-2.0
//
// Troupe side of the local rows of the peer comparison (bench/compare/README.md), built against
// an installed Troupe (find_package(Troupe), CMakeLists.txt beside this file) as a user's program
// would be. Every mode runs on a node made by ActorSystem::Create with an empty config: the
// defaults (the four standard pools, User with one worker per core). The workloads are those of
// actors_bench's BM_FanInUnbounded, BM_Spawn, BM_Skynet, BM_PingPong and BM_Ring, with the sizes of
// caf_compare and compare.escript:
//
//   troupe_compare fanin [EVENTS]       4 senders each send EVENTS/4 fresh events (4,096 per
//                                       handler call, then a self-sent continue) to 1 receiver
//                                       that counts them, with no flow control. events/s = EVENTS
//                                       / wall time from the start until the last is counted; peak
//                                       RSS growth sampled every 10 ms by the main thread.
//   troupe_compare idle [ACTORS]        ACTORS actors registered from the main thread that wait
//                                       for an event; (RSS after - RSS before) / ACTORS once each
//                                       has run its Bootstrap, heap trimmed before both readings.
//   troupe_compare skynet [LEAVES]      a root spawns 10 children, each as many, down to LEAVES
//                                       leaves (1,111,111 actors for 1,000,000); each leaf replies
//                                       its ordinal, each inner node the sum of its children's,
//                                       and passes away. ms from registering the root to its sum.
//   troupe_compare pingpong [ROUND_TRIPS]  one pinger and one ponger bounce one event handle
//                                       (Forward: no allocation per bounce). Round trips/s.
//   troupe_compare ring [HOPS]          a ring of 1,000 actors passes one token (Forward) HOPS
//                                       times. Hops/s.
//
// Each mode prints one line of key=value pairs that run.sh reads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "bench/process_memory.h"
#include "proto/config.pb.h"
#include "report.h"

namespace {

using compare::Clock;
using troupe::bench::ResidentBytes;
using troupe::bench::TrimHeap;

enum : troupe::EventType {
  kEvData = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvContinue,
  kEvSum,
  kEvBall,
  kEvToken,
  kEvSetNext,
  kEvEnd,
};
static_assert(troupe::InEventSpace(kEvEnd - 1, troupe::kUserEventSpace));

struct EvData : troupe::EventLocal<EvData, kEvData> {};
struct EvContinue : troupe::EventLocal<EvContinue, kEvContinue> {};
struct EvSum : troupe::EventLocal<EvSum, kEvSum> {
  explicit EvSum(uint64_t value) : sum(value) {}
  uint64_t sum;
};
struct EvBall : troupe::EventLocal<EvBall, kEvBall> {};
struct EvToken : troupe::EventLocal<EvToken, kEvToken> {
  explicit EvToken(uint64_t value) : hops(value) {}
  uint64_t hops;
};

struct EvSetNext : troupe::EventLocal<EvSetNext, kEvSetNext> {
  explicit EvSetNext(troupe::ActorId value) : next(value) {}
  troupe::ActorId next;
};

constexpr absl::Duration kTimeout = absl::Seconds(120);

std::unique_ptr<troupe::ActorSystem> MakeSystem() {
  auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "troupe_compare: %s\n", system.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(system);
}

// Waits for `done`; on timeout reports and exits without stopping the node (its workers may be
// wedged).
void AwaitOrExit(troupe::Notification& done, const char* what) {
  if (!done.WaitForNotificationWithTimeout(kTimeout)) {
    std::fprintf(stderr, "troupe_compare: %s did not finish within %s\n", what,
                 absl::FormatDuration(kTimeout).c_str());
    std::_Exit(1);
  }
}

// -- fan-in ---------------------------------------------------------------------------------------

// Counts `expected` events, then notes the time and notifies.
class Counter : public troupe::Actor {
 public:
  Counter(uint64_t expected, Clock::time_point* end, troupe::Notification* done)
      : Actor(&Counter::StateWork), expected_(expected), end_(end), done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvData) {
      Unhandled(ev);
      return;
    }
    if (++received_ == expected_) {
      *end_ = Clock::now();
      done_->Notify();
    }
  }

  const uint64_t expected_;
  uint64_t received_ = 0;
  Clock::time_point* end_;
  troupe::Notification* done_;
};

// Sends `count` fresh events to `receiver`, 4,096 per handler call, as fast as it can.
class BurstSender : public troupe::Actor {
 public:
  BurstSender(troupe::ActorId receiver, uint64_t count)
      : Actor(&BurstSender::StateWork), receiver_(receiver), remaining_(count) {}

 private:
  void Bootstrap() override { SendChunk(); }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvContinue) {
      SendChunk();
    } else {
      Unhandled(ev);
    }
  }
  void SendChunk() {
    const uint64_t chunk = std::min<uint64_t>(4096, remaining_);
    for (uint64_t i = 0; i < chunk; ++i) {
      Send(receiver_, std::make_unique<EvData>());
    }
    remaining_ -= chunk;
    if (remaining_ > 0) {
      Send(SelfId(), std::make_unique<EvContinue>());
    }
  }

  const troupe::ActorId receiver_;
  uint64_t remaining_;
};

int RunFanIn(int64_t events) {
  constexpr int kSenders = 4;
  const auto per_sender = static_cast<uint64_t>(events / kSenders);
  const uint64_t total = per_sender * kSenders;
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  int64_t peak = rss_before;
  troupe::Notification done;
  Clock::time_point end;
  const troupe::ActorId receiver = system->Register(std::make_unique<Counter>(total, &end, &done));
  const auto start = Clock::now();
  for (int s = 0; s < kSenders; ++s) {
    system->Register(std::make_unique<BurstSender>(receiver, per_sender));
  }
  const auto deadline = Clock::now() + absl::ToChronoSeconds(kTimeout);
  while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
    peak = std::max(peak, ResidentBytes());
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "troupe_compare: the fan-in did not finish in time\n");
      std::_Exit(1);
    }
  }
  peak = std::max(peak, ResidentBytes());
  const double seconds = std::chrono::duration<double>(end - start).count();
  compare::PrintFanIn(total, seconds, peak - rss_before);
  return 0;
}

// -- idle actors ----------------------------------------------------------------------------------

// Notes its start, then waits for an event it never gets.
class Idle : public troupe::Actor {
 public:
  explicit Idle(std::atomic<int64_t>* started) : Actor(&Idle::StateWork), started_(started) {}

 private:
  void Bootstrap() override { started_->fetch_add(1, std::memory_order_relaxed); }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  std::atomic<int64_t>* started_;
};

int RunIdle(int64_t actors) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  std::atomic<int64_t> started{0};
  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  const auto start = Clock::now();
  for (int64_t i = 0; i < actors; ++i) {
    system->Register(std::make_unique<Idle>(&started));
  }
  // At most 60 s, every 10 ms.
  for (int i = 0; i < 6000 && started.load(std::memory_order_relaxed) < actors; ++i) {
    troupe::Notification().WaitForNotificationWithTimeout(absl::Milliseconds(10));
  }
  const double spawn_seconds = compare::SecondsSince(start);
  if (started.load(std::memory_order_relaxed) < actors) {
    std::fprintf(stderr, "troupe_compare: only %lld of %lld actors started within 60 s\n",
                 static_cast<long long>(started.load()), static_cast<long long>(actors));
    return 1;
  }
  TrimHeap();
  const int64_t rss_after = ResidentBytes();
  compare::PrintIdle(static_cast<uint64_t>(actors), spawn_seconds, rss_after - rss_before);
  return 0;
}

// -- skynet ---------------------------------------------------------------------------------------

constexpr uint64_t kFanOut = 10;

// A skynet node over the leaf ordinals [first, first + size): a leaf replies its ordinal, an
// inner node spawns kFanOut children and replies the sum of theirs; either then passes away. The
// root (no parent) writes the sum to `result` and notifies `done` instead.
class Skynet : public troupe::Actor {
 public:
  Skynet(troupe::ActorId parent, uint64_t first, uint64_t size, uint64_t* result = nullptr,
         troupe::Notification* done = nullptr)
      : Actor(&Skynet::StateWork),
        parent_(parent),
        first_(first),
        size_(size),
        result_(result),
        done_(done) {}

 private:
  void Bootstrap() override {
    if (size_ == 1) {
      Reply(first_);
      return;
    }
    const uint64_t part = size_ / kFanOut;
    for (uint64_t i = 0; i < kFanOut; ++i) {
      Register(std::make_unique<Skynet>(SelfId(), first_ + i * part, part));
    }
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvSum) {
      Unhandled(ev);
      return;
    }
    sum_ += ev->Get<EvSum>()->sum;
    if (++replies_ == kFanOut) {
      Reply(sum_);
    }
  }
  void Reply(uint64_t sum) {
    if (done_ != nullptr) {
      *result_ = sum;
      done_->Notify();
    } else {
      Send(parent_, std::make_unique<EvSum>(sum));
    }
    PassAway();
  }

  const troupe::ActorId parent_;
  const uint64_t first_;
  const uint64_t size_;
  uint64_t* result_;
  troupe::Notification* done_;
  uint64_t sum_ = 0;
  uint64_t replies_ = 0;
};

int RunSkynet(uint64_t leaves) {
  compare::CheckSkynetLeaves("troupe_compare", leaves);
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  uint64_t sum = 0;
  troupe::Notification done;
  const auto start = Clock::now();
  system->Register(std::make_unique<Skynet>(troupe::ActorId(), 0, leaves, &sum, &done));
  AwaitOrExit(done, "skynet");
  return compare::ReportSkynet("troupe_compare", leaves, sum, compare::SecondsSince(start));
}

// -- ping-pong ------------------------------------------------------------------------------------

// Returns every ball to its sender (Forward keeps the sender: the pinger).
class Ponger : public troupe::Actor {
 public:
  Ponger() : Actor(&Ponger::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBall) {
      Forward(ev->sender(), ev);
    } else {
      Unhandled(ev);
    }
  }
};

// Serves one ball to `ponger` and sends it back `count` times, then notifies.
class Pinger : public troupe::Actor {
 public:
  Pinger(troupe::ActorId ponger, uint64_t count, troupe::Notification* done)
      : Actor(&Pinger::StateWork), ponger_(ponger), left_(count), done_(done) {}

 private:
  void Bootstrap() override { Send(ponger_, std::make_unique<EvBall>()); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBall) {
      Unhandled(ev);
      return;
    }
    if (--left_ == 0) {
      done_->Notify();
      PassAway();
    } else {
      Forward(ponger_, ev);
    }
  }

  const troupe::ActorId ponger_;
  uint64_t left_;
  troupe::Notification* done_;
};

int RunPingPong(uint64_t round_trips) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  const troupe::ActorId ponger = system->Register(std::make_unique<Ponger>());
  troupe::Notification done;
  const auto start = Clock::now();
  system->Register(std::make_unique<Pinger>(ponger, round_trips, &done));
  AwaitOrExit(done, "ping-pong");
  compare::PrintPingPong(round_trips, compare::SecondsSince(start));
  return 0;
}

// -- ring -----------------------------------------------------------------------------------------

constexpr int kRingSize = 1000;

// Passes the token to `next` until its hops run out, then notifies. The last member built learns
// its successor, the first, from an EvSetNext.
class RingMember : public troupe::Actor {
 public:
  RingMember(troupe::ActorId next, troupe::Notification* done)
      : Actor(&RingMember::StateWork), next_(next), done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvToken: {
        auto* token = ev->Get<EvToken>();
        if (token->hops == 0) {
          done_->Notify();
        } else {
          --token->hops;
          Forward(next_, ev);
        }
        break;
      }
      case kEvSetNext:
        next_ = ev->Get<EvSetNext>()->next;
        break;
      default:
        Unhandled(ev);
    }
  }

  troupe::ActorId next_;
  troupe::Notification* done_;
};

int RunRing(uint64_t hops) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  troupe::Notification done;
  std::vector<troupe::ActorId> ring(kRingSize);
  for (int i = kRingSize - 1; i >= 0; --i) {
    ring[i] = system->Register(
        std::make_unique<RingMember>(i + 1 < kRingSize ? ring[i + 1] : troupe::ActorId(), &done));
  }
  // Handled before the token reaches the last member: sent before the token starts.
  system->Send(ring[kRingSize - 1], std::make_unique<EvSetNext>(ring[0]));
  const auto start = Clock::now();
  system->Send(ring[0], std::make_unique<EvToken>(hops - 1));
  AwaitOrExit(done, "ring");
  compare::PrintRing(kRingSize, hops, compare::SecondsSince(start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  // The size argument, or the mode's default.
  const auto arg = [&](uint64_t fallback) {
    return compare::CountArg(argc, argv, 2, fallback, "the size");
  };
  if (mode == "fanin") {
    return RunFanIn(static_cast<int64_t>(arg(10'000'000)));
  }
  if (mode == "idle") {
    return RunIdle(static_cast<int64_t>(arg(1'000'000)));
  }
  if (mode == "skynet") {
    return RunSkynet(arg(1'000'000));
  }
  if (mode == "pingpong") {
    return RunPingPong(arg(2'000'000));
  }
  if (mode == "ring") {
    return RunRing(arg(10'000'000));
  }
  std::fprintf(stderr,
               "usage: %s fanin [EVENTS] | idle [ACTORS] | skynet [LEAVES] | pingpong "
               "[ROUND_TRIPS] | ring [HOPS]\n",
               argv[0]);
  return 2;
}
