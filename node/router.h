// SPDX-License-Identifier: Apache-2.0
//
// Router: a group of worker actors behind one ActorId. Any node sends to the router as to any
// actor; the router passes each event on to one member (or, for broadcast, a copy to every
// member). Members are plain ActorIds, on the router's node or on others, added and removed while
// the router runs.
//
// Policies (RouterOptions::policy):
//   | policy             | the member that gets an event                                       |
//   |--------------------|---------------------------------------------------------------------|
//   | kRoundRobin        | the next one, in the order members were added                       |
//   | kSmallestMailbox   | the least loaded, by the score below; ties go round-robin           |
//   | kConsistentHash    | the owner of the event's key on a hash ring (`key` extracts it; each |
//   |                    | member holds `virtual_nodes` points): the same members give the same |
//   |                    | mapping on every node; a member leaving moves only its own keys, one |
//   |                    | joining takes keys only from others. An event without a key goes   |
//   |                    | round-robin.                                                        |
//   | kBroadcast         | every member, a copy each, made from the event's bytes: the event   |
//   |                    | must be serializable (EventPB); a local one is reported             |
//   |                    | Undelivered{kNotSerializable}.                                      |
//
// Smallest-mailbox score, lowest wins: a member on the router's node whose mailbox is idle
// (IsMailboxIdle, actors/node_hooks.h: nothing queued, nothing running) scores 0. Otherwise the
// score is 1 + 2 x (events this router sent it and has not seen handled): for a local member, the
// ones sent since its mailbox was last seen idle; for a member on another node, whose mailbox
// cannot be seen, the ones not yet covered by a probe. A mailbox keeps no count of its events, so
// events other senders queued count only through the idle test, and only for local members.
//
// Probes (members on other nodes, every policy): at most one per member in flight, sent behind the
// router's events; the member's node answers it once every event queued before it was handled.
// It is addressed to the member's mailbox slot under an id no actor has, so the runtime reports it
// Undelivered to the router when it reaches the head of the queue (node/router.cc says why that is
// sound). Its answer retires the records the router keeps of events it routed there; the cost is
// one small event each way per burst sent to a member.
//
// Sender and cookie: a member sees the event with its original sender, cookie and trace id, so
// Reply goes straight to the requester and an Ask through a router works. Flags are kept, except
// that the router adds kForwardOnNondelivery (events that already carry a forward target of their
// own keep it, and the router then does not re-route or report them) and, toward a member on
// another node, clears kTrackDelivery and kGenerateUnsureUndelivered: for those events the router
// itself reports (below), so that nothing is reported twice.
//
// Members that end: the router watches every member; EvTerminated (any reason: stopped, failed,
// not-found, node-lost, node-left) drops it. What happens to an event routed to it and not handled:
//   | member                  | event                              | outcome                      |
//   |-------------------------|------------------------------------|------------------------------|
//   | on the router's node    | still in its mailbox when it ended,| re-routed to a live member   |
//   |                         | or sent after it ended             | (certain it was not handled);|
//   |                         |                                    | with none left, reported as  |
//   |                         |                                    | for an empty router          |
//   | on the router's node,   | the same                           | reported Undelivered         |
//   | broadcast               |                                    | {kActorNotFound}             |
//   | on another node         | not yet seen handled (by a probe)  | reported Undelivered, unsure |
//   |                         | when the member's EvTerminated     | (kDisconnected for node-lost |
//   |                         | comes: still queued there, on the  | and node-left, else          |
//   |                         | wire, lost with its node, or       | kActorNotFound), sure for    |
//   |                         | handled just before the end        | not-found                    |
//   | on another node         | given back by the link before the  | reported Undelivered         |
//   |                         | member's end (refused: overloaded, | {kDisconnected}, unsure, at  |
//   |                         | too large; the session ended)      | once                         |
// "Reported" is delivery rule 3 (actors/node_hooks.h ReportUndelivered): EvUndelivered to a sender
// that tracked the event (an unsure report also to one that asked kGenerateUnsureUndelivered),
// else a dead letter. An event on another node is never re-routed: the router cannot tell one the
// member never saw from one it handled while the acknowledgement was lost, so it reports it,
// unsure, and the sender decides. Every routed event is thus handled once, or reported once, or
// (unsure) both; "handled" means its handler ran (or threw). Not covered: events held by a member
// suspended with ActorSystem::Suspend (a probe passes them), events that carry a forward target of
// their own, and a router that ends: events it routed stay with their members, and losses after
// that are the runtime's to report. The router keeps a record of 48 bytes per event routed to
// another node until a probe covers it; each probe answer counts as one undelivered event in the
// member node's counters.
//
// Removing a member (EvRouterRemove) stops routing to it; events already routed stay with it. A
// member on another node stays watched and probed until every event routed to it is seen handled,
// so its end before that is still reported (a probe that fails is sent again 100 ms later).
//
// Empty router: an event is reported Undelivered{kNoRoute} (to a tracking sender, else a dead
// letter), never silently dropped.
//
// Order: events of one sender reach one member in the order sent. With round-robin and smallest
// mailbox, consecutive events go to different members, so no order holds between them. With
// consistent hashing, events of one sender with one key keep their order while the membership
// does not change. A re-routed event may be handled after later events of its sender.
//
// Control events (any node may send them; the router handles them, no member sees them):
// EvRouterAdd, EvRouterRemove, EvRouterGetMembers (answered with EvRouterMembers, Reply-style, so
// Ask works), EvPoison (ends the router). Events of the system and interconnect event spaces are
// never routed.
//
// Thread-safety: the router is an actor (actor-confined); RouterOptions is a value type.
//
// Example:
//
//   troupe::node::RouterOptions options;
//   options.policy = troupe::node::RoutingPolicy::kConsistentHash;
//   options.key = [](troupe::EventHandle& ev) -> std::optional<std::string> {
//     const auto* order = ev.Get<EvOrder>();   // parses an order that came from another node
//     return order == nullptr ? std::nullopt : std::optional<std::string>(order->record.text());
//   };
//   options.members = {worker_a, worker_b, worker_on_node_2};
//   troupe::ActorId orders = system->Register(std::make_unique<troupe::node::Router>(options));
//   system->Send(orders, std::make_unique<EvOrder>("alice"));   // to the member owning "alice"
//   system->Send(orders, std::make_unique<troupe::node::EvRouterAdd>(
//                            std::vector<troupe::ActorId>{worker_c}));
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "proto/router.pb.h"

