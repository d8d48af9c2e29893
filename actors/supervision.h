// SPDX-License-Identifier: Apache-2.0
//
// Supervision: what happens when an actor's handler (or Bootstrap) throws.
//
// An actor registered by another actor (Actor::Register, Actor::RegisterRestartable) is its child,
// unless RegisterOptions::detached says otherwise; an actor registered by ActorSystem::Register
// or Actor::RegisterWithSameMailbox is top-level. When a child throws, the exception and the event
// are logged, that event is dropped, the child's later events are held (in order), and its parent's
// `supervisor_strategy()` decides, in a handler of the parent:
//   | directive  | the child                                                                     |
//   |------------|-------------------------------------------------------------------------------|
//   | kResume    | keeps its state and handles its held events                                   |
//   | kRestart   | gets a new instance from its RegisterRestartable factory, after a backoff:    |
//   |            | same ActorId, same queued and held events, Bootstrap again; the old instance  |
//   |            | is destroyed and its own children stopped. Not restartable: kStop.            |
//   | kStop      | ends (its watchers get TerminationReason::kFailed)                            |
//   | kEscalate  | stays held while the parent fails in its turn, with the child's failure       |
// kOneForOne applies the directive to the failed child; kAllForOne to every child of the parent
// (restart all, or stop all). A child that exceeds `max_restarts` within `within` is stopped and
// the parent escalates. Restarts back off exponentially: the n-th restart within the window waits
// min_backoff * 2^(n-1), at most max_backoff (simulated under TestRuntime).
//
// A top-level actor that throws, or to which a failure escalates, ends (as it always has).
//
// An actor that ends (PassAway, EvPoison, a kStop) ends its children first, and theirs before
// them: post-order. Until its last child has ended, it handles nothing more (its events are
// reported undelivered) and its destructor has not run.
//
// Thread-safety: value types. supervisor_strategy() is called in the parent's handler.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"

namespace troupe {

enum class SupervisorDirective : uint8_t { kResume, kRestart, kStop, kEscalate };

// Returns "resume", "restart", "stop" or "escalate".
const char* SupervisorDirectiveName(SupervisorDirective directive);

// What a parent learns of a child's failure.
struct ChildFailure {
  ActorId child;
  // The event whose handler threw (kEvBootstrap for Bootstrap).
  EventType event_type = 0;
  // The exception's what(), or "non-standard exception".
  std::string what;
  // Whether it was registered with RegisterRestartable (kRestart is possible).
  bool restartable = false;
};

struct SupervisorStrategy {
  enum class Scope : uint8_t { kOneForOne, kAllForOne };

  Scope scope = Scope::kOneForOne;
  // Decides per failure. Unset: kRestart for a restartable child, else kStop.
  std::function<SupervisorDirective(const ChildFailure&)> decide;
  // More restarts than this within `within` (per child): stop the child and escalate.
  uint32_t max_restarts = 10;
  absl::Duration within = absl::Minutes(1);
  absl::Duration min_backoff = absl::Milliseconds(1);
  absl::Duration max_backoff = absl::Seconds(1);
};

// The runtime's supervision events (local: a parent and its children share a node).
struct EvSupervise final : EventLocal<EvSupervise, kEvSupervise> {
  explicit EvSupervise(SupervisorDirective directive_value) : directive(directive_value) {}
  SupervisorDirective directive;
};
struct EvStop final : EventLocal<EvStop, kEvStop> {};
struct EvChildFailed final : EventLocal<EvChildFailed, kEvChildFailed> {
  ChildFailure failure;
};

}  // namespace troupe
