// SPDX-License-Identifier: Apache-2.0
//
// The views of a shard region and the two-phase hand-off barrier between the regions of a kind
// (node/sharding.h explains why two phases; node/internal/shard_region.h the key states).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "actors/log.h"
#include "node/internal/shard_region.h"

namespace troupe::node::internal {

namespace {

uint64_t ShardViewMix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9E3779B97F4A7C15u + (hash << 6) + (hash >> 2);
  hash ^= hash >> 31;
  hash *= 0xBF58476D1CE4E5B9u;
  return hash ^ (hash >> 29);
}

bool ShardIsUnregistered(UndeliveredReason reason) {
  return reason == UndeliveredReason::kUnknownService ||
         reason == UndeliveredReason::kActorNotFound;
}

}  // namespace

// -- views ----------------------------------------------------------------------------------------

ShardView ShardRegion::ReadView() const {
  ShardView view;
  uint64_t hash = 0x5348415244u;  // "SHARD"
  for (const interconnect::NodeEndpoint& member : nameservice_->Members()) {
    const bool leaving = leaving_nodes_.contains(member.node);
    uint32_t weight = options_.default_weight;
    if (auto it = options_.weights.find(member.node); it != options_.weights.end()) {
      weight = it->second;
    }
    view.members.push_back(member.node);
    hash = ShardViewMix(hash, member.node);
    hash = ShardViewMix(hash, (member.client ? 1u : 0u) | (leaving ? 2u : 0u));
    hash = ShardViewMix(hash, weight);
    if (!member.client && !leaving && weight > 0) {
      view.hosts.push_back({.node = member.node, .weight = weight});
    }
  }
  view.hash = hash == 0 ? 1 : hash;  // 0 marks a notice without a view (HandleBarrier)
  return view;
}

void ShardRegion::RecomputeView() {
  // A node that left the table is forgotten as a leaver: if it comes back, it is a new one.
  absl::flat_hash_set<NodeId> listed;
  for (const interconnect::NodeEndpoint& member : nameservice_->Members()) {
    listed.insert(member.node);
  }
  absl::erase_if(leaving_nodes_, [&](NodeId node) { return !listed.contains(node); });
  ShardView view = ReadView();
  if (view.hash == view_.hash) {
    return;
  }
  // Tell the members of both views at once that this region moved: what it said before (perhaps
  // about this same view, on an earlier visit) no longer counts.
  std::vector<NodeId> told = view_.members;
  told.insert(told.end(), view.members.begin(), view.members.end());
  std::sort(told.begin(), told.end());
  told.erase(std::unique(told.begin(), told.end()), told.end());
  view_ = std::move(view);
  ++epoch_;
  for (NodeId node : told) {
    SendBarrier(node, /*ready=*/false, view_.hash, /*pending=*/true);
  }
  view_since_ = Now();
  acked_ = false;
  readied_ = false;
  active_ = false;
  forced_ = false;
  held_for_absent_ = false;
  release_absent_ = false;
  leave_probe_sent_ = false;
  leave_probe_waiting_.clear();
  TROUPE_LOG(kDebug, kActors) << "shard " << kind_ << ": view " << view_.hash << " with "
                              << view_.hosts.size() << " hosts, epoch " << epoch_;
  // Phase 1: stop every entity the view gives away; send on what waits for keys that moved.
  foreign_live_ = 0;
  // In key order, not the hash map's (seeded per process): a test seed then fixes the run.
  std::vector<std::string> moved;
  std::vector<std::string> to_stop;
  for (const auto& [key, entry] : keys_) {
    if (Owner(key) == self_node_) {
      continue;
    }
    if (entry.state == KeyState::kIdle) {
      moved.push_back(key);
      continue;
    }
    ++foreign_live_;
    if (entry.state == KeyState::kLive) {
      to_stop.push_back(key);
    }
  }
  std::sort(to_stop.begin(), to_stop.end());
  for (const std::string& key : to_stop) {
    ++handoffs_;
    if (leaving_) {
      ++leave_stopped_;
    }
    StopEntity(keys_[key]);
  }
  std::sort(moved.begin(), moved.end());
  for (const std::string& key : moved) {
    RerouteBuffer(key);
  }
  TryAdvance();
}

// -- the barrier ----------------------------------------------------------------------------------

bool ShardRegion::HasAck(NodeId node) const {
  if (node == self_node_) {
    return acked_;
  }
  auto it = peers_.find(node);
  return it != peers_.end() &&
         (it->second.absent || (it->second.view == view_.hash && it->second.acked));
}

bool ShardRegion::HasAbsentRegion(NodeId node) const {
  auto it = peers_.find(node);
  return it != peers_.end() && it->second.absent;
}

bool ShardRegion::HasReady(NodeId node) const {
  if (node == self_node_) {
    return readied_;
  }
  auto it = peers_.find(node);
  return it != peers_.end() &&
         (it->second.absent || (it->second.view == view_.hash && it->second.ready));
}

