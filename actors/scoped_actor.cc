// SPDX-License-Identifier: Apache-2.0
#include "actors/scoped_actor.h"

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"

#include "actors/events.h"
#include "actors/sync.h"

namespace troupe {
namespace internal {

// What the inbox actor and its ScopedActor share; the actor may outlive the ScopedActor.
struct ScopedInbox {
  mutable troupe::Mutex mu;
  std::deque<EventHandlePtr> events ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
};

namespace {

// Queues every event for the thread; ends once the ScopedActor closed the inbox.
class InboxActor final : public Actor {
 public:
  explicit InboxActor(std::shared_ptr<ScopedInbox> inbox)
      : Actor(&InboxActor::StateWork), inbox_(std::move(inbox)) {}

 private:
  TROUPE_STATE(StateWork) {
    troupe::MutexLock lock(&inbox_->mu);
    if (inbox_->closed) {
      PassAway();
      return;
    }
    inbox_->events.push_back(std::move(ev));
  }

  std::shared_ptr<ScopedInbox> inbox_;
};

}  // namespace
}  // namespace internal

ScopedActor::ScopedActor(ActorSystem& system, RegisterOptions options)
    : system_(system), inbox_(std::make_shared<internal::ScopedInbox>()) {
  absl::StatusOr<ActorId> id =
      system.TryRegister(std::make_unique<internal::InboxActor>(inbox_), options);
  if (id.ok()) {
    id_ = *id;
  }
}

ScopedActor::~ScopedActor() {
  {
    troupe::MutexLock lock(&inbox_->mu);
    inbox_->closed = true;
    inbox_->events.clear();
  }
  if (!id_.IsEmpty()) {
    // Any event ends it now that the inbox is closed.
    system_.Send(id_, std::make_unique<EvWakeup>());
  }
}

void ScopedActor::Send(const ActorId& recipient, std::unique_ptr<EventBase> event, uint32_t flags,
                       uint64_t cookie) {
  system_.Send(recipient, std::move(event), flags, cookie, id_);
}

EventHandlePtr ScopedActor::Receive(absl::Duration timeout) {
  if (id_.IsEmpty()) {
    return nullptr;
  }
  internal::ScopedInbox& inbox = *inbox_;
  troupe::MutexLock lock(&inbox.mu);
  const auto ready = [&inbox]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox.mu) { return !inbox.events.empty(); };
  inbox.mu.AwaitWithDeadline(absl::Condition(&ready), absl::Now() + timeout);
  if (inbox.events.empty()) {
    return nullptr;
  }
  EventHandlePtr ev = std::move(inbox.events.front());
  inbox.events.pop_front();
  return ev;
}

size_t ScopedActor::waiting() const {
  troupe::MutexLock lock(&inbox_->mu);
  return inbox_->events.size();
}

}  // namespace troupe
