// SPDX-License-Identifier: Apache-2.0
//
// CAF 0.17 side of the peer comparison in bench/README.md (actors_bench). It measures, with CAF's
// default actor_system_config (the work-stealing scheduler on every core), the same workloads as
// Troupe's BM_FanInUnbounded and BM_Spawn, so that the table's CAF column can be re-measured:
//
//   caf_compare fanin [EVENTS]  4 senders each send EVENTS/4 messages holding one int, as fast as
//                               they can and with no flow control, to 1 receiver that counts
//                               them. Prints events/s (EVENTS / wall time from the first send to
//                               the receiver counting the last) and the peak RSS growth in MiB
//                               (RSS sampled from /proc/self/statm every 10 ms by a plain thread,
//                               minus the RSS before the run, taken after malloc_trim(0)).
//   caf_compare idle [ACTORS]   spawns ACTORS actors that just wait for an int, waits until each
//                               has started, and prints (RSS after - RSS before) / ACTORS, with
//                               malloc_trim(0) before both readings. CAF ends an actor that no
//                               handle refers to (exit_reason::unreachable), so the program keeps
//                               one `caf::actor` (8 B) per actor: it is part of the figure.
//
// EVENTS defaults to 10,000,000 and ACTORS to 1,000,000; smaller values are for a quick check.
// Each mode prints one line of key=value pairs that run.sh reads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_memory.h"
#include "caf/all.hpp"

namespace {

using troupe::bench::ResidentBytes;
using troupe::bench::TrimHeap;
using Clock = std::chrono::steady_clock;

constexpr int kSenders = 4;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Shared between the fan-in actors and main: when the first message left and when the last one
// was counted.
struct FanInClock {
  std::atomic<int64_t> first_send_ns{0};
  std::atomic<int64_t> last_count_ns{0};
};

// Sends `count` ints to `receiver` in one go and ends (no behavior: the actor quits after this).
void Sender(caf::event_based_actor* self, caf::actor receiver, int64_t count, FanInClock* clock) {
  int64_t expected = 0;
  clock->first_send_ns.compare_exchange_strong(expected, NowNs());
  for (int64_t i = 0; i < count; ++i) {
    self->send(receiver, static_cast<int>(i & 0xffff));
  }
}

// Counts ints until `total` have arrived, notes the time and quits.
caf::behavior Receiver(caf::event_based_actor* self, int64_t total, FanInClock* clock) {
  auto received = std::make_shared<int64_t>(0);
  return {
      [self, received, total, clock](int) {
        if (++*received == total) {
          clock->last_count_ns.store(NowNs());
          self->quit();
        }
      },
  };
}

// An actor that waits for one int and then does nothing with it.
caf::behavior Idle(caf::event_based_actor* /*self*/, std::atomic<int64_t>* started) {
  started->fetch_add(1, std::memory_order_relaxed);
  return {
      [](int) {},
  };
}

int RunFanIn(int64_t events) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const int64_t per_sender = events / kSenders;
  const int64_t total = per_sender * kSenders;

  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  std::atomic<bool> sampling{true};
  std::atomic<int64_t> rss_peak{rss_before};
  std::thread sampler([&] {
    // Bounded by the run's own timeout in run.sh; stops when main clears `sampling`.
    while (sampling.load()) {
      const int64_t rss = ResidentBytes();
      if (rss > rss_peak.load()) {
        rss_peak.store(rss);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  FanInClock clock;
  {
    caf::actor receiver = system.spawn(Receiver, total, &clock);
    for (int s = 0; s < kSenders; ++s) {
      system.spawn(Sender, receiver, per_sender, &clock);
    }
  }
  system.await_all_actors_done();
  sampling.store(false);
  sampler.join();
  const int64_t rss = ResidentBytes();
  rss_peak.store(std::max(rss_peak.load(), rss));

  const double seconds =
      static_cast<double>(clock.last_count_ns.load() - clock.first_send_ns.load()) / 1e9;
  std::printf("fanin events=%lld seconds=%.4f events_per_s=%.0f peak_rss_growth_mib=%.1f\n",
              static_cast<long long>(total), seconds, static_cast<double>(total) / seconds,
              static_cast<double>(rss_peak.load() - rss_before) / (1 << 20));
  return 0;
}

int RunIdle(int64_t actors) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  std::atomic<int64_t> started{0};

  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  const auto spawn_start = Clock::now();
  std::vector<caf::actor> alive;
  alive.reserve(static_cast<size_t>(actors));
  for (int64_t i = 0; i < actors; ++i) {
    alive.push_back(system.spawn(Idle, &started));
  }
  // Wait (at most 60 s) until every actor has run its start and waits for a message.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (started.load() < actors && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double spawn_seconds = std::chrono::duration<double>(Clock::now() - spawn_start).count();
  if (started.load() < actors) {
    std::fprintf(stderr, "idle: only %lld of %lld actors started within 60 s\n",
                 static_cast<long long>(started.load()), static_cast<long long>(actors));
    return 1;
  }
  TrimHeap();
  const int64_t rss_after = ResidentBytes();
  std::printf("idle actors=%lld spawn_seconds=%.3f rss_growth_mib=%.1f bytes_per_actor=%.0f\n",
              static_cast<long long>(actors), spawn_seconds,
              static_cast<double>(rss_after - rss_before) / (1 << 20),
              static_cast<double>(rss_after - rss_before) / static_cast<double>(actors));
  // Dropping the handles ends the actors (unreachable); the system's destructor waits for them.
  alive.clear();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "fanin") == 0) {
    return RunFanIn(argc > 2 ? std::atoll(argv[2]) : 10'000'000);
  }
  if (std::strcmp(mode, "idle") == 0) {
    return RunIdle(argc > 2 ? std::atoll(argv[2]) : 1'000'000);
  }
  std::fprintf(stderr, "usage: %s fanin [EVENTS] | idle [ACTORS]\n", argv[0]);
  return 2;
}
