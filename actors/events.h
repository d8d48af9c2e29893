// SPDX-License-Identifier: Apache-2.0
//
// System events (event space 0): Bootstrap, Poison, Wakeup, Undelivered, Suspend, Resume.
//
// - `EvBootstrap` is the first event of every actor; the runtime turns it into a call to
//   `Actor::Bootstrap()`, no state function sees it.
// - `EvPoison` asks an actor to end; `Actor::Unhandled` ends the actor when its state function does
//   not handle poison itself. It is a protobuf event, so it can be sent across nodes.
// - `EvWakeup{tag}` is what `Actor::ScheduleWakeup` delivers.
// - `EvUndelivered{reason, source_type, cookie, unsure}` goes back to a sender that asked for
//   `kTrackDelivery` when its event could not be delivered; `cookie` is the lost event's cookie.
// - `EvSuspend` and `EvResume` suspend and resume the recipient (ActorSystem::Suspend): the runtime
//   handles them, no state function sees them. While an actor is suspended its other events are
//   held in arrival order, not handled; n suspends need n resumes, and the last resume handles the
//   held events, in order, before anything newer. They are local events (not sent across nodes).
//   In a kPriority mailbox they are system events and so overtake queued ordinary events.
// - `EvWatch`/`EvUnwatch` (Actor::Watch, Actor::Unwatch) are handled by the runtime too; the
//   watcher gets one `EvTerminated{target, reason}` when the target ends (actors/actor.h).
// - `EvSupervise`, `EvStop` and `EvChildFailed` carry supervision (actors/supervision.h) between a
//   parent and its children; the runtime handles them.
// - `EvAskTimeout` ends an Actor::Ask that got no answer; the runtime consumes it.
// - `EvDeadLetter` describes an event nobody could receive to the listeners subscribed with
//   ActorSystem::SubscribeDeadLetters.
//
// Thread-safety: value types; thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "actors/actor_id.h"
#include "actors/event.h"
#include "proto/events.pb.h"

