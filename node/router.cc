// SPDX-License-Identifier: Apache-2.0
#include "node/router.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "actors/actor_system.h"
#include "actors/log.h"
#include "actors/node_hooks.h"

namespace troupe::node {

namespace {

// How long a removed member's failed probe waits before it is sent again.
constexpr absl::Duration kRouterProbeRetry = absl::Milliseconds(100);

// splitmix64's finalizer: spreads FNV's weak low bits and the ids' structure over the ring.
uint64_t RouterMix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9u;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBu;
  x ^= x >> 31;
  return x;
}

// The probe's address: the member's mailbox slot under local id 0, which no actor ever has (local
// ids start above 0 and are never reused). The member's node pushes it into that mailbox, behind
// every event queued there, and the reader, finding no actor 0, reports it Undelivered to the
// tracking sender: the answer means "everything queued before the probe has been handled". A slot
// freed and reused since answers after its new actor's queue, later than needed but never early.
ActorId RouterProbeAddress(const ActorId& member) {
  return ActorId::FromRaw(0, member.hint(), member.node_word());
}

}  // namespace

namespace internal {

void AppendRouterMembers(const std::vector<ActorId>& members,
                         google::protobuf::RepeatedPtrField<proto::ActorIdWire>* out) {
  for (const ActorId& id : members) {
    proto::ActorIdWire* wire = out->Add();
    wire->set_local_id(id.local_id());
    wire->set_hint(id.hint());
    wire->set_node_word(id.node_word());
  }
}

std::vector<ActorId> ReadRouterMembers(
    const google::protobuf::RepeatedPtrField<proto::ActorIdWire>& in) {
  std::vector<ActorId> members;
  members.reserve(in.size());
  for (const proto::ActorIdWire& wire : in) {
    members.push_back(ActorId::FromRaw(wire.local_id(), wire.hint(), wire.node_word()));
  }
  return members;
}

}  // namespace internal

const char* RoutingPolicyName(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kRoundRobin:
      return "round-robin";
    case RoutingPolicy::kSmallestMailbox:
      return "smallest-mailbox";
    case RoutingPolicy::kConsistentHash:
      return "consistent-hash";
    case RoutingPolicy::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

uint64_t RouterKeyHash(std::string_view key) {
  uint64_t hash = 14695981039346656037u;  // FNV-1a 64
  for (const char c : key) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211u;
  }
  return RouterMix(hash);
}

// A forward target: an actor on the router's mailbox (so never run beside the router) that hands
// events a member could not take back to the router. One serves every local member; each remote
// member has its own, so that a returned event names the member it came back from.
class Router::Return final : public Actor {
 public:
  Return(std::shared_ptr<Router*> router, ActorId member)
      : Actor(&Return::StateWork), router_(std::move(router)), member_(member) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvPoison) {
      PassAway();
      return;
    }
    if (InEventSpace(ev->type(), kSystemEventSpace) ||
        InEventSpace(ev->type(), kInterconnectEventSpace)) {
      Unhandled(ev);
      return;
    }
    if (*router_ != nullptr) {
      (*router_)->Returned(std::move(ev), member_);
      return;
    }
    // The router has ended: nothing will re-route or account for the event, so report it.
    const bool remote = !member_.IsEmpty();
    ReportUndelivered(*system(), std::move(ev),
                      remote ? UndeliveredReason::kDisconnected : UndeliveredReason::kActorNotFound,
                      /*unsure=*/remote);
  }

  std::shared_ptr<Router*> router_;
  ActorId member_;
};

// -- lifecycle ----------------------------------------------------------------------------------

Router::Router(RouterOptions options)
    : Actor(&Router::StateWork),
      options_(std::move(options)),
      self_cell_(std::make_shared<Router*>(this)) {
  options_.virtual_nodes = std::max<uint32_t>(options_.virtual_nodes, 1);
}

