// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's peers: one PeerChannel per peer node, shared by the router (senders'
// threads) and that peer's proxy actor, in a table that grows while the node runs.
//
// A channel is created, with its proxy, the first time anyone needs the peer: at start for every
// member of the nameservice, when the nameservice announces a new member, when an event is routed
// to a member without one, or when a member dials in. Channels are never removed while the
// interconnect lives, so a channel pointer read from the table stays valid.
//
// Thread-safety: thread-safe. Find is lock-free (two acquire loads) for the router's hot path;
// GetOrCreate takes a mutex on the slow path only.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/event_queue.h"
#include "actors/events.h"
#include "actors/metrics.h"
#include "actors/sync.h"
#include "interconnect/internal/stream.h"
#include "interconnect/transport.h"

namespace troupe::interconnect::internal {

// Counters of one peer's session, written by its proxy (relaxed: each is one independent number),
// read through the node's metrics registry (one row each in session_metrics.h).
struct SessionStats {
  std::atomic<bool> up{false};
  std::atomic<bool> connected{false};
  std::atomic<uint64_t> sessions{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> events_sent{0};
  std::atomic<uint64_t> events_received{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> frames_resent{0};
  std::atomic<uint64_t> duplicates_dropped{0};
  std::atomic<uint64_t> queued_events{0};
  std::atomic<uint64_t> unacked_bytes{0};
  std::atomic<uint64_t> backpressure_stalls{0};
  std::atomic<uint64_t> protocol_errors{0};
  // Connections the peer refused, or whose answer this node refused (outgoing handshakes).
  std::atomic<uint64_t> refusals{0};
  // Events refused with Undelivered{kOverloaded}: the peer's budget was spent.
  std::atomic<uint64_t> overloaded{0};
  // Connections in a row closed for protocol errors (reset by one that made progress).
  std::atomic<uint64_t> failed_links{0};
  // The protocol version of the current (or last) session.
  std::atomic<uint64_t> protocol_version{0};
  RoundTrips round_trips;

  static void Bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
    counter.fetch_add(by, std::memory_order_relaxed);
  }
  static void Set(std::atomic<uint64_t>& gauge, uint64_t value) {
    gauge.store(value, std::memory_order_relaxed);
  }
};

// What the router and one peer's proxy share.
struct PeerChannel {
  explicit PeerChannel(NodeId peer) : node(peer) {}

  const NodeId node;
  ActorId proxy;
  SessionStats stats;
  // The HeldCharge (stream.h) of every event held for the peer, from Route until it leaves the
  // process: the router adds, the proxy gives back what its stream releases (an acknowledgement's
  // before it delivers the events of the frame that carried it).
  std::atomic<uint64_t> held_bytes{0};
  // `stats` in the node's registry, labelled peer (see PublishMetrics).
  std::vector<MetricsRegistry::Registration> metrics;
  // The peer is in the nameservice's table, as the interconnect's watcher last told the proxy
  // (EvMembership). Written by that watcher only.
  std::atomic<bool> listed{true};
  // This node is leaving and every event the peer will send it has arrived (the peer answered the
  // leaving notice, or no session exists). Written by the proxy, read by Interconnect::Drain.
  std::atomic<bool> inbound_done{false};

