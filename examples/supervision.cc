// SPDX-License-Identifier: Apache-2.0
//
// supervision: a small supervision tree whose workers crash at random and are restarted (the
// README's "Actors that fail well"):
//   - a Supervisor registers three restartable workers (RegisterRestartable) and restarts any
//     that throws (one-for-one, at most 20 restarts a second each, backing off from 5 ms);
//   - a Feeder sends them jobs; a worker throws on one job in five, and the job that failed is
//     dropped, the ones queued behind it wait for the new instance (same id);
//   - a Monitor watches every worker and the supervisor (Watch), and listens to dead letters;
//   - at the end the supervisor is poisoned: its workers end first, then it (post-order), and
//     the monitor hears of each.
// Prints what happens; exits 0 when workers failed and were restarted, every job was handled or
// failed exactly once, and every watch came back with the supervisor last, 1 otherwise (statuses
// as in cli.h).
//
//   supervision
#include "actors/supervision.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/scoped_actor.h"
#include "cli.h"
#include "proto/config.pb.h"

ABSL_FLAG(uint32_t, jobs, 300, "jobs to send to the workers");

namespace {

enum : troupe::EventType {
  kEvJob = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvFeed,
};

struct EvJob : troupe::EventLocal<EvJob, kEvJob> {
  explicit EvJob(uint64_t number_value) : number(number_value) {}
  uint64_t number;
};
struct EvFeed : troupe::EventLocal<EvFeed, kEvFeed> {
  explicit EvFeed(std::vector<troupe::ActorId> workers_value) : workers(std::move(workers_value)) {}
  std::vector<troupe::ActorId> workers;
};

// What the run counted, from every actor's thread.
struct Tally {
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> starts{0};
};

// Handles jobs; throws on about one in five. Counts its instance's jobs.
class Worker final : public troupe::Actor {
 public:
  Worker(int index, Tally* tally, uint64_t seed)
      : Actor(&Worker::StateWork), index_(index), tally_(tally), random_(seed) {}

 private:
  void Bootstrap() override {
    if (tally_->starts.fetch_add(1) >= 3) {
      std::printf("supervision: worker %d %s is a new instance\n", index_,
                  SelfId().ToString().c_str());
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvJob, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvJob> ev) {
    if (std::uniform_int_distribution<int>(0, 4)(random_) == 0) {
      tally_->failed.fetch_add(1);
      throw std::runtime_error(absl::StrFormat("worker %d crashed on job %u after %d jobs", index_,
                                               ev.Get()->number, handled_));
    }
    ++handled_;
    tally_->done.fetch_add(1);
  }

  int index_;
  Tally* tally_;
  std::mt19937_64 random_;
  int handled_ = 0;
};

// Supervises three workers; restarts any that fails.
class Supervisor final : public troupe::Actor {
 public:
  Supervisor(Tally* tally, troupe::ActorId report_to)
      : Actor(&Supervisor::StateWork), tally_(tally), report_to_(report_to) {}

  troupe::SupervisorStrategy supervisor_strategy() const override {
    troupe::SupervisorStrategy strategy;
    strategy.decide = [](const troupe::ChildFailure& failure) {
      std::printf("supervision: %s -> restart\n", failure.what.c_str());
      return troupe::SupervisorDirective::kRestart;
    };
    strategy.max_restarts = 20;
    strategy.within = absl::Seconds(1);
    strategy.min_backoff = absl::Milliseconds(5);
    strategy.max_backoff = absl::Milliseconds(100);
    return strategy;
  }

 private:
  void Bootstrap() override {
    std::vector<troupe::ActorId> workers;
    for (int i = 0; i < 3; ++i) {
      uint64_t seed = 1000 + i;
      workers.push_back(RegisterRestartable(
          [this, i, seed]() mutable { return std::make_unique<Worker>(i, tally_, seed++); }));
    }
    Send(report_to_, std::make_unique<EvFeed>(std::move(workers)));
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  Tally* tally_;
  troupe::ActorId report_to_;
};

// Watches what it is told to, prints each EvTerminated and dead letter, and forwards the
// terminations to the main thread.
class Monitor final : public troupe::Actor {
 public:
  explicit Monitor(troupe::ActorId report_to) : Actor(&Monitor::StateWork), report_to_(report_to) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvFeed:
        for (const troupe::ActorId& target : ev->Get<EvFeed>()->workers) {
          Watch(target);
        }
        break;
      case troupe::kEvTerminated: {
        const troupe::EvTerminated* ended = ev->Get<troupe::EvTerminated>();
        std::printf("supervision: monitor: %s ended (%s)\n", ended->target().ToString().c_str(),
                    troupe::TerminationReasonName(ended->reason()));
        Forward(report_to_, ev);
        break;
      }
      case troupe::kEvDeadLetter:
        std::printf("supervision: monitor: %s\n",
                    ev->Get<troupe::EvDeadLetter>()->ToString().c_str());
        break;
      default:
        Unhandled(ev);
    }
  }

  troupe::ActorId report_to_;
};

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(
      argc, argv, "A supervision tree whose workers crash at random and are restarted.");
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> created =
      troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!created.ok()) {
    std::fprintf(stderr, "supervision: %s\n", created.status().ToString().c_str());
    return troupe::examples::kExitConfig;
  }
  troupe::ActorSystem& system = **created;
  Tally tally;
  troupe::ScopedActor me(system);
  const troupe::ActorId monitor = system.Register(std::make_unique<Monitor>(me.id()));
  system.SubscribeDeadLetters(monitor);
  const troupe::ActorId supervisor = system.Register(std::make_unique<Supervisor>(&tally, me.id()));
  troupe::EventHandlePtr feed = me.Receive(absl::Seconds(10));
  if (feed == nullptr || feed->Get<EvFeed>() == nullptr) {
    std::printf("supervision: FAILED: the supervisor did not start its workers\n");
    return troupe::examples::kExitFailed;
  }
  const std::vector<troupe::ActorId> workers = feed->Get<EvFeed>()->workers;
  std::vector<troupe::ActorId> watched = workers;
  watched.push_back(supervisor);
  system.Send(monitor, std::make_unique<EvFeed>(watched));

  const uint64_t jobs = absl::GetFlag(FLAGS_jobs);
  for (uint64_t job = 0; job < jobs; ++job) {
    system.Send(workers[job % workers.size()], std::make_unique<EvJob>(job));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (tally.done.load() + tally.failed.load() < jobs && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::printf("supervision: %llu jobs done, %llu failed, %llu worker starts\n",
              static_cast<unsigned long long>(tally.done.load()),
              static_cast<unsigned long long>(tally.failed.load()),
              static_cast<unsigned long long>(tally.starts.load()));

  // Post-order: the workers end before the supervisor, and the monitor hears of all four.
  system.Send(supervisor, std::make_unique<troupe::EvPoison>());
  std::vector<std::string> order;
  for (size_t i = 0; i < watched.size(); ++i) {
    troupe::EventHandlePtr ended = me.Receive(absl::Seconds(10));
    if (ended == nullptr || ended->Get<troupe::EvTerminated>() == nullptr) {
      break;
    }
    order.push_back(ended->Get<troupe::EvTerminated>()->target() == supervisor ? "supervisor"
                                                                               : "worker");
  }
  const bool ok = tally.done.load() + tally.failed.load() == jobs && tally.failed.load() > 0 &&
                  tally.starts.load() > 3 && order.size() == watched.size() &&
                  order.back() == "supervisor";
  std::printf("supervision: %s\n", ok ? "OK" : "FAILED");
  return ok ? troupe::examples::kExitOk : troupe::examples::kExitFailed;
}
