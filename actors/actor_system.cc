// SPDX-License-Identifier: Apache-2.0
#include "actors/actor_system.h"

#include "absl/strings/str_cat.h"

#include "actors/config.h"
#include "actors/events.h"
#include "actors/internal/driver.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"
#include "actors/node_hooks.h"

namespace troupe {

absl::StatusOr<std::unique_ptr<ActorSystem>> ActorSystem::Create(
    const proto::ActorSystemConfig& config) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = Build(config, nullptr, 0);
  if (system.ok()) {
    (*system)->runtime_->Start();
  }
  return system;
}

absl::StatusOr<std::unique_ptr<ActorSystem>> internal::CreateDrivenSystem(
    const proto::ActorSystemConfig& config, Driver* driver, uint64_t first_local_id) {
  return ActorSystem::Build(config, driver, first_local_id);
}

internal::Runtime* internal::RuntimeOf(const ActorSystem& system) { return system.runtime(); }

// -- node hooks (node_hooks.h)
// ----------------------------------------------------------------------

void SetRemoteRouter(ActorSystem& system, std::shared_ptr<RemoteRouter> router) {
  internal::RuntimeOf(system)->set_remote_router(std::move(router));
}

void RouteThroughRouter(ActorSystem& system, EventHandlePtr ev) {
  internal::RuntimeOf(system)->RouteThroughRouter(std::move(ev));
}

void ReportUndelivered(ActorSystem& system, EventHandlePtr ev, UndeliveredReason reason,
                       bool unsure) {
  internal::RuntimeOf(system)->Undeliverable(std::move(ev), reason, unsure);
}

MetricsRegistry& MetricsOf(ActorSystem& system) { return system.metrics(); }

absl::StatusOr<std::unique_ptr<ActorSystem>> ActorSystem::Build(
    const proto::ActorSystemConfig& config, internal::Driver* driver, uint64_t first_local_id) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  proto::ActorSystemConfig full = WithDefaults(config);
  LogLevel level = LogLevel::kInfo;
  if (absl::Status status = ParseLogLevel(full.log().level(), &level); !status.ok()) {
    return status;
  }
  SetLogLevel(level);
  std::unique_ptr<ActorSystem> system(new ActorSystem());
  system->runtime_ =
      std::make_unique<internal::Runtime>(system.get(), std::move(full), driver, first_local_id);
  return system;
}

ActorSystem::~ActorSystem() { Stop(); }

void ActorSystem::Stop() {
  if (runtime_ != nullptr) {
    runtime_->Stop();
  }
}

ActorId ActorSystem::Register(std::unique_ptr<Actor> actor, RegisterOptions options) {
  return runtime_->Register(std::move(actor), options);
}

void ActorSystem::Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags,
                       uint64_t cookie, const ActorId& sender) {
  Send(std::make_unique<EventHandle>(recipient, sender, std::move(event), flags, cookie));
}

void ActorSystem::Send(EventHandlePtr handle) {
  if (runtime_->stopped()) {
    return;  // the handle is freed; nothing runs any more
  }
  runtime_->Send(std::move(handle));
}

TimerCookie ActorSystem::Schedule(absl::Duration delay, EventHandlePtr handle) {
  return runtime_->Schedule(delay, std::move(handle));
}

namespace {

// Checks that `actor` names a local actor (suspend and resume do not cross nodes).
absl::Status CheckSuspendable(const ActorId& actor, NodeId node, const char* what) {
  if (actor.IsEmpty() || actor.IsService()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", actor.ToString(), " is not an actor id"));
  }
  if (actor.node_id() != 0 && actor.node_id() != node) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", actor.ToString(),
                                                   " lives on another node (suspend and resume "
                                                   "are local)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ActorSystem::Suspend(const ActorId& actor) {
  if (absl::Status s = CheckSuspendable(actor, node_id(), "Suspend"); !s.ok()) {
    return s;
  }
  Send(actor, std::make_unique<EvSuspend>());
  return absl::OkStatus();
}

absl::Status ActorSystem::Resume(const ActorId& actor) {
  if (absl::Status s = CheckSuspendable(actor, node_id(), "Resume"); !s.ok()) {
    return s;
  }
  Send(actor, std::make_unique<EvResume>());
  return absl::OkStatus();
}

absl::Status ActorSystem::RegisterService(const ActorId& service, const ActorId& actor) {
  return runtime_->services().Register(service, actor);
}

ActorId ActorSystem::LookupService(const ActorId& service) const {
  return runtime_->services().Lookup(service);
}

NodeId ActorSystem::node_id() const { return runtime_->node_id(); }

absl::StatusOr<uint32_t> ActorSystem::PoolIndex(std::string_view name) const {
  return runtime_->PoolIndex(name);
}

const proto::ActorSystemConfig& ActorSystem::config() const { return runtime_->config(); }

absl::Time ActorSystem::Now() const { return runtime_->Now(); }

MetricsRegistry& ActorSystem::metrics() const { return runtime_->metrics(); }

ActorSystemCounters ActorSystem::Counters() const {
  ActorSystemCounters counters;
  counters.dropped_events = runtime_->dropped_events();
  counters.failed_actors = runtime_->failed_actors();
  counters.live_mailboxes = runtime_->LiveMailboxes();
  counters.pending_timers = runtime_->PendingTimers();
  for (size_t i = 0; i < runtime_->pool_count(); ++i) {
    const internal::ExecutorPool& pool = runtime_->pool(i);
    const internal::PoolStats stats = pool.Stats();
    PoolCounters& out = counters.pools.emplace_back();
    out.name = pool.settings().name;
    out.threads = pool.settings().threads;
    out.events = stats.events;
    out.activations = stats.activations;
    out.budget_preemptions = stats.budget_preemptions;
    out.parks = stats.parks;
    out.parked_time = stats.parked_time;
    out.busy_time = stats.busy_time;
    out.cpu_time = stats.cpu_time;
    out.steals = stats.steals;
    out.queue_length = pool.QueueLength();
    out.stuck_reports = stats.stuck_reports;
    for (const internal::WorkerStats& worker : stats.workers) {
      out.workers.push_back(WorkerCounters{worker.events, worker.activations, worker.steals});
    }
  }
  return counters;
}

}  // namespace troupe
