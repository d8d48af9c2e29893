// SPDX-License-Identifier: Apache-2.0
//
// Listener: the acceptor of this node's listening address. It reads nothing: each accepted
// connection goes at once to a new incoming handshake actor (handshake_actor.h), which reads the
// peer's hello and hands the connection to the peer's proxy. The hand-over keeps the bytes in
// order (handover.h): what the transport sent the listener before SetOwner is forwarded, then
// EvHandoverEnd.
//
// Thread-safety: actor-confined.
#pragma once

#include <memory>

#include "actors/actor.h"
#include "interconnect/internal/handshake_actor.h"
#include "interconnect/internal/peer_table.h"

namespace troupe::interconnect::internal {

// `handshakes` says where handshake actors run (the listener's pool).
std::unique_ptr<Actor> MakeListener(HandshakeSettings settings, std::shared_ptr<PeerTable> peers,
                                    RegisterOptions handshakes);

}  // namespace troupe::interconnect::internal
