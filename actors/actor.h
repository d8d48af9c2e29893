// SPDX-License-Identifier: Apache-2.0
//
// Actor: a class with private state and a current state function that handles one event at a time.
//
// While handling an event an actor may change its state, switch its state function (`Become`),
// send events, register new actors, schedule delayed events and end itself (`PassAway`). The
// runtime guarantees that an actor is never run by two threads at once (nor are actors sharing a
// mailbox), and that events from one sender are handled in the order they were sent.
//
// Lifetime: `ActorSystem::Register` takes ownership. The first event is Bootstrap, turned into a
// call to `Bootstrap()`. The actor is destroyed after the handler that called `PassAway()` returns,
// when a handler throws and it is top-level or its parent stops it (actors/supervision.h; the
// exception is logged with the actor id and event type), or when the system stops. Events still
// queued for it are then reported undelivered. An actor registered by another is its child and
// ends before it.
//
// Thread-safety: actor-confined. Every protected member is to be called from the actor's own
// handlers (or Bootstrap) only.
//
// Example:
//
//   class Counter : public troupe::Actor {
//    public:
//     Counter() : Actor(&Counter::StateWork) {}
//
//    private:
//     TROUPE_STATE(StateWork) {
//       switch (ev->type()) {
//         TROUPE_HFUNC(EvAdd, Handle);
//         default:
//           Unhandled(ev);   // ends the actor on EvPoison, drops anything else
//       }
//     }
//     void Handle(troupe::EventPtr<EvAdd> ev) { total_ += ev.Get()->value; }
//     int64_t total_ = 0;
//   };
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/internal/small_alloc.h"
#include "actors/mailbox_kind.h"
#include "actors/supervision.h"
#include "actors/timer.h"

namespace troupe {

class Actor;
class ActorSystem;
template <typename ReplyEvent>
class AskAwaiter;

// Makes a new instance of an actor: what Actor::RegisterRestartable registers, and what its
// supervisor calls again to restart it (actors/supervision.h).
using ActorFactory = absl::AnyInvocable<std::unique_ptr<Actor>()>;

// What every form of ask yields (Actor::Ask with a callback, `co_await Actor::Ask`, AskFuture in
// actors/scoped_actor.h): the reply event, which the asker then owns, or why there is none.
// Owned because the reply is the asker's to keep: a callback may move it into the actor's state, a
// coroutine holds it across its next co_await, and a future hands it to another thread, all after
// the event that carried it has been handled.
template <typename ReplyEvent>
using AskResult = absl::StatusOr<std::unique_ptr<ReplyEvent>>;

namespace internal {
class Mailbox;
class Runtime;
struct ActorExtras;
struct Children;
// Called once with an ask's reply (OK) or the reason there is none (see Actor::Ask).
using AskContinuation = absl::AnyInvocable<void(EventHandlePtr& reply, const absl::Status& error)>;
}  // namespace internal

// Where and how an actor is registered.
struct RegisterOptions {
  // Executor pool index from `ActorSystem::PoolIndex`; unset means the configured default pool.
  std::optional<uint32_t> pool;
  // Mailbox kind (actors/mailbox_kind.h); kPoolDefault takes the pool's `default_mailbox`.
  MailboxKind mailbox = MailboxKind::kPoolDefault;
  // Actor::Register only: true registers a top-level actor instead of a child of the caller
  // (actors/supervision.h).
  bool detached = false;
};

// Actors come from the same per-thread size-class pool as events (actors/internal/small_alloc.h):
// spawning and ending many short-lived actors, often on different workers, was malloc-bound.
// Actors larger than the pool's classes fall back to malloc.
class Actor : public internal::SmallPooled {
 public:
  // A state function: handles the event in `ev` (and may take it).
  using StateFunc = void (Actor::*)(EventHandlePtr& ev);

  // Starts in `initial_state`, a member function of the derived class.
  template <typename Derived>
  explicit Actor(void (Derived::*initial_state)(EventHandlePtr&))
      : state_(static_cast<StateFunc>(initial_state)) {}

