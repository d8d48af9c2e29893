// SPDX-License-Identifier: Apache-2.0
//
// The byte-stream transport the interconnect's session actors speak to.
//
// A transport moves bytes; everything it has to say reaches the owning actor as an event:
//   | event               | when                                                               |
//   |---------------------|--------------------------------------------------------------------|
//   | EvConnectionUp      | an outgoing connection is established, or an incoming one accepted |
//   |                     | (then it goes to the listener's acceptor, which may SetOwner); it  |
//   |                     | names the remote address                                           |
//   | EvBytesReceived     | bytes arrived, in order, in chunks of any size                     |
//   | EvConnectionDown    | the connection failed or was closed by the peer (reason inside);   |
//   |                     | also when Connect fails. Nothing follows it for that id.           |
// A reason with code kUnauthenticated means the transport refused the peer's credentials (a TLS
// transport: an unknown CA, an expired certificate, one that names no node); the session treats
// it as a refusal (logged, counted, redialled with backoff), not as a network fault.
// Write queues bytes in order (WriteShared too, without copying bytes the writer keeps: a
// session's frames); Close ends a connection without an EvConnectionDown to its own owner (the
// other end gets one). TCP through Asio is one implementation (tcp_transport.h); the
// in-memory PipeNetwork of the troupe::interconnect_testing target is another
// (interconnect/testing/pipe_network.h), so session code runs under the deterministic test runtime
// with simulated time.
//
// Thread-safety: Transport methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "actors/event.h"

namespace troupe::interconnect {

using ConnectionId = uint64_t;

// Bytes that their writer and a transport share without copying (a session's frames, which the
// session keeps for resend while the socket writes them). Never changed once shared.
using SharedBytes = std::shared_ptr<const std::string>;

enum TransportEventType : EventType {
  kEvConnectionUp = EventSpaceBegin(kInterconnectEventSpace) + 0x100,
  kEvBytesReceived,
  kEvConnectionDown,
  kEvTransportEnd,
};
static_assert(InEventSpace(kEvTransportEnd - 1, kInterconnectEventSpace));

struct EvConnectionUp final : EventLocal<EvConnectionUp, kEvConnectionUp> {
  EvConnectionUp(ConnectionId id, bool is_incoming, std::string remote_address = {})
      : connection(id), incoming(is_incoming), remote(std::move(remote_address)) {}
  ConnectionId connection;
  // True for a connection accepted by a listener.
  bool incoming;
  // "host:port" of the remote end, as Peer() says it when the connection comes up (empty when the
  // transport has no addresses). The connection may go down, and Peer() forget it, before its
  // owner asks: a refusal still names whom it refused.
  std::string remote;
};

struct EvBytesReceived final : EventLocal<EvBytesReceived, kEvBytesReceived> {
  EvBytesReceived(ConnectionId id, std::string data) : connection(id), bytes(std::move(data)) {}
  ConnectionId connection;
  std::string bytes;
};

struct EvConnectionDown final : EventLocal<EvConnectionDown, kEvConnectionDown> {
  EvConnectionDown(ConnectionId id, absl::Status why) : connection(id), reason(std::move(why)) {}
  ConnectionId connection;
  absl::Status reason;
};

// What a transport knows about the remote end of a connection.
struct PeerInfo {
  // "host:port" of the remote end (empty when the transport has no addresses), for log lines.
  std::string address;
  // The node id the remote end proved with a certificate, for a transport that authenticates
  // peers (TLS): such a transport sets it on every connection it reports up, and refuses a peer
  // whose certificate names no node. nullopt: the transport does not authenticate.
  std::optional<NodeId> certified_node;
};

class Transport {
 public:
  Transport() = default;
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  Transport(Transport&&) = delete;
  Transport& operator=(Transport&&) = delete;

  // Accepts connections on host:port (port 0: any free one); each is reported to `acceptor` as
  // EvConnectionUp{incoming}. Returns the port. kAlreadyExists when the address is taken.
  virtual absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port,
                                          const ActorId& acceptor) = 0;
  // Starts connecting to host:port; `owner` gets EvConnectionUp or EvConnectionDown.
  virtual ConnectionId Connect(const std::string& host, uint16_t port, const ActorId& owner) = 0;
  // Sends the connection's future events to `owner`.
  virtual void SetOwner(ConnectionId connection, const ActorId& owner) = 0;
  // Queues `bytes` for sending, after everything written before. Ignored once the connection is
  // down.
  virtual void Write(ConnectionId connection, std::string bytes) = 0;
  // Queues `pieces` for sending, in order, after everything written before: the same bytes as one
  // Write of their concatenation. A transport may keep references to the pieces until the kernel
  // has taken them instead of copying them (the TCP transport gathers them into one sendmsg);
  // this default copies them into one Write. By value: a sink, which overrides keep.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void WriteShared(ConnectionId connection, std::vector<SharedBytes> pieces) {
    std::string bytes;
    for (const SharedBytes& piece : pieces) {
      bytes += *piece;
    }
    Write(connection, std::move(bytes));
  }
  // Closes the connection; its owner hears nothing more, the other end gets EvConnectionDown.
  virtual void Close(ConnectionId connection) = 0;
  // Returns what the transport knows about the remote end of `connection` (empty for an unknown
  // or closed one). Complete once the connection's first bytes have been reported.
  virtual PeerInfo Peer(ConnectionId connection) const = 0;
  // Closes every connection and listener of this transport and stops its threads. As Close does,
  // it tells no owner of its own connections: none hears of one from the moment Shutdown begins
  // (not even of a connection that fails meanwhile), no event at all is sent after it returns,
  // and every later call is a no-op (Connect returns an id that never comes up). Idempotent; the
  // destructor calls it. Call it before the ActorSystem goes away.
  virtual void Shutdown() = 0;
};

}  // namespace troupe::interconnect
