// SPDX-License-Identifier: Apache-2.0
//
// Talking to actors from a plain thread (a service's request thread, main, a test), outside the
// test runtime:
//   - ScopedActor gives the thread an inbox: an actor id of its own that actors send and reply
//     to, and a blocking Receive with a timeout (CAF's scoped_actor).
//   - AskFuture sends one request from a one-shot actor and returns a std::future of its
//     AskResult, with the outcomes of Actor::Ask's table (actor.h): the reply, owned by the
//     caller, or kDeadlineExceeded, kUnavailable (undelivered), kInvalidArgument (another type),
//     kDataLoss, and kCancelled when the system stops first. Nothing outlives the ask: the
//     one-shot actor ends with it, and a late reply is dropped.
// Both work across nodes: the ids are ordinary actor ids of the node. Sends carry the calling
// thread's trace id (TraceScope, log.h).
//
// Thread-safety: ScopedActor is thread-compatible (one owning thread; its inbox actor runs on a
// pool). AskFuture is thread-safe.
//
// Example:
//
//   troupe::AskResult<EvPrice> price =
//       troupe::AskFuture<EvPrice>(*system, quotes, std::make_unique<EvQuote>("ACME"),
//                                  absl::Seconds(1)).get();
//
//   troupe::ScopedActor me(*system);
//   me.Send(counter, std::make_unique<EvGet>());
//   troupe::EventHandlePtr reply = me.Receive(absl::Seconds(1));   // null on timeout
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/log.h"

namespace troupe {

namespace internal {
struct ScopedInbox;
}  // namespace internal

class ScopedActor {
 public:
  // Registers the inbox on `system` (options.pool, or the default pool). `system` must outlive
  // this object. When the system is stopping, id() is empty and Receive returns null at once.
  explicit ScopedActor(ActorSystem& system, RegisterOptions options = {});
  // Ends the inbox actor; events waiting, and those that arrive later, are dropped.
  ~ScopedActor();
  ScopedActor(const ScopedActor&) = delete;
  ScopedActor& operator=(const ScopedActor&) = delete;
  ScopedActor(ScopedActor&&) = delete;
  ScopedActor& operator=(ScopedActor&&) = delete;

  // Returns the inbox's id: the sender of Send, where replies come.
  const ActorId& id() const { return id_; }
  // Sends `event` to `recipient` with id() as sender.
  void Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags = kNoFlags,
            uint64_t cookie = 0);
  // Returns the oldest event received and not returned yet, waiting up to `timeout` for one;
  // null when none came.
  EventHandlePtr Receive(absl::Duration timeout);
  // Returns the number of events received and not returned yet.
  size_t waiting() const;

 private:
  ActorSystem& system_;
  std::shared_ptr<internal::ScopedInbox> inbox_;
  ActorId id_;
};

namespace internal {

// The actor behind troupe::AskFuture: asks once, hands the outcome to the future, ends.
template <typename ReplyEvent>
class OneShotAsk final : public Actor {
 public:
  OneShotAsk(ActorId to, std::unique_ptr<EventBase> request, absl::Duration timeout,
             uint64_t trace_id, std::promise<AskResult<ReplyEvent>> promise)
      : Actor(&OneShotAsk::StateWork),
        to_(to),
        request_(std::move(request)),
        timeout_(timeout),
        trace_id_(trace_id),
        promise_(std::move(promise)) {}
  ~OneShotAsk() override {
    if (!done_) {
      promise_.set_value(absl::CancelledError("the actor system stopped before the ask ended"));
    }
  }
  OneShotAsk(const OneShotAsk&) = delete;
  OneShotAsk& operator=(const OneShotAsk&) = delete;
  OneShotAsk(OneShotAsk&&) = delete;
  OneShotAsk& operator=(OneShotAsk&&) = delete;

 private:
  void Bootstrap() override {
    const TraceScope trace(trace_id_);
    Ask<ReplyEvent>(to_, std::move(request_), timeout_, [this](AskResult<ReplyEvent> reply) {
      done_ = true;
      promise_.set_value(std::move(reply));
      PassAway();
    });
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  ActorId to_;
  std::unique_ptr<EventBase> request_;
  absl::Duration timeout_;
  uint64_t trace_id_;
  std::promise<AskResult<ReplyEvent>> promise_;
  bool done_ = false;
};

}  // namespace internal

// Sends `request` to `to` and returns a future of the reply (see the file comment). Does not
// block; get() or wait_for() on the future does. For plain threads: an actor uses Actor::Ask.
template <typename Reply>
std::future<AskResult<Reply>> AskFuture(ActorSystem& system, const ActorId& to,
                                        std::unique_ptr<EventBase> request,
                                        absl::Duration timeout) {
  std::promise<AskResult<Reply>> promise;
  std::future<AskResult<Reply>> future = promise.get_future();
  // Registering hands the promise to the actor; when registering fails the actor is destroyed
  // unbootstrapped and its destructor reports kCancelled.
  (void)system.TryRegister(std::make_unique<internal::OneShotAsk<Reply>>(
      to, std::move(request), timeout, CurrentTraceId(), std::move(promise)));
  return future;
}

}  // namespace troupe