  virtual ~Actor();
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;
  Actor(Actor&&) = delete;
  Actor& operator=(Actor&&) = delete;

  // Returns this actor's id (empty before Register).
  const ActorId& SelfId() const { return self_; }
  // Returns the system this actor lives in (null before Register).
  ActorSystem* system() const { return system_; }

 protected:
  // -- lifecycle --------------------------------------------------------------------------------

  // Called once, as the actor's first event, on its own pool. The default does nothing.
  virtual void Bootstrap() {}

  // Makes `state` the state function for the next events.
  template <typename Derived>
  void Become(void (Derived::*state)(EventHandlePtr&)) {
    state_ = static_cast<StateFunc>(state);
  }

  // Ends this actor once the current handler returns; its destructor runs then and events still
  // queued for it are reported undelivered. Calling it twice is harmless.
  void PassAway() { passed_away_ = true; }

  // Suspends this actor once the current handler returns: its events are held, in order, until
  // as many EvResume (ActorSystem::Resume) as suspends arrive. Same as receiving EvSuspend now.
  void Suspend();
  // Returns how many resumes this actor still needs (0 when it is not suspended).
  uint32_t SuspendCount() const;

  // Default for events a state function does not handle: EvPoison ends the actor; any other event
  // is dropped (logged at debug level).
  void Unhandled(EventHandlePtr& ev);

  // Drops an event whose bytes did not parse, logs it, and reports Undelivered{kParseError} to a
  // tracking sender. TROUPE_HFUNC calls it; handlers never see a half-parsed message.
  void DropUnparsable(EventHandlePtr& ev);

  // -- sending ---------------------------------------------------------------------------------

  // Sends `event` to `recipient` with this actor as sender. It carries the trace id of the event
  // being handled (CurrentTraceId(), log.h), as do the other sends and schedules below.
  void Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags = kNoFlags,
            uint64_t cookie = 0) const;
  // Sends a prepared handle (its sender is used as is).
  void Send(EventHandlePtr handle) const;
  // Sends `ev` on to `recipient`, keeping its sender, flags and cookie.
  void Forward(const ActorId& recipient, EventHandlePtr& ev) const;

  // Sends `event` to this actor after `delay`. The returned cookie cancels it.
  TimerCookie Schedule(absl::Duration delay, std::unique_ptr<EventBase> event,
                       uint64_t cookie = 0) const;
  // Sends `event` to `recipient` after `delay`, with this actor as sender.
  TimerCookie Schedule(absl::Duration delay, const ActorId& recipient,
                       std::unique_ptr<EventBase> event, uint32_t flags = kNoFlags,
                       uint64_t cookie = 0) const;
  // Sends EvWakeup{tag} to this actor after `delay`.
  TimerCookie ScheduleWakeup(absl::Duration delay, uint64_t tag = 0) const;

