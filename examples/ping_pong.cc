// SPDX-License-Identifier: Apache-2.0
//
// ping_pong: pairs of actors on one node bounce an event back and forth; prints round trips per
// second every second and a total at the end. The single-node demo of the README. Exit statuses
// as in cli.h: 1 when no round trip happened, 2 on a bad flag, 3 on a bad --config.
//
//   ping_pong --pairs=1 --seconds=3
#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/config.h"
#include "actors/sync.h"
#include "actors/testing/actors.h"
#include "cli.h"

ABSL_FLAG(int, pairs, 1, "ping-pong pairs running at once");
ABSL_FLAG(int, seconds, 3, "how long to run");
ABSL_FLAG(std::string, config, "", "node config file (protobuf text); empty for defaults");

namespace {

enum : troupe::EventType {
  kEvBall = troupe::EventSpaceBegin(troupe::kUserEventSpace),
};

struct EvBall : troupe::EventLocal<EvBall, kEvBall> {};

// The shared test actors (actors/testing/actors.h): a ponger returns every ball to its sender; a
// pinger serves one and returns it until told to stop, counting round trips.
using Ponger = troupe::testing::Ponger<EvBall>;
using Pinger = troupe::testing::Pinger<EvBall>;

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Actor ping-pong on one node: prints round trips per second. Exits 1 when no round trip "
      "happened.");
  const int pairs = absl::GetFlag(FLAGS_pairs);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  if (pairs < 1 || seconds < 1) {
    std::fprintf(stderr, "ping_pong: --pairs and --seconds must be at least 1\n");
    return troupe::examples::kExitUsage;
  }

  troupe::proto::ActorSystemConfig config;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    auto loaded = troupe::LoadConfigFile(absl::GetFlag(FLAGS_config));
    if (!loaded.ok()) {
      std::fprintf(stderr, "ping_pong: %s\n", loaded.status().ToString().c_str());
      return troupe::examples::kExitConfig;
    }
    config = *loaded;
  }
  auto system = troupe::ActorSystem::Create(config);
  if (!system.ok()) {
    std::fprintf(stderr, "ping_pong: %s\n", system.status().ToString().c_str());
    return absl::IsInvalidArgument(system.status()) ? troupe::examples::kExitConfig
                                                    : troupe::examples::kExitFailed;
  }

  std::atomic<uint64_t> round_trips{0};
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<troupe::Notification>> done;
  for (int i = 0; i < pairs; ++i) {
    done.push_back(std::make_unique<troupe::Notification>());
    const troupe::ActorId ponger = (*system)->Register(std::make_unique<Ponger>());
    (*system)->Register(std::make_unique<Pinger>(
        ponger,
        Pinger::Options{.stop = &stop, .round_trips = &round_trips, .done = done.back().get()}));
  }

  std::printf("ping_pong: %d pair(s) on node %u for %d s\n", pairs, (*system)->node_id(), seconds);
  const absl::Time start = absl::Now();
  uint64_t last = 0;
  for (int s = 1; s <= seconds; ++s) {
    absl::SleepFor(start + absl::Seconds(s) - absl::Now());
    const uint64_t now = round_trips.load(std::memory_order_relaxed);
    std::printf("  second %d: %.2f M round trips/s\n", s, static_cast<double>(now - last) / 1e6);
    std::fflush(stdout);
    last = now;
  }
  // relaxed: the flag only ends the games; `done` orders their last counts.
  stop.store(true, std::memory_order_relaxed);
  for (auto& notification : done) {
    if (!notification->WaitForNotificationWithTimeout(absl::Seconds(10))) {
      std::fprintf(stderr, "ping_pong: a pair did not stop within 10 s\n");
      return troupe::examples::kExitFailed;
    }
  }
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t total = round_trips.load(std::memory_order_relaxed);
  (*system)->Stop();
  std::printf("ping_pong: %.2f M round trips/s on average (%llu in %.2f s)\n",
              static_cast<double>(total) / elapsed / 1e6, static_cast<unsigned long long>(total),
              elapsed);
  return total > 0 ? troupe::examples::kExitOk : troupe::examples::kExitFailed;
}
