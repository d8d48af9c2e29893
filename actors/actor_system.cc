// SPDX-License-Identifier: Apache-2.0
#include "actors/actor_system.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "actors/check.h"
#include "actors/config.h"
#include "actors/events.h"
#include "actors/internal/driver.h"
#include "actors/internal/node_metrics.h"
#include "actors/internal/pool_metrics.h"
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

// -- node hooks (node_hooks.h) --------------------------------------------------------------------

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

std::optional<bool> IsMailboxIdle(ActorSystem& system, const ActorId& actor) {
  if (actor.IsEmpty() || actor.IsService() ||
      (actor.node_id() != 0 && actor.node_id() != system.node_id())) {
    return std::nullopt;
  }
  // Slots live as long as the table (never freed while the node runs), so reading the state of
  // one whose actor just ended is safe; it may describe the slot's next actor.
  const internal::Mailbox* mailbox = internal::RuntimeOf(system)->mailboxes().Get(actor.hint());
  if (mailbox == nullptr) {
    return std::nullopt;
  }
  return mailbox->IsIdle();
}

absl::Status AttachIoPoller(ActorSystem& system, std::string_view pool, IoPoller* poller) {
  return internal::RuntimeOf(system)->AttachIoPoller(pool, poller);
}

void DetachIoPoller(ActorSystem& system, IoPoller* poller) {
  internal::RuntimeOf(system)->DetachIoPoller(poller);
}

SystemLease LeaseSystem(ActorSystem& system, std::string name) {
  return {&system, internal::RuntimeOf(system)->AddLease(std::move(name))};
}

void SystemLease::Release() {
  if (system_ != nullptr) {
    internal::RuntimeOf(*system_)->DropLease(id_);
    system_ = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<ActorSystem>> ActorSystem::Build(
    const proto::ActorSystemConfig& config, internal::Driver* driver, uint64_t first_local_id) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  proto::ActorSystemConfig full = WithDefaults(config);
  std::unique_ptr<ActorSystem> system(new ActorSystem());
  system->runtime_ =
      std::make_unique<internal::Runtime>(system.get(), std::move(full), driver, first_local_id);
  return system;
}

ActorSystem::~ActorSystem() {
  if (runtime_ != nullptr) {
    const std::vector<std::string> users = runtime_->LiveLeases();
    TROUPE_CHECK(users.empty()) << "ActorSystem of node " << node_id() << " destroyed while "
                                << absl::StrJoin(users, ", ") << " still uses it: destroy "
                                << (users.size() == 1 ? "it" : "them")
                                << " first (troupe::node::Node in node/node.h keeps the order)";
  }
  Stop();
}

void ActorSystem::Stop() {
  if (runtime_ != nullptr) {
    runtime_->Stop();
  }
}

ActorId ActorSystem::Register(std::unique_ptr<Actor> actor, RegisterOptions options) {
  return runtime_->Register(std::move(actor), options);
}

absl::StatusOr<ActorId> ActorSystem::TryRegister(std::unique_ptr<Actor> actor,
                                                 RegisterOptions options) {
  return runtime_->TryRegister(std::move(actor), options);
}

void ActorSystem::Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags,
                       uint64_t cookie, const ActorId& sender) {
  Send(std::make_unique<EventHandle>(recipient, sender, std::move(event), flags, cookie, ActorId(),
                                     CurrentTraceId()));
}

void ActorSystem::Send(EventHandlePtr handle) {
  if (runtime_->stopped()) {
    return;  // the handle is freed; nothing runs any more
  }
  if (handle->trace_id() == 0) {
    handle->set_trace_id(CurrentTraceId());
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

void ActorSystem::SubscribeDeadLetters(const ActorId& listener) {
  runtime_->SubscribeDeadLetters(listener);
}

void ActorSystem::UnsubscribeDeadLetters(const ActorId& listener) {
  runtime_->UnsubscribeDeadLetters(listener);
}

std::vector<DeadLetterCount> ActorSystem::DeadLetterCounts() const {
  return runtime_->DeadLetterCounts();
}

absl::Status ActorSystem::RegisterService(const ActorId& service, const ActorId& actor) {
  if (!actor.IsEmpty() && !actor.IsService() && actor.node_id() != 0 &&
      actor.node_id() != runtime_->node_id()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterService: ", actor.ToString(), " lives on node ", actor.node_id(),
                     "; a service of node ", runtime_->node_id(), " maps to a local actor"));
  }
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

LogContext& ActorSystem::log_context() const { return runtime_->log_context(); }

ActorSystemCounters ActorSystem::Counters() const {
  ActorSystemCounters counters;
  const proto::ActorSystemConfig& config = runtime_->config();
  for (const proto::PoolConfig& pool : config.pools()) {
    counters.pools.emplace_back().name = pool.name();
  }
  runtime_->metrics().ForEach([&](const MetricSample& sample) {
    // The node's rows (node_metrics.h), then the pools'.
    if (FillFromRows(internal::kNodeMetrics, sample, counters) ||
        FillFromRows(internal::kReasonMetrics, sample, counters)) {
      return;
    }
    if (sample.name.starts_with("troupe_actor_class_")) {
      const std::string_view name = sample.label("class");
      auto it = std::find_if(counters.classes.begin(), counters.classes.end(),
                             [&](const ActorClassCounters& c) { return c.name == name; });
      if (it == counters.classes.end()) {
        counters.classes.emplace_back().name = name;
        it = counters.classes.end() - 1;
      }
      FillFromRows(internal::kClassMetrics, sample, *it);
      return;
    }
    if (sample.name.starts_with("troupe_pool_")) {
      const std::string_view name = sample.label("pool");
      for (PoolCounters& pool : counters.pools) {
        if (pool.name == name) {
          // Pool-wide rows and workers' rows (summed into the pool): pool_metrics.h.
          if (!FillFromRows(internal::kPoolMetrics, sample, pool)) {
            FillFromRows(internal::kWorkerMetrics, sample, pool);
          }
          break;
        }
      }
    }
  });
  return counters;
}

}  // namespace troupe
