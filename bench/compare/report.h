// SPDX-License-Identifier: Apache-2.0
//
// What every C++ program of the peer comparison shares: reading a size argument, and the one line
// of key=value pairs per workload that run.sh reads (the same keys for every framework).
//
// Thread-safety: thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace compare {

using Clock = std::chrono::steady_clock;

// Returns the seconds since `start`.
inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Returns argv[index] as a count of at least 1, or `fallback` when there is no such argument;
// exits 2 naming the argument when it is not a count.
inline uint64_t CountArg(int argc, char** argv, int index, uint64_t fallback, const char* name) {
  if (argc <= index) {
    return fallback;
  }
  char* end = nullptr;
  const long long value = std::strtoll(argv[index], &end, 10);
  if (value < 1 || end == argv[index] || *end != '\0') {
    std::fprintf(stderr, "%s %s: %s must be a whole number of at least 1, got '%s'\n", argv[0],
                 argv[1], name, argv[index]);
    std::exit(2);
  }
  return static_cast<uint64_t>(value);
}

// Prints the rtt line: the mean round trip of `round_trips` taking `seconds`.
inline void PrintRtt(uint64_t round_trips, double seconds) {
  std::printf("rtt round_trips=%llu seconds=%.4f rtt_us=%.2f\n",
              static_cast<unsigned long long>(round_trips), seconds,
              seconds * 1e6 / static_cast<double>(round_trips));
}

// Prints the stream line: `events` events of `body` bytes in `seconds`, as events/s and GB/s.
inline void PrintStream(uint64_t events, uint64_t body, double seconds) {
  const double rate = static_cast<double>(events) / seconds;
  std::printf("stream events=%llu body=%llu seconds=%.4f events_per_s=%.0f gb_per_s=%.3f\n",
              static_cast<unsigned long long>(events), static_cast<unsigned long long>(body),
              seconds, rate, rate * static_cast<double>(body) / 1e9);
}

// Exits 2 naming LEAVES unless `leaves` is a power of 10 of at least 10 (every inner node of the
// skynet tree splits its range into 10 equal parts).
inline void CheckSkynetLeaves(const char* program, uint64_t leaves) {
  uint64_t power = 10;
  while (power < leaves) {
    power *= 10;
  }
  if (power != leaves) {
    std::fprintf(stderr, "%s skynet: LEAVES must be a power of 10 (at least 10), got %llu\n",
                 program, static_cast<unsigned long long>(leaves));
    std::exit(2);
  }
}

// Prints the skynet line for a tree of `leaves` leaves (fan-out 10) that took `seconds`; returns
// 1 (and prints the reason) when `sum` is not the sum of the leaf ordinals, else 0.
inline int ReportSkynet(const char* program, uint64_t leaves, uint64_t sum, double seconds) {
  if (sum != leaves * (leaves - 1) / 2) {
    std::fprintf(stderr, "%s: skynet sum %llu is wrong\n", program,
                 static_cast<unsigned long long>(sum));
    return 1;
  }
  uint64_t actors = 0;
  for (uint64_t level = leaves; level >= 1; level /= 10) {
    actors += level;
  }
  std::printf("skynet leaves=%llu actors=%llu ms=%.1f actors_per_s=%.0f\n",
              static_cast<unsigned long long>(leaves), static_cast<unsigned long long>(actors),
              seconds * 1e3, static_cast<double>(actors) / seconds);
  return 0;
}

// Prints the fanin line: `events` counted in `seconds`, and the peak RSS growth in bytes.
inline void PrintFanIn(uint64_t events, double seconds, int64_t peak_growth_bytes) {
  std::printf("fanin events=%llu seconds=%.4f events_per_s=%.0f peak_rss_growth_mib=%.1f\n",
              static_cast<unsigned long long>(events), seconds,
              static_cast<double>(events) / seconds,
              static_cast<double>(peak_growth_bytes) / (1 << 20));
}

// Prints the idle line: `actors` idle actors, spawned in `spawn_seconds`, grew RSS by
// `growth_bytes`.
inline void PrintIdle(uint64_t actors, double spawn_seconds, int64_t growth_bytes) {
  std::printf("idle actors=%llu spawn_seconds=%.3f rss_growth_mib=%.1f bytes_per_actor=%.0f\n",
              static_cast<unsigned long long>(actors), spawn_seconds,
              static_cast<double>(growth_bytes) / (1 << 20),
              static_cast<double>(growth_bytes) / static_cast<double>(actors));
}

// Prints the pingpong line: `round_trips` local round trips in `seconds`.
inline void PrintPingPong(uint64_t round_trips, double seconds) {
  std::printf("pingpong round_trips=%llu seconds=%.4f rt_per_s=%.0f\n",
              static_cast<unsigned long long>(round_trips), seconds,
              static_cast<double>(round_trips) / seconds);
}

// Prints the ring line: `hops` hops around a ring of `actors` in `seconds`.
inline void PrintRing(int actors, uint64_t hops, double seconds) {
  std::printf("ring actors=%d hops=%llu seconds=%.4f hops_per_s=%.0f\n", actors,
              static_cast<unsigned long long>(hops), seconds, static_cast<double>(hops) / seconds);
}

}  // namespace compare
