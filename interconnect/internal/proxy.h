// SPDX-License-Identifier: Apache-2.0
//
// The proxy: one actor per peer node, owning the session with it (interconnect.h describes the
// behaviour a user sees). It takes the events the router queues in its PeerChannel, packs them
// into frames of the reliable stream (stream.h), and keeps one connection carrying the session:
//   | link state | means                                           | leaves on |
//   |------------|-------------------------------------------------|-------------------------------|
//   | kNone      | no connection                                   | Dial (dialling side, at each |
//   |            |                                                 | tick and after a drop) | |
//   kDialing   | an outgoing handshake actor dials and checks    | EvHandshakeDone → kUp;        |
//   |            |                                                 | EvHandshakeFailed → kNone | |
//   kUp        | frames flow on `conn_`                          | down, silence, protocol error |
// The accepting side goes kNone → kUp when an incoming handshake actor hands it a connection (a
// newer one replaces the old). Connections come to the proxy checked, through the hand-over of
// handover.h; the proxy never reads a handshake.
//
// Thread-safety: actor-confined.
#pragma once

#include <memory>

#include "absl/time/time.h"

#include "actors/actor.h"
#include "interconnect/internal/handshake_actor.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/internal/stream.h"
#include "interconnect/nameservice.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

struct SessionSettings {
  LocalIdentity identity;
  NodeId peer = 0;
  // This side dials (the lower node id of the pair); the other accepts.
  bool dials = false;
  absl::Duration heartbeat;
  absl::Duration dead_timeout;
  StreamLimits limits;
  // Where the peer listens, asked at every dial.
  std::shared_ptr<Nameservice> nameservice;
  std::shared_ptr<Transport> transport;
  // Where the proxy's handshake actors run.
  RegisterOptions handshakes;
};

// The proxy of `channel`'s peer.
std::unique_ptr<Actor> MakeProxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel);

}  // namespace troupe::interconnect
