// SPDX-License-Identifier: Apache-2.0
//
// The implementation behind ActorSystem: delivery rules, dispatch, registration and shutdown.
//
// Delivery rules, in order (docs/design.md):
//   1. recipient on another node → the driver's RouteRemote when a driver runs the node (the
//      deterministic test runtime's simulated interconnect), else the installed RemoteRouter (the
//      interconnect), else reported as kNoRoute;
//   2. local recipient → its mailbox after the service rewrite; the pusher that activates an idle
//      mailbox hands it to the mailbox's pool;
//   3. missing mailbox or actor → forward target if set, else Undelivered to a tracking sender,
//      else dropped and counted.
// Whether the actor exists is decided by the mailbox's reader at dispatch time (local ids are never
// reused), so a send never races with an actor's death.
//
// Thread-safety: thread-safe, except Dispatch (called by the worker owning the mailbox).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/internal/class_stats.h"
#include "actors/internal/dead_letters.h"
#include "actors/internal/driver.h"
#include "actors/internal/executor_pool.h"
#include "actors/internal/mailbox_table.h"
#include "actors/internal/scheduler.h"
#include "actors/internal/service_table.h"
#include "actors/internal/thread_lending.h"
#include "actors/log.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "proto/config.pb.h"

namespace troupe {
class ActorSystem;
}

namespace troupe::internal {

// The events of one UndeliveredReason that a node dropped (no tracking, no forward target) and
// that it reported to their sender as undelivered (node_metrics.h publishes both).
struct ReasonCounts {
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> undelivered{0};
};

class Runtime {
 public:
  // `config` must be validated and have defaults filled in. With a `driver` (see driver.h) no
  // thread is started and local ids start at `first_local_id`; without one they start at the wall
  // clock in nanoseconds.
  Runtime(ActorSystem* system, proto::ActorSystemConfig config, Driver* driver = nullptr,
          uint64_t first_local_id = 0);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  Runtime(Runtime&&) = delete;
  Runtime& operator=(Runtime&&) = delete;

  void Start();
  // Stops the scheduler and pools, destroys every actor and frees every queued event.
  void Stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  // -- delivery ---------------------------------------------------------------------------------

  // Sends `ev`: through the driver when there is one, else straight to Deliver.
  void Send(EventHandlePtr ev) {
    if (driver_ != nullptr) [[unlikely]] {
      driver_->OnSend(this, std::move(ev));
      return;
    }
    Deliver(std::move(ev));
  }
  // Applies the delivery rules to `ev` (the driver calls it for events it lets through).
  void Deliver(EventHandlePtr ev);
  // Applies rule 3 to an event that cannot be delivered. `unsure` marks an event whose fate is
  // unknown (a session died with it in flight): it is reported to a sender that tracked it or
  // asked for kGenerateUnsureUndelivered.
  void Undeliverable(EventHandlePtr ev, UndeliveredReason reason, bool unsure = false);
  // Hands `ev` to its actor in `mailbox` (the reader owning the mailbox only). A worker passes its
  // trace, which records the handler it is in for the watchdog.
  void Dispatch(Mailbox* mailbox, EventHandlePtr ev, HandlerTrace* trace = nullptr) {
    Dispatch(mailbox, mailbox->first_actor(), std::move(ev), trace);
  }
  // As Dispatch, with the mailbox's actor list as the worker read it (see kActorsChanged in
  // mailbox.h).
  void Dispatch(Mailbox* mailbox, Actor* actors, EventHandlePtr ev, HandlerTrace* trace);
  TimerCookie Schedule(absl::Duration delay, EventHandlePtr ev) {
    if (driver_ != nullptr) {
      return driver_->Schedule(this, delay, std::move(ev));
    }
    return scheduler_->Schedule(delay, std::move(ev));
  }
  absl::Time Now() const { return driver_ != nullptr ? driver_->Now() : absl::Now(); }
  // The dead-letter sink's listeners and counts (see ActorSystem::SubscribeDeadLetters).
  void SubscribeDeadLetters(const ActorId& listener) { dead_letters_.Subscribe(listener); }
  void UnsubscribeDeadLetters(const ActorId& listener) { dead_letters_.Unsubscribe(listener); }
  std::vector<DeadLetterCount> DeadLetterCounts() const { return dead_letters_.Counts(); }
  // Installs the router for recipients on other nodes (see actors/node_hooks.h).
  void set_remote_router(std::shared_ptr<RemoteRouter> router) {
    // release: pairs with the acquire in RouteThroughRouter; a sender that sees the router sees
    // it built.
    remote_router_.store(router.get(), std::memory_order_release);
    troupe::MutexLock lock(&routers_mu_);
    routers_.push_back(std::move(router));
  }
  // Rule 1 without a driver: the installed router, else kNoRoute.
  void RouteThroughRouter(EventHandlePtr ev);
  // Extensions that must end before the node (see LeaseSystem in actors/node_hooks.h): add one,
  // drop one, and the names of those alive.
  uint64_t AddLease(std::string name) {
    troupe::MutexLock lock(&routers_mu_);
    leases_.emplace(++last_lease_, std::move(name));
    return last_lease_;
  }
  void DropLease(uint64_t lease) {
    troupe::MutexLock lock(&routers_mu_);
    leases_.erase(lease);
  }
  std::vector<std::string> LiveLeases() const {
    troupe::MutexLock lock(&routers_mu_);
    std::vector<std::string> names;
    for (const auto& [id, name] : leases_) {
      names.push_back(name);
    }
    return names;
  }
  // See AttachIoPoller and DetachIoPoller in actors/node_hooks.h.
  absl::Status AttachIoPoller(std::string_view pool, IoPoller* poller);
  void DetachIoPoller(IoPoller* poller);

