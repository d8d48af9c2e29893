// SPDX-License-Identifier: Apache-2.0
#include "actors/actor.h"

#include "absl/strings/str_format.h"

#include "actors/actor_system.h"
#include "actors/internal/extras.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"

namespace troupe {

// An actor with no members of its own takes the pool's 88-byte class, a 96-byte heap chunk
// (internal/small_alloc.h); one more word would cost 16 bytes per actor.
static_assert(sizeof(Actor) <= 88, "the Actor base grew a class");

Actor::~Actor() {
  delete extras_;
  delete children_;
}

internal::ActorExtras& Actor::Extras() {
  if (extras_ == nullptr) {
    extras_ = new internal::ActorExtras();
  }
  return *extras_;
}

void Actor::Suspend() { ++Extras().suspend_count; }

uint32_t Actor::SuspendCount() const { return extras_ == nullptr ? 0 : extras_->suspend_count; }

void Actor::Reply(const EventHandlePtr& request, std::unique_ptr<EventBase> response,
                  uint32_t flags) const {
  Send(request->sender(), std::move(response), flags, request->cookie());
}

uint64_t Actor::AskErased(const ActorId& to, std::unique_ptr<EventBase> request,
                          absl::Duration timeout, internal::AskContinuation done) {
  internal::ActorExtras& extras = Extras();
  const uint64_t id =
      internal::kAskCookieBit | internal::AskTag(self_) | (++extras.last_ask & 0xffffffffU);
  const EventType request_type = request->Type();
  internal::PendingAsk& pending = extras.asks[id];
  pending.done = std::move(done);
  pending.to = to;
  pending.request_type = request_type;
  pending.timeout = Schedule(timeout, std::make_unique<EvAskTimeout>(), id);
  Send(to, std::move(request), kTrackDelivery, id);
  return id;
}

void Actor::Watch(const ActorId& target) {
  if (target == self_ || !Extras().watching.insert(target).second) {
    return;
  }
  if (target.IsEmpty()) {
    Send(self_, std::make_unique<EvTerminated>(target, TerminationReason::kNotFound));
    return;
  }
  // A remote watch subscribes to the session, whose end reports the target kNodeLost.
  const NodeId node = target.node_id();
  const bool remote = node != 0 && node != system_->node_id();
  Send(target, std::make_unique<EvWatch>(target), remote ? kSubscribeOnSession : kNoFlags);
}

void Actor::Unwatch(const ActorId& target) {
  if (extras_ == nullptr || extras_->watching.erase(target) == 0 || target.IsEmpty()) {
    return;
  }
  Send(target, std::make_unique<EvUnwatch>(target));
}

void Actor::Unhandled(EventHandlePtr& ev) {
  if (ev->type() == kEvPoison) {
    PassAway();
    return;
  }
  TROUPE_LOG(kDebug, kActors) << "actor " << self_ << " dropped unhandled " << ev->ToString();
}

void Actor::Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags,
                 uint64_t cookie) const {
  system_->runtime()->Send(std::make_unique<EventHandle>(recipient, self_, std::move(event), flags,
                                                         cookie, ActorId(), CurrentTraceId()));
}

void Actor::Send(EventHandlePtr handle) const {
  if (handle->trace_id() == 0) {
    handle->set_trace_id(CurrentTraceId());
  }
  system_->runtime()->Send(std::move(handle));
}

void Actor::Forward(const ActorId& recipient, EventHandlePtr& ev) const {
  ev->set_recipient(recipient);
  system_->runtime()->Send(std::move(ev));
}

TimerCookie Actor::Schedule(absl::Duration delay, std::unique_ptr<EventBase> event,
                            uint64_t cookie) const {
  return Schedule(delay, self_, std::move(event), kNoFlags, cookie);
}

TimerCookie Actor::Schedule(absl::Duration delay, const ActorId& recipient,
                            std::unique_ptr<EventBase> event, uint32_t flags,
                            uint64_t cookie) const {
  return system_->runtime()->Schedule(
      delay, std::make_unique<EventHandle>(recipient, self_, std::move(event), flags, cookie,
                                           ActorId(), CurrentTraceId()));
}

TimerCookie Actor::ScheduleWakeup(absl::Duration delay, uint64_t tag) const {
  return Schedule(delay, std::make_unique<EvWakeup>(tag));
}

absl::Time Actor::Now() const { return system_->runtime()->Now(); }

ActorId Actor::Register(std::unique_ptr<Actor> actor, RegisterOptions options) {
  return system_->runtime()->Register(std::move(actor), options, options.detached ? nullptr : this);
}

ActorId Actor::RegisterRestartable(ActorFactory factory, RegisterOptions options) {
  std::unique_ptr<Actor> first = factory != nullptr ? factory() : nullptr;
  if (first == nullptr) {
    TROUPE_LOG(kError, kActors)
        << "actor " << self_ << ": RegisterRestartable's factory made no actor; nothing registered";
    return {};
  }
  return system_->runtime()->Register(std::move(first), options, this, &factory);
}

ActorId Actor::RegisterWithSameMailbox(std::unique_ptr<Actor> actor) {
  return system_->runtime()->RegisterWithSameMailbox(this, std::move(actor));
}

void Actor::DropUnparsable(EventHandlePtr& ev) {
  TROUPE_LOG(kWarn, kActors) << absl::StrFormat(
      "actor %s dropped event %s (0x%08x): its bytes do not parse", self_.ToString(),
      EventTypeName(ev->type()), ev->type());
  system_->runtime()->Undeliverable(std::move(ev), UndeliveredReason::kParseError);
}

}  // namespace troupe