bool ShardRegion::CanForwardTo(NodeId owner) const {
  auto it = peers_.find(owner);
  if (it != peers_.end() && it->second.absent) {
    return release_absent_ || forced_;
  }
  if (active_ || forced_) {
    return true;
  }
  return it != peers_.end() && it->second.view == view_.hash && it->second.acked;
}

void ShardRegion::RerouteIdle() {
  std::vector<std::string> waiting;
  for (const auto& [key, entry] : keys_) {
    if (entry.state == KeyState::kIdle && !entry.buffer.empty()) {
      waiting.push_back(key);
    }
  }
  std::sort(waiting.begin(), waiting.end());
  for (const std::string& key : waiting) {
    RerouteBuffer(key);
  }
}

bool ShardRegion::Complete(bool ready) const {
  if (forced_) {
    return true;
  }
  return std::all_of(view_.members.begin(), view_.members.end(), [&](NodeId node) {
    return node == self_node_ || (ready ? HasReady(node) : HasAck(node));
  });
}

void ShardRegion::TryAdvance() {
  if (!acked_ && foreign_live_ == 0) {
    acked_ = true;
    for (NodeId node : view_.members) {
      SendBarrier(node, /*ready=*/false, view_.hash);
    }
  }
  if (acked_ && !readied_ && Complete(/*ready=*/false)) {
    readied_ = true;
    for (NodeId node : view_.members) {
      SendBarrier(node, /*ready=*/true, view_.hash);
    }
  }
  if (readied_ && !active_ && Complete(/*ready=*/true)) {
    active_ = true;
    TROUPE_LOG(kDebug, kActors) << "shard " << kind_ << ": active under view " << view_.hash
                                << (forced_ ? " (unanswered members taken as answered)" : "");
    RerouteIdle();
  }
  if (leaving_ && active_ && keys_.empty() && !leave_requester_.IsEmpty()) {
    // What this region forwarded may still be on its way: repeat the ack, which every member
    // answers after what came before it on the same link, and answer the leave once all have.
    if (!leave_probe_sent_) {
      leave_probe_sent_ = true;
      leave_probe_since_ = Now();
      leave_probe_waiting_.clear();
      for (NodeId node : view_.members) {
        if (node != self_node_ && !HasAbsentRegion(node)) {
          leave_probe_waiting_.insert(node);
          SendBarrier(node, /*ready=*/false, view_.hash);
        }
      }
    }
    if (leave_probe_waiting_.empty() ||
        Now() - leave_probe_since_ >= options_.unanswered_member_timeout) {
      auto left = std::make_unique<EvShardLeft>();
      left->record.set_stopped(leave_stopped_);
      Send(leave_requester_, std::move(left), kNoFlags, leave_cookie_);
      leave_requester_ = ActorId();
    }
  }
  if (!active_ || held_for_absent_ || !leave_requester_.IsEmpty()) {
    ScheduleBarrierTick();
  }
}

void ShardRegion::SendBarrier(NodeId node, bool ready, uint64_t view, bool pending, bool answer) {
  if (node == self_node_) {
    return;
  }
  proto::ShardBarrier message;
  message.set_view(view);
  *message.mutable_region() = troupe::internal::ToWire(SelfId());
  message.set_leaving(leaving_);
  message.set_epoch(epoch_);
  message.set_pending(pending);
  message.set_answer(answer);
  const uint32_t flags = kTrackDelivery | kSubscribeOnSession;
  // The cookie names the node, so that an Undelivered says whose region is missing.
  if (ready) {
    auto event = std::make_unique<EvShardReady>();
    event->record = std::move(message);
    Send(ShardRegionId(kind_, node), std::move(event), flags, node);
  } else {
    auto event = std::make_unique<EvShardAck>();
    event->record = std::move(message);
    Send(ShardRegionId(kind_, node), std::move(event), flags, node);
  }
}

bool ShardRegion::NotePeer(NodeId node, const ActorId& region) {
  PeerState& peer = peers_[node];
  if (peer.region == region) {
    return false;
  }
  // A new region on that node (or the first word of one): what an old one said is void, and the
  // new one has heard nothing from this region yet (HandleBarrier answers it).
  const bool restarted = !peer.region.IsEmpty();
  peer = PeerState{
      .region = region, .epoch = 0, .view = 0, .acked = false, .ready = false, .absent = false};
  if (restarted && leaving_nodes_.erase(node) > 0) {
    RecomputeView();
  }
  return true;
}