  // -- requests and replies ----------------------------------------------------------------------
  //
  // An ask sends `request` to `to` (tracked) and yields one AskResult<ReplyEvent> (above), once,
  // later, in a handler of this actor (so never while another of its events is handled). Two
  // forms here, a third for plain threads:
  //   - Ask(to, request, timeout, on_reply) calls `on_reply` with the result;
  //   - `co_await Ask(to, request, timeout)` in a coroutine (include actors/coroutine.h, which says
  //     what the actor does while the coroutine waits) resumes it with the result;
  //   - AskFuture(system, to, request, timeout) (actors/scoped_actor.h) returns a future of it.
  // The result, in every form:
  //   | what happened                                  | the result                              |
  //   |------------------------------------------------|-----------------------------------------|
  //   | `to` answered with Reply(ev, event of Reply)   | OK: the reply event, owned by the asker |
  //   | it answered with another event type            | kInvalidArgument naming both types      |
  //   | the reply's bytes did not parse                | kDataLoss                               |
  //   | the request could not be delivered             | kUnavailable naming the Undelivered     |
  //   |                                                | reason ("unsure" when it was sent)      |
  //   | no answer within `timeout`                     | kDeadlineExceeded                       |
  //   | the system stopped first (AskFuture only)      | kCancelled                              |
  // The framework matches the answer by the request's cookie, which Reply copies; an answer that
  // comes after the ask ended (a reply after its timeout) is dropped, and so is the timeout after
  // a reply. Once the result is handed over nothing of the ask is kept; an actor that ends with
  // asks pending drops them: no callback runs and a waiting coroutine is destroyed unresumed.
  // Works across nodes. Ask cookies have the top bit set: keep it clear in cookies of your own.
  //
  //   Ask<EvPrice>(quotes, std::make_unique<EvQuote>("ACME"), absl::Seconds(1),
  //                [this](troupe::AskResult<EvPrice> price) {
  //                  if (price.ok()) { last_ = (*price)->value; }
  //                });
  //
  // Returns the request id (the cookie).
  template <typename ReplyEvent>
  uint64_t Ask(const ActorId& to, std::unique_ptr<EventBase> request, absl::Duration timeout,
               absl::AnyInvocable<void(AskResult<ReplyEvent>)> on_reply) {
    return AskErased(
        to, std::move(request), timeout,
        [on_reply = std::move(on_reply)](EventHandlePtr& reply, const absl::Status& error) mutable {
          if (!error.ok()) {
            on_reply(error);
          } else if (reply->type() != ReplyEvent::kEventType) {
            on_reply(absl::InvalidArgumentError("expected a reply of type " +
                                                EventTypeName(ReplyEvent::kEventType) + ", got " +
                                                EventTypeName(reply->type())));
          } else if (std::unique_ptr<ReplyEvent> event = reply->template Release<ReplyEvent>();
                     event == nullptr) {
            on_reply(absl::DataLossError("the reply's bytes did not parse"));
          } else {
            on_reply(std::move(event));
          }
        });
  }
  // The same for a coroutine: `co_await` the returned awaiter (defined in actors/coroutine.h).
  template <typename ReplyEvent>
  AskAwaiter<ReplyEvent> Ask(const ActorId& to, std::unique_ptr<EventBase> request,
                             absl::Duration timeout);
  // Sends `response` to the sender of `request` with the request's cookie: the answer an Ask
  // matches. (Also fine for requests that were not asks.)
  void Reply(const EventHandlePtr& request, std::unique_ptr<EventBase> response,
             uint32_t flags = kNoFlags) const;
  // The same from a TROUPE_HFUNC handler's typed view.
  template <typename Request>
  void Reply(const EventPtr<Request>& request, std::unique_ptr<EventBase> response,
             uint32_t flags = kNoFlags) const {
    Send(request->sender(), std::move(response), flags, request->cookie());
  }

  // -- watching ----------------------------------------------------------------------------------
  //
  // Watch(target) delivers exactly one EvTerminated{target, reason} (events.h) to this actor when
  // `target` ends, whatever happens:
  //   | what happened                                               | reason     |
  //   |-------------------------------------------------------------|------------|
  //   | it ended (PassAway, EvPoison, stopped by its parent)        | kStopped   |
  //   | a handler threw and it was not restarted                    | kFailed    |
  //   | it had already ended, or never existed, when the watch came | kNotFound  |
  //   | its node died, or this node's session to it ended           | kNodeLost  |
  //   | its node left the cluster (shut down, saying goodbye)       | kNodeLeft  |
  // `target` in the notice is the id passed to Watch (a service id stays one: the watch is on the
  // actor the service named when the watch arrived). Watching an actor twice is one watch;
  // watching itself does nothing. After kNodeLost the target may still be alive on its node:
  // watching it again after a new session is this actor's choice. Unwatch(target) means no
  // EvTerminated for it comes later (not even one already on its way). Watches end with either
  // side: a target keeps no record of a watcher that ended, nor a watcher of a target that did.
  //
  //   Watch(worker);
  //   ...
  //   case kEvTerminated: Restart(ev->Get<EvTerminated>()->target()); break;
  void Watch(const ActorId& target);
  void Unwatch(const ActorId& target);

