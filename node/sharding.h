// SPDX-License-Identifier: Apache-2.0
//
// Sharded entities: actors addressed by (kind, key) that live on whichever node owns the key.
//
// A kind is a class of entities ("cart", "counter"). Every node that hosts the kind starts its
// region with a factory (StartShardRegion); a node that only sends (a client, a node without the
// factory) starts a proxy-only region (a null factory). Anybody then sends to (kind, key) with
// SendToEntity, from an actor or from a plain thread; the region of the sender's node takes the
// event to the key's owner, whose region creates the entity on its first event and hands it the
// event with the original sender, cookie and flags (so Reply and Undelivered reach the sender).
//
// Placement: the owner of a key is chosen by weighted rendezvous hashing (ShardOwner) over the
// region's view: the members of its nameservice (interconnect/nameservice.h) that listen (not
// clients), have weight > 0 (ShardingOptions::weights; the same options on every node) and are
// not leaving (ShardRegionLeave). A host joining takes about weight/total of the keys, each from
// its previous owner; the others keep theirs.
//
// Life of an entity:
//   | what happens                              | what the region does                            |
//   |-------------------------------------------|-------------------------------------------------|
//   | first event for a key it owns             | creates it (factory(key)), Load(), then events  |
//   | no event for `passivate_after`,           | stops it: Save(), the entity ends; events that  |
//   | or the entity called Passivate()          | arrive meanwhile go to the next incarnation     |
//   | its view changes and the key moves away   | stops it (Save) and forwards its events, in     |
//   |                                           | order, to the new owner                         |
//   | its node leaves (ShardRegionLeave)        | stops every entity (Save), forwards the rest    |
//   | its node dies                             | nothing: the next owner creates it (Load) once  |
//   |                                           | the dead node left the views                    |
// The entity keeps its state across these only through Save and Load, on storage of the user's
// choosing: what an entity holds and did not save is lost when its node dies.
//
// Hand-off barrier: when a region's view changes to V it tells the members of its old and new view
// that it moved, stops every entity it does not own under V (Save), then sends Ack(V) to every
// member of V; a region with Ack(V) from every member sends Ready(V) to every member; a region
// creates entities under V only once it has Ready(V) from every member (entities it kept across
// the change continue meanwhile; events for keys it may not create yet are buffered). Only a
// peer's latest word counts, so an answer from an earlier visit to the same view is never reused.
// A region forwards an event to the key's owner only once that owner acked the region's view (or
// the barrier completed): views that disagree hold events rather than pass them back and forth.
// Every event carries the view epoch of the region that first took it, and a buffer is delivered
// sorted by it, which keeps each sender's order across stale forwards. A member without a region
// of the kind (Undelivered{kUnknownService} to the barrier) counts as having answered: it holds
// no entity; events for keys it would own are held until its region speaks, at most
// unanswered_member_timeout (then they go, and are reported kUnknownService there). A region that
// restarts (a new actor id on its node) is a new peer: what the old one said no longer counts.
//
// Guarantees, exactly:
//   - Per (sender, key) order: events one actor sends to one key are handled in send order, across
//     passivation and hand-offs, for senders on member nodes (listed in the nameservice, clients
//     included) with a region for the kind, as long as no node dies or is cut off while they are
//     under way and unanswered_member_timeout does not expire. A node outside the table takes
//     part in no barrier: its events keep their order except across a view change.
//   - One live incarnation: while the members agree on the membership (their nameservices list
//     the same members, the same weights, the same leavers) and every member answers the barrier,
//     no key has two live incarnations: one stops (Save returns) before the next is created (Load).
//   - Delivery: at most once. An event is handled by exactly one incarnation, or reported
//     Undelivered to a sender that tracked it (kTrackDelivery), or lost untracked. Undelivered
//     comes with the sender's cookie; its source_type is the event's type when the entity's own
//     delivery failed, kEvShardEnvelope when the hop between regions failed, and the reason is
//     kNoRoute when the region had no host for the key or the hop limit was reached,
//     kActorNotFound when the factory returned null.
// Where they are weaker than one might assume:
//   - Node death: events on their way to, or buffered at, a node that dies are lost (reported
//     Undelivered{kDisconnected, unsure} to tracking senders); its entities' unsaved state is lost.
//     Until its node leaves the views, events for its keys are reported Undelivered{kDisconnected}.
//   - Views that disagree (one node removed a member the others still list, a partition that made
//     a membership service drop one side): two incarnations of a key can be live, one on each side,
//     until the views agree again. A region answers only for itself.
//   - unanswered_member_timeout: a member of the view that does not answer the barrier in that time
//     (its kind is not registered, it is dead but still listed, cut off) is taken as having
//     answered. A cut-off member can then still hold a live incarnation of a key another node
//     creates, and events it forwards late can come after newer ones.
//   - Events sent from a node without a region for the kind are refused at once
//     (Undelivered{kUnknownService, source_type kEvShardLocal} to a tracking sender). On a running
//     Node, start the region right after Node::Start (the nameservice exists then); peers treat it
//     as absent until it speaks, which is safe because it holds nothing. An entity that ends itself
//     (PassAway, EvPoison, an exception) loses the events queued for it (reported to tracking
//     senders); the next event creates it again. Use Passivate() to end without losing any.
//   - A Save that fails is the entity's own business: the region does not retry it. A node shut
//     down without ShardRegionLeave destroys its entities without Save, as a death would.
//
// Leaving gracefully: call ShardRegionLeave (or send EvShardLeave) for every kind the node hosts,
// wait for its answer (EvShardLeft), and only then Node::Shutdown: the region stops its entities
// (Save), tells the others (their views drop the node as a host), forwards what it holds to the
// new owners, and answers once every other member acknowledged the view without it and answered
// one last repeated ack (so everything it forwarded has arrived). Until Node::Shutdown it forwards
// what still reaches it. A region that cannot finish (a member never answers) answers after
// unanswered_member_timeout.
//
// Thread-safety: the free functions are thread-safe; a region and its entities are actors
// (actor-confined). The nameservice's watcher only posts an event to the region.
//
// Example:
//
//   class Counter : public troupe::node::ShardedEntity {
//    public:
//     explicit Counter(Store* store) : ShardedEntity(&Counter::StateWork), store_(store) {}
//
//    private:
//     void Load() override { total_ = store_->Get(key()); }
//     void Save() override { store_->Put(key(), total_); }
//     TROUPE_STATE(StateWork) {
//       switch (ev->type()) {
//         TROUPE_HFUNC(EvAdd, Handle);
//         default:
//           Unhandled(ev);
//       }
//     }
//     void Handle(troupe::EventPtr<EvAdd> ev) { total_ += ev.Get()->record.value(); }
//     Store* store_;
//     int64_t total_ = 0;
//   };
//
//   // On every hosting node, right after Node::Start (node->interconnect()->nameservice() is
//   // the membership):
//   absl::StatusOr<troupe::ActorId> region = troupe::node::StartShardRegion(
//       system, "counter", names,
//       [&store](std::string_view) { return std::make_unique<Counter>(&store); });
//   // Anywhere:
//   troupe::node::SendToEntity(system, "counter", "user-42", std::make_unique<EvAdd>(5));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "interconnect/nameservice.h"
#include "proto/sharding.pb.h"

