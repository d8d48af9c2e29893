// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's event space (kInterconnectEventSpace) and its private events.
//
// Who uses which part of the space:
//   | range           | file                             | events                                 |
//   |-----------------|----------------------------------|----------------------------------------|
//   | +0x001..+0x0ff  | actors/session_events.h (public) | EvNodeConnected, EvNodeDisconnected    |
//   | +0x100..+0x1ff  | interconnect/transport.h (public)| EvConnectionUp, EvBytesReceived, ...   |
//   | +0x200..+0x2ff  | this file (private)              | router → proxy, handshake hand-over    |
// A new sub-range goes in this table first.
//
// Thread-safety: value types; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"

#include "actors/event.h"
#include "interconnect/transport.h"
#include "proto/interconnect.pb.h"

namespace troupe::interconnect::internal {

enum InternalEventType : EventType {
  // The router queued events for the proxy (PeerChannel).
  kEvKick = EventSpaceBegin(kInterconnectEventSpace) + 0x200,
  kEvHandshakeDone,
  kEvHandshakeFailed,
  kEvHandoverEnd,
  kEvSubscribeSession,
  kEvCloseSession,
  kEvMembership,
  kEvLeave,
  kEvInternalEnd,
};
static_assert(InEventSpace(kEvInternalEnd - 1, kInterconnectEventSpace));

struct EvKick final : EventLocal<EvKick, kEvKick> {};

// A handshake actor hands its proxy a connection whose handshake it checked: the connection's
// owner is the proxy from now on (see handover.h for the events still on their way).
struct EvHandshakeDone final : EventLocal<EvHandshakeDone, kEvHandshakeDone> {
  EvHandshakeDone(ConnectionId id, proto::Handshake hs, std::string rest_bytes, bool is_incoming)
      : connection(id),
        handshake(std::move(hs)),
        rest(std::move(rest_bytes)),
        incoming(is_incoming) {}
  ConnectionId connection;
  proto::Handshake handshake;
  // Bytes received after the peer's handshake (its first frames).
  std::string rest;
  bool incoming;
};

// A dialled connection did not carry a checked handshake; it is closed.
struct EvHandshakeFailed final : EventLocal<EvHandshakeFailed, kEvHandshakeFailed> {
  enum class Kind : uint8_t {
    // The connection never came up (nobody listens, or the peer refused it).
    kUnreachable,
    // It went down before the peer's handshake was in.
    kDown,
    // The peer did not answer within the handshake timeout.
    kTimeout,
    // The peer's bytes were not an acceptable handshake (garbage, another cluster, ...).
    kRefused,
  };
  EvHandshakeFailed(Kind kind_value, absl::Status why) : kind(kind_value), reason(std::move(why)) {}
  Kind kind;
  absl::Status reason;
};

// The previous owner of `connection` forwarded every event it still had for it (handover.h).
struct EvHandoverEnd final : EventLocal<EvHandoverEnd, kEvHandoverEnd> {
  explicit EvHandoverEnd(ConnectionId id) : connection(id) {}
  ConnectionId connection;
};

// Interconnect::SubscribeSession: the sender subscribes to the session as a kSubscribeOnSession
// send would (actors/session_events.h), without sending anything to the peer.
struct EvSubscribeSession final : EventLocal<EvSubscribeSession, kEvSubscribeSession> {};

// Interconnect::Drain, as this node starts leaving: the proxy tells its peer (a kLeaving frame,
// again on every new connection) and sets its channel's `inbound_done` once the peer answers that
// it sends nothing new (kStopped), or at once when there is no session to answer.
struct EvLeave final : EventLocal<EvLeave, kEvLeave> {};

// Interconnect::Drain (or its destructor): the proxy says goodbye to its peer (a kGoodbye frame:
// the peer ends the session as left, at once), reports every event it still holds
// Undelivered{kShutdown}, refuses what comes later, then calls `done` (which may be empty). The
// connection stays open for the goodbye to go out; the peer closes it, or the transport's
// shutdown does.
struct EvCloseSession final : EventLocal<EvCloseSession, kEvCloseSession> {
  explicit EvCloseSession(std::function<void(uint64_t reported)> on_done)
      : done(std::move(on_done)) {}
  std::function<void(uint64_t reported)> done;
};

// The peer left the nameservice's table (`member` false): the session ends and the proxy neither
// dials nor takes events until it is back (`member` true).
struct EvMembership final : EventLocal<EvMembership, kEvMembership> {
  explicit EvMembership(bool is_member) : member(is_member) {}
  bool member;
};

}  // namespace troupe::interconnect::internal