namespace troupe::node {

enum RouterEventType : EventType {
  kEvRouterAdd = EventSpaceBegin(kClusterEventSpace),
  kEvRouterRemove,
  kEvRouterGetMembers,
  kEvRouterMembers,
  kEvRouterProbe,
  kEvRouterEnd,
};
static_assert(kEvRouterEnd - 1 < EventSpaceBegin(kClusterEventSpace) + 0x100,
              "router events overflow their range");

namespace internal {
// Fills a RouterMembersChange or RouterMembers body.
void AppendRouterMembers(const std::vector<ActorId>& members,
                         google::protobuf::RepeatedPtrField<proto::ActorIdWire>* out);
std::vector<ActorId> ReadRouterMembers(
    const google::protobuf::RepeatedPtrField<proto::ActorIdWire>& in);
}  // namespace internal

// Adds members (an id already a member, an empty id or a service id is skipped).
struct EvRouterAdd final : EventPB<EvRouterAdd, proto::RouterMembersChange, kEvRouterAdd> {
  EvRouterAdd() = default;
  explicit EvRouterAdd(const std::vector<ActorId>& members) {
    internal::AppendRouterMembers(members, record.mutable_members());
  }
  std::vector<ActorId> members() const { return internal::ReadRouterMembers(record.members()); }
};

// Removes members (ids that are not members are skipped).
struct EvRouterRemove final : EventPB<EvRouterRemove, proto::RouterMembersChange, kEvRouterRemove> {
  EvRouterRemove() = default;
  explicit EvRouterRemove(const std::vector<ActorId>& members) {
    internal::AppendRouterMembers(members, record.mutable_members());
  }
  std::vector<ActorId> members() const { return internal::ReadRouterMembers(record.members()); }
};

// Asks for the current members; the router replies EvRouterMembers with the request's cookie.
struct EvRouterGetMembers final
    : EventPB<EvRouterGetMembers, proto::RouterGetMembers, kEvRouterGetMembers> {};

// The members at the time of the request, in the order they were added (removed ones not listed,
// even while the router still waits for their events).
struct EvRouterMembers final : EventPB<EvRouterMembers, proto::RouterMembers, kEvRouterMembers> {
  EvRouterMembers() = default;
  explicit EvRouterMembers(const std::vector<ActorId>& members) {
    internal::AppendRouterMembers(members, record.mutable_members());
  }
  std::vector<ActorId> members() const { return internal::ReadRouterMembers(record.members()); }
};

// The router's probe of a member's mailbox (see the file comment); never handled by anyone.
struct EvRouterProbe final : EventPB<EvRouterProbe, proto::RouterProbe, kEvRouterProbe> {};

enum class RoutingPolicy : uint8_t { kRoundRobin, kSmallestMailbox, kConsistentHash, kBroadcast };

// Returns "round-robin", "smallest-mailbox", "consistent-hash" or "broadcast".
const char* RoutingPolicyName(RoutingPolicy policy);

// Extracts the consistent-hashing key of an event (it may parse the event: `ev.Get<E>()`);
// nullopt for an event without one. Must give the same key for the same event on every node.
using RouterKey = std::function<std::optional<std::string>(EventHandle& ev)>;

struct RouterOptions {
  RoutingPolicy policy = RoutingPolicy::kRoundRobin;
  // The first members (as if added by one EvRouterAdd before any other event).
  std::vector<ActorId> members;
  // kConsistentHash only: the key of an event.
  RouterKey key;
  // kConsistentHash only: points per member on the ring (at least 1). More points spread keys
  // more evenly and cost memory and a longer rebuild when members change.
  uint32_t virtual_nodes = 64;
};

// Returns the 64-bit hash of `key` that the ring uses: FNV-1a, then a finalizer; the same on
// every node and in every build.
uint64_t RouterKeyHash(std::string_view key);

class Router final : public Actor {
 public:
  explicit Router(RouterOptions options);
  ~Router() override;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;
  Router(Router&&) = delete;
  Router& operator=(Router&&) = delete;

