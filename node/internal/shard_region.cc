// SPDX-License-Identifier: Apache-2.0
#include "node/internal/shard_region.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "actors/log.h"

namespace troupe::node::internal {

namespace {

// Flags an event keeps on the hops between regions: tracking only (a session subscription is the
// first hop's business, and priorities mean nothing to a region).
constexpr uint32_t kShardHopFlags = kTrackDelivery | kGenerateUnsureUndelivered;

void ShardSortByEpoch(std::deque<ShardPending>& buffer) {
  std::stable_sort(buffer.begin(), buffer.end(),
                   [](const ShardPending& a, const ShardPending& b) { return a.epoch < b.epoch; });
}

}  // namespace

ShardRegion::ShardRegion(std::string kind, std::shared_ptr<interconnect::Nameservice> nameservice,
                         EntityFactory factory, ShardingOptions options)
    : Actor(&ShardRegion::StateWork),
      kind_(std::move(kind)),
      nameservice_(std::move(nameservice)),
      factory_(std::move(factory)),
      options_(std::move(options)) {}

// -- lifecycle ------------------------------------------------------------------------------------

void ShardRegion::Bootstrap() {
  self_node_ = SelfId().node_id();
  ActorSystem* system = this->system();
  const ActorId self = SelfId();
  // Watch first, then read: a change between the two is read twice rather than missed. The watcher
  // runs on the thread that changed the table and must not block: it only posts.
  watch_ = nameservice_->Watch(
      [system, self] { system->Send(self, std::make_unique<EvShardViewChanged>()); });
  RecomputeView();
}

void ShardRegion::StateWork(EventHandlePtr& ev) {
  switch (ev->type()) {
    case kEvShardLocal:
      HandleLocal(ev);
      break;
    case kEvShardEnvelope:
      HandleEnvelope(ev);
      break;
    case kEvShardAck:
      HandleBarrier(ev, /*ready=*/false);
      break;
    case kEvShardReady:
      HandleBarrier(ev, /*ready=*/true);
      break;
    case kEvShardViewChanged:
      RecomputeView();
      break;
    case kEvTerminated:
      HandleTerminated(ev);
      break;
    case kEvShardPassivate:
      HandlePassivateRequest(ev);
      break;
    case kEvUndelivered:
      HandleUndelivered(ev);
      break;
    case kEvNodeConnected:
      HandleNodeConnected(ev->Get<EvNodeConnected>()->node);
      break;
    case kEvNodeDisconnected:
      break;
    case kEvShardLeave:
      HandleLeave(ev);
      break;
    case kEvShardStatsRequest:
      HandleStats(ev);
      break;
    case kEvWakeup: {
      const uint64_t tag = ev->Get<EvWakeup>()->tag;
      if (tag == kBarrierTick) {
        barrier_tick_scheduled_ = false;
        BarrierTick();
      } else if (tag == kPassivateTick) {
        passivate_tick_scheduled_ = false;
        PassivateIdle();
      }
      break;
    }
    default:
      Unhandled(ev);
  }
}

// -- routing --------------------------------------------------------------------------------------

void ShardRegion::HandleLocal(EventHandlePtr& ev) {
  auto* local = ev->Get<EvShardLocal>();
  if (local == nullptr || local->payload == nullptr) {
    return;
  }
  ShardPending pending;
  pending.type = local->payload->Type();
  pending.event = std::move(local->payload);
  pending.sender = ev->sender();
  pending.cookie = ev->cookie();
  pending.flags = ev->flags();
  pending.hops = 1;
  pending.epoch = epoch_;
  pending.origin = self_node_;
  pending.trace_id = ev->trace_id();
  Route(local->key, std::move(pending));
}

void ShardRegion::HandleEnvelope(EventHandlePtr& ev) {
  auto* envelope = ev->Get<EvShardEnvelope>();
  if (envelope == nullptr) {
    DropUnparsable(ev);
    return;
  }
  proto::ShardEnvelope& record = envelope->record;
  ShardPending pending;
  pending.type = record.type();
  pending.bytes = std::move(*record.mutable_payload());
  pending.sender = ev->sender();
  pending.cookie = ev->cookie();
  pending.flags = record.flags();
  pending.hops = record.hops();
  pending.epoch = record.epoch();
  pending.origin = record.origin_node();
  pending.trace_id = record.trace_id();
  Route(record.key(), std::move(pending));
}

void ShardRegion::Route(const std::string& key, ShardPending pending) {
  const NodeId owner = Owner(key);
  if (owner == 0) {
    Report(pending, UndeliveredReason::kNoRoute);
    return;
  }
  auto it = keys_.find(key);
  if (owner != self_node_) {
    // A key still alive here, or with events held, keeps its order: the buffer goes on when the
    // entity has ended.
    if (it != keys_.end() && (it->second.state != KeyState::kIdle || !it->second.buffer.empty())) {
      it->second.buffer.push_back(std::move(pending));
      return;
    }
    // An owner that has not acked this region's view may be at another view, and might send the
    // event back; one with no region yet (starting) would refuse it: hold it until the owner acks
    // (or the barrier completes, or unanswered_member_timeout passes).
    if (!CanForwardTo(owner)) {
      keys_[key].buffer.push_back(std::move(pending));
      auto peer = peers_.find(owner);
      if (peer != peers_.end() && peer->second.absent) {
        held_for_absent_ = true;
        ScheduleBarrierTick();
      }
      return;
    }
    Forward(key, std::move(pending), owner);
    return;
  }
  if (it == keys_.end()) {
    if (!active_) {
      keys_[key].buffer.push_back(std::move(pending));
      return;
    }
    it = keys_.try_emplace(key).first;
    if (!Activate(key, it->second)) {
      Report(pending, UndeliveredReason::kActorNotFound);
      keys_.erase(it);
      return;
    }
  }
  KeyEntry& entry = it->second;
  if (entry.state == KeyState::kLive) {
    Deliver(entry, std::move(pending));
    return;
  }
  entry.buffer.push_back(std::move(pending));
  if (entry.state == KeyState::kIdle && active_) {
    RerouteBuffer(key);
  }
}

void ShardRegion::Forward(const std::string& key, ShardPending pending, NodeId owner) {
  if (pending.hops >= options_.max_hops) {
    TROUPE_LOG(kDebug, kActors) << "shard " << kind_ << ": event for key " << key
                                << " gave up after " << pending.hops << " hops";
    Report(pending, UndeliveredReason::kNoRoute);
    return;
  }
  auto envelope = std::make_unique<EvShardEnvelope>();
  proto::ShardEnvelope& record = envelope->record;
  if (pending.event != nullptr) {
    if (!pending.event->SerializeToString(record.mutable_payload())) {
      Report(pending, UndeliveredReason::kNotSerializable);
      return;
    }
  } else {
    *record.mutable_payload() = std::move(pending.bytes);
  }
  record.set_key(key);
  record.set_type(pending.type);
  *record.mutable_sender() = troupe::internal::ToWire(pending.sender);
  record.set_cookie(pending.cookie);
  record.set_flags(pending.flags);
  record.set_hops(pending.hops + 1);
  record.set_epoch(pending.epoch);
  record.set_origin_node(pending.origin);
  record.set_trace_id(pending.trace_id);
  // The original sender sends it, as far as the interconnect is concerned: a lost hop is reported
  // to it directly, and its order to this node's region holds on the next link too.
  auto handle = std::make_unique<EventHandle>(ShardRegionId(kind_, owner), pending.sender,
                                              std::move(envelope), pending.flags & kShardHopFlags,
                                              pending.cookie);
  if (pending.trace_id != 0) {
    handle->set_trace_id(pending.trace_id);
  }
  ++forwarded_;
  Send(std::move(handle));
}

void ShardRegion::Deliver(KeyEntry& entry, ShardPending pending) {
  EventHandlePtr handle;
  if (pending.event != nullptr) {
    handle = std::make_unique<EventHandle>(entry.actor, pending.sender, std::move(pending.event),
                                           pending.flags, pending.cookie);
  } else {
    handle = std::make_unique<EventHandle>(pending.type, entry.actor, pending.sender, pending.bytes,
                                           pending.flags, pending.cookie);
  }
  if (pending.trace_id != 0) {
    handle->set_trace_id(pending.trace_id);
  }
  entry.last_event = Now();
  ++delivered_;
  Send(std::move(handle));
}

void ShardRegion::Report(const ShardPending& pending, UndeliveredReason reason) {
  ++undelivered_;
  if ((pending.flags & kTrackDelivery) == 0 || pending.sender.IsEmpty()) {
    return;
  }
  Send(pending.sender, std::make_unique<EvUndelivered>(reason, pending.type, pending.cookie));
}

bool ShardRegion::Activate(const std::string& key, KeyEntry& entry) {
  std::unique_ptr<ShardedEntity> entity = factory_ ? factory_(key) : nullptr;
  if (entity == nullptr) {
    TROUPE_LOG(kWarn, kActors) << "shard " << kind_ << ": no entity for key " << key;
    return false;
  }
  ShardEntityAccess::Init(*entity, kind_, key, SelfId());
  RegisterOptions register_options = options_.entity_register;
  register_options.detached = false;
  const ActorId actor = Register(std::move(entity), register_options);
  if (actor.IsEmpty()) {
    return false;
  }
  Watch(actor);
  entry.state = KeyState::kLive;
  entry.actor = actor;
  entry.last_event = Now();
  by_actor_[actor] = key;
  ++activations_;
  if (options_.passivate_after > absl::ZeroDuration() && !passivate_tick_scheduled_) {
    passivate_tick_scheduled_ = true;
    ScheduleWakeup(options_.passivate_after / 2, kPassivateTick);
  }
  return true;
}

void ShardRegion::StopEntity(KeyEntry& entry) {
  if (entry.state != KeyState::kLive) {
    return;
  }
  entry.state = KeyState::kStopping;
  Send(entry.actor, std::make_unique<EvShardStop>());
}

void ShardRegion::RerouteBuffer(const std::string& key) {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.state != KeyState::kIdle) {
    return;
  }
  std::deque<ShardPending> buffer = std::move(it->second.buffer);
  keys_.erase(it);
  ShardSortByEpoch(buffer);
  for (ShardPending& pending : buffer) {
    Route(key, std::move(pending));
  }
}

