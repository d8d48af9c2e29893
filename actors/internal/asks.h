// SPDX-License-Identifier: Apache-2.0
//
// What an actor keeps beyond its state only once it needs it (allocated on first use, freed with
// the actor): its suspension (Actor::Suspend) and its pending asks (Actor::Ask). The dispatcher
// takes its slow path for an actor that has them, so actors that never suspend or ask pay one
// null check per event.
//
// An ask's request id is the request's cookie, with kAskCookieBit set; the reply, the
// Undelivered notice and the EvAskTimeout all carry it back. TryComplete consumes every event
// with such a cookie: the first one to come completes the ask, the later ones (a reply after
// the timeout, a timeout after the reply) are dropped.
#pragma once

#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/timer.h"

namespace troupe::internal {

// Set in the cookie of every ask's request (and so of its reply).
inline constexpr uint64_t kAskCookieBit = uint64_t{1} << 63;

struct PendingAsk {
  // Gets the reply (status OK) or the reason there is none (the handle is then the notice that
  // ended the ask: an EvUndelivered or EvAskTimeout).
  AskContinuation done;
  TimerCookie timeout;
  ActorId to;
  EventType request_type = 0;
};

struct ActorExtras {
  // Suspension: resumes still needed, and the events held meanwhile, in order.
  uint32_t suspend_count = 0;
  std::deque<EventHandlePtr> held;
  // Asks by request id.
  absl::flat_hash_map<uint64_t, PendingAsk> asks;
  uint64_t last_ask = 0;

  // Completes the ask `ev` answers, if `ev` carries an ask's cookie; returns false for any other
  // event. Runs the continuation on the calling (handler) thread.
  bool TryComplete(const ActorId& self, EventHandlePtr& ev);
};

}  // namespace troupe::internal
