// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/peer_table.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "actors/metric_table.h"
#include "actors/node_hooks.h"
#include "interconnect/internal/session_metrics.h"
#include "interconnect/internal/stream.h"

namespace troupe::interconnect::internal {

void PeerChannel::PublishMetrics(MetricsRegistry& registry, bool histogram) {
  const MetricLabels labels = {{"peer", absl::StrCat(node)}};
  PublishRows(registry, kSessionMetrics, *this, labels, &metrics);
  if (!histogram) {
    return;
  }
  metrics.push_back(registry.AddHistogram(
      {.name = "troupe_session_round_trip_seconds",
       .help = "Round trips of data frames: from the write to the first acknowledgement covering "
               "it (one frame timed at a time).",
       .labels = labels},
      &stats.round_trips.histogram));
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

}  // namespace troupe::interconnect::internal
