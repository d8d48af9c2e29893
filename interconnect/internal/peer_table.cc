// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/peer_table.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "actors/node_hooks.h"
#include "interconnect/internal/stream.h"

namespace troupe::interconnect {

void PeerChannel::PublishMetrics(MetricsRegistry& registry) {
  const MetricLabels labels = {{"peer", absl::StrCat(node)}};
  auto add = [&](std::string name, MetricType type, std::string help, const auto& value) {
    metrics.push_back(registry.Add({std::move(name), type, std::move(help), labels}, [&value] {
      return static_cast<int64_t>(value.load(std::memory_order_relaxed));
    }));
  };
  constexpr MetricType kCounter = MetricType::kCounter;
  constexpr MetricType kGauge = MetricType::kGauge;
  add("troupe_session_up", kGauge, "1 while a session with the peer is established.", stats.up);
  add("troupe_session_connected", kGauge, "1 while a connection carries the session.",
      stats.connected);
  add("troupe_session_sessions_total", kCounter, "Sessions established with the peer.",
      stats.sessions);
  add("troupe_session_connections_total", kCounter,
      "Connections that carried a session (a session may use several).", stats.connections);
  add("troupe_session_events_sent_total", kCounter, "Events packed into frames for the peer.",
      stats.events_sent);
  add("troupe_session_events_received_total", kCounter, "Events received from the peer.",
      stats.events_received);
  add("troupe_session_bytes_written_total", kCounter, "Bytes written to the peer.",
      stats.bytes_written);
  add("troupe_session_bytes_read_total", kCounter, "Bytes read from the peer.", stats.bytes_read);
  add("troupe_session_frames_resent_total", kCounter, "Frames sent again after a reconnect.",
      stats.frames_resent);
  add("troupe_session_duplicates_dropped_total", kCounter, "Received frames dropped as duplicates.",
      stats.duplicates_dropped);
  add("troupe_session_queued_events", kGauge, "Events waiting in the proxy, not yet in a frame.",
      stats.queued_events);
  add("troupe_session_unacked_bytes", kGauge, "Bytes sent and not yet acknowledged.",
      stats.unacked_bytes);
  add("troupe_session_backpressure_stalls_total", kCounter,
      "Times the proxy stopped sending at max_unacked_bytes.", stats.backpressure_stalls);
  add("troupe_session_protocol_errors_total", kCounter,
      "Connections closed for malformed or refused input.", stats.protocol_errors);
  add("troupe_session_refusals_total", kCounter,
      "Connections to the peer refused by it, or whose answer this node refused.", stats.refusals);
  add("troupe_session_overloaded_total", kCounter,
      "Events refused with Undelivered{overloaded}: the bytes held for the peer were at "
      "max_queued_bytes.",
      stats.overloaded);
  add("troupe_session_failed_links", kGauge,
      "Connections in a row closed for protocol errors (the session ends at 5).",
      stats.failed_links);
  add("troupe_session_round_trip_nanoseconds", kGauge,
      "Round trip of a data frame to the peer and its acknowledgement back, smoothed (1/8 per "
      "sample; 0 before the first).",
      stats.round_trips.smoothed_ns);
  metrics.push_back(registry.AddHistogram(
      {.name = "troupe_session_round_trip_seconds",
       .help = "Round trips of data frames: from the write to the first acknowledgement covering "
               "it (one frame timed at a time).",
       .labels = labels},
      &stats.round_trips.histogram));
  add("troupe_session_held_bytes", kGauge,
      "Bytes held for the peer: queued, in unacknowledged frames, and their overhead.", held_bytes);
}

PeerChannel* PeerTable::GetOrCreate(NodeId node) {
  if (node == 0 || node >= kMaxNodes) {
    return nullptr;
  }
  troupe::MutexLock lock(&mu_);
  if (PeerChannel* channel = Find(node); channel != nullptr) {
    return channel;
  }
  if (closed_) {
    return nullptr;
  }
  auto channel = std::make_shared<PeerChannel>(node);
  channel->proxy = factory_(channel);
  if (channel->proxy.IsEmpty()) {
    return nullptr;
  }
  std::atomic<Chunk*>& chunk_slot = chunks_[node >> kChunkBits];
  Chunk* chunk = chunk_slot.load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunk = owned_chunks_.emplace_back(std::make_unique<Chunk>()).get();
    // release: pairs with the acquire in Find.
    chunk_slot.store(chunk, std::memory_order_release);
  }
  PeerChannel* raw = channel.get();
  channels_.push_back(std::move(channel));
  // release: pairs with the acquire in Find; a router that finds the channel sees its proxy.
  chunk->slots[node & (kChunkSize - 1)].store(raw, std::memory_order_release);
  return raw;
}

uint64_t PeerChannel::ReportQueued(ActorSystem& system, UndeliveredReason reason) {
  uint64_t reported = 0;
  Drain([&](EventHandlePtr ev) {
    ++reported;
    Release(HeldCharge(*ev));
    ReportUndelivered(system, std::move(ev), reason);
  });
  return reported;
}

std::vector<std::shared_ptr<PeerChannel>> PeerTable::Close() {
  troupe::MutexLock lock(&mu_);
  closed_ = true;
  return channels_;
}

std::vector<std::shared_ptr<PeerChannel>> PeerTable::Channels() const {
  troupe::MutexLock lock(&mu_);
  return channels_;
}

std::string NodeAt(NodeId node, const Transport& transport, ConnectionId connection) {
  const std::string address = connection != 0 ? transport.Peer(connection).address : "";
  return address.empty() ? absl::StrCat("node ", node)
                         : absl::StrCat("node ", node, " at ", address);
}

}  // namespace troupe::interconnect
