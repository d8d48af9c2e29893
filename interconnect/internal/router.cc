// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/router.h"

#include <utility>

#include "absl/status/status.h"

#include "actors/events.h"
#include "actors/log.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/stream.h"

namespace troupe::interconnect::internal {
namespace {

// The runtime's own events that cross nodes to keep the Watch and Undelivered promises: charged
// to the peer's budget but never refused for it (see the table in router.h). A switch over four
// system types compiles to a range check and a bit test.
constexpr bool PassesTheBudget(EventType type) {
  switch (type) {
    case kEvWatch:
    case kEvUnwatch:
    case kEvTerminated:
    case kEvUndelivered:
      return true;
    default:
      return false;
  }
}

}  // namespace

void Router::Route(EventHandlePtr ev) {
  // acquire: pairs with the release in Close; a router seen closed is drained or draining.
  if (closed_.load(std::memory_order_acquire)) {
    ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kShutdown);
    return;
  }
  PeerChannel* channel = ChannelFor(ev->recipient().node_id());
  if (channel == nullptr) {
    ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kNoRoute);
    return;
  }
  if (ev->HasEvent()) {
    if (absl::Status status = ev->Serialize(); !status.ok()) {
      TROUPE_LOG(kDebug, kInterconnect) << ev->ToString() << " cannot cross nodes: " << status;
      ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kNotSerializable);
      return;
    }
  }
  if (ev->bytes().size() > max_event_size_) {
    ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kTooLarge);
    return;
  }
  if (PassesTheBudget(ev->type())) [[unlikely]] {
    channel->Charge(HeldCharge(*ev));
  } else if (!channel->Admit(HeldCharge(*ev), admit_limit_)) {
    SessionStats::Bump(channel->stats.overloaded);
    ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kOverloaded);
    return;
  }
  if (channel->Push(std::move(ev))) {
    system_->Send(
        std::make_unique<EventHandle>(channel->proxy, ActorId(), std::make_unique<EvKick>()));
  }
}

PeerChannel* Router::ChannelFor(NodeId node) {
  if (PeerChannel* channel = peers_->Find(node); channel != nullptr) [[likely]] {
    return channel;
  }
  if (node == system_->node_id() || !nameservice_->Resolve(node).has_value()) {
    return nullptr;
  }
  return peers_->GetOrCreate(node);
}

uint64_t Router::Close() {
  closed_.store(true, std::memory_order_release);
  uint64_t reported = 0;
  for (const std::shared_ptr<PeerChannel>& channel : peers_->Close()) {
    reported += channel->ReportQueued(*system_, UndeliveredReason::kShutdown);
  }
  return reported;
}

}  // namespace troupe::interconnect::internal