namespace troupe::node {

namespace internal {
class ShardEntityAccess;
}  // namespace internal

// -- events ---------------------------------------------------------------------------------------

enum ShardingEventType : EventType {
  kEvShardEnvelope = EventSpaceBegin(kClusterEventSpace) + 0x200,
  kEvShardAck,
  kEvShardReady,
  kEvShardLeave,
  kEvShardLeft,
  kEvShardStatsRequest,
  kEvShardStats,
  // Local to a node: an event for an entity on its first hop (not serialized), the order to stop
  // an entity, an entity's request to be passivated, and a change of the region's nameservice.
  kEvShardLocal,
  kEvShardStop,
  kEvShardPassivate,
  kEvShardViewChanged,
  kEvShardingEnd,
};
static_assert(kEvShardingEnd - 1 < EventSpaceBegin(kClusterEventSpace) + 0x400,
              "sharding events overflow their range");

// An event for an entity between regions (also what tracking senders see as source_type when a
// hop between regions fails).
struct EvShardEnvelope final : EventPB<EvShardEnvelope, proto::ShardEnvelope, kEvShardEnvelope> {};
// The hand-off barrier between regions of one kind.
struct EvShardAck final : EventPB<EvShardAck, proto::ShardBarrier, kEvShardAck> {};
struct EvShardReady final : EventPB<EvShardReady, proto::ShardBarrier, kEvShardReady> {};
// Asks a region to leave (see "Leaving gracefully"); answered with EvShardLeft, same cookie.
struct EvShardLeave final : EventPB<EvShardLeave, proto::ShardLeave, kEvShardLeave> {};
struct EvShardLeft final : EventPB<EvShardLeft, proto::ShardLeft, kEvShardLeft> {};
// Asks a region for its figures; answered with EvShardStats, same cookie. Works across nodes.
struct EvShardStatsRequest final
    : EventPB<EvShardStatsRequest, proto::ShardStatsRequest, kEvShardStatsRequest> {};
struct EvShardStats final : EventPB<EvShardStats, proto::ShardStats, kEvShardStats> {};

// -- options --------------------------------------------------------------------------------------

struct ShardingOptions {
  // An entity with no event for this long is passivated (Save, then it ends). Zero: never.
  absl::Duration passivate_after = absl::Minutes(5);
  // Weight of each node in placement; nodes not listed weigh `default_weight`. Weight 0: the node
  // hosts nothing (its region forwards only). Must be the same on every node of the kind.
  std::map<NodeId, uint32_t> weights = {};
  uint32_t default_weight = 1;
  // A member that has not answered the hand-off barrier of a view this long after the region
  // reached that view is taken as having answered (see the guarantees).
  absl::Duration unanswered_member_timeout = absl::Seconds(5);
  // How often a region repeats its barrier messages while the barrier is incomplete.
  absl::Duration resend_interval = absl::Milliseconds(200);
  // Regions an event may pass before it is given up (reported Undelivered{kNoRoute} to a tracking
  // sender): views that disagree cannot pass an event around forever.
  uint32_t max_hops = 8;
  // Where entities are registered (pool, mailbox kind; `detached` is ignored: entities are
  // children of their region).
  RegisterOptions entity_register = {};
};

// -- entities -------------------------------------------------------------------------------------

// Base of a sharded entity: an Actor with a key, whose state survives moves through Load and Save.
// Write its state functions as for any Actor (Become works as usual); the base handles the
// region's stop order before them. Bootstrap belongs to the base (it calls Load): start work in
// Load, or on the first event.
class ShardedEntity : public Actor {
 public:
  template <typename Derived>
  explicit ShardedEntity(void (Derived::*initial_state)(EventHandlePtr&))
      : Actor(&ShardedEntity::StateDispatch), user_state_(static_cast<StateFunc>(initial_state)) {}

