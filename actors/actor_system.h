// SPDX-License-Identifier: Apache-2.0
//
// ActorSystem: one node's actor runtime — executor pools, mailboxes, services and the scheduler.
//
// `Create` checks its sections of the config (actors/config.h), starts every pool's workers and
// the scheduler thread. `Stop` (also run by the destructor) stops the scheduler, lets each worker
// finish its activation, joins every thread, destroys every actor and frees every queued event.
//
// Delivery guarantees (docs/design.md): a mailbox is processed by at most one thread at a time;
// events from one sender to one recipient are handled in send order; delivery is at most once, and
// a sender that asked for kTrackDelivery learns EvUndelivered when its event cannot be delivered.
//
// Scheduling (actors/README.md): each pool runs ready mailboxes on its workers with a run-next
// slot and stealable local queues, activation budgets, spin-then-park, optional fair mode and a
// watchdog that reports handlers stuck past the pool's `stuck_threshold_ms`; Counters() shows it.
//
// Thread-safety: thread-safe. Send, Register, RegisterService, LookupService, Schedule, Suspend,
// Resume, the dead-letter calls and Counters may be called from any thread until Stop begins; calls
// made concurrently with Stop or the destructor may be dropped (their events are freed).
//
// Example:
//
//   auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
//   if (!system.ok()) { std::cerr << system.status(); return 1; }
//   troupe::ActorId counter = (*system)->Register(std::make_unique<Counter>());
//   (*system)->Send(counter, std::make_unique<EvAdd>(5));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/log.h"
#include "actors/metrics.h"
#include "actors/timer.h"
#include "proto/config.pb.h"

namespace troupe {

namespace internal {
class Driver;
class Runtime;
absl::StatusOr<std::unique_ptr<ActorSystem>> CreateDrivenSystem(
    const proto::ActorSystemConfig& config, Driver* driver, uint64_t first_local_id);
Runtime* RuntimeOf(const ActorSystem& system);
}  // namespace internal

class MetricsRegistry;

// Counters of one worker thread of a pool.
struct WorkerCounters {
  uint64_t events = 0;
  uint64_t activations = 0;
  // Mailboxes this worker took from other workers' local queues.
  uint64_t steals = 0;
};

// Counters of one executor pool, summed over its workers.
struct PoolCounters {
  std::string name;
  // Worker threads running now (a temporary one included), and the bounds lending moves the count
  // between (min_threads, max_threads).
  uint32_t threads = 0;
  uint32_t min_threads = 0;
  uint32_t max_threads = 0;
  // Threads the pool took from the budget or another pool, and gave to them; temporary threads
  // it got while all its workers were inside long handlers (extra_thread_after_ms).
  uint64_t threads_borrowed = 0;
  uint64_t threads_lent = 0;
  uint64_t temporary_threads = 0;
  // Events handled and mailbox activations (one activation handles up to the event budget).
  uint64_t events = 0;
  uint64_t activations = 0;
  // Activations cut short by the event or time budget (the mailbox went to the back of the queue).
  uint64_t budget_preemptions = 0;
  // Times a worker parked on its semaphore, and how long workers were parked in total.
  uint64_t parks = 0;
  absl::Duration parked_time;
  // Worker time since start not spent looking for work (spinning or parked), summed over workers.
  absl::Duration busy_time;
  // CPU time of the pool's threads (idle spinning included).
  absl::Duration cpu_time;
  // Mailboxes taken from another worker's local queue.
  uint64_t steals = 0;
  // Ready mailboxes waiting (shared queue plus the workers' local queues).
  int64_t queue_length = 0;
  // Workers inside a handler at the moment of reading.
  int64_t handlers_running = 0;
  // Handlers reported stuck for longer than the pool's `stuck_threshold_ms`.
  uint64_t stuck_reports = 0;
  std::vector<WorkerCounters> workers;
};

// The figures of one actor class (the troupe_actor_class_*{class} metrics).
struct ActorClassCounters {
  // The class's label: its C++ type without namespaces ("Cart<Item>"), at most 64 characters;
  // "other" for the classes a node saw after 256 labels (class_stats.h).
  std::string name;
  // Actors of the class alive.
  int64_t live = 0;
  // Events its actors handled, counting one in 64 per worker: times 64, an estimate.
  uint64_t sampled_events = 0;
  // The time its actors spent in the handlers of those sampled events.
  absl::Duration sampled_handler_time;
};

// Counters of the whole node.
struct ActorSystemCounters {
  // Events neither delivered nor reported (no tracking, no forward target).
  uint64_t dropped_events = 0;
  // Events not delivered and reported to their sender (EvUndelivered).
  uint64_t undelivered_events = 0;
  // Exceptions that escaped a handler (each ended its actor, or went to its parent's strategy).
  uint64_t failed_actors = 0;
  // Mailboxes with at least one actor.
  uint64_t live_mailboxes = 0;
  // Delayed events not fired yet (cancelled ones included until due).
  uint64_t pending_timers = 0;
  std::vector<PoolCounters> pools;
  // Every actor class the node has seen, by name.
  std::vector<ActorClassCounters> classes;
};

class ActorSystem {
 public:
  // Checks its config sections, fills defaults, starts the node. kInvalidArgument names the field.
  static absl::StatusOr<std::unique_ptr<ActorSystem>> Create(
      const proto::ActorSystemConfig& config);

  ~ActorSystem();
  ActorSystem(const ActorSystem&) = delete;
  ActorSystem& operator=(const ActorSystem&) = delete;
  ActorSystem(ActorSystem&&) = delete;
  ActorSystem& operator=(ActorSystem&&) = delete;