  // -- actors -----------------------------------------------------------------------------------

  // Register logs the reason and returns an empty id where TryRegister returns a status. With a
  // `parent`, the actor is its child, restartable with `*factory` when there is one (moved from
  // once the child is registered; a pointer, so a plain child's spawn moves no empty callable).
  ActorId Register(std::unique_ptr<Actor> actor, const RegisterOptions& options,
                   Actor* parent = nullptr, ActorFactory* factory = nullptr);
  absl::StatusOr<ActorId> TryRegister(std::unique_ptr<Actor> actor, const RegisterOptions& options,
                                      Actor* parent = nullptr, ActorFactory* factory = nullptr);
  ActorId RegisterWithSameMailbox(Actor* owner, std::unique_ptr<Actor> actor);

  // -- lookups ----------------------------------------------------------------------------------

  const proto::ActorSystemConfig& config() const { return config_; }
  NodeId node_id() const { return node_id_; }
  MetricsRegistry& metrics() const { return metrics_; }
  LogContext& log_context() const { return log_context_; }
  ClassTable& classes() { return classes_; }
  ServiceTable& services() { return services_; }
  const ServiceTable& services() const { return services_; }
  const MailboxTable& mailboxes() const { return mailboxes_; }
  // Returns the number of mailboxes with actors.
  uint64_t LiveMailboxes() const {
    int64_t live = mailboxes_.LiveCountOutsideCaches();
    for (const auto& pool : pools_) {
      live += pool->LiveMailboxesInCaches();
    }
    return static_cast<uint64_t>(std::max<int64_t>(0, live));
  }
  size_t pool_count() const { return pools_.size(); }
  const ExecutorPool& pool(size_t index) const { return *pools_[index]; }
  // For tests that move threads by hand (ExecutorPool::SetThreads).
  ExecutorPool& pool(size_t index) { return *pools_[index]; }
  absl::StatusOr<uint32_t> PoolIndex(std::string_view name) const;
  uint64_t dropped_events() const {
    uint64_t dropped = 0;
    for (const ReasonCounts& counts : reasons_) {
      dropped += counts.dropped.load(std::memory_order_relaxed);
    }
    return dropped;
  }
  uint64_t failed_actors() const { return failed_actors_.load(std::memory_order_relaxed); }
  size_t PendingTimers() const {
    return driver_ != nullptr ? driver_->PendingTimers(this) : scheduler_->PendingCount();
  }

 private:
  bool IsLocal(const ActorId& id) const { return id.node_id() == 0 || id.node_id() == node_id_; }
  // Hands a mailbox the caller moved to kScheduled to its reader.
  void Activate(Mailbox* mailbox) {
    if (driver_ != nullptr) [[unlikely]] {
      driver_->MailboxReady(this, mailbox);
      return;
    }
    pools_[mailbox->pool()]->Schedule(mailbox);
  }
  // The calling worker's hint cache when it is a worker of this node, else null.
  MailboxTable::HintCache* WorkerHints() {
    WorkerContext* worker = CurrentWorker();
    return worker != nullptr && worker->runtime == this ? &worker->hints : nullptr;
  }
  void Attach(Mailbox* mailbox, Actor* actor, uint32_t pool, uint32_t hint);
  // Runs `actor`'s handler for `ev` (Bootstrap included), catching what it throws. kWithExtras:
  // the actor may have extras, which may consume `ev` (ActorExtras::Consume).
  template <bool kWithExtras>
  void Handle(Actor* actor, EventHandlePtr& ev, HandlerTrace* trace);
  // Dispatch for EvSuspend, EvResume, EvWatch, EvUnwatch, EvSupervise, EvStop, EvChildFailed and
  // the events of an actor with extras (internal/extras.h): suspended, asking, watching, watched,
  // failed, or ended and waiting for its children.
  void DispatchSlow(Mailbox* mailbox, Actor* actor, EventHandlePtr ev, HandlerTrace* trace);
  void Destroy(Mailbox* mailbox, Actor* actor);

  // -- supervision (internal/supervision.cc) ----------------------------------------------------