  // Returns the entity's kind and key (set before Load).
  const std::string& kind() const { return kind_; }
  const std::string& key() const { return key_; }

 protected:
  // Called once when the entity starts, before its first event: read the saved state of key().
  virtual void Load() {}
  // Called once before the entity stops for passivation, hand-off or a leave (not when its node
  // dies, nor when it ends itself): write its state where the next incarnation's Load finds it.
  // To save asynchronously, call DelayStop() here and FinishStop() when the write is confirmed;
  // until then the entity handles its own events (replies of the store) and the region holds the
  // key's events for the next incarnation.
  virtual void Save() {}

  // Makes the entity's state functions `state` (replaces Actor::Become for entities).
  template <typename Derived>
  void Become(void (Derived::*state)(EventHandlePtr&)) {
    user_state_ = static_cast<StateFunc>(state);
  }

  // Asks the region to passivate this entity now (Save, then it ends; no event is lost).
  void Passivate();
  // Called inside Save: the entity does not end when Save returns, but at FinishStop().
  void DelayStop() { stop_delayed_ = true; }
  // Ends an entity whose stop was delayed. Does nothing otherwise.
  void FinishStop();

 private:
  friend class internal::ShardEntityAccess;

  void Bootstrap() final;
  TROUPE_STATE(StateDispatch);

