// SPDX-License-Identifier: Apache-2.0
//
// Simulation: what every part of a TestRuntime shares — its options, the seeded generator (the
// only source of choice in a run) and the simulated clock.
//
// The stepper, the simulated interconnect (jitter) and the timers all read the same clock and draw
// from the same generator, in the order the run makes its choices; that single stream is what makes
// a seed replay a run exactly. Private to troupe::testing; not installed.
//
// Thread-safety: thread-compatible; the test runtime uses it from the test's thread only.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/testing/test_runtime.h"

namespace troupe::testing {

struct Simulation {
  TestRuntimeOptions options;
  uint64_t seed = 0;
  std::mt19937_64 rng;
  absl::Time start;  // the simulated epoch
  absl::Time now;

  // Returns a draw in [0, n). A choice among at most one candidate draws nothing, so runs that
  // differ only in such non-choices keep the same stream.
  uint64_t Uniform(uint64_t n) { return n <= 1 ? 0 : rng() % n; }
  // Returns the line a failure prints: the seed, and how to replay it.
  std::string SeedText() const;
};

// Returns "event 0x… from … to …", for failure messages.
std::string DescribeEvent(EventType type, const ActorId& sender, const ActorId& recipient);

}  // namespace troupe::testing
