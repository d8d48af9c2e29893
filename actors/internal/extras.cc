// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/extras.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "actors/events.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"
#include "actors/session_events.h"

namespace troupe::internal {

bool ActorExtras::TryComplete(const ActorId& self, EventHandlePtr& ev) {
  const uint64_t id = ev->cookie();
  if ((id & kAskCookieBit) == 0 || (id & ~uint64_t{0xffffffffU} & ~kAskCookieBit) != AskTag(self)) {
    return false;  // not an answer to one of this actor's asks (maybe a request of another's)
  }
  const auto it = asks.find(id);
  if (it == asks.end()) {
    if (ev->type() != kEvAskTimeout) {
      TROUPE_LOG(kDebug, kActors) << "actor " << self << " dropped " << ev->ToString()
                                  << ": the ask it answers has ended (timed out or answered)";
    }
    return true;
  }
  PendingAsk pending = std::move(it->second);
  asks.erase(it);
  const std::string request =
      absl::StrCat("request ", EventTypeName(pending.request_type), " to ", pending.to.ToString());
  if (ev->type() == kEvAskTimeout) {
    pending.done(ev, absl::DeadlineExceededError(absl::StrCat(request, ": no reply in time")));
    return true;
  }
  pending.timeout.Cancel();
  if (ev->type() == kEvUndelivered) {
    const EvUndelivered* undelivered = ev->Get<EvUndelivered>();
    if (undelivered != nullptr && undelivered->source_type == pending.request_type) {
      pending.done(ev, absl::UnavailableError(absl::StrCat(
                           request, " undelivered: ", UndeliveredReasonName(undelivered->reason),
                           undelivered->unsure ? " (unsure: it was sent)" : "")));
      return true;
    }
  }
  pending.done(ev, absl::OkStatus());
  return true;
}

bool ActorExtras::Consume(Runtime& runtime, const ActorId& self, EventHandlePtr& ev) {
  switch (ev->type()) {
    case kEvTerminated: {
      const EvTerminated* terminated = ev->Get<EvTerminated>();
      // Unwatched meanwhile, or reported already (node lost, then the target's own notice).
      return terminated == nullptr || watching.erase(terminated->target()) == 0;
    }
    case kEvNodeDisconnected: {
      const EvNodeDisconnected& disconnected = *ev->Get<EvNodeDisconnected>();
      const TerminationReason reason =
          disconnected.left ? TerminationReason::kNodeLeft : TerminationReason::kNodeLost;
      for (const ActorId& target : watching) {
        if (target.node_id() == disconnected.node) {
          runtime.Send(std::make_unique<EventHandle>(
              self, target, std::make_unique<EvTerminated>(target, reason), kNoFlags, 0));
        }
      }
      return false;
    }
    default:
      return TryComplete(self, ev);
  }
}

void ActorExtras::OnWatchRequest(const ActorId& self, EventHandle& ev) {
  const bool watch = ev.type() == kEvWatch;
  const EvWatch* request = watch ? ev.Get<EvWatch>() : nullptr;
  const EvUnwatch* cancel = watch ? nullptr : ev.Get<EvUnwatch>();
  if ((request == nullptr && cancel == nullptr) || ev.sender().IsEmpty()) {
    TROUPE_LOG(kWarn, kActors) << "actor " << self << " ignored " << ev.ToString()
                               << ": no watcher, or its bytes do not parse";
    return;
  }
  if (watch) {
    watchers[ev.sender()] = request->target();
  } else {
    watchers.erase(ev.sender());
  }
}

void ActorExtras::Farewell(Runtime& runtime, const ActorId& self) {
  const TerminationReason reason =
      failed ? TerminationReason::kFailed : TerminationReason::kStopped;
  for (const auto& [watcher, as] : watchers) {
    runtime.Send(std::make_unique<EventHandle>(
        watcher, self, std::make_unique<EvTerminated>(as, reason), kNoFlags, 0));
  }
  watchers.clear();
  UnwatchAll(runtime, self);
}

void ActorExtras::UnwatchAll(Runtime& runtime, const ActorId& self) {
  for (const ActorId& target : watching) {
    runtime.Send(std::make_unique<EventHandle>(target, self, std::make_unique<EvUnwatch>(target),
                                               kNoFlags, 0));
  }
  watching.clear();
}

void ActorExtras::EndAsks() {
  for (auto& [id, pending] : asks) {
    pending.timeout.Cancel();
  }
  asks.clear();
}

void LostSystemEvent(Runtime& runtime, EventHandlePtr ev, UndeliveredReason reason) {
  if (ev->type() == kEvWatch && !ev->sender().IsEmpty()) {
    const EvWatch* request = ev->Get<EvWatch>();
    const ActorId target = request != nullptr ? request->target() : ev->recipient();
    const bool not_found =
        reason == UndeliveredReason::kActorNotFound || reason == UndeliveredReason::kUnknownService;
    runtime.Send(std::make_unique<EventHandle>(
        ev->sender(), target,
        std::make_unique<EvTerminated>(
            target, not_found ? TerminationReason::kNotFound : TerminationReason::kNodeLost),
        kNoFlags, 0));
  } else if (ev->type() == kEvDeadLetter && reason == UndeliveredReason::kActorNotFound) {
    runtime.UnsubscribeDeadLetters(ev->recipient());
  }
}

}  // namespace troupe::internal