  StateFunc user_state_;
  std::string kind_;
  std::string key_;
  ActorId region_;
  bool stopping_ = false;
  bool stop_delayed_ = false;
};

// Makes the entity for `key` (called on the region's node, in the region's handler).
using EntityFactory = std::function<std::unique_ptr<ShardedEntity>(std::string_view key)>;

// -- regions --------------------------------------------------------------------------------------

// Returns the service id of the region of `kind` on `node` (0: the local node). Kinds of any
// length are hashed into the 12-byte service name.
ActorId ShardRegionId(std::string_view kind, NodeId node = 0);

// Starts this node's region of `kind` and registers it as the service ShardRegionId(kind).
// `nameservice` is the membership (a running node: node.interconnect()->nameservice()); the
// region watches it. A null `factory` starts a proxy-only region: it forwards and hosts nothing
// (give such a node weight 0 when it is listed as a listening member). kInvalidArgument for an
// empty kind or a null nameservice, kAlreadyExists when the kind has a region on this node; the
// errors of ActorSystem::TryRegister and RegisterService otherwise.
absl::StatusOr<ActorId> StartShardRegion(ActorSystem& system, std::string_view kind,
                                         std::shared_ptr<interconnect::Nameservice> nameservice,
                                         EntityFactory factory, ShardingOptions options = {});

// -- sending --------------------------------------------------------------------------------------

// Sends `event` to the entity (kind, key) from `sender` (may be empty), through the local region.
// `event` must be an EventPB when the owner may be another node (a local event to a remote owner
// is reported Undelivered{kNotSerializable}); on the local node it is moved, never serialized.
// The entity sees `sender`, `flags` and `cookie` as given (Reply reaches the sender).
void SendToEntity(ActorSystem& system, std::string_view kind, std::string_view key,
                  std::unique_ptr<EventBase> event, const ActorId& sender = ActorId(),
                  uint32_t flags = kNoFlags, uint64_t cookie = 0);
// The same from inside an actor's handler, with that actor as sender.
void SendToEntity(const Actor& self, std::string_view kind, std::string_view key,
                  std::unique_ptr<EventBase> event, uint32_t flags = kNoFlags, uint64_t cookie = 0);

// -- leaving and introspection --------------------------------------------------------------------

// Asks the local region of `kind` to leave (see "Leaving gracefully") and blocks until it has, or
// `timeout` passes (kDeadlineExceeded), or it cannot be asked (kUnavailable: no region). Call it
// from a plain thread, never from a handler of this node. Returns how many entities it stopped.
absl::StatusOr<uint64_t> ShardRegionLeave(ActorSystem& system, std::string_view kind,
                                          absl::Duration timeout);
// Asks the region of `kind` on `node` (0: local) for its figures (with its live keys when
// `with_keys`) and blocks for the answer; the same errors as ShardRegionLeave.
absl::StatusOr<proto::ShardStats> GetShardStats(ActorSystem& system, std::string_view kind,
                                                absl::Duration timeout, bool with_keys = false,
                                                NodeId node = 0);

// -- placement ------------------------------------------------------------------------------------

struct ShardHost {
  NodeId node = 0;
  uint32_t weight = 1;
};
// Returns the owner of `key` among `hosts` by weighted rendezvous hashing (0 when no host has a
// weight > 0). Deterministic across processes and platforms.
NodeId ShardOwner(std::string_view key, const std::vector<ShardHost>& hosts);

}  // namespace troupe::node