Router::~Router() {
  *self_cell_ = nullptr;
  // The forward targets share this mailbox and would outlive the router; end them. (While the
  // node stops, these sends may be dropped: the node then destroys them anyway.)
  if (system() != nullptr) {
    if (!local_return_.IsEmpty()) {
      system()->Send(local_return_, std::make_unique<EvPoison>());
    }
    for (const std::vector<Member>* list : {&members_, &draining_}) {
      for (const Member& member : *list) {
        if (!member.return_to.IsEmpty()) {
          system()->Send(member.return_to, std::make_unique<EvPoison>());
        }
      }
    }
    for (const auto& [cookie, target] : retiring_) {
      system()->Send(target, std::make_unique<EvPoison>());
    }
  }
}

void Router::Bootstrap() {
  local_return_ = RegisterWithSameMailbox(std::make_unique<Return>(self_cell_, ActorId()));
  std::vector<ActorId> initial = std::move(options_.members);
  options_.members.clear();
  Add(initial);
}

void Router::StateWork(EventHandlePtr& ev) {
  switch (ev->type()) {
    case kEvRouterAdd:
      if (const auto* add = ev->Get<EvRouterAdd>(); add != nullptr) {
        Add(add->members());
      } else {
        DropUnparsable(ev);
      }
      break;
    case kEvRouterRemove:
      if (const auto* remove = ev->Get<EvRouterRemove>(); remove != nullptr) {
        Remove(remove->members());
      } else {
        DropUnparsable(ev);
      }
      break;
    case kEvRouterGetMembers: {
      std::vector<ActorId> ids;
      ids.reserve(members_.size());
      for (const Member& member : members_) {
        ids.push_back(member.id);
      }
      Reply(ev, std::make_unique<EvRouterMembers>(ids));
      break;
    }
    case kEvTerminated:
      if (const auto* ended = ev->Get<EvTerminated>(); ended != nullptr) {
        HandleTerminated(*ended);
      }
      break;
    case kEvUndelivered:
      if (const auto* answer = ev->Get<EvUndelivered>();
          answer != nullptr && answer->source_type == kEvRouterProbe) {
        HandleProbeAnswer(*answer);
      }
      break;
    case kEvWakeup:
      // A probe to a removed member failed: nothing routed there will send the next one.
      retry_scheduled_ = false;
      for (Member& member : draining_) {
        MaybeProbe(member);
      }
      break;
    default:
      // The runtime's and the interconnect's own notices (EvPoison, the session events that come
      // with watching members on other nodes) are the router's, never a member's.
      if (InEventSpace(ev->type(), kSystemEventSpace) ||
          InEventSpace(ev->type(), kInterconnectEventSpace)) {
        Unhandled(ev);  // EvPoison ends the router; the destructor ends the forward targets
        break;
      }
      Route(std::move(ev));
  }
}

// -- membership ---------------------------------------------------------------------------------

Router::Member* Router::Find(const ActorId& id) {
  for (std::vector<Member>* list : {&members_, &draining_}) {
    for (Member& member : *list) {
      if (member.id == id) {
        return &member;
      }
    }
  }
  return nullptr;
}

void Router::Add(const std::vector<ActorId>& ids) {
  bool changed = false;
  for (const ActorId& id : ids) {
    if (id.IsEmpty() || id.IsService()) {
      TROUPE_LOG(kWarn, kActors) << "router " << SelfId() << ": " << id
                                 << " cannot be a member (an actor id is needed)";
      continue;
    }
    if (std::any_of(members_.begin(), members_.end(),
                    [&id](const Member& member) { return member.id == id; })) {
      continue;
    }
    changed = true;
    auto draining = std::find_if(draining_.begin(), draining_.end(),
                                 [&id](const Member& member) { return member.id == id; });
    if (draining != draining_.end()) {
      members_.push_back(std::move(*draining));  // still watched, still probed
      draining_.erase(draining);
      continue;
    }
    Member member{.id = id,
                  .local = id.node_id() == 0 || id.node_id() == system()->node_id(),
                  .next_seq = 1,
                  .handled_seq = 0,
                  .probe_cookie = 0,
                  .probe_seq = 0,
                  .records = {},
                  .return_to = ActorId()};
    // Watch first: it reaches the member before any routed event (one sender, one recipient), so
    // a not-found answer means no event routed to it was handled.
    Watch(id);
    if (!member.local) {
      member.return_to = RegisterWithSameMailbox(std::make_unique<Return>(self_cell_, id));
    }
    members_.push_back(std::move(member));
  }
  if (changed) {
    RebuildRing();
  }
}

