// SPDX-License-Identifier: Apache-2.0
//
// ShardRegion: the actor behind one node's region of one entity kind (node/sharding.h). It keeps
// the node's view of the hosts, the entities it owns, the buffers of keys in hand-off, and runs the
// two-phase hand-off barrier with the regions of the other members.
//
// Key states:
//   | state     | meaning                                 | an event for the key                 |
//   |-----------|-----------------------------------------|--------------------------------------|
//   | absent    | no entity, nothing buffered             | delivered after activation (owner,   |
//   |           |                                         | active), buffered (owner, inactive), |
//   |           |                                         | or forwarded to the owner            |
//   | idle      | no entity, events buffered (awaiting    | buffered                             |
//   |           | activation)                             |                                      |
//   | live      | entity running                          | delivered (owner) or buffered        |
//   | stopping  | stop sent, EvTerminated not yet come    | buffered                             |
// A buffer is sorted by epoch and routed again when the entity ends or the region activates.
//
// Thread-safety: actor-confined.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "interconnect/nameservice.h"
#include "node/internal/shard_events.h"
#include "node/sharding.h"

namespace troupe::node::internal {

// One event on its way to an entity, held or forwarded by a region.
struct ShardPending {
  EventType type = 0;
  // The live event (first hop on this node), else its bytes.
  std::unique_ptr<EventBase> event;
  std::string bytes;
  ActorId sender;
  uint64_t cookie = 0;
  uint32_t flags = 0;
  uint32_t hops = 0;
  uint64_t epoch = 0;
  NodeId origin = 0;
  uint64_t trace_id = 0;
};

// A region's view: the members it runs the barrier with and the hosts that own keys.
struct ShardView {
  uint64_t hash = 0;
  std::vector<NodeId> members;
  std::vector<ShardHost> hosts;
};

class ShardRegion final : public Actor {
 public:
  ShardRegion(std::string kind, std::shared_ptr<interconnect::Nameservice> nameservice,
              EntityFactory factory, ShardingOptions options);

 private:
  enum class KeyState : uint8_t { kIdle, kLive, kStopping };
  struct KeyEntry {
    KeyState state = KeyState::kIdle;
    ActorId actor;
    std::deque<ShardPending> buffer;
    absl::Time last_event;
  };
  // What a peer region last said: its view and epoch then, and whether it had acked or readied
  // that view. Only its latest word counts (its messages come in order).
  struct PeerState {
    ActorId region;
    uint64_t epoch = 0;
    uint64_t view = 0;
    bool acked = false;
    bool ready = false;
    // Its node has no region of this kind (Undelivered{kUnknownService}): it holds nothing.
    bool absent = false;
  };
  enum WakeupTag : uint64_t { kBarrierTick = 1, kPassivateTick = 2 };

  // -- lifecycle (shard_region.cc) -------------------------------------------------------------
  void Bootstrap() override;
  TROUPE_STATE(StateWork);

  // -- routing (shard_region.cc) ---------------------------------------------------------------
  void HandleLocal(EventHandlePtr& ev);
  void HandleEnvelope(EventHandlePtr& ev);
  void Route(const std::string& key, ShardPending pending);
  void Forward(const std::string& key, ShardPending pending, NodeId owner);
  void Deliver(KeyEntry& entry, ShardPending pending);
  void Report(const ShardPending& pending, UndeliveredReason reason);
  bool Activate(const std::string& key, KeyEntry& entry);
  void StopEntity(KeyEntry& entry);
  void RerouteBuffer(const std::string& key);
  // Sends on the events held for keys `owner` owns (it has acked this region's view).
  void ReleaseHeldFor(NodeId owner);
  void HandleTerminated(EventHandlePtr& ev);
  void HandlePassivateRequest(EventHandlePtr& ev);
  void PassivateIdle();
  void HandleStats(EventHandlePtr& ev);
  NodeId Owner(std::string_view key) const;

  // -- views and the barrier (shard_barrier.cc) ------------------------------------------------
  ShardView ReadView() const;
  void RecomputeView();
  void HandleBarrier(EventHandlePtr& ev, bool ready);
  void HandleUndelivered(EventHandlePtr& ev);
  void HandleNodeConnected(NodeId node);
  void HandleLeave(EventHandlePtr& ev);
  // Returns true when `region` is new on `node` (its first word, or a restarted region).
  bool NotePeer(NodeId node, const ActorId& region);
  // True when an event for a key `owner` owns may go there now (see Route).
  bool CanForwardTo(NodeId owner) const;
  // Routes again the buffers of keys with no entity here.
  void RerouteIdle();
  void TryAdvance();
  // Sends Ack or Ready of `view` (a notice of moving with `pending`; an answer that the peer does
  // not answer with `answer`).
  void SendBarrier(NodeId node, bool ready, uint64_t view, bool pending = false,
                   bool answer = false);
  void BarrierTick();
  void ScheduleBarrierTick();
  bool HasAck(NodeId node) const;
  bool HasReady(NodeId node) const;
  bool HasAbsentRegion(NodeId node) const;
  bool Complete(bool ready) const;

  const std::string kind_;
  const std::shared_ptr<interconnect::Nameservice> nameservice_;
  EntityFactory factory_;
  const ShardingOptions options_;
  NodeId self_node_ = 0;
  interconnect::NameserviceWatch watch_;

  absl::flat_hash_map<std::string, KeyEntry> keys_;
  absl::flat_hash_map<ActorId, std::string> by_actor_;

  ShardView view_;
  uint64_t epoch_ = 0;
  absl::Time view_since_;
  // Entities alive here (live or stopping) that the current view gives to another node.
  uint64_t foreign_live_ = 0;
  bool acked_ = false;
  bool readied_ = false;
  bool active_ = false;
  bool forced_ = false;
  // Events are held for an owner with no region of the kind (absent), and the timeout after which
  // they go anyway has passed.
  bool held_for_absent_ = false;
  bool release_absent_ = false;
  std::map<NodeId, PeerState> peers_;
  absl::flat_hash_set<NodeId> leaving_nodes_;
  bool barrier_tick_scheduled_ = false;
  bool passivate_tick_scheduled_ = false;

  bool leaving_ = false;
  ActorId leave_requester_;
  uint64_t leave_cookie_ = 0;
  uint64_t leave_stopped_ = 0;
  // The last round of a leave: members that have not answered the repeated ack yet.
  bool leave_probe_sent_ = false;
  absl::Time leave_probe_since_;
  absl::flat_hash_set<NodeId> leave_probe_waiting_;

  uint64_t activations_ = 0;
  uint64_t passivations_ = 0;
  uint64_t handoffs_ = 0;
  uint64_t forwarded_ = 0;
  uint64_t delivered_ = 0;
  uint64_t undelivered_ = 0;
};

}  // namespace troupe::node::internal
