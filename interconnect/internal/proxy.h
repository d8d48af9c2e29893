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
// handover.h; the proxy never reads a handshake. A node's leaving (kLeaving, kStopped, kGoodbye
// frames) is described under "Leaving" in interconnect.h. The class is in proxy_actor.h.
//
// No fault turns into a loop:
//   | fault                                        | the proxy                                    |
//   |----------------------------------------------|----------------------------------------------|
//   | the peer refuses the connection (or we its   | counts it; dials again after a pause that    |
//   | answer)                                      | starts at a heartbeat and doubles up to      |
//   |                                              | max_redial_delay                             |
//   | this side closes a connection for a protocol | counts a failed link and pauses the same     |
//   | error (bad checksum, a frame over the limit, | way (a connection that moves either stream   |
//   | a gap)                                       | ends the streak); the 5th in a row ends the  |
//   |                                              | session (Undelivered for what it holds)      |
//   | an event larger than the peer accepts        | Undelivered{kTooLarge}; the session goes on  |
//   |                                              | (limits are announced in the handshake)      |
// Only decoded frames are signs of life: a handshake, or bytes that fail to decode, are not.
//
// Thread-safety: actor-confined.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/time/time.h"

#include "actors/actor.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/internal/handshake_actor.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/internal/stream.h"
#include "interconnect/nameservice.h"
#include "interconnect/transport.h"

namespace troupe::interconnect::internal {

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
  // The node's count and memory of refusals, shared with the handshake actors.
  std::shared_ptr<RefusalLog> refusals;
  // Longest pause between dials after refusals or failed connections (the first is a heartbeat).
  absl::Duration max_redial_delay = absl::Seconds(10);
};

// Returns the handshake of `settings`' node to its peer (handshake.h): resuming the session with
// `peer_incarnation` (0: none), having received the frames up to `received`.
inline proto::Handshake MakeHandshake(const SessionSettings& settings, uint64_t peer_incarnation,
                                      uint64_t received) {
  return MakeSessionHandshake(settings.identity, settings.peer, peer_incarnation, received,
                              settings.limits.MaxPayload(), settings.limits.max_event_size);
}

// The proxy of `channel`'s peer.
std::unique_ptr<Actor> MakeProxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel);

}  // namespace troupe::interconnect::internal