void Router::Remove(const std::vector<ActorId>& ids) {
  bool changed = false;
  for (const ActorId& id : ids) {
    auto it = std::find_if(members_.begin(), members_.end(),
                           [&id](const Member& member) { return member.id == id; });
    if (it == members_.end()) {
      continue;
    }
    changed = true;
    Member member = std::move(*it);
    members_.erase(it);
    if (member.local || member.records.empty()) {
      // A local member's returns come back through the shared forward target and are re-routed;
      // a remote one with nothing outstanding has nothing left to report.
      Unwatch(member.id);
      Forget(member);
    } else {
      draining_.push_back(std::move(member));
    }
  }
  if (changed) {
    next_ = members_.empty() ? 0 : next_ % members_.size();
    RebuildRing();
  }
}

void Router::Forget(Member& member) {
  if (member.return_to.IsEmpty()) {
    return;
  }
  // Events the member's node drains from its mailbox after its EvTerminated are still on their
  // way back, and would be dead letters if the forward target ended now. A last probe comes back
  // behind them on the same link (or fails at once when the link is gone): its answer ends the
  // target, and whatever reached the target before is dropped, its records already reported.
  const uint64_t cookie = next_probe_cookie_++;
  retiring_.emplace_back(cookie, member.return_to);
  Send(std::make_unique<EventHandle>(RouterProbeAddress(member.id), SelfId(),
                                     std::make_unique<EvRouterProbe>(), kTrackDelivery, cookie));
  member.return_to = ActorId();
}

void Router::HandleTerminated(const EvTerminated& ended) {
  const ActorId id = ended.target();
  for (std::vector<Member>* list : {&members_, &draining_}) {
    auto it = std::find_if(list->begin(), list->end(),
                           [&id](const Member& member) { return member.id == id; });
    if (it == list->end()) {
      continue;
    }
    UndeliveredReason reason = UndeliveredReason::kActorNotFound;
    bool unsure = true;
    switch (ended.reason()) {
      case TerminationReason::kNodeLost:
      case TerminationReason::kNodeLeft:
        reason = UndeliveredReason::kDisconnected;
        break;
      case TerminationReason::kNotFound:
        unsure = false;  // gone before the watch, which preceded every routed event
        break;
      case TerminationReason::kStopped:
      case TerminationReason::kFailed:
        break;
    }
    TROUPE_LOG(kDebug, kActors) << "router " << SelfId() << ": member " << id << " dropped ("
                                << TerminationReasonName(ended.reason()) << ")";
    ReportRecords(*it, reason, unsure);
    Forget(*it);
    const bool was_member = list == &members_;
    list->erase(it);
    if (was_member) {
      next_ = members_.empty() ? 0 : next_ % members_.size();
      RebuildRing();
    }
    return;
  }
}

void Router::ReportRecords(Member& member, UndeliveredReason reason, bool unsure) {
  for (const Record& record : member.records) {
    // A bodyless handle carries all that rule 3 needs: the report, or the dead letter's type.
    auto lost = std::make_unique<EventHandle>(record.type, SelfId(), record.sender,
                                              record.flags & ~kForwardOnNondelivery, record.cookie);
    lost->set_trace_id(record.trace_id);
    ReportUndelivered(*system(), std::move(lost), reason, unsure);
  }
  member.records.clear();
}

