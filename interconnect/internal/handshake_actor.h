// SPDX-License-Identifier: Apache-2.0
//
// The handshake actor: one per connection, in either direction; the only place a peer's handshake
// is read and checked (interconnect/internal/handshake.h). It owns the connection until the
// handshake is checked, then hands it to the peer's proxy (handover.h) and ends.
//
//   | direction | started by            | does                                    | on success →
//   proxy   |
//   |-----------|-----------------------|-----------------------------------------|----------------------|
//   | outgoing  | the proxy, to dial    | connects, sends the proxy's hello,      | EvHandshakeDone
//   with | |           |                       | reads the reply (from the dialled node) | the
//   frames after it  | | incoming  | the listener, per     | reads the peer's hello (a member, not
//   | EvHandshakeDone; the | |           | accepted connection   | us), finds or creates its proxy
//   | proxy replies        |
// Failures close the connection. An outgoing one tells its proxy (EvHandshakeFailed: unreachable,
// down, timeout, refused); an incoming one is logged ("refused incoming connection ...") and ends.
// A handshake not complete within its timeout fails (outgoing: also a connect that hangs).
//
// Thread-safety: actor-confined.
#pragma once

#include <memory>

#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/nameservice.h"
#include "interconnect/transport.h"
#include "proto/interconnect.pb.h"

namespace troupe::interconnect {

struct HandshakeSettings {
  LocalIdentity identity;
  std::shared_ptr<Transport> transport;
  // How long the peer may take to complete its handshake.
  absl::Duration timeout;
};

// Dials `peer` for `proxy`, sends `hello` and checks the reply.
std::unique_ptr<Actor> MakeOutgoingHandshake(HandshakeSettings settings, NodeEndpoint peer,
                                             const ActorId& proxy, proto::Handshake hello);

// Takes `connection` over from `listener` (which forwards what it still receives for it, then
// sends EvHandoverEnd), checks the peer's hello and hands the connection to the peer's proxy from
// `peers`.
std::unique_ptr<Actor> MakeIncomingHandshake(HandshakeSettings settings, ConnectionId connection,
                                             const ActorId& listener,
                                             std::shared_ptr<PeerTable> peers);

}  // namespace troupe::interconnect
