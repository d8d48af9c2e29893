// SPDX-License-Identifier: Apache-2.0
//
// The handshake actor: one per connection, in either direction; the only place a peer's handshake
// is read and checked (interconnect/internal/handshake.h). It owns the connection until the
// handshake is checked, then hands it to the peer's proxy (handover.h) and ends.
//
//   | direction | started by            | does                                                  |
//   |-----------|-----------------------|-------------------------------------------------------|
//   | outgoing  | the proxy, to dial    | connects, sends the proxy's hello, reads the dialled  |
//   |           |                       | node's reply                                          |
//   | incoming  | the listener, per     | reads the peer's hello (a member, not us), finds or   |
//   |           | accepted connection   | creates its proxy                                     |
// On success the proxy gets EvHandshakeDone (for an incoming connection it then sends our reply).
// Failures close the connection. An outgoing one tells its proxy (EvHandshakeFailed: unreachable,
// down, timeout, refused). An incoming one is refused: the actor answers with a refusal saying why
// (handshake.h), waits for the dialler to close (at most a second; bytes that are not a handshake
// at all: not at all) and ends. Refusals in both directions are counted and logged with the
// remote address (the one EvConnectionUp named, so a connection the transport has already
// forgotten is still named) once per change of reason (refusal_log.h): "refused incoming
// connection from ADDR (node N): why" on the accepting side, "node N at ADDR: why" on the
// dialling side. A transport that refuses the peer's credentials (EvConnectionDown with
// kUnauthenticated: TLS) is a refusal too. An incoming refusal of a dialler that named itself a
// member is also that member's channel's last failure (PeerChannel::NoteFailure), which
// Interconnect::WaitForPeer reports.
// A handshake not complete within its timeout fails (outgoing: also a connect that hangs).
//
// Thread-safety: actor-confined.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/internal/refusal_log.h"
#include "interconnect/nameservice.h"
#include "interconnect/transport.h"
#include "proto/interconnect.pb.h"

namespace troupe::interconnect::internal {

struct HandshakeSettings {
  LocalIdentity identity;
  std::shared_ptr<Transport> transport;
  // How long the peer may take to complete its handshake.
  absl::Duration timeout;
  // The node's count and memory of refusals.
  std::shared_ptr<RefusalLog> refusals;
};

// Dials `peer` for `proxy`, sends `hello` and checks the reply.
std::unique_ptr<Actor> MakeOutgoingHandshake(HandshakeSettings settings, NodeEndpoint peer,
                                             const ActorId& proxy, proto::Handshake hello);

// Takes `connection` (from `remote`, as its EvConnectionUp said) over from `listener` (which
// forwards what it still receives for it, then sends EvHandoverEnd), checks the peer's hello and
// hands the connection to the peer's proxy from `peers`.
std::unique_ptr<Actor> MakeIncomingHandshake(HandshakeSettings settings, ConnectionId connection,
                                             std::string remote, const ActorId& listener,
                                             std::shared_ptr<PeerTable> peers);

}  // namespace troupe::interconnect::internal
