// SPDX-License-Identifier: Apache-2.0
//
// Interconnect: makes actors on other nodes reachable as if they were local.
//
// `Interconnect::Start(system)` asks the nameservice (by default the node table of
// `system->config().interconnect()`, see nameservice.h) where this node listens, listens there,
// registers one proxy actor per peer node in the IC pool (reachable as `ProxyServiceId(peer)`)
// and installs itself as the node's remote router. The TCP transport's socket I/O runs on that
// pool's workers (actors/node_hooks.h, IoPoller), unless `interconnect.io_thread` gives it a
// thread of its own. A node that joins the nameservice later gets
// its proxy when the nameservice announces it, when an event is routed to it, or when it dials in;
// one that leaves it is gone at once (nameservice.h: its session ends, later events get
// Undelivered{kNoRoute}). A client node (NodeEndpoint::client) listens nowhere.
// From then on a send to an ActorId (or a ServiceId) of another node goes to that node's proxy:
//   - the event is serialized on the sender's thread; a local event is refused with
//     Undelivered{kNotSerializable}, one above max_event_size with Undelivered{kTooLarge}, one for
//     a node the nameservice does not know with Undelivered{kNoRoute}, and one that would take
//     the bytes held for its node past max_queued_bytes with Undelivered{kOverloaded} (the bound
//     covers every queue between Send and the socket: events waiting, frames not acknowledged,
//     the transport's copy; troupe_session_overloaded_total and _held_bytes show the pressure).
//     The runtime's own EvWatch, EvUnwatch, EvTerminated and EvUndelivered are never refused
//     for it (they keep Actor::Watch's and kTrackDelivery's promises): they are charged, can
//     take the bytes held a little past the bound, and are given back like any event.
//     An event's bytes are given back as soon as its node acknowledges it, before any event that
//     node sent after receiving it is delivered here: a sender that sends more only as replies
//     come back, with at most W bytes unanswered, is never refused while W (and about 140 bytes
//     per event) fits max_queued_bytes less max_unacked_bytes;
//   - the proxy waits for the session while it is being established, then packs events into
//     frames (many per frame, many frames per write) with sequence numbers, acknowledgements and
//     XXH3 checksums (interconnect/internal/wire.h);
//   - the node with the lower id dials, or the client when one side is a client (again after
//     20 ms, doubling up to the heartbeat interval, while nothing listens; again at once when
//     the handshake is not answered within two heartbeats), the other accepts; the handshake checks
//     protocol version, cluster id, node ids and, with TLS, that the claimed node id is the one the
//     certificate names (interconnect/internal/handshake.h), in one handshake actor per connection;
//   - a refused connection is answered with the reason, which both sides log once per change
//     with the remote address and count (troupe_interconnect_refusals_total{direction}); the
//     dialler dials again after a heartbeat, doubling up to max_redial_delay_ms;
//   - each side announces the largest frame it accepts: an event the peer cannot take gets
//     Undelivered{kTooLarge} at the sender and the session goes on;
//   - a broken connection is redialled while the session lives; unacknowledged frames are resent
//     and the receiver drops duplicates, so order per sender→recipient is kept and nothing is lost;
//   - the session dies when the peer is silent (no valid frame, not even a heartbeat: a
//     handshake alone is no sign of life) for dead_peer_timeout (events waiting for a session that
//     never comes wait as long), when five connections in a row are closed for protocol errors,
//     or when the peer restarts (a new incarnation). Unsent tracked events get
//     Undelivered{kDisconnected} (on a restart they go to the new incarnation instead: they were
//     never sent), sent-but-unacknowledged ones get it marked unsure (tracked events, and any
//     event sent with kGenerateUnsureUndelivered), and kSubscribeOnSession subscribers get
//     EvNodeDisconnected (actors/session_events.h). An event acknowledged by a peer that then
//     dies is lost with it, unreported (acknowledged means delivered to the node, not handled).
//     A killed peer's connection resets at once, but only the timeout tells a dead peer from a
//     cut cable: the session ends then;
//   - at most max_unacked_bytes are sent and not acknowledged: past it the proxy stops sending
//     (backpressure) and events wait in its queue;
//   - malformed input (bad magic, checksum, length, garbage instead of a handshake, a handshake
//     from another cluster or an unexpected node) closes that connection with a logged reason;
//     every other session goes on.
// With `interconnect.tls` set (off by default), connections are mutual TLS 1.3 (tls_transport.h).
// Received events keep their bytes until the handler asks for the message (EventPB lazy parse).
//
// Counters: every session publishes troupe_session_* metrics labelled peer into the node's
// registry (ActorSystem::metrics(), actors/metrics.h); Counters() is a typed view of them.
//
// Waiting for a peer: a plain thread calls WaitForPeer(peer, timeout); an actor calls
// SubscribeSession(peer, SelfId()) and gets EvNodeConnected, or EvNodeDisconnected when no session
// comes within dead_peer_timeout (actors/session_events.h), and can Schedule its own shorter
// timeout. The dialling side dials every member from the start, so a session comes up without
// any event being sent. The log tells "no session with node N: never connected, tried for ..."
// (nothing ever answered) from "session with node N ended: ..." (one existed).
//
// Leaving: Drain(timeout) is how a node leaves the cluster without losing what it accepted.
//   1. It tells every peer it is leaving (a kLeaving frame). A peer sends what it had already
//      accepted for this node, then answers that it sends nothing new (kStopped); from then on
//      its sends to this node are refused at once with Undelivered{kShutdown}, until a new
//      incarnation of this node connects.
//   2. Meanwhile this node keeps acknowledging, delivering and sending: its actors handle what
//      arrived and their replies go out. Drain waits until every peer has answered, every event
//      held for a peer is acknowledged and no actor has work (no ready mailbox, no handler
//      running) for kDrainLinger in a row, or until the timeout.
//   3. It says goodbye on every session (kGoodbye): each peer ends the session at once as left
//      (its kSubscribeOnSession subscribers get EvNodeDisconnected, a remote watch ends), not
//      after dead_peer_timeout. Every event still held is reported Undelivered{kShutdown} (unsure
//      when sent but not acknowledged): a tracked sender learns its event's fate, an untracked one
//      is counted in dropped_events, nothing is freed unreported. Later sends are refused the
//      same way.
// What the timeout cuts short: an event the peer sent (and this node acknowledged) that no
// handler has answered when the sessions close. Its reply, if one comes later, is refused with
// Undelivered{kShutdown} to the actor that replies; the requester learns of the session's end
// (EvNodeDisconnected) but not of that request. A reply an actor defers on a timer longer than
// kDrainLinger counts as not yet in flight.
// Steps 1 and 3 need the feature "leave" on both sides (protocol.h); with a peer that lacks it
// (a release without the feature), this node skips them for that peer: it still handles and
// answers what arrives until the sessions close, and the peer learns of the close as of a lost
// connection.
//
// Versions: each handshake announces the protocol versions the node speaks and its features
// (InterconnectOptions::protocol, protocol.h); a session uses the newest version both speak
// (SessionCounters::protocol_version, troupe_session_protocol_version) and the features both
// have, and nodes without a common version refuse each other, naming both ranges.
//
// Lifetime: destroy the Interconnect before its ActorSystem (troupe::node::Node, node/node.h, does
// it for you); an ActorSystem destroyed first aborts with a message saying so (LeaseSystem in
// actors/node_hooks.h). The destructor refuses later remote sends (Undelivered{kShutdown}), asks
// each proxy to report what it holds as Drain(0) would, without waiting for it, stops the
// transport and ends the proxies. Call Drain first to know the reports were made.
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

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "interconnect/nameservice.h"
#include "interconnect/protocol.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