void ShardRegion::ReleaseHeldFor(NodeId owner) {
  std::vector<std::string> held;
  for (const auto& [key, entry] : keys_) {
    if (entry.state == KeyState::kIdle && !entry.buffer.empty() && Owner(key) == owner) {
      held.push_back(key);
    }
  }
  std::sort(held.begin(), held.end());
  for (const std::string& key : held) {
    RerouteBuffer(key);
  }
}

void ShardRegion::HandleTerminated(EventHandlePtr& ev) {
  const ActorId target = ev->Get<EvTerminated>()->target();
  auto by = by_actor_.find(target);
  if (by == by_actor_.end()) {
    return;
  }
  const std::string key = std::move(by->second);
  by_actor_.erase(by);
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.actor != target) {
    return;
  }
  if (Owner(key) != self_node_ && foreign_live_ > 0) {
    --foreign_live_;
  }
  it->second.state = KeyState::kIdle;
  it->second.actor = ActorId();
  if (it->second.buffer.empty()) {
    keys_.erase(it);
  } else {
    RerouteBuffer(key);
  }
  TryAdvance();
}

void ShardRegion::HandlePassivateRequest(EventHandlePtr& ev) {
  auto by = by_actor_.find(ev->sender());
  if (by == by_actor_.end()) {
    return;
  }
  auto it = keys_.find(by->second);
  if (it != keys_.end() && it->second.state == KeyState::kLive) {
    ++passivations_;
    StopEntity(it->second);
  }
}