void ShardRegion::HandleBarrier(EventHandlePtr& ev, bool ready) {
  const proto::ShardBarrier* record = nullptr;
  if (ready) {
    if (const EvShardReady* event = ev->Get<EvShardReady>(); event != nullptr) {
      record = &event->record;
    }
  } else if (const EvShardAck* event = ev->Get<EvShardAck>(); event != nullptr) {
    record = &event->record;
  }
  if (record == nullptr) {
    DropUnparsable(ev);
    return;
  }
  const ActorId region = troupe::internal::FromWire(record->region());
  const NodeId node = region.node_id();
  if (node == 0 || node == self_node_) {
    return;
  }
  const bool fresh = NotePeer(node, region);
  if (record->leaving() && leaving_nodes_.insert(node).second) {
    RecomputeView();
  }
  const uint64_t view = record->view();
  if (view == 0) {
    return;  // a notice of leaving only
  }
  PeerState& peer = peers_[node];
  if (record->epoch() < peer.epoch) {
    return;  // older than what it said since
  }
  if (record->epoch() > peer.epoch || peer.view != view) {
    peer.epoch = record->epoch();
    peer.view = view;
    peer.acked = false;
    peer.ready = false;
  }
  peer.absent = false;
  if (fresh && !record->answer()) {
    if (acked_) {
      SendBarrier(node, /*ready=*/false, view_.hash, /*pending=*/false, /*answer=*/true);
    }
    if (readied_) {
      SendBarrier(node, /*ready=*/true, view_.hash, /*pending=*/false, /*answer=*/true);
    }
  }
  if (record->pending()) {
    return;
  }
  const bool duplicate = ready ? peer.ready : peer.acked;
  peer.acked = true;
  peer.ready = peer.ready || ready;
  if (view != view_.hash) {
    return;
  }
  if (record->answer()) {
    leave_probe_waiting_.erase(node);
  }
  ReleaseHeldFor(node);
  const bool member =
      std::find(view_.members.begin(), view_.members.end(), node) != view_.members.end();
  // A repeat means the peer still misses something of ours (it repeats only while incomplete); a
  // node outside this view (a proxy not in the table) hears from nobody else; a fresh one had its
  // answer above.
  if ((duplicate || !member) && !fresh && !record->answer()) {
    if (acked_) {
      SendBarrier(node, /*ready=*/false, view, /*pending=*/false, /*answer=*/true);
    }
    if (readied_) {
      SendBarrier(node, /*ready=*/true, view, /*pending=*/false, /*answer=*/true);
    }
  }
  TryAdvance();
}

void ShardRegion::HandleUndelivered(EventHandlePtr& ev) {
  const EvUndelivered* undelivered = ev->Get<EvUndelivered>();
  if (undelivered == nullptr ||
      (undelivered->source_type != kEvShardAck && undelivered->source_type != kEvShardReady)) {
    return;
  }
  if (!ShardIsUnregistered(undelivered->reason)) {
    return;  // lost on the way: the tick repeats it
  }
  // No region of this kind on that node: it hosts nothing and sends nothing, so it agrees. Its
  // first message, should a region start there, makes it a peer like any other.
  const auto node = static_cast<NodeId>(undelivered->cookie);
  PeerState& peer = peers_[node];
  peer.region = ActorId();
  peer.absent = true;
  ReleaseHeldFor(node);
  TryAdvance();
}

void ShardRegion::HandleNodeConnected(NodeId node) {
  if (active_) {
    return;
  }
  if (acked_) {
    SendBarrier(node, /*ready=*/false, view_.hash);
  }
  if (readied_) {
    SendBarrier(node, /*ready=*/true, view_.hash);
  }
}

void ShardRegion::ScheduleBarrierTick() {
  if (barrier_tick_scheduled_) {
    return;
  }
  barrier_tick_scheduled_ = true;
  ScheduleWakeup(options_.resend_interval, kBarrierTick);
}

void ShardRegion::BarrierTick() {
  if (active_ && !held_for_absent_ && leave_requester_.IsEmpty()) {
    return;
  }
  if (active_ && leave_probe_sent_) {
    for (NodeId node : leave_probe_waiting_) {
      SendBarrier(node, /*ready=*/false, view_.hash);
    }
  }
  if (Now() - view_since_ >= options_.unanswered_member_timeout) {
    if (!forced_ && !active_) {
      for (NodeId node : view_.members) {
        if (!HasReady(node)) {
          TROUPE_LOG(kWarn, kActors) << "shard " << kind_ << ": node " << node
                                     << " did not answer the hand-off barrier of view "
                                     << view_.hash << " in time; taken as answered";
        }
      }
      forced_ = true;
    }
    if (held_for_absent_) {
      // Owners that never started a region of the kind: what waits for them goes (and is
      // reported Undelivered{kUnknownService} there).
      held_for_absent_ = false;
      release_absent_ = true;
      RerouteIdle();
    }
  }
  if (!forced_ && !active_) {
    for (NodeId node : view_.members) {
      if (HasReady(node)) {
        continue;
      }
      if (acked_) {
        SendBarrier(node, /*ready=*/false, view_.hash);
      }
      if (readied_) {
        SendBarrier(node, /*ready=*/true, view_.hash);
      }
    }
  }
  TryAdvance();
}

// -- leaving --------------------------------------------------------------------------------------

void ShardRegion::HandleLeave(EventHandlePtr& ev) {
  leave_requester_ = ev->sender();
  leave_cookie_ = ev->cookie();
  if (!leaving_) {
    leaving_ = true;
    leaving_nodes_.insert(self_node_);
    // Tell every member now: their views drop this node as a host, and the barrier of that view
    // moves the keys.
    for (NodeId node : view_.members) {
      SendBarrier(node, /*ready=*/false, /*view=*/0);
    }
    RecomputeView();
  }
  TryAdvance();
}

}  // namespace troupe::node::internal
