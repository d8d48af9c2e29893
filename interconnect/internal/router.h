// SPDX-License-Identifier: Apache-2.0
//
// Router: the node's RemoteRouter (actors/node_hooks.h). It runs on the senders' threads and hands
// each event whose recipient lives on another node to that node's proxy:
//   | situation                                  | fate                                       |
//   |--------------------------------------------|--------------------------------------------|
//   | the interconnect is shutting down          | Undelivered{kShutdown}                     |
//   | the node is not a member (nameservice)     | Undelivered{kNoRoute}                      |
//   | a local event (no protobuf body)           | Undelivered{kNotSerializable}              |
//   | serialized larger than max_event_size      | Undelivered{kTooLarge}                     |
//   | its HeldCharge would take the bytes held   | Undelivered{kOverloaded}, counted in       |
//   | for the peer past the admit limit, and it  | troupe_session_overloaded_total{peer}      |
//   | is not a runtime control event (below)     |                                            |
//   | otherwise                                  | the peer's channel, and one EvKick to its  |
//   |                                            | proxy per batch routed while none is on    |
//   |                                            | its way                                    |
// The event is serialized here, on the sender's thread. A member without a channel gets one (and
// a proxy) on the first event routed to it. The admit limit is max_queued_bytes less
// max_unacked_bytes: the transport may hold a second copy of up to max_unacked_bytes of frames
// the kernel has not taken yet, so everything held for a peer stays under max_queued_bytes.
// The runtime's control events that keep a promise across nodes (EvWatch, EvUnwatch,
// EvTerminated, EvUndelivered; actors/events.h) pass the admit limit: refusing one would break
// the promise (a lost EvTerminated, a watch ended kNodeLost with the session alive, a tracked
// event with no outcome). They are small (a few hundred bytes charged) and few (one per watch,
// one per tracked event the peer could not deliver), and still charged and given back like any
// event, so the held bytes may pass the admit limit by their sum and return to 0. They are
// recognized by type, a bit test on the send path; a user event of those types passes too.
// An event's charge is given back when the peer acknowledges it, before the proxy delivers any
// event of the frame that carried the acknowledgement (the peer wrote those after reading it). So
// a sender that sends more only as replies come back, keeping events of at most W charged bytes
// unanswered, finds the budget at W at most, and is never refused while W fits the admit limit:
// 512 events of 64 KiB (about 33.6 MB charged) fit the default 48 MiB.
//
// Thread-safety: thread-safe; Route takes no lock (the channel is a lock-free EventQueue).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/node_hooks.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/nameservice.h"

namespace troupe::interconnect::internal {

class Router final : public RemoteRouter {
 public:
  Router(ActorSystem* system, std::shared_ptr<PeerTable> peers,
         std::shared_ptr<Nameservice> nameservice, size_t max_event_size, uint64_t admit_limit)
      : system_(system),
        peers_(std::move(peers)),
        nameservice_(std::move(nameservice)),
        max_event_size_(max_event_size),
        admit_limit_(admit_limit) {}

  void Route(EventHandlePtr ev) override;
  // Refuses every later event and reports those still queued in channels as kShutdown; returns
  // how many it reported.
  uint64_t Close();

 private:
  // The channel of `node`: found, or created for a member of the nameservice; null otherwise.
  PeerChannel* ChannelFor(NodeId node);

  ActorSystem* const system_;
  const std::shared_ptr<PeerTable> peers_;
  const std::shared_ptr<Nameservice> nameservice_;
  const size_t max_event_size_;
  const uint64_t admit_limit_;
  std::atomic<bool> closed_{false};
};

}  // namespace troupe::interconnect::internal
