// SPDX-License-Identifier: Apache-2.0
//
// The byte-stream transport the interconnect's session actors speak to, and an in-memory
// implementation with fault injection.
//
// A transport moves bytes; everything it has to say reaches the owning actor as an event:
//   | event               | when                                                               |
//   |---------------------|--------------------------------------------------------------------|
//   | EvConnectionUp      | an outgoing connection is established, or an incoming one accepted |
//   |                     | (then it goes to the listener's acceptor, which may SetOwner)      |
//   | EvBytesReceived     | bytes arrived, in order, in chunks of any size                     |
//   | EvConnectionDown    | the connection failed or was closed by the peer (reason inside);   |
//   |                     | also when Connect fails. Nothing follows it for that id.           |
// Write queues bytes in order; Close ends a connection without an EvConnectionDown to its own
// owner (the other end gets one). TCP through Asio is one implementation (tcp_transport.h);
// PipeTransport below is another, so session code runs under the deterministic test runtime with
// simulated time.
//
// PipeNetwork joins the PipeTransports of several nodes (one per ActorSystem) by "host:port"
// addresses. Bytes travel after `latency` of the node's clock (simulated under TestRuntime) and
// keep their order. Faults: Cut (both ends get EvConnectionDown), Stall/Resume (bytes wait),
// Blackhole (bytes vanish, the connection stays up), CorruptNextWrite (one bit flipped).
//
// Thread-safety: Transport methods are thread-safe. PipeNetwork is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "actors/timer.h"

namespace troupe::interconnect {

using ConnectionId = uint64_t;

enum TransportEventType : EventType {
  kEvConnectionUp = EventSpaceBegin(kInterconnectEventSpace) + 0x100,
  kEvBytesReceived,
  kEvConnectionDown,
  kEvTransportEnd,
};
static_assert(InEventSpace(kEvTransportEnd - 1, kInterconnectEventSpace));

struct EvConnectionUp final : EventLocal<EvConnectionUp, kEvConnectionUp> {
  EvConnectionUp(ConnectionId id, bool is_incoming) : connection(id), incoming(is_incoming) {}
  ConnectionId connection;
  // True for a connection accepted by a listener.
  bool incoming;
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
  // Closes the connection; its owner hears nothing more, the other end gets EvConnectionDown.
  virtual void Close(ConnectionId connection) = 0;
  // Closes every connection and listener of this transport and stops its threads: no event is
  // sent after it returns, and every later call is a no-op (Connect returns an id that never comes
  // up). Idempotent; the destructor calls it. Call it before the ActorSystem goes away.
  virtual void Shutdown() = 0;
};

class PipeTransport;

// The in-memory network joining PipeTransports.
class PipeNetwork {
 public:
  // Bytes arrive `latency` after they were written (by the writing node's clock).
  explicit PipeNetwork(absl::Duration latency = absl::ZeroDuration()) : latency_(latency) {}

  // Returns the transport of `system`'s node. The system must outlive every connection of it
  // (under TestRuntime: do not kill a node whose transport has connections).
  std::unique_ptr<Transport> TransportFor(ActorSystem* system);

  // -- faults (by the id either end knows the connection by) ----------------------------------

  // Breaks the connection: both owners get EvConnectionDown; bytes in flight are lost.
  void Cut(ConnectionId connection);
  // Holds the bytes of both directions until Resume (a stalled peer, a full socket buffer).
  void Stall(ConnectionId connection);
  void Resume(ConnectionId connection);
  // Drops every byte from now on, both directions, while the connection seems up.
  void Blackhole(ConnectionId connection);
  // Flips one bit in the middle of the next write on this end.
  void CorruptNextWrite(ConnectionId connection);
  // Returns the number of connections up.
  size_t Connections() const;
  // Returns the ids of every connection end that is up, in increasing order.
  std::vector<ConnectionId> ConnectionIds() const;

 private:
  friend class PipeTransport;

  struct End {
    ActorSystem* system = nullptr;
    ActorId owner;
    ConnectionId peer = 0;
    bool up = true;
    bool stalled = false;
    bool blackholed = false;
    bool corrupt_next = false;
    // Bytes written while stalled, delivered on Resume.
    std::string held;
    // Deliveries to this end still waiting out the latency; cancelled when it goes down, so
    // nothing arrives after EvConnectionDown.
    std::deque<TimerCookie> in_flight;
  };

  // Delivers `bytes` to the end `to` (after the latency).
  void Transmit(ConnectionId to, std::string bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the end `id` down: cancels what is still on its way to it and tells its owner.
  void Down(ConnectionId id, const absl::Status& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `apply` on the end `connection` and then on its peer (those that exist).
  void ForBothEnds(ConnectionId connection, const std::function<void(End&)>& apply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration latency_;
  mutable troupe::Mutex mu_;
  ConnectionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint16_t next_port_ ABSL_GUARDED_BY(mu_) = 40000;
  // "host:port" → (node's system, acceptor).
  absl::flat_hash_map<std::string, std::pair<ActorSystem*, ActorId>> listeners_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ConnectionId, End> ends_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::interconnect
