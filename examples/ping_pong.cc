// SPDX-License-Identifier: Apache-2.0
//
// ping_pong: pairs of actors on one node bounce an event back and forth; prints round trips per
// second every second and a total at the end. The single-node demo of the README.
//
//   ping_pong --pairs=1 --seconds=3
#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/config.h"

ABSL_FLAG(int, pairs, 1, "ping-pong pairs running at once");
ABSL_FLAG(int, seconds, 3, "how long to run");
ABSL_FLAG(std::string, config, "", "node config file (protobuf text); empty for defaults");

namespace {

enum : troupe::EventType {
  kEvBall = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvStop,
};

struct EvBall : troupe::EventLocal<EvBall, kEvBall> {};
struct EvStop : troupe::EventLocal<EvStop, kEvStop> {};

std::atomic<uint64_t> g_round_trips{0};

// Returns every ball it receives; the server side of a pair.
class Ponger : public troupe::Actor {
 public:
  Ponger() : Actor(&Ponger::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvBall:
        // Reuse the handle: no allocation per bounce.
        Forward(ev, ev->sender());
        break;
      default:
        Unhandled(ev);
    }
  }
};

// Serves a ball to its ponger and counts the returns until told to stop.
class Pinger : public troupe::Actor {
 public:
  Pinger(troupe::ActorId ponger, absl::Notification* done)
      : Actor(&Pinger::StateWork), ponger_(ponger), done_(done) {}

 private:
  void Bootstrap() override {
    Send(std::make_unique<troupe::EventHandle>(ponger_, SelfId(), std::make_unique<EvBall>()));
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvBall:
        if (++local_ == 1024) {
          g_round_trips.fetch_add(local_, std::memory_order_relaxed);
          local_ = 0;
        }
        if (!stopping_) {
          Forward(ev, ponger_);
        } else {
          done_->Notify();
        }
        break;
      case kEvStop:
        stopping_ = true;
        break;
      default:
        Unhandled(ev);
    }
  }

  troupe::ActorId ponger_;
  absl::Notification* done_;
  uint64_t local_ = 0;
  bool stopping_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Actor ping-pong on one node: prints round trips per second.");
  absl::ParseCommandLine(argc, argv);
  const int pairs = absl::GetFlag(FLAGS_pairs);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  if (pairs < 1 || seconds < 1) {
    std::fprintf(stderr, "--pairs and --seconds must be at least 1\n");
    return 2;
  }

  troupe::proto::ActorSystemConfig config;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    auto loaded = troupe::LoadConfigFile(absl::GetFlag(FLAGS_config));
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 2;
    }
    config = *loaded;
  }
  auto system = troupe::ActorSystem::Create(config);
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 2;
  }

  std::vector<std::unique_ptr<absl::Notification>> done;
  std::vector<troupe::ActorId> pingers;
  for (int i = 0; i < pairs; ++i) {
    done.push_back(std::make_unique<absl::Notification>());
    const troupe::ActorId ponger = (*system)->Register(std::make_unique<Ponger>());
    pingers.push_back((*system)->Register(std::make_unique<Pinger>(ponger, done.back().get())));
  }

  std::printf("ping_pong: %d pair(s) on node %u for %d s\n", pairs, (*system)->node_id(), seconds);
  const absl::Time start = absl::Now();
  uint64_t last = 0;
  for (int s = 1; s <= seconds; ++s) {
    absl::SleepFor(start + absl::Seconds(s) - absl::Now());
    const uint64_t now = g_round_trips.load(std::memory_order_relaxed);
    std::printf("  second %d: %.2f M round trips/s\n", s, static_cast<double>(now - last) / 1e6);
    std::fflush(stdout);
    last = now;
  }
  for (const troupe::ActorId& pinger : pingers) {
    (*system)->Send(pinger, std::make_unique<EvStop>());
  }
  for (auto& notification : done) {
    if (!notification->WaitForNotificationWithTimeout(absl::Seconds(10))) {
      std::fprintf(stderr, "ping_pong: a pair did not stop within 10 s\n");
      return 1;
    }
  }
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t total = g_round_trips.load(std::memory_order_relaxed);
  (*system)->Stop();
  std::printf("ping_pong: %.2f M round trips/s on average (%llu in %.2f s)\n",
              static_cast<double>(total) / elapsed / 1e6, static_cast<unsigned long long>(total),
              elapsed);
  return total > 0 ? 0 : 1;
}