void Router::HandleProbeAnswer(const EvUndelivered& answer) {
  for (auto it = retiring_.begin(); it != retiring_.end(); ++it) {
    if (it->first == answer.cookie) {
      Send(it->second, std::make_unique<EvPoison>());
      retiring_.erase(it);
      return;
    }
  }
  for (std::vector<Member>* list : {&members_, &draining_}) {
    auto it = std::find_if(list->begin(), list->end(), [&answer](const Member& member) {
      return member.probe_cookie == answer.cookie;
    });
    if (it == list->end()) {
      continue;
    }
    Member& member = *it;
    member.probe_cookie = 0;
    // Only "no such actor" means the probe reached the head of the mailbox; any other reason (the
    // session failed, the link refused it) says nothing about the events before it.
    if (answer.reason != UndeliveredReason::kActorNotFound || answer.unsure) {
      // A member still routed to gets its next probe with its next event; a removed one would
      // wait for its end (a lost session brings that), so its probe is tried again later.
      if (list == &draining_ && !retry_scheduled_) {
        retry_scheduled_ = true;
        ScheduleWakeup(kRouterProbeRetry);
      }
      return;
    }
    member.handled_seq = std::max(member.handled_seq, member.probe_seq);
    while (!member.records.empty() && member.records.front().seq <= member.handled_seq) {
      member.records.pop_front();
    }
    if (list == &draining_ && member.records.empty()) {
      Unwatch(member.id);
      Forget(member);
      list->erase(it);
      return;
    }
    MaybeProbe(member);
    return;
  }
}

bool Router::NeedsProbes(const Member& member) const {
  // A local member's load is read from its mailbox (PickSmallest), and the events it cannot take
  // come back through the forward target: no probe needed.
  return !member.local;
}

void Router::MaybeProbe(Member& member) {
  if (!NeedsProbes(member) || member.probe_cookie != 0 ||
      member.handled_seq + 1 >= member.next_seq) {
    return;
  }
  member.probe_cookie = next_probe_cookie_++;
  member.probe_seq = member.next_seq - 1;
  Send(std::make_unique<EventHandle>(RouterProbeAddress(member.id), SelfId(),
                                     std::make_unique<EvRouterProbe>(), kTrackDelivery,
                                     member.probe_cookie));
}

void Router::RebuildRing() {
  ring_.clear();
  if (options_.policy != RoutingPolicy::kConsistentHash) {
    return;
  }
  ring_.reserve(members_.size() * options_.virtual_nodes);
  for (size_t index = 0; index < members_.size(); ++index) {
    const uint64_t base = members_[index].id.Hash();
    for (uint32_t replica = 0; replica < options_.virtual_nodes; ++replica) {
      ring_.emplace_back(RouterMix(base ^ RouterMix(replica + 1)), index);
    }
  }
  // Ties between points broken by id, not by index, so every node builds the same ring whatever
  // order its members were added in.
  std::sort(ring_.begin(), ring_.end(), [this](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : members_[a.second].id < members_[b.second].id;
  });
}

// -- routing ------------------------------------------------------------------------------------

void Router::Route(EventHandlePtr ev) {
  if (members_.empty()) {
    ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kNoRoute);
    return;
  }
  if (options_.policy == RoutingPolicy::kBroadcast) {
    Broadcast(std::move(ev));
    return;
  }
  const size_t index = Pick(*ev);
  SendTo(index, std::move(ev));
}

void Router::Broadcast(EventHandlePtr ev) {
  if (!ev->HasBytes()) {
    if (absl::Status status = ev->Serialize(); !status.ok()) {
      ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kNotSerializable);
      return;
    }
  }
  for (size_t index = 0; index < members_.size(); ++index) {
    auto copy =
        std::make_unique<EventHandle>(ev->type(), members_[index].id, ev->sender(), ev->bytes(),
                                      ev->flags(), ev->cookie(), ev->forward_to(), ev->trace_id());
    SendTo(index, std::move(copy));
  }
}

