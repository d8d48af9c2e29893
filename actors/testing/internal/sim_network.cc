// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/internal/sim_network.h"

#include <algorithm>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "gtest/gtest.h"

#include "actors/check.h"
#include "actors/session_events.h"

namespace troupe::testing {

// -- nodes --------------------------------------------------------------------------------------

void SimNetwork::Init(uint32_t nodes) {
  runtimes_.assign(nodes, nullptr);
  links_.resize(size_t{nodes} * nodes);
  sessions_.resize(size_t{nodes} * nodes);
}

SimNetwork::Link& SimNetwork::LinkRef(NodeId from, NodeId to) {
  std::unique_ptr<Link>& link = links_[LinkIndex(from, to)];
  if (link == nullptr) {
    link = std::make_unique<Link>();
  }
  return *link;
}

void SimNetwork::NodeUp(NodeId id, internal::Runtime* runtime) { runtimes_[id - 1] = runtime; }

void SimNetwork::NodeDown(NodeId id) {
  // Unreachable first: the sessions below then report only on the peers' side.
  runtimes_[id - 1] = nullptr;
  for (NodeId peer = 1; peer <= N(); ++peer) {
    if (peer != id) {
      SessionDown(id, peer);
    }
  }
}

void SimNetwork::Clear() {
  for (const size_t index : busy_) {
    links_[index]->queue.clear();
  }
  busy_.clear();
}

// -- routing ------------------------------------------------------------------------------------

bool SimNetwork::Reachable(NodeId a, NodeId b) {
  return Alive(a) && Alive(b) && !SessionRef(a, b).partitioned;
}

void SimNetwork::SessionDown(NodeId a, NodeId b) {
  Session& session = SessionRef(a, b);
  if (!session.up) {
    return;
  }
  session.up = false;
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    Link* link = FindLink(from, to);
    if (link == nullptr) {
      continue;  // never used: nothing in flight, nobody subscribed
    }
    busy_.erase(LinkIndex(from, to));
    std::deque<InFlight> lost = std::move(link->queue);
    link->queue.clear();
    absl::flat_hash_set<ActorId> subscribers = std::move(link->subscribers);
    link->subscribers.clear();
    if (!Alive(from)) {
      continue;  // the senders are gone; so are their reports
    }
    internal::Runtime* runtime = runtimes_[from - 1];
    for (InFlight& in_flight : lost) {
      runtime->Undeliverable(std::move(in_flight.ev), UndeliveredReason::kDisconnected,
                             /*unsure=*/true);
    }
    // Sorted, so the order of the notifications does not depend on hashing.
    std::vector<ActorId> sorted(subscribers.begin(), subscribers.end());
    std::sort(sorted.begin(), sorted.end());
    for (const ActorId& subscriber : sorted) {
      runtime->Send(std::make_unique<EventHandle>(subscriber, ActorId(),
                                                  std::make_unique<EvNodeDisconnected>(to)));
    }
  }
}

void SimNetwork::Route(NodeId from, internal::Runtime* runtime, EventHandlePtr ev) {
  const NodeId to = ev->recipient().node_id();
  if (to < 1 || to > N()) {
    runtime->Undeliverable(std::move(ev), UndeliveredReason::kNoRoute);
    return;
  }
  const bool subscribe = ev->HasFlag(kSubscribeOnSession) && !ev->sender().IsEmpty();
  if (!Reachable(from, to)) {
    if (subscribe) {
      runtime->Send(std::make_unique<EventHandle>(ev->sender(), ActorId(),
                                                  std::make_unique<EvNodeDisconnected>(to)));
    }
    runtime->Undeliverable(std::move(ev), UndeliveredReason::kDisconnected);
    return;
  }
  SessionRef(from, to).up = true;
  Link& link = LinkRef(from, to);
  if (subscribe && link.subscribers.insert(ev->sender()).second) {
    runtime->Send(std::make_unique<EventHandle>(ev->sender(), ActorId(),
                                                std::make_unique<EvNodeConnected>(to)));
  }
  if (absl::Status status = ev->Serialize(); !status.ok()) {
    ADD_FAILURE() << DescribeEvent(ev->type(), ev->sender(), ev->recipient())
                  << " cannot cross from node " << from << " to node " << to << ": " << status
                  << "\n"
                  << sim_->SeedText();
    runtime->Undeliverable(std::move(ev), UndeliveredReason::kNotSerializable);
    return;
  }
  absl::Duration latency = sim_->options.latency;
  absl::Duration jitter = sim_->options.jitter;
  if (link.latency.has_value()) {
    std::tie(latency, jitter) = *link.latency;
  }
  absl::Time due = sim_->now + latency;
  if (jitter > absl::ZeroDuration()) {
    due += absl::Nanoseconds(static_cast<int64_t>(
        sim_->Uniform(static_cast<uint64_t>(absl::ToInt64Nanoseconds(jitter)) + 1)));
  }
  if (!link.queue.empty()) {
    due = std::max(due, link.queue.back().due);  // FIFO per link, whatever the jitter
  } else {
    busy_.insert(LinkIndex(from, to));
  }
  link.queue.push_back(InFlight{due, std::move(ev)});
}

size_t SimNetwork::DueCount() const {
  size_t due = 0;
  for (const size_t index : busy_) {
    due += links_[index]->queue.front().due <= sim_->now ? 1 : 0;
  }
  return due;
}

SimNetwork::Arrival SimNetwork::TakeDue(size_t pick) {
  for (auto it = busy_.begin(); it != busy_.end(); ++it) {
    const size_t index = *it;
    Link& link = *links_[index];
    if (link.queue.front().due > sim_->now || pick-- != 0) {
      continue;
    }
    Arrival arrival{static_cast<NodeId>(index % N()) + 1, std::move(link.queue.front().ev)};
    link.queue.pop_front();
    if (link.queue.empty()) {
      busy_.erase(it);
    }
    return arrival;
  }
  TROUPE_CHECK(false) << "no due link number " << pick;
  return {};
}

std::optional<absl::Time> SimNetwork::NextArrival() const {
  std::optional<absl::Time> next;
  for (const size_t index : busy_) {
    const absl::Time due = links_[index]->queue.front().due;
    if (!next.has_value() || due < *next) {
      next = due;
    }
  }
  return next;
}

// -- faults -------------------------------------------------------------------------------------

void SimNetwork::Partition(NodeId a, NodeId b) {
  SessionRef(a, b).partitioned = true;
  SessionDown(a, b);
}

void SimNetwork::Heal(NodeId a, NodeId b) { SessionRef(a, b).partitioned = false; }

void SimNetwork::HealAll() {
  for (Session& session : sessions_) {
    session.partitioned = false;
  }
}

bool SimNetwork::IsPartitioned(NodeId a, NodeId b) const {
  return sessions_[SessionIndex(a, b)].partitioned;
}

void SimNetwork::SetLatency(NodeId from, NodeId to, absl::Duration latency, absl::Duration jitter) {
  LinkRef(from, to).latency = std::pair{latency, jitter};
}

}  // namespace troupe::testing
