// SPDX-License-Identifier: Apache-2.0
//
// Coroutines for requests inside an actor: a handler starts a coroutine (a member function
// returning troupe::Task), which `co_await`s typed replies with a timeout.
//
//   troupe::Task Quote(troupe::EventHandlePtr request) {        // parameters by value
//     troupe::AskResult<EvPrice> price =
//         co_await Ask<EvPrice>(prices_, std::make_unique<EvGetPrice>("ACME"), absl::Seconds(1));
//     if (!price.ok()) { co_return; }                            // timeout, undelivered, ...
//     Reply(request, std::make_unique<EvQuote>((*price)->value));
//   }
//   TROUPE_STATE(StateWork) {
//     switch (ev->type()) {
//       case kEvQuoteRequest: Quote(std::move(ev)); break;      // runs up to its first co_await
//       ...
//
// The actor keeps its one-event-at-a-time guarantee. The coroutine runs inside the handler that
// started it until its first co_await; each later part runs as the handling of the awaited reply
// (or timeout), never while another of the actor's events is handled. **While a coroutine waits,
// the actor handles its other events as usual** (in order; they are not held), so state it read
// before the co_await may have changed after it. Several coroutines of one actor may wait at
// once. `co_await Ask(to, request, timeout)` yields an AskResult with the outcomes of
// Actor::Ask's table (actors/actor.h): the reply, owned by the coroutine, or kDeadlineExceeded,
// kUnavailable, kInvalidArgument or kDataLoss. A reply after the timeout is dropped.
//
// An exception that escapes a coroutine fails the actor as one from a handler would (in the
// handler that started or resumed it). An actor that ends with coroutines waiting destroys them
// before its destructor runs: their locals are destroyed and they never resume. A Task can only
// co_await Actor::Ask (anything else does not compile).
//
// Thread-safety: actor-confined, like the handlers that start and resume the coroutines.
#pragma once

#include <coroutine>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"

namespace troupe {

class Task;

namespace internal {

template <typename T>
struct IsAskAwaiter : std::false_type {};
template <typename ReplyEvent>
struct IsAskAwaiter<AskAwaiter<ReplyEvent>> : std::true_type {};

// Resumes or destroys one suspended coroutine frame, once: whoever holds it (an ask's
// continuation) either resumes it or, dropped unused, destroys it.
class FrameOwner {
 public:
  explicit FrameOwner(std::coroutine_handle<> frame) : frame_(frame) {}
  FrameOwner(FrameOwner&& other) noexcept : frame_(std::exchange(other.frame_, {})) {}
  FrameOwner& operator=(FrameOwner&&) = delete;
  FrameOwner(const FrameOwner&) = delete;
  FrameOwner& operator=(const FrameOwner&) = delete;
  ~FrameOwner() {
    if (frame_) {
      frame_.destroy();
    }
  }

  // Resumes the coroutine up to its next co_await (the next ask owns the frame then) or its end
  // (the frame destroys itself). An exception that escapes it stops it at its final suspend
  // point: the frame is destroyed here and the exception goes on to the handler.
  void Resume() {
    std::coroutine_handle<> frame = std::exchange(frame_, {});
    try {
      frame.resume();
    } catch (...) {
      frame.destroy();
      throw;
    }
  }

 private:
  std::coroutine_handle<> frame_;
};

}  // namespace internal

// The return type of an actor's coroutine. The coroutine starts at once; the Task it returns
// carries nothing and may be discarded: a waiting coroutine belongs to the ask it waits on, and
// one that ends frees itself.
class Task {
 public:
  struct promise_type {
    Task get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    // Into the handler that started or resumed the coroutine (which fails the actor). Before the
    // first co_await the frame is freed with the call; after it FrameOwner::Resume frees it.
    void unhandled_exception() { throw; }
    template <typename Awaiter>
    Awaiter&& await_transform(Awaiter&& awaiter) noexcept {
      static_assert(internal::IsAskAwaiter<std::remove_cvref_t<Awaiter>>::value,
                    "a troupe::Task can only co_await Actor::Ask");
      return std::forward<Awaiter>(awaiter);
    }
  };
};

// What `co_await Ask<ReplyEvent>(to, request, timeout)` waits on (see the file comment).
template <typename ReplyEvent>
class [[nodiscard]] AskAwaiter {
 public:
  AskAwaiter(Actor* actor, const ActorId& to, std::unique_ptr<EventBase> request,
             absl::Duration timeout)
      : actor_(actor), to_(to), request_(std::move(request)), timeout_(timeout) {}

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<Task::promise_type> frame) {
    internal::FrameOwner owner(frame);
    actor_->Ask<ReplyEvent>(to_, std::move(request_), timeout_,
                            [this, owner = std::move(owner)](AskResult<ReplyEvent> reply) mutable {
                              result_ = std::move(reply);
                              owner.Resume();
                            });
  }
  AskResult<ReplyEvent> await_resume() { return std::move(result_); }

 private:
  Actor* actor_;
  ActorId to_;
  std::unique_ptr<EventBase> request_;
  absl::Duration timeout_;
  AskResult<ReplyEvent> result_ = absl::UnknownError("not answered");
};

template <typename ReplyEvent>
AskAwaiter<ReplyEvent> Actor::Ask(const ActorId& to, std::unique_ptr<EventBase> request,
                                  absl::Duration timeout) {
  return AskAwaiter<ReplyEvent>(this, to, std::move(request), timeout);
}

}  // namespace troupe