  // Returns the node's clock (simulated under the deterministic test runtime; see
  // ActorSystem::Now). Use it rather than absl::Now() for anything a test should control.
  absl::Time Now() const;

  // -- spawning --------------------------------------------------------------------------------

  // Registers `actor` on its own new mailbox (see ActorSystem::Register) as a child of this actor
  // (unless options.detached): this actor supervises it and ends after it (actors/supervision.h).
  ActorId Register(std::unique_ptr<Actor> actor, RegisterOptions options = {});
  // Registers `factory()` as a restartable child: a kRestart directive replaces it by a new
  // instance from `factory` (same id, same queue). Returns an empty id when the factory returns
  // null. (Register, too, makes a child, but one that can only be stopped.)
  ActorId RegisterRestartable(ActorFactory factory, RegisterOptions options = {});
  // Registers `actor` on this actor's mailbox: the two never run in parallel and share a queue.
  // It is a mailbox sibling, not a child: top-level, it outlives this actor if it must.
  ActorId RegisterWithSameMailbox(std::unique_ptr<Actor> actor);

  // -- supervising ---------------------------------------------------------------------------

  // How this actor treats its children's failures (actors/supervision.h). The default restarts a
  // restartable child (RegisterRestartable) and stops any other; override to choose.
  virtual SupervisorStrategy supervisor_strategy() const { return {}; }

 private:
  friend class internal::Mailbox;
  friend class internal::Runtime;
  friend struct internal::Children;
  template <typename ReplyEvent>
  friend class AskAwaiter;

  uint64_t AskErased(const ActorId& to, std::unique_ptr<EventBase> request, absl::Duration timeout,
                     internal::AskContinuation done);
  // Returns the extras, allocating them on first use.
  internal::ActorExtras& Extras();

  StateFunc state_;
  ActorSystem* system_ = nullptr;
  ActorId self_;
  // The mailbox is not kept: the node's table finds it by self_.hint().
  Actor* next_in_mailbox_ = nullptr;
  // Suspension and pending asks (internal/extras.h): allocated by the first Suspend or Ask, freed
  // by the destructor (owned; a raw pointer because the type is internal). The runtime's dispatch
  // only checks it for null on its fast path.
  internal::ActorExtras* extras_ = nullptr;
  // Supervision (internal/supervision.cc): this actor's children (owned; null until it has
  // had one), and its parent's, where this actor sits at `sibling_index_` (null when top-level).
  // Kept here, not in the extras: a parent or a child keeps the fast dispatch path.
  internal::Children* children_ = nullptr;
  internal::Children* siblings_ = nullptr;
  uint32_t sibling_index_ = 0;
  bool passed_away_ = false;
  bool bootstrapped_ = false;
};

}  // namespace troupe

// Declares a state function `name` taking `ev` (an `EventHandlePtr&`).
#define TROUPE_STATE(name) void name(::troupe::EventHandlePtr& ev)

// A `case` that calls `handler(troupe::EventPtr<Event>)` for events of type `Event`. A protobuf
// event that fails to parse never reaches the handler: it is dropped, counted, and reported to a
// tracking sender as Undelivered{kParseError}.
#define TROUPE_HFUNC(Event, handler)            \
  case Event::kEventType: {                     \
    if (ev->template Get<Event>() != nullptr) { \
      handler(::troupe::EventPtr<Event>(ev));   \
    } else {                                    \
      DropUnparsable(ev);                       \
    }                                           \
    break;                                      \
  }

// A `case` that calls `handler()` with no argument for events of `type`.
#define TROUPE_CFUNC(type, handler) \
  case type: {                      \
    handler();                      \
    break;                          \
  }

// A `case` that drops events of `type` silently.
#define TROUPE_IGNORE(type) \
  case type: {              \
    break;                  \
  }