 private:
  class Return;
  friend class Return;
  struct Record {
    uint64_t seq = 0;
    ActorId sender;
    uint64_t cookie = 0;
    EventType type = 0;
    uint32_t flags = 0;
    uint64_t trace_id = 0;
  };
  struct Member {
    ActorId id;
    bool local;
    // Sequence numbers of events routed to it: next to give, and the last seen handled.
    uint64_t next_seq = 1;
    uint64_t handled_seq = 0;
    // The probe in flight (0: none) and the last sequence number it covers.
    uint64_t probe_cookie = 0;
    uint64_t probe_seq = 0;
    // Remote members: the events not yet seen handled, for reporting them, and the forward target
    // (an actor of its own on this router's mailbox) that tells which member returned an event.
    std::deque<Record> records;
    ActorId return_to;
  };

  // -- lifecycle ------------------------------------------------------------------------------
  void Bootstrap() override;
  TROUPE_STATE(StateWork);

  // -- membership -----------------------------------------------------------------------------
  void Add(const std::vector<ActorId>& ids);
  void Remove(const std::vector<ActorId>& ids);
  void HandleTerminated(const EvTerminated& ended);
  void HandleProbeAnswer(const EvUndelivered& answer);
  // Reports every recorded event of `member` (a remote member that ended).
  void ReportRecords(Member& member, UndeliveredReason reason, bool unsure);
  void RebuildRing();
  bool NeedsProbes(const Member& member) const;
  void MaybeProbe(Member& member);

  // -- routing --------------------------------------------------------------------------------
  // Routes a fresh event, or one a local member returned unhandled.
  void Route(EventHandlePtr ev);
  void Broadcast(EventHandlePtr ev);
  // Returns the index in members_ of the member for `ev`.
  size_t Pick(EventHandle& ev);
  size_t PickSmallest();
  size_t PickByKey(EventHandle& ev);
  // Sends `ev` on to members_[index] with the router's forward target and records it.
  void SendTo(size_t index, EventHandlePtr ev);
  // An event returned through a forward target: by a local member (`member` empty), or by the
  // remote member `member`.
  void Returned(EventHandlePtr ev, const ActorId& member);
  // Finds a member, or one being drained, by id (nullptr: neither).
  Member* Find(const ActorId& id);
  // Forgets a remote member: ends its forward target once what its node sent back has arrived.
  void Forget(Member& member);

  RouterOptions options_;
  std::vector<Member> members_;
  // Removed remote members whose events are not all seen handled yet (still watched).
  std::vector<Member> draining_;
  std::vector<std::pair<uint64_t, size_t>> ring_;
  size_t next_ = 0;
  uint64_t next_probe_cookie_ = 1;
  // Forward targets of forgotten members, each ended by the answer to its last probe (Forget).
  std::vector<std::pair<uint64_t, ActorId>> retiring_;
  // A wakeup is due to probe removed members again (see HandleProbeAnswer).
  bool retry_scheduled_ = false;
  // The forward targets (actors on this router's mailbox that hand returned events back to it)
  // reach the router through this cell, cleared when the router ends.
  std::shared_ptr<Router*> self_cell_;
  ActorId local_return_;
};

}  // namespace troupe::node