namespace troupe {

enum SystemEventType : EventType {
  kEvBootstrap = EventSpaceBegin(kSystemEventSpace) + 1,
  kEvPoison,
  kEvWakeup,
  kEvUndelivered,
  kEvSuspend,
  kEvResume,
  kEvWatch,
  kEvUnwatch,
  // A parent's directive to a failed child, and a parent's order to end (actors/supervision.h).
  kEvSupervise,
  kEvStop,
  // A child's failure, for its parent's supervisor strategy (actors/supervision.h).
  kEvChildFailed,
  // An Ask's deadline (Actor::Ask): the request id is the event's cookie.
  kEvAskTimeout,
  kEvTerminated,
  kEvDeadLetter,
  kEvSystemEnd,
};
static_assert(InEventSpace(kEvSystemEnd - 1, kSystemEventSpace), "system events overflow");

// Why an event was not delivered.
enum class UndeliveredReason : uint32_t {
  // The recipient actor is dead or never existed.
  kActorNotFound = 1,
  // The recipient is a service id that no actor is registered for.
  kUnknownService = 2,
  // The recipient's node is not known or no route to it exists.
  kNoRoute = 3,
  // The session to the recipient's node died before the event was sent (or, if unsure, acked).
  kDisconnected = 4,
  // The event is larger than the configured maximum.
  kTooLarge = 5,
  // The event's bytes did not parse on the receiving side.
  kParseError = 6,
  // The actor system is stopping.
  kShutdown = 7,
  // The event had to cross nodes but is local (not an EventPB) or did not serialize.
  kNotSerializable = 8,
  // The bytes held for the recipient's node reached interconnect.max_queued_bytes (the peer or
  // the link is slower than the senders): refused at once, nothing was sent.
  kOverloaded = 9,
};

// Returns "actor-not-found", "unknown-service", ... ("unknown" for a value not listed above): a
// NUL-terminated string with static storage, so it passes to absl::StrCat, StrFormat's %s, printf
// and operator<<, and converts to std::string_view. Compare names as std::string_view, not with ==
// on the pointer.
const char* UndeliveredReasonName(UndeliveredReason reason);

struct EvBootstrap final : EventLocal<EvBootstrap, kEvBootstrap> {};

struct EvPoison final : EventPB<EvPoison, proto::Poison, kEvPoison> {};

struct EvWakeup final : EventLocal<EvWakeup, kEvWakeup> {
  explicit EvWakeup(uint64_t tag_value = 0) : tag(tag_value) {}
  uint64_t tag;
};

struct EvSuspend final : EventLocal<EvSuspend, kEvSuspend> {};
struct EvResume final : EventLocal<EvResume, kEvResume> {};
struct EvAskTimeout final : EventLocal<EvAskTimeout, kEvAskTimeout> {};

// Why a watched actor is gone (EvTerminated).
enum class TerminationReason : uint32_t {
  // It ended itself (PassAway, EvPoison) or its parent stopped it.
  kStopped = 1,
  // A handler (or Bootstrap) threw and nothing restarted it.
  kFailed = 2,
  // Its node died, or the session to its node ended: it may still be alive there.
  kNodeLost = 3,
  // No such actor when the watch arrived: it had already ended, or never existed.
  kNotFound = 4,
  // Its node left the cluster (a graceful shutdown, which said goodbye): the actor is gone, or
  // about to be.
  kNodeLeft = 5,
};

// Returns "stopped", "failed", "node-lost", "not-found", "node-left" ("unknown" for other values);
// static storage, like UndeliveredReasonName.
const char* TerminationReasonName(TerminationReason reason);

namespace internal {
proto::ActorIdWire ToWire(const ActorId& id);
ActorId FromWire(const proto::ActorIdWire& wire);
}  // namespace internal

// Actor::Watch and Actor::Unwatch send these; the runtime handles them, no state function sees
// them. They cross nodes.
struct EvWatch final : EventPB<EvWatch, proto::Watch, kEvWatch> {
  EvWatch() = default;
  explicit EvWatch(const ActorId& target) { *record.mutable_target() = internal::ToWire(target); }
  ActorId target() const { return internal::FromWire(record.target()); }
};
struct EvUnwatch final : EventPB<EvUnwatch, proto::Watch, kEvUnwatch> {
  EvUnwatch() = default;
  explicit EvUnwatch(const ActorId& target) { *record.mutable_target() = internal::ToWire(target); }
  ActorId target() const { return internal::FromWire(record.target()); }
};

// A watched actor has ended (Actor::Watch): `target()` is the id the watcher passed to Watch.
// Each Watch yields exactly one, unless Unwatch came first.
struct EvTerminated final : EventPB<EvTerminated, proto::Terminated, kEvTerminated> {
  EvTerminated() = default;
  EvTerminated(const ActorId& target, TerminationReason reason) {
    *record.mutable_target() = internal::ToWire(target);
    record.set_reason(static_cast<uint32_t>(reason));
  }
  ActorId target() const { return internal::FromWire(record.target()); }
  TerminationReason reason() const { return static_cast<TerminationReason>(record.reason()); }
  std::string ToString() const override;
};

// An event that could not be delivered and that nobody tracked (a dead letter), as a listener
// subscribed with ActorSystem::SubscribeDeadLetters learns of it. The event itself is gone; this
// describes it. Local: listeners live on the node that dropped the event.
struct EvDeadLetter final : EventLocal<EvDeadLetter, kEvDeadLetter> {
  EvDeadLetter(const EventHandle& lost, UndeliveredReason reason_value)
      : sender(lost.sender()),
        recipient(lost.recipient()),
        type(lost.type()),
        cookie(lost.cookie()),
        reason(reason_value) {}
  std::string ToString() const override;

  ActorId sender;
  ActorId recipient;
  EventType type;
  uint64_t cookie;
  UndeliveredReason reason;
};

// Dead letters counted so far for one event type and reason (ActorSystem::DeadLetterCounts).
struct DeadLetterCount {
  // 0 for the "other" bucket (see actors/internal/dead_letters.h).
  EventType type = 0;
  UndeliveredReason reason = UndeliveredReason::kActorNotFound;
  uint64_t count = 0;
};

// Plain fields for handlers; it crosses nodes as proto::Undelivered (a sender on another node
// must learn about its lost event too).
struct EvUndelivered final : EventBase {
  static constexpr EventType kEventType = kEvUndelivered;

  EvUndelivered(UndeliveredReason reason_value, EventType source_type_value, uint64_t cookie_value,
                bool unsure_value = false)
      : reason(reason_value),
        source_type(source_type_value),
        cookie(cookie_value),
        unsure(unsure_value) {}
  EventType Type() const override { return kEventType; }
  bool IsSerializable() const override { return true; }
  bool SerializeToString(std::string* out) const override;
  std::string ToString() const override;
  // Parses the wire form; nullptr when `bytes` is not a valid proto::Undelivered.
  static std::unique_ptr<EvUndelivered> Load(std::string_view bytes);

  UndeliveredReason reason;
  EventType source_type;
  uint64_t cookie;
  // True when the event may or may not have been handled (session died with it in flight).
  bool unsure;
};

}  // namespace troupe