  // Makes `child` (attached, not running yet) a child of `parent`, restartable with `factory`.
  void Adopt(Actor* parent, Actor* child, ActorFactory* factory);
  // For Destroy, before the actor goes: takes it out of its parent's children. Returns the parent
  // to wake (WakeParent, once the actor is gone) when it was the last one the parent waited for.
  ActorId Unlink(Actor* actor);
  void WakeParent(const ActorId& parent, const ActorId& child);
  // For Destroy: true while `actor` must wait for its children (told to stop on the first call).
  bool WaitForChildren(Actor* actor);
  // Sends EvStop from `parent` to each of `children`.
  void StopChildren(const ActorId& parent, const std::vector<ActorId>& children);
  // A handler of `actor` threw `what` while handling `type`: a top-level actor ends, a child
  // waits for its parent's directive.
  void OnHandlerFailure(Actor* actor, EventType type, std::string what);
  // The parent's side: applies its strategy to the EvChildFailed `ev`. Throws to escalate.
  void Supervise(Actor* parent, EventHandlePtr& ev);
  // The child's side of EvSupervise and EvStop (OnDirectiveInScope, within the actor's log scope).
  void OnDirective(Mailbox* mailbox, Actor* actor, EventHandlePtr& ev, HandlerTrace* trace);
  void OnDirectiveInScope(Mailbox* mailbox, Actor* actor, EventHandlePtr& ev, HandlerTrace* trace);
  // Replaces `old` by a new instance from its factory and bootstraps it; returns it, or null
  // when there is no factory or it made nothing.
  Actor* Restart(Mailbox* mailbox, Actor* old, HandlerTrace* trace);
  // Handles held events until none is left or the actor is suspended, failed or ending.
  void DrainHeld(Actor* actor, HandlerTrace* trace);
  // Reports handlers stuck past their pool's threshold; wakes workers to take work a stuck worker
  // holds. Runs on its own thread when a pool has a threshold or more than one worker.
  void WatchdogLoop();
  // Thread lending (thread_lending.h), run by the watchdog once per lending.period_ms: samples
  // each pool's busy time and ready queue since the last call, applies the rule's moves to the
  // pools and logs each at debug with its figures.
  void LendThreads();
  // Adds `pool`'s temporary worker when `all_long` (every running worker has been inside one
  // handler for its extra_thread_after), retires it otherwise; logs once per episode.
  void UpdateTemporaryThread(ExecutorPool& pool, bool all_long, absl::Duration longest);
  void FreeAllQueued();
  // Publishes dropped events, failed actors, live mailboxes and pending timers.
  void PublishNodeMetrics();

  ActorSystem* const system_;
  Driver* const driver_;
  const proto::ActorSystemConfig config_;
  const NodeId node_id_;
  // Levels from the config's `log` section; every thread of the node and every handler is bound
  // to it (LogBinding, Handle).
  mutable LogContext log_context_;
  // Before the pools: they publish into it, and unregister when destroyed.
  mutable MetricsRegistry metrics_;
  // Live actors and sampled events per class (publishes into metrics_).
  ClassTable classes_{&metrics_};
  // Dropped events by type and reason, their log lines (10 a second) and listeners.
  DeadLetters dead_letters_{&metrics_, 10};
  uint32_t default_pool_ = 0;
  // Each pool's `default_mailbox`, by pool index.
  std::vector<MailboxKind> pool_mailbox_;
  MailboxTable mailboxes_;
  ServiceTable services_;
  std::vector<std::unique_ptr<ExecutorPool>> pools_;
  std::unique_ptr<Scheduler> scheduler_;
  troupe::Mutex watchdog_mu_;
  bool watchdog_stop_ ABSL_GUARDED_BY(watchdog_mu_) = false;
  std::thread watchdog_;
  // The lending rule and what it last sampled (busy nanoseconds per pool, when); the watchdog
  // thread's only. Null when no pool may change its count.
  std::unique_ptr<ThreadLending> lending_;
  std::vector<int64_t> lending_busy_ns_;
  int64_t lending_at_ns_ = 0;
  // Starts at the wall clock in nanoseconds, so ids of a restarted node do not collide with the
  // old incarnation's (that would need more than one registration per nanosecond). A driver
  // chooses the start instead.
  std::atomic<uint64_t> next_local_id_;
  // Events dropped (no tracking, no forward target) and events reported to their sender as
  // Undelivered, by UndeliveredReason (index 0 unused).
  static constexpr size_t kReasons = static_cast<size_t>(UndeliveredReason::kOverloaded) + 1;
  std::array<ReasonCounts, kReasons> reasons_{};
  std::atomic<uint64_t> failed_actors_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<RemoteRouter*> remote_router_{nullptr};
  // Every router ever installed, kept alive until the runtime dies (see SetRemoteRouter), and
  // the extensions' leases.
  mutable troupe::Mutex routers_mu_;
  std::vector<std::shared_ptr<RemoteRouter>> routers_ ABSL_GUARDED_BY(routers_mu_);
  std::map<uint64_t, std::string> leases_ ABSL_GUARDED_BY(routers_mu_);
  uint64_t last_lease_ ABSL_GUARDED_BY(routers_mu_) = 0;
  // The node-wide metrics (dropped events, failed actors, live mailboxes, pending timers).
  std::vector<MetricsRegistry::Registration> node_metrics_;
};

}  // namespace troupe::internal