void ShardRegion::PassivateIdle() {
  const absl::Time now = Now();
  bool any_live = false;
  std::vector<std::string> idle;
  for (const auto& [key, entry] : keys_) {
    if (entry.state != KeyState::kLive) {
      continue;
    }
    if (now - entry.last_event >= options_.passivate_after) {
      idle.push_back(key);
    } else {
      any_live = true;
    }
  }
  std::sort(idle.begin(), idle.end());
  for (const std::string& key : idle) {
    ++passivations_;
    StopEntity(keys_[key]);
  }
  if (any_live && !passivate_tick_scheduled_) {
    passivate_tick_scheduled_ = true;
    ScheduleWakeup(options_.passivate_after / 2, kPassivateTick);
  }
}

void ShardRegion::HandleStats(EventHandlePtr& ev) {
  auto* request = ev->Get<EvShardStatsRequest>();
  const bool with_keys = request != nullptr && request->record.with_keys();
  auto stats = std::make_unique<EvShardStats>();
  proto::ShardStats& record = stats->record;
  record.set_node(self_node_);
  record.set_view(view_.hash);
  for (const ShardHost& host : view_.hosts) {
    record.add_hosts(host.node);
  }
  record.set_active(active_);
  uint64_t live = 0;
  uint64_t buffered = 0;
  std::vector<std::string> keys;
  for (const auto& [key, entry] : keys_) {
    buffered += entry.buffer.size();
    if (entry.state == KeyState::kLive) {
      ++live;
      if (with_keys) {
        keys.push_back(key);
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  for (std::string& key : keys) {
    record.add_keys(std::move(key));
  }
  record.set_live(live);
  record.set_buffered(buffered);
  record.set_activations(activations_);
  record.set_passivations(passivations_);
  record.set_handoffs(handoffs_);
  record.set_forwarded(forwarded_);
  record.set_delivered(delivered_);
  record.set_undelivered(undelivered_);
  record.set_leaving(leaving_);
  Reply(ev, std::move(stats));
}

NodeId ShardRegion::Owner(std::string_view key) const { return ShardOwner(key, view_.hosts); }

}  // namespace troupe::node::internal