namespace internal {
class PeerTable;
class RefusalLog;
class Router;
}  // namespace internal

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
  // Where nodes listen and who is a member; null means a StaticNameservice of the config's node
  // table.
  std::shared_ptr<Nameservice> nameservice = nullptr;
  // The protocol versions and features the handshakes announce (protocol.h): this build's. Tests
  // that play another release (a mixed-version test, troupe_node --testing_protocol) announce
  // another; the frames are this build's whatever is announced.
  ProtocolRange protocol = {};
};

// What one proxy knows about its session, read without stopping it: a view of its
// troupe_session_* metrics, each field filled from one row of interconnect/internal/
// session_metrics.h.
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
  // Connections the peer refused (or whose answer this node refused), with the reason logged.
  uint64_t refusals = 0;
  // Events refused with Undelivered{kOverloaded}: the bytes held for the peer were at
  // max_queued_bytes (senders are faster than the peer or the link).
  uint64_t overloaded = 0;
  // Connections in a row this node closed for protocol errors (the 5th ends the session).
  uint64_t failed_links = 0;
  // Bytes held for the peer now (events queued and in unacknowledged frames, with overhead).
  uint64_t held_bytes = 0;
  // Round trip of a data frame and its acknowledgement, smoothed (each sample weighs 1/8); zero
  // before the first.
  absl::Duration round_trip;
  // The protocol version the session uses (protocol.h); 0 before the first session.
  uint64_t protocol_version = 0;
};

// Returns the counters of every peer session whose troupe_session_* metrics `registry` holds, in
// node-id order: Interconnect::Counters() of the node whose registry it is, for a reader that has
// the registry (a status page) but not the Interconnect.
std::vector<SessionCounters> SessionCountersOf(const MetricsRegistry& registry);

