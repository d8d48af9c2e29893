// SPDX-License-Identifier: Apache-2.0
//
// Interconnect: makes actors on other nodes reachable as if they were local.
//
// `Interconnect::Start(system)` reads the node table of `system->config().interconnect()` (the
// static nameservice: node id → host and port), listens on this node's address, registers one
// proxy actor per peer node in the IC pool (reachable as `ProxyServiceId(peer)`) and installs
// itself as the node's remote router. From then on a send to an ActorId (or a ServiceId) of
// another node goes to that node's proxy:
//   - the event is serialized on the sender's thread; a local event is refused with
//     Undelivered{kNotSerializable}, one above max_event_size with Undelivered{kTooLarge}, one for
//     a node outside the table with Undelivered{kNoRoute};
//   - the proxy waits for the session while it is being established, then packs events into
//     frames (many per frame, many frames per write) with sequence numbers, acknowledgements and
//     XXH3 checksums (interconnect/internal/wire.h);
//   - the node with the lower id dials (again after 20 ms, doubling up to the heartbeat interval,
//     while the peer refuses; again at once when the handshake is not answered within two
//     heartbeats), the other accepts; the handshake checks protocol version, cluster id and node
//     ids (interconnect/internal/handshake.h);
//   - a broken connection is redialled while the session lives; unacknowledged frames are resent
//     and the receiver drops duplicates, so order per sender→recipient is kept and nothing is lost;
//   - the session dies when the peer is silent (no byte, not even a heartbeat) for
//     dead_peer_timeout (events waiting for a session that never comes wait as long), or when it
//     restarts (a new incarnation): unsent tracked events get
//     Undelivered{kDisconnected}, sent-but-unacknowledged ones get it marked unsure (tracked
//     events, and any event sent with kGenerateUnsureUndelivered), and kSubscribeOnSession
//     subscribers get EvNodeDisconnected (actors/session_events.h). A killed peer's connection
//     resets at once, but only the timeout tells a dead peer from a cut cable: the session ends
//     then;
//   - at most max_unacked_bytes are sent and not acknowledged: past it the proxy stops sending
//     (backpressure) and events wait in its queue;
//   - malformed input (bad magic, checksum, length, garbage instead of a handshake, a handshake
//     from another cluster or an unexpected node) closes that connection with a logged reason;
//     every other session goes on.
// Received events keep their bytes until the handler asks for the message (EventPB lazy parse).
//
// Lifetime: destroy the Interconnect before its ActorSystem (declare it after the system). The
// destructor uninstalls the router (later remote sends get Undelivered{kShutdown}), stops the
// transport's threads and ends the proxies; events still queued in proxies are freed with them.
//
// Thread-safety: thread-safe.
//
// Example:
//
//   auto system = troupe::ActorSystem::Create(config);          // config.interconnect() filled
//   auto ic = troupe::interconnect::Interconnect::Start(system->get());
//   if (!ic.ok()) { std::cerr << ic.status(); return 1; }
//   (*system)->Send(troupe::ServiceId("echo", /*node=*/2), std::make_unique<EvPing>());
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

class Router;

// The well-known ServiceId of this node's proxy for `peer` ("ic/<peer>").
ActorId ProxyServiceId(NodeId peer);

struct InterconnectOptions {
  // The byte transport; null means TCP through Asio (MakeTcpTransport).
  std::shared_ptr<Transport> transport = nullptr;
  // Identifies this process in handshakes, so a restarted node is recognised as new. Unset: a
  // random nonzero number (tests under the deterministic runtime set it).
  std::optional<uint64_t> incarnation = std::nullopt;
  // Pool of the proxies and the listener; empty means "IC" when such a pool exists, else the
  // default pool.
  std::string pool = {};
};

// What one proxy knows about its session, read without stopping it.
struct SessionCounters {
  NodeId peer = 0;
  // A session is established with the peer (a connection may still be redialling).
  bool up = false;
  // A connection carries the session right now.
  bool connected = false;
  // Sessions established, connections established (a session may use several).
  uint64_t sessions = 0;
  uint64_t connections = 0;
  uint64_t events_sent = 0;
  uint64_t events_received = 0;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  // Frames sent again after a reconnect; received frames dropped as duplicates.
  uint64_t frames_resent = 0;
  uint64_t duplicates_dropped = 0;
  // Events waiting in the proxy (not yet in a frame), and bytes sent but not acknowledged.
  uint64_t queued_events = 0;
  uint64_t unacked_bytes = 0;
  // Times the proxy stopped sending because unacked_bytes reached max_unacked_bytes.
  uint64_t backpressure_stalls = 0;
  // Connections closed because of malformed or refused input.
  uint64_t protocol_errors = 0;
};

class Interconnect {
 public:
  // Starts the interconnect of `system` (see the file comment). kInvalidArgument when the node
  // table does not list this node or lists a node twice; kUnavailable when the address cannot be
  // listened on.
  static absl::StatusOr<std::unique_ptr<Interconnect>> Start(ActorSystem* system,
                                                             InterconnectOptions options = {});
  ~Interconnect();
  Interconnect(const Interconnect&) = delete;
  Interconnect& operator=(const Interconnect&) = delete;
  Interconnect(Interconnect&&) = delete;
  Interconnect& operator=(Interconnect&&) = delete;

  // The port this node listens on (the table's, or the one chosen for port 0).
  uint16_t port() const { return port_; }
  uint64_t incarnation() const { return incarnation_; }
  // Returns the counters of every proxy, in node-id order.
  std::vector<SessionCounters> Counters() const;

 private:
  Interconnect() = default;

  ActorSystem* system_ = nullptr;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<Router> router_;
  // The proxies and the listener, ended by the destructor; the peers whose proxy services it
  // removes.
  std::vector<ActorId> actors_;
  std::vector<NodeId> peers_;
  uint16_t port_ = 0;
  uint64_t incarnation_ = 0;
};

}  // namespace troupe::interconnect