size_t Router::Pick(EventHandle& ev) {
  switch (options_.policy) {
    case RoutingPolicy::kSmallestMailbox:
      return PickSmallest();
    case RoutingPolicy::kConsistentHash:
      return PickByKey(ev);
    case RoutingPolicy::kRoundRobin:
    case RoutingPolicy::kBroadcast:
      break;
  }
  const size_t index = next_ % members_.size();
  next_ = index + 1;
  return index;
}

size_t Router::PickSmallest() {
  size_t best = 0;
  uint64_t best_score = UINT64_MAX;
  for (size_t step = 0; step < members_.size(); ++step) {
    const size_t index = (next_ + step) % members_.size();
    Member& member = members_[index];
    const bool idle = member.local && IsMailboxIdle(*system(), member.id).value_or(false);
    if (idle) {
      member.handled_seq = member.next_seq - 1;  // whatever it was sent has been handled
    }
    const uint64_t score = idle ? 0 : 1 + 2 * (member.next_seq - 1 - member.handled_seq);
    if (score < best_score) {
      best = index;
      best_score = score;
      if (score == 0) {
        break;
      }
    }
  }
  next_ = best + 1;
  return best;
}

size_t Router::PickByKey(EventHandle& ev) {
  std::optional<std::string> key;
  if (options_.key) {
    key = options_.key(ev);
  }
  if (!key.has_value() || ring_.empty()) {
    const size_t index = next_ % members_.size();
    next_ = index + 1;
    return index;
  }
  const uint64_t hash = RouterKeyHash(*key);
  auto it = std::lower_bound(ring_.begin(), ring_.end(), hash,
                             [](const auto& point, uint64_t value) { return point.first < value; });
  if (it == ring_.end()) {
    it = ring_.begin();
  }
  return it->second;
}

void Router::SendTo(size_t index, EventHandlePtr ev) {
  Member& member = members_[index];
  const EventBase* body = ev->GetBase();
  if (!member.local && body != nullptr && !body->IsSerializable()) {
    ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kNotSerializable);
    return;
  }
  ev->set_recipient(member.id);
  const uint64_t seq = member.next_seq++;
  if (!ev->HasFlag(kForwardOnNondelivery)) {
    const uint32_t flags = ev->flags();
    if (member.local) {
      ev->set_forward_to(local_return_);
      ev->set_flags(flags | kForwardOnNondelivery);
    } else {
      member.records.push_back(Record{.seq = seq,
                                      .sender = ev->sender(),
                                      .cookie = ev->cookie(),
                                      .type = ev->type(),
                                      .flags = flags,
                                      .trace_id = ev->trace_id()});
      ev->set_forward_to(member.return_to);
      ev->set_flags((flags & ~(kTrackDelivery | kGenerateUnsureUndelivered)) |
                    kForwardOnNondelivery);
    }
  }
  Send(std::move(ev));
  MaybeProbe(member);
}

void Router::Returned(EventHandlePtr ev, const ActorId& member_id) {
  if (member_id.IsEmpty()) {
    // A local member ended with the event still queued, or before it arrived: certainly not
    // handled, so another member may have it (a broadcast copy may not: that member has its own).
    if (options_.policy == RoutingPolicy::kBroadcast) {
      ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kActorNotFound);
      return;
    }
    Route(std::move(ev));
    return;
  }
  Member* member = Find(member_id);
  if (member == nullptr) {
    return;  // its member's end already reported every event not seen handled, this one too
  }
  // Came back from another node: the member ended with it queued, or the session ended with it
  // in flight (possibly handled), or the link refused it. The router cannot tell which: report
  // it, unsure, with the sender's own flags, and stop accounting for it.
  auto record =
      std::find_if(member->records.begin(), member->records.end(), [&ev](const Record& r) {
        return r.sender == ev->sender() && r.cookie == ev->cookie() && r.type == ev->type() &&
               r.trace_id == ev->trace_id();
      });
  if (record != member->records.end()) {
    ev->set_flags(record->flags);
    member->records.erase(record);
  }
  ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kDisconnected, /*unsure=*/true);
}

}  // namespace troupe::node