class Interconnect {
 public:
  // Starts the interconnect of `system` (see the file comment): listens where the nameservice's
  // Local says (nowhere for a client), then announces the node there (Nameservice::Announce,
  // whose error fails the start). kInvalidArgument naming the field when the system's
  // config().interconnect() fails ValidateConfig (config.h; its defaults are WithDefaults'), when
  // the nameservice has no place for this node or the incarnation is 0; kUnavailable when the
  // address cannot be listened on; kResourceExhausted when the proxies cannot be registered (the
  // mailbox or service table is full). On failure nothing is left running.
  static absl::StatusOr<std::unique_ptr<Interconnect>> Start(ActorSystem* system,
                                                             InterconnectOptions options = {});
  ~Interconnect();
  Interconnect(const Interconnect&) = delete;
  Interconnect& operator=(const Interconnect&) = delete;
  Interconnect(Interconnect&&) = delete;
  Interconnect& operator=(Interconnect&&) = delete;

  // The port this node listens on (the table's, or the one chosen for port 0); 0 for a client.
  uint16_t port() const { return port_; }
  uint64_t incarnation() const { return incarnation_; }
  // Returns the nameservice the interconnect asks.
  const std::shared_ptr<Nameservice>& nameservice() const { return nameservice_; }
  // Returns the counters of every proxy, in node-id order (a view of the troupe_session_* metrics).
  std::vector<SessionCounters> Counters() const;

  // -- waiting for peers --------------------------------------------------------------------------

  // Blocks the calling thread until a session with `peer` is up (at once when it is), or
  // `timeout` passes. OK for this node itself; kNotFound when the nameservice does not know
  // `peer`; kDeadlineExceeded after the timeout, saying whether the peer was never reached, why
  // the last attempt failed (unreachable, refused and why) or how the last session ended;
  // kFailedPrecondition after Drain. Not for handlers (it would block a worker) nor for a node
  // run by the deterministic test runtime (its time does not pass while a thread waits): actors
  // use SubscribeSession.
  absl::Status WaitForPeer(NodeId peer, absl::Duration timeout);
  // Blocks until a session with every member of the nameservice but this node is up, or
  // `timeout` passes (one deadline for all). Errors as WaitForPeer, for the first member
  // without a session.
  absl::Status WaitForPeers(absl::Duration timeout);
  // Subscribes the local actor `subscriber` to the session with `peer`, as a send with
  // kSubscribeOnSession would (actors/session_events.h): it gets EvNodeConnected when the session
  // is up (at once when it is), else EvNodeDisconnected when none comes within
  // dead_peer_timeout, and EvNodeDisconnected when the session ends. kNotFound when the
  // nameservice does not know `peer`; kInvalidArgument for this node or an empty subscriber;
  // kFailedPrecondition once the interconnect closes. After Drain the subscriber gets
  // EvNodeDisconnected at once.
  absl::Status SubscribeSession(NodeId peer, const ActorId& subscriber);

  // -- stopping -----------------------------------------------------------------------------------

  // How long Drain waits, once every peer is done sending and every event is acknowledged, for
  // the node's actors to stay without work before it says goodbye.
  static constexpr absl::Duration kDrainLinger = absl::Milliseconds(20);

  // What Drain did.
  struct DrainReport {
    // Every event held for a peer was acknowledged before the timeout.
    bool flushed = false;
    // Before the timeout, every peer was done sending, every event was acknowledged and the
    // node's actors had handled what arrived (answers included) for kDrainLinger in a row.
    bool quiet = false;
    // Events reported Undelivered{kShutdown} by the close (those still held at the timeout, and
    // sends that raced with the close).
    uint64_t reported = 0;
  };
  // Leaves the cluster (see "Leaving" in the file comment): tells every peer, waits until it is
  // quiet or `timeout` passes, then says goodbye on every session: what is still held is reported
  // Undelivered{kShutdown} and later remote sends are refused the same way. Returns once every
  // proxy has made its reports (their EvUndelivered are queued to the senders), or after 5 s more
  // if the interconnect's pool is stuck (logged: what those proxies hold is then not reported).
  // Call it from a plain thread; a second call returns {flushed = true, quiet = true,
  // reported = 0}. Not for a node run by the deterministic test runtime.
  DrainReport Drain(absl::Duration timeout);

 private:
  Interconnect() = default;

  // Declared first, released last: the ActorSystem aborts if destroyed while it is held.
  SystemLease lease_;
  ActorSystem* system_ = nullptr;
  std::shared_ptr<Nameservice> nameservice_;
  std::shared_ptr<Transport> transport_;
  // The peers' channels and proxies (grows at run time), the router reading it, the listener.
  std::shared_ptr<internal::PeerTable> peers_;
  std::shared_ptr<internal::Router> router_;
  ActorId listener_;
  NameserviceWatch watch_;
  // The node's refusals and their metric, troupe_interconnect_refusals_total{direction}.
  std::shared_ptr<internal::RefusalLog> refusals_;
  // Every peer's round trips, troupe_interconnect_round_trip_seconds (shared with the channels).
  std::shared_ptr<Histogram> round_trips_;
  std::vector<MetricsRegistry::Registration> metrics_;
  uint16_t port_ = 0;
  uint64_t incarnation_ = 0;
  // Drain ran: the proxies are closed.
  std::atomic<bool> drained_{false};
};

}  // namespace troupe::interconnect
