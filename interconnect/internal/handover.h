// SPDX-License-Identifier: Apache-2.0
//
// Handing a connection from one actor to another without reordering its bytes.
//
// Transport::SetOwner redirects the events the transport sends *from now on*; events it sent
// before are already in the old owner's mailbox. The old owner therefore:
//   1. makes sure the new owner's gate is open before the transport can reach it: it sends the
//      new owner what it needs to take over (EvHandshakeDone, which begins the proxy's gate), or
//      the new owner begins its gate in Bootstrap (an actor just registered);
//   2. calls SetOwner(connection, new_owner);
//   3. sends itself a fence (an EvHandoverEnd): the transport's earlier events are ahead of it;
//   4. forwards every EvBytesReceived / EvConnectionDown of the connection it still receives,
//      re-sent as new events *from itself*, and at the fence sends EvHandoverEnd{connection}.
// The new owner runs a HandoverGate: bytes of the connection that come straight from the
// transport (no sender) wait in the gate until EvHandoverEnd, so they follow the forwarded ones.
// An EvConnectionDown passes at once: the connection is gone, and what the gate still holds or
// the old owner still forwards is moot (a session resends what the peer did not acknowledge).
// Handling it at once keeps its place among the owner's other events (the router's kicks).
//
// Thread-safety: actor-confined (owned by the new owner).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "actors/actor_id.h"
#include "actors/event.h"
#include "interconnect/transport.h"

namespace troupe::interconnect::internal {

class HandoverGate {
 public:
  // Starts holding the transport's events until `from` ends the hand-over.
  void Begin(const ActorId& from) {
    from_ = from;
    held_.clear();
  }
  // Returns true when `ev` may be handled now; otherwise the gate keeps it (and `ev` is empty).
  bool Admit(EventHandlePtr& ev) {
    if (from_.IsEmpty() || ev->sender() == from_ || ev->type() == kEvConnectionDown) {
      return true;
    }
    held_.push_back(std::move(ev));
    return false;
  }
  // Ends the hand-over; returns the held events, oldest first, to be handled now.
  std::vector<EventHandlePtr> End() {
    from_ = ActorId();
    return std::exchange(held_, {});
  }
  // Returns true when no hand-over is in progress.
  bool idle() const { return from_.IsEmpty(); }
  // Forgets the hand-over and what it held (the connection is gone).
  void Reset() {
    from_ = ActorId();
    held_.clear();
  }

 private:
  ActorId from_;
  std::vector<EventHandlePtr> held_;
};

// Re-makes the connection event in `ev` (EvBytesReceived, its bytes moved out, or
// EvConnectionDown) for the old owner to forward as its own, and sets `*connection`; returns null
// for any other event.
inline std::unique_ptr<EventBase> TakeConnectionEvent(EventHandle& ev, ConnectionId* connection) {
  if (auto* bytes = ev.Get<EvBytesReceived>(); bytes != nullptr) {
    *connection = bytes->connection;
    return std::make_unique<EvBytesReceived>(bytes->connection, std::move(bytes->bytes));
  }
  if (const auto* down = ev.Get<EvConnectionDown>(); down != nullptr) {
    *connection = down->connection;
    return std::make_unique<EvConnectionDown>(down->connection, down->reason);
  }
  return nullptr;
}

}  // namespace troupe::interconnect::internal