  // Stops the node (see the file comment). Idempotent; the destructor calls it. Must be called
  // from outside the node's handlers (a call from a handler is logged and ignored).
  void Stop();

  // -- actors -----------------------------------------------------------------------------------

  // Registers `actor` on a new mailbox and schedules its Bootstrap; returns its id. Returns an
  // empty id, and the actor is destroyed, exactly when TryRegister fails; the reason is logged
  // (at error level; not while the system stops).
  ActorId Register(std::unique_ptr<Actor> actor, RegisterOptions options = {});
  // As Register, with the failure as a status a service can act on: kInvalidArgument when
  // `actor` is null or options.pool / options.mailbox do not exist, kResourceExhausted when the
  // mailbox table is full (max_mailboxes), kFailedPrecondition once Stop has begun. Nothing is
  // logged; on failure the actor is destroyed.
  absl::StatusOr<ActorId> TryRegister(std::unique_ptr<Actor> actor, RegisterOptions options = {});

  // Sends `event` to `recipient`; `sender` receives EvUndelivered if `flags` has kTrackDelivery.
  void Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags = kNoFlags,
            uint64_t cookie = 0, const ActorId& sender = ActorId());
  // Sends a prepared handle.
  void Send(EventHandlePtr handle);

  // Delivers `handle` after `delay` (at most one scheduler resolution late, never early).
  TimerCookie Schedule(absl::Duration delay, EventHandlePtr handle);

  // Suspends the local actor `actor` (sends it EvSuspend): once the actor reaches this request in
  // its mailbox, its events are held, in arrival order, not handled. Suspends nest: n suspends
  // need n resumes. kInvalidArgument for an empty, service or remote id.
  absl::Status Suspend(const ActorId& actor);
  // Undoes one Suspend (sends EvResume); the last one handles the held events, in order, before
  // newer ones. A resume of an actor that is not suspended is logged and ignored.
  absl::Status Resume(const ActorId& actor);

  // -- dead letters -----------------------------------------------------------------------------
  //
  // An event that cannot be delivered and that nobody tracks (no kTrackDelivery, no forward
  // target) is a dead letter: it is counted by type and reason (DeadLetterCounts, and the metric
  // troupe_dead_letters_total{type,reason}), logged at info level with sender, recipient and type
  // (10 lines a second at most; the next line says how many were not logged), and each
  // subscribed listener gets an EvDeadLetter describing it (the event itself is freed).
  //
  //   system->SubscribeDeadLetters(auditor);   // auditor handles kEvDeadLetter
  //
  // Lines and labels name the event type by its class (EventTypeName: "EvPing"; the number, as
  // 0x%08x, for a type no class of the program declares). A listener that ends is unsubscribed by
  // the first EvDeadLetter that cannot reach it. The runtime's own notices (watches, EvTerminated,
  // EvDeadLetter) are never dead letters; nor is an event of the runtime's own event spaces (system
  // and interconnect: a timer's EvWakeup, EvUndelivered, EvPoison, transport and session events)
  // whose recipient has ended: those are dropped silently, counted in
  // troupe_dropped_notices_total only.

  // Subscribes the local actor `listener` (again: no effect).
  void SubscribeDeadLetters(const ActorId& listener);
  void UnsubscribeDeadLetters(const ActorId& listener);
  // Returns the dead letters counted so far by event type and reason, ordered by type.
  std::vector<DeadLetterCount> DeadLetterCounts() const;

  // -- services ---------------------------------------------------------------------------------

  // Maps a ServiceId to a local actor (replacing an earlier mapping; an empty actor removes it).
  // kInvalidArgument when `service` is not a service id, `actor` is one, or `actor` lives on
  // another node; kResourceExhausted when the table is full.
  absl::Status RegisterService(const ActorId& service, const ActorId& actor);
  // Returns the actor registered for `service`, or an empty id.
  ActorId LookupService(const ActorId& service) const;

  // -- introspection ----------------------------------------------------------------------------

  NodeId node_id() const;
  // Returns the index of the pool called `name`; kNotFound otherwise.
  absl::StatusOr<uint32_t> PoolIndex(std::string_view name) const;
  // Returns the effective config (defaults filled in).
  const proto::ActorSystemConfig& config() const;
  // Reads every counter without stopping anything.
  ActorSystemCounters Counters() const;
  // Returns the node's clock: absl::Now(), or the simulated time when the deterministic test
  // runtime runs the node. Actors that measure time through it can be tested without sleeping.
  absl::Time Now() const;

  // Returns the node's metrics registry: every counter and gauge of its pools, mailboxes and the
  // extensions that publish into it (the interconnect's sessions), enumerable at any time.
  MetricsRegistry& metrics() const;
  // Returns the node's log context: its levels (from the config's `log` section; change them here
  // at run time) and its id on every line its threads and handlers write. Bind threads of your own
  // that work for this node to it with LogBinding.
  LogContext& log_context() const;

 private:
  friend class Actor;
  friend absl::StatusOr<std::unique_ptr<ActorSystem>> internal::CreateDrivenSystem(
      const proto::ActorSystemConfig& config, internal::Driver* driver, uint64_t first_local_id);
  friend internal::Runtime* internal::RuntimeOf(const ActorSystem& system);

  // The runtime behind this node; for Actor and the driver only (extensions use node_hooks.h).
  internal::Runtime* runtime() const { return runtime_.get(); }

  ActorSystem() = default;
  // Validates `config` and builds the runtime (not started).
  static absl::StatusOr<std::unique_ptr<ActorSystem>> Build(const proto::ActorSystemConfig& config,
                                                            internal::Driver* driver,
                                                            uint64_t first_local_id);

  std::unique_ptr<internal::Runtime> runtime_;
};

}  // namespace troupe
