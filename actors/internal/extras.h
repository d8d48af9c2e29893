// SPDX-License-Identifier: Apache-2.0
//
// What an actor keeps beyond its state only once it needs it (allocated on first use, freed with
// the actor): its suspension (Actor::Suspend), its pending asks (Actor::Ask), the actors it
// watches and those that watch it (Actor::Watch). The dispatcher takes its slow path for an actor
// that has them, so actors that do none of this pay one null check per event.
//
// Watching: the watcher remembers each target as it named it and sends it EvWatch (subscribed to
// the session when the target is remote); the target remembers its watchers. When the target
// ends, Farewell sends each watcher EvTerminated; when the watcher ends, it sends each target
// EvUnwatch, so neither side keeps a watch past the other. An EvWatch that cannot be delivered
// comes back as EvTerminated (LostSystemEvent): kNotFound when no actor took it, kNodeLost when it
// did not reach the node. When the watcher's session to a node ends, every target on that node is
// reported kNodeLost. The watcher passes an EvTerminated to its state function only while it
// still watches that target, which makes it exactly one per Watch.
//
// An ask's request id is the request's cookie: kAskCookieBit, the asker's tag (AskTag: bits 32 to
// 62, from its id) and a counter. Only events whose cookie has the bit and this actor's own tag
// can answer its asks: a request another actor asked this one has another tag. The reply, the
// Undelivered notice and the EvAskTimeout all carry it back. TryComplete consumes every event
// with such a cookie: the first one to come completes the ask, the later ones (a reply after
// the timeout, a timeout after the reply) are dropped.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/internal/small_alloc.h"
#include "actors/internal/spin_lock.h"
#include "actors/supervision.h"
#include "actors/sync.h"
#include "actors/timer.h"

namespace troupe::internal {

class Runtime;

// Set in the cookie of every ask's request (and so of its reply).
inline constexpr uint64_t kAskCookieBit = uint64_t{1} << 63;

// The bits 32..62 of every ask id of the actor `self`.
inline uint64_t AskTag(const ActorId& self) {
  return ((self.local_id() ^ (uint64_t{self.node_id()} * 0x9e3779b1U)) & 0x7fffffffU) << 32;
}

struct PendingAsk {
  // Gets the reply (status OK) or the reason there is none (the handle is then the notice that
  // ended the ask: an EvUndelivered or EvAskTimeout).
  AskContinuation done;
  TimerCookie timeout;
  ActorId to;
  EventType request_type = 0;
};

// A parent's live children (actors/internal/supervision.cc), owned by the parent (Actor::children_,
// handed from instance to instance across restarts). The parent adds; each child removes itself
// as it ends, before it is destroyed, so every non-null slot is a live actor while the lock is
// held. A child knows its slot (Actor::sibling_index_) and empties it as it ends: an ending child
// touches only this list, never a sibling (a swap-remove wrote the moved sibling's index, a cache
// miss on a cold actor at nearly every end in a large tree). The parent compacts the slots when it
// adds a child and at least half of them are empty, so a parent that spawns and ends children
// forever keeps about twice its live children's slots at most.
struct Children : SmallPooled {
  explicit Children(const ActorId& parent_id) : parent(parent_id) {}

  void Add(Actor* child) ABSL_LOCKS_EXCLUDED(mu);
  // Returns true when `child` was the last and the parent waits for it (stopping).
  bool Remove(Actor* child) ABSL_LOCKS_EXCLUDED(mu);
  // Puts `fresh` (a restarted instance) in the place of `old`.
  void Replace(Actor* old, Actor* fresh) ABSL_LOCKS_EXCLUDED(mu);
  // Returns the live children's ids; with `stop`, marks the parent as waiting for them.
  std::vector<ActorId> Ids(bool stop = false) ABSL_LOCKS_EXCLUDED(mu);
  bool Contains(const ActorId& child) ABSL_LOCKS_EXCLUDED(mu);

  const ActorId parent;
  // A spin lock: held for a push, an emptied slot or a compaction, and taken at every spawn and
  // end of a child.
  SpinLock mu;
  // The children's slots, null where one has ended. Inline: most parents have a few children, and
  // skynet-like trees many parents.
  absl::InlinedVector<Actor*, 6> slots ABSL_GUARDED_BY(mu);
  // Non-null slots.
  uint32_t live ABSL_GUARDED_BY(mu) = 0;
  // The parent has ended and waits for `live` to reach zero; the last child to go wakes it.
  bool stopping ABSL_GUARDED_BY(mu) = false;
};

struct ActorExtras {
  // Suspension: resumes still needed, and the events held meanwhile, in order.
  uint32_t suspend_count = 0;
  std::deque<EventHandlePtr> held;
  // Asks by request id.
  absl::flat_hash_map<uint64_t, PendingAsk> asks;
  uint64_t last_ask = 0;
  // The targets this actor watches, as it named them, and this actor's watchers, each with the id
  // it watches this actor as. Ordered: the notices they lead to leave in one order, so a run under
  // the deterministic test runtime replays (a hash set's order differs between processes).
  std::set<ActorId> watching;
  std::map<ActorId, ActorId> watchers;
  // A handler threw: the actor ends as TerminationReason::kFailed.
  bool failed = false;
  // Supervision: a child's factory (RegisterRestartable), whether it failed and waits for its
  // parent's directive (its events are held meanwhile), and a parent's children's recent restarts.
  ActorFactory factory;
  bool awaiting_directive = false;
  absl::flat_hash_map<ActorId, std::deque<absl::Time>> restarts;

  // Takes what the runtime handles before the state function: an ask's answer (the
  // continuation runs), an EvTerminated for a target no longer watched (dropped). Reports the
  // targets on a node whose session ended (EvNodeDisconnected, which the state function still
  // gets). Returns true when `ev` was consumed.
  bool Consume(Runtime& runtime, const ActorId& self, EventHandlePtr& ev);
  // Completes the ask `ev` answers, if `ev` carries an ask's cookie; returns false for any other
  // event. Runs the continuation on the calling (handler) thread.
  bool TryComplete(const ActorId& self, EventHandlePtr& ev);
  // Records or removes the watcher that sent `ev` (an EvWatch or EvUnwatch).
  void OnWatchRequest(const ActorId& self, EventHandle& ev);
  // For an actor that ends: tells its watchers, unwatches its targets.
  void Farewell(Runtime& runtime, const ActorId& self);
  // Sends EvUnwatch to every target and forgets them (an actor that ends or restarts).
  void UnwatchAll(Runtime& runtime, const ActorId& self);
  // Drops every pending ask, cancelling its timer, without calling its continuation (a waiting
  // coroutine's frame is destroyed here).
  void EndAsks();
};

// Applies delivery rule 3 to the runtime's own events (EvWatch, EvUnwatch, EvSupervise, EvStop,
// EvChildFailed, EvTerminated, EvDeadLetter), which are never dead letters: a lost EvWatch becomes
// the watcher's EvTerminated, a lost EvDeadLetter unsubscribes its listener, the others end
// silently.
void LostSystemEvent(Runtime& runtime, EventHandlePtr ev, UndeliveredReason reason);

}  // namespace troupe::internal
