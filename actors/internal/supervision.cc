// SPDX-License-Identifier: Apache-2.0
//
// The runtime's side of supervision (actors/supervision.h): parents and children, failures,
// directives, restarts and the post-order end of a parent.
//
// A parent's children are a locked list (Children, owned by the parent and handed to each new
// instance across restarts); each child points at it (Actor::siblings_). The parent adds (in its
// handler); a child removes itself as it ends (on its own worker), before it is destroyed. Because
// a parent ends only once the list is empty, the list outlives every child that points at it.
// Neither side needs the extras for this, so parents and children keep the fast dispatch path.
#include "actors/supervision.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/internal/extras.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"

namespace troupe {

const char* SupervisorDirectiveName(SupervisorDirective directive) {
  switch (directive) {
    case SupervisorDirective::kResume:
      return "resume";
    case SupervisorDirective::kRestart:
      return "restart";
    case SupervisorDirective::kStop:
      return "stop";
    case SupervisorDirective::kEscalate:
      return "escalate";
  }
  return "unknown";
}

namespace internal {

namespace {

// Thrown in the parent's handler to make the child's failure the parent's.
class Escalation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

void Children::Add(Actor* child) {
  SpinLockHolder hold(&mu);
  if (slots.size() >= 8 && live <= slots.size() / 2) {
    // Compact: half or more of the slots are empty, so this costs at most one move per removal.
    uint32_t kept = 0;
    for (Actor* sibling : slots) {
      if (sibling != nullptr) {
        sibling->sibling_index_ = kept;
        slots[kept++] = sibling;
      }
    }
    slots.resize(kept);
  }
  child->sibling_index_ = static_cast<uint32_t>(slots.size());
  slots.push_back(child);
  ++live;
}

bool Children::Remove(Actor* child) {
  SpinLockHolder hold(&mu);
  slots[child->sibling_index_] = nullptr;
  --live;
  if (live == 0) {
    slots.clear();  // the next Add starts from the inline slots again
  }
  return stopping && live == 0;
}

void Children::Replace(Actor* old, Actor* fresh) {
  SpinLockHolder hold(&mu);
  fresh->sibling_index_ = old->sibling_index_;
  slots[fresh->sibling_index_] = fresh;
}

std::vector<ActorId> Children::Ids(bool stop) {
  SpinLockHolder hold(&mu);
  std::vector<ActorId> ids;
  if (stop) {
    if (stopping) {
      return ids;  // told them already
    }
    stopping = live != 0;
  }
  ids.reserve(live);
  for (const Actor* child : slots) {
    if (child != nullptr) {
      ids.push_back(child->self_);
    }
  }
  return ids;
}

bool Children::Contains(const ActorId& child) {
  SpinLockHolder hold(&mu);
  return std::any_of(slots.begin(), slots.end(),
                     [&](const Actor* actor) { return actor != nullptr && actor->self_ == child; });
}

void Runtime::Adopt(Actor* parent, Actor* child, ActorFactory* factory) {
  if (parent->children_ == nullptr) {
    parent->children_ = new Children(parent->self_);
  }
  parent->children_->Add(child);
  child->siblings_ = parent->children_;
  if (factory != nullptr && *factory != nullptr) {
    child->Extras().factory = std::move(*factory);
  }
}

ActorId Runtime::Unlink(Actor* actor) {
  Children* siblings = std::exchange(actor->siblings_, nullptr);
  if (siblings == nullptr) {
    return {};
  }
  // Read before the removal: once no child is live the parent may end (on another event) and free
  // the set.
  const ActorId parent = siblings->parent;
  return siblings->Remove(actor) ? parent : ActorId();
}

void Runtime::WakeParent(const ActorId& parent, const ActorId& child) {
  Send(std::make_unique<EventHandle>(
      parent, child, std::make_unique<EvTerminated>(child, TerminationReason::kStopped), kNoFlags,
      0));
}

bool Runtime::WaitForChildren(Actor* actor) {
  if (actor->children_ == nullptr) {
    return false;
  }
  bool waiting = false;
  {
    SpinLockHolder hold(&actor->children_->mu);
    waiting = actor->children_->live != 0;
  }
  if (!waiting) {
    return false;
  }
  // Its events go to the slow path from now on (DispatchSlow: an ended actor handles nothing).
  actor->Extras();
  StopChildren(actor->self_, actor->children_->Ids(/*stop=*/true));
  return true;
}

void Runtime::StopChildren(const ActorId& parent, const std::vector<ActorId>& children) {
  for (const ActorId& child : children) {
    Send(std::make_unique<EventHandle>(child, parent, std::make_unique<EvStop>(), kNoFlags, 0));
  }
}

void Runtime::OnHandlerFailure(Actor* actor, EventType type, std::string what) {
  failed_actors_.fetch_add(1, std::memory_order_relaxed);
  if (actor->siblings_ == nullptr) {
    TROUPE_LOG(kError, kActors) << absl::StrFormat(
        "actor %s ended: exception from handler of event %s (0x%08x): %s", actor->self_.ToString(),
        EventTypeName(type), type, what);
    actor->passed_away_ = true;
    if (actor->extras_ != nullptr) {
      actor->extras_->failed = true;
    }
    return;
  }
  const ActorId parent = actor->siblings_->parent;
  TROUPE_LOG(kWarn, kActors) << absl::StrFormat(
      "actor %s failed: exception from handler of event %s (0x%08x) (dropped): %s; its events are "
      "held until its parent %s decides",
      actor->self_.ToString(), EventTypeName(type), type, what, parent.ToString());
  ActorExtras& extras = actor->Extras();
  extras.awaiting_directive = true;
  auto failed = std::make_unique<EvChildFailed>();
  failed->failure = {.child = actor->self_,
                     .event_type = type,
                     .what = std::move(what),
                     .restartable = extras.factory != nullptr};
  Send(std::make_unique<EventHandle>(parent, actor->self_, std::move(failed), kNoFlags, 0));
}

void Runtime::Supervise(Actor* parent, EventHandlePtr& ev) {
  const ChildFailure& failure = ev->Get<EvChildFailed>()->failure;
  ActorExtras& extras = parent->Extras();
  const SupervisorStrategy strategy = parent->supervisor_strategy();
  SupervisorDirective directive = strategy.decide       ? strategy.decide(failure)
                                  : failure.restartable ? SupervisorDirective::kRestart
                                                        : SupervisorDirective::kStop;
  const std::string child = failure.child.ToString();
  if (directive == SupervisorDirective::kEscalate) {
    throw Escalation(absl::StrCat("child ", child, " failed (escalated): ", failure.what));
  }
  absl::Duration backoff = absl::ZeroDuration();
  if (directive == SupervisorDirective::kRestart) {
    std::deque<absl::Time>& restarts = extras.restarts[failure.child];
    const absl::Time now = Now();
    while (!restarts.empty() && now - restarts.front() >= strategy.within) {
      restarts.pop_front();
    }
    if (restarts.size() >= strategy.max_restarts) {
      extras.restarts.erase(failure.child);
      Send(std::make_unique<EventHandle>(failure.child, parent->self_,
                                         std::make_unique<EvSupervise>(SupervisorDirective::kStop),
                                         kNoFlags, 0));
      throw Escalation(absl::StrFormat(
          "child %s failed after %u restarts within %s, so it was stopped: %s", child,
          strategy.max_restarts, absl::FormatDuration(strategy.within), failure.what));
    }
    restarts.push_back(now);
    backoff = std::min(strategy.max_backoff,
                       strategy.min_backoff * static_cast<double>(uint64_t{1} << std::min<size_t>(
                                                                      restarts.size() - 1, 30)));
  }
  std::vector<ActorId> targets = {failure.child};
  if (strategy.scope == SupervisorStrategy::Scope::kAllForOne && parent->children_ != nullptr) {
    targets = parent->children_->Ids();
  }
  TROUPE_LOG(kInfo, kActors) << absl::StrFormat(
      "actor %s: child %s failed (%s): %s%s%s", parent->self_.ToString(), child, failure.what,
      SupervisorDirectiveName(directive),
      targets.size() > 1 ? absl::StrCat(" all ", targets.size(), " children") : "",
      backoff > absl::ZeroDuration() ? absl::StrCat(" in ", absl::FormatDuration(backoff)) : "");
  for (const ActorId& target : targets) {
    auto handle = std::make_unique<EventHandle>(
        target, parent->self_, std::make_unique<EvSupervise>(directive), kNoFlags, 0);
    if (backoff > absl::ZeroDuration()) {
      Schedule(backoff, std::move(handle));
    } else {
      Send(std::move(handle));
    }
  }
  // Records of children that have ended go once there are many.
  if (extras.restarts.size() > 64 && parent->children_ != nullptr) {
    absl::erase_if(extras.restarts,
                   [&](const auto& entry) { return !parent->children_->Contains(entry.first); });
  }
}

void Runtime::OnDirective(Mailbox* mailbox, Actor* actor, EventHandlePtr& ev, HandlerTrace* trace) {
  // Lines logged here (outside a handler) say which node and actor they are about, as a handler's
  // would; the id is copied because a restart replaces the instance.
  const ActorId self = actor->self_;
  LogScope scope{.context = &log_context_,
                 .actor = &self,
                 .actor_class = &typeid(*actor),
                 .trace_id = ev->trace_id(),
                 .previous = tls_log_scope};
  tls_log_scope = &scope;
  OnDirectiveInScope(mailbox, actor, ev, trace);
  tls_log_scope = scope.previous;
}

void Runtime::OnDirectiveInScope(Mailbox* mailbox, Actor* actor, EventHandlePtr& ev,
                                 HandlerTrace* trace) {
  ActorExtras* extras = actor->extras_;
  const bool awaiting = extras != nullptr && extras->awaiting_directive;
  SupervisorDirective directive = SupervisorDirective::kStop;
  if (ev->type() == kEvSupervise) {
    directive = ev->Get<EvSupervise>()->directive;
  } else if (ev->sender() != (actor->siblings_ != nullptr ? actor->siblings_->parent : ActorId())) {
    TROUPE_LOG(kWarn, kActors) << "actor " << actor->self_ << " ignored a stop from "
                               << ev->sender() << ", which is not its parent";
    return;
  }
  if (directive == SupervisorDirective::kResume) {
    if (awaiting) {
      extras->awaiting_directive = false;
      DrainHeld(actor, trace);
    }
  } else if (directive == SupervisorDirective::kRestart) {
    Actor* fresh = Restart(mailbox, actor, trace);
    if (fresh == nullptr) {
      actor->passed_away_ = true;
    } else {
      actor = fresh;
      DrainHeld(actor, trace);
    }
  } else {
    actor->passed_away_ = true;
    if (awaiting) {
      extras->failed = true;
    }
  }
  if (actor->passed_away_) {
    Destroy(mailbox, actor);
  }
}

Actor* Runtime::Restart(Mailbox* mailbox, Actor* old, HandlerTrace* trace) {
  ActorExtras* extras = old->extras_;
  if (extras == nullptr || extras->factory == nullptr) {
    if (extras != nullptr) {
      extras->failed = extras->awaiting_directive;
    }
    return nullptr;
  }
  std::unique_ptr<Actor> fresh;
  try {
    fresh = extras->factory();
  } catch (const std::exception& e) {
    TROUPE_LOG(kError, kActors) << "actor " << old->self_
                                << ": its factory threw, so it is not restarted: " << e.what();
  }
  if (fresh == nullptr) {
    extras->failed = true;
    return nullptr;
  }
  // What the old instance started ends with it: asks, watches and children. Its watchers, parent,
  // factory and held events stay with the id.
  extras->EndAsks();
  extras->UnwatchAll(*this, old->self_);
  if (old->children_ != nullptr) {
    StopChildren(old->self_, old->children_->Ids());
  }
  extras->awaiting_directive = false;
  extras->failed = false;
  Actor* raw = fresh.release();
  raw->system_ = system_;
  raw->self_ = old->self_;
  raw->extras_ = std::exchange(old->extras_, nullptr);
  raw->children_ = std::exchange(old->children_, nullptr);
  raw->siblings_ = std::exchange(old->siblings_, nullptr);
  if (raw->siblings_ != nullptr) {
    raw->siblings_->Replace(old, raw);
  }
  mailbox->DetachActor(old);
  classes_.Get(typeid(*old)).AddLive(-1);
  delete old;
  mailbox->AttachActor(raw);
  classes_.Get(typeid(*raw)).AddLive(1);
  TROUPE_LOG(kInfo, kActors) << "actor " << raw->self_ << " restarted";
  EventHandlePtr bootstrap =
      std::make_unique<EventHandle>(kEvBootstrap, raw->self_, raw->self_, kNoFlags, 0);
  Handle<true>(raw, bootstrap, trace);
  return raw;
}

void Runtime::DrainHeld(Actor* actor, HandlerTrace* trace) {
  // The held events are older than anything still queued: handle them now, in order, unless a
  // handler suspends the actor again, fails or ends it.
  ActorExtras* extras = actor->extras_;
  while (extras->suspend_count == 0 && !extras->awaiting_directive && !extras->held.empty() &&
         !actor->passed_away_) {
    EventHandlePtr held = std::move(extras->held.front());
    extras->held.pop_front();
    Handle<true>(actor, held, trace);
  }
}

}  // namespace internal
}  // namespace troupe
