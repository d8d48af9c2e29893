// SPDX-License-Identifier: Apache-2.0
//
// The implementation behind ActorSystem: delivery rules, dispatch, registration and shutdown.
//
// Delivery rules, in order (DESIGN.md):
//   1. recipient on another node → interconnect (none yet in actors/: reported as kNoRoute);
//   2. local recipient → its mailbox after the service rewrite; the pusher that activates an idle
//      mailbox hands it to the mailbox's pool;
//   3. missing mailbox or actor → forward target if set, else Undelivered to a tracking sender,
//      else dropped and counted.
// Whether the actor exists is decided by the mailbox's reader at dispatch time (local ids are never
// reused), so a send never races with an actor's death.
//
// Thread-safety: thread-safe, except Dispatch (called by the worker owning the mailbox).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "actors/actor.h"
#include "actors/internal/executor_pool.h"
#include "actors/internal/mailbox_table.h"
#include "actors/internal/scheduler.h"
#include "actors/internal/service_table.h"
#include "proto/config.pb.h"

namespace troupe {
class ActorSystem;
}

namespace troupe::internal {

class Runtime {
 public:
  // `config` must be validated and have defaults filled in.
  Runtime(ActorSystem* system, proto::ActorSystemConfig config);
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

  void Send(EventHandlePtr ev);
  // Applies rule 3 to an event that cannot be delivered.
  void Undeliverable(EventHandlePtr ev, UndeliveredReason reason);
  // Hands `ev` to its actor in `mailbox` (worker owning the mailbox only).
  void Dispatch(Mailbox* mailbox, EventHandlePtr ev);
  TimerCookie Schedule(absl::Duration delay, EventHandlePtr ev) {
    return scheduler_->Schedule(delay, std::move(ev));
  }

  // -- actors -----------------------------------------------------------------------------------

  ActorId Register(std::unique_ptr<Actor> actor, const RegisterOptions& options);
  ActorId RegisterWithSameMailbox(Actor* owner, std::unique_ptr<Actor> actor);

  // -- lookups ----------------------------------------------------------------------------------

  const proto::ActorSystemConfig& config() const { return config_; }
  NodeId node_id() const { return node_id_; }
  ServiceTable& services() { return services_; }
  const ServiceTable& services() const { return services_; }
  const MailboxTable& mailboxes() const { return mailboxes_; }
  size_t pool_count() const { return pools_.size(); }
  const ExecutorPool& pool(size_t index) const { return *pools_[index]; }
  absl::StatusOr<uint32_t> PoolIndex(std::string_view name) const;
  uint64_t dropped_events() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t failed_actors() const { return failed_actors_.load(std::memory_order_relaxed); }
  size_t PendingTimers() const { return scheduler_->PendingCount(); }

 private:
  bool IsLocal(const ActorId& id) const { return id.node_id() == 0 || id.node_id() == node_id_; }
  void Attach(Mailbox* mailbox, Actor* actor, uint32_t pool, uint32_t hint);
  void Destroy(Mailbox* mailbox, Actor* actor);
  void FreeAllQueued();

  ActorSystem* const system_;
  const proto::ActorSystemConfig config_;
  const NodeId node_id_;
  uint32_t default_pool_ = 0;
  MailboxTable mailboxes_;
  ServiceTable services_;
  std::vector<std::unique_ptr<ExecutorPool>> pools_;
  std::unique_ptr<Scheduler> scheduler_;
  // Starts at the wall clock in nanoseconds, so ids of a restarted node do not collide with the
  // old incarnation's (that would need more than one registration per nanosecond).
  std::atomic<uint64_t> next_local_id_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> failed_actors_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace troupe::internal