  // Charges `bytes` to the budget unless that would take it past `limit`; returns whether it did.
  bool Admit(uint64_t bytes, uint64_t limit) {
    // relaxed: the budget is one number; racing senders may each see it nearly full and be
    // refused, never both admitted past it.
    const uint64_t before = held_bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (before + bytes > limit) {
      held_bytes.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // Charges `bytes` to the budget whatever it holds (the router's control events).
  void Charge(uint64_t bytes) { held_bytes.fetch_add(bytes, std::memory_order_relaxed); }
  void Release(uint64_t bytes) {
    if (bytes != 0) {
      held_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    }
  }

  // Router (any thread, no lock): queues a serialized event for the proxy. Returns true when the
  // caller must send the proxy an EvKick: none is on its way.
  bool Push(EventHandlePtr ev) {
    queue_.Push(std::move(ev));
    // seq_cst, after the push is complete: either a kick that is on its way has not cleared the
    // flag yet (its Drain starts later and finds this event), or we see it clear and kick.
    return !kicked_.exchange(true, std::memory_order_seq_cst);
  }
  // Proxy, on EvKick (or the router at Close): clears the kick, then hands each queued event to
  // `fn`, in the order routed. An event whose producer is between its two steps waits for the
  // kick that producer sends.
  template <typename Fn>
  void Drain(Fn&& fn) {
    troupe::MutexLock lock(&drain_mu_);
    kicked_.store(false, std::memory_order_seq_cst);
    while (EventHandlePtr ev = queue_.Pop()) {
      fn(std::move(ev));
    }
  }
  // Publishes the rows of kSessionMetrics (session_metrics.h) and, when `histogram`, the
  // round-trip histogram, with the label peer.
  void PublishMetrics(MetricsRegistry& registry, bool histogram);
  // Proxy or router: reports every event waiting in the queue Undelivered{`reason`} to `system`,
  // giving back its charge; returns how many.
  uint64_t ReportQueued(ActorSystem& system, UndeliveredReason reason);

  // Proxy: the session came up or ended. Wakes the threads in WaitUntilUp.
  void SetSessionUp(bool up) {
    troupe::MutexLock lock(&session_mu_);
    stats.up.store(up, std::memory_order_relaxed);
    session_up_ = up;
  }
  // Proxy: why the last attempt to reach the peer, or the last session, failed. Incoming
  // handshake: why the peer's last connection to this node was refused.
  void NoteFailure(std::string why) {
    troupe::MutexLock lock(&session_mu_);
    last_failure_ = std::move(why);
  }
  // Plain threads: waits until the session is up or `deadline` passes. Returns whether it is up;
  // otherwise sets `*why` to what the proxy last said (empty when it never failed).
  bool WaitUntilUp(absl::Time deadline, std::string* why) {
    troupe::MutexLock lock(&session_mu_);
    const bool up = session_mu_.AwaitWithDeadline(absl::Condition(&session_up_), deadline);
    if (!up) {
      *why = last_failure_;
    }
    return up;
  }

 private:
  // Serialized events waiting for the proxy: many routing threads, one drainer at a time (the
  // proxy, or the router's Close) under drain_mu_, which senders never take.
  EventQueue queue_;
  troupe::Mutex drain_mu_;
  // An EvKick is on its way to the proxy; the events routed meanwhile ride on it.
  std::atomic<bool> kicked_{false};
  // The session's state for WaitUntilUp (stats.up is the lock-free copy the metrics read).
  troupe::Mutex session_mu_;
  bool session_up_ ABSL_GUARDED_BY(session_mu_) = false;
  std::string last_failure_ ABSL_GUARDED_BY(session_mu_);
};

class PeerTable {
 public:
  // Registers the proxy actor of a new channel and returns its id (empty on failure; the factory
  // then leaves nothing running).
  using ProxyFactory = std::function<ActorId(const std::shared_ptr<PeerChannel>& channel)>;

  explicit PeerTable(ProxyFactory factory) : factory_(std::move(factory)) {}
  ~PeerTable() = default;
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;
  PeerTable(PeerTable&&) = delete;
  PeerTable& operator=(PeerTable&&) = delete;

  // Returns the channel of `node`, or null when it has none yet.
  PeerChannel* Find(NodeId node) const {
    if (node >= kMaxNodes) {
      return nullptr;
    }
    // acquire: pairs with the releases in GetOrCreate; a channel seen is seen built.
    const Chunk* chunk = chunks_[node >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr
                            : chunk->slots[node & (kChunkSize - 1)].load(std::memory_order_acquire);
  }
  // Returns the channel of `node`, creating it and its proxy first when it has none. Returns null
  // after Close, for an impossible node id, or when the proxy cannot be registered.
  PeerChannel* GetOrCreate(NodeId node);
  // Refuses every later GetOrCreate and returns every channel.
  std::vector<std::shared_ptr<PeerChannel>> Close();
  // Returns every channel, in creation order.
  std::vector<std::shared_ptr<PeerChannel>> Channels() const;

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxNodes = 1u << 20;  // node ids are 20 bits (actor_id.h)
  struct Chunk {
    std::array<std::atomic<PeerChannel*>, kChunkSize> slots{};
  };

  const ProxyFactory factory_;
  std::array<std::atomic<Chunk*>, kMaxNodes / kChunkSize> chunks_{};
  mutable troupe::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Chunk>> owned_chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<PeerChannel>> channels_ ABSL_GUARDED_BY(mu_);
};

// Returns "node 2 at 127.0.0.1:7002" (or "node 2" when `connection` is 0 or has no address): how
// log lines name a peer.
std::string NodeAt(NodeId node, const Transport& transport, ConnectionId connection);

}  // namespace troupe::interconnect::internal
