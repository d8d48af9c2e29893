// SPDX-License-Identifier: Apache-2.0
//
// The actors of the example cluster, shared by troupe_node and troupe_loadgen.
//
// Every node registers three services (RegisterNodeServices):
//   | service     | actor          | does                                                       |
//   |-------------|----------------|------------------------------------------------------------|
//   | "echo"      | echo           | answers an EvEchoPing with an EvEchoPong (same body) to    |
//   |             |                | its sender                                                 |
//   | "lg/sender" | sender service | spawns one LoadSender per EvLoadStart                      |
//   | "lg/recv"   | receiver       | acknowledges every EvLoadData, counting duplicates and     |
//   |             |                | gaps per sending actor                                     |
//
// A LoadSender sends EvLoadData{seq 1, 2, ...} to "lg/recv" on the receiver node, at most
// `window` unacknowledged, with kTrackDelivery | kSubscribeOnSession: as fast as acknowledgements
// free the window (closed loop), or with LoadStart.rate_per_s on a fixed schedule (open loop,
// open_loop.h: every due event sent, latency counted from its intended send time, an event due
// while the window is full sent once it has room, what is still due 5 s after the end reported
// unsent). It checks that acks come in
// sequence order, records round-trip times (sender clock both ends) in a LatencyHistogram, sends
// the controller an EvLoadProgress for each second (acks, bytes and round trips of that second)
// and, `duration_ms` after it started, stops sending, waits up to 5 s for the outstanding acks,
// sends the last second's EvLoadProgress (the drain's acks count in it) and EvLoadReport. An
// Undelivered data event or the death of the session to the receiver's node stops it early; the
// report says why.
//
// A node that leaves gracefully (interconnect.h, "Leaving") is no failure:
//   | who leaves        | what the pair does                                                    |
//   |-------------------|-----------------------------------------------------------------------|
//   | the receiver's    | an event refused with Undelivered{kShutdown}, or the session ending   |
//   | node              | as left, pauses it: nothing new is sent, the refused events count in  |
//   |                   | LoadReport.leave_undelivered (answered, not lost), and it pings the   |
//   |                   | node's echo service every 100 ms; once every event it sent is         |
//   |                   | answered and a ping came back (only the node's next incarnation       |
//   |                   | answers), it resumes with a new stretch of sequence numbers           |
//   |                   | (LoadData.first_seq), from which the receiver counts gaps             |
//   |                   | A ping refused with kNoRoute (no member any more: with etcd a node    |
//   |                   | comes back under a new id) ends the pair with receiver_left; the      |
//   |                   | controller starts a new pair from the sender to a member              |
//   | the sender's node | troupe_node calls StopLoadSenders before it leaves: the pair stops    |
//   |                   | sending, collects its acknowledgements (the cluster still routes      |
//   |                   | normally) and reports with sender_left; the controller starts a new   |
//   |                   | pair for the route once the node is back, which sends once the        |
//   |                   | receiver answers a ping (LoadStart.await_receiver)                    |
//
// Thread-safety: the actors are actor-confined; the free functions are thread-safe.
//
// Example:
//
//   auto system = troupe::ActorSystem::Create(config);
//   absl::Status status = troupe::examples::RegisterNodeServices(system->get());
//   auto start = std::make_unique<troupe::examples::EvLoadStart>();
//   start->record.set_pair_id(1);
//   start->record.set_receiver(3);  // and payload_bytes, window, duration_ms, controller
//   (*system)->Send(troupe::examples::kLoadSenderService.WithNode(2), std::move(start),
//                   troupe::kTrackDelivery, /*cookie=*/1, controller);
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "histogram.h"
#include "loadtest.pb.h"

namespace troupe::examples {

enum : EventType {
  kEvEchoPing = EventSpaceBegin(kUserEventSpace + 0x100),
  kEvEchoPong,
  kEvLoadStart,
  kEvLoadData,
  kEvLoadAck,
  kEvLoadProgress,
  kEvLoadReport,
  kEvLoadLeave,       // local: the node is about to leave (StopLoadSenders)
  kEvLoadSenderDone,  // local: a LoadSender tells its service it ended
  kEvExamplesEnd,
};
static_assert(InEventSpace(kEvExamplesEnd - 1, kUserEventSpace + 0x100), "events overflow");

struct EvEchoPing final : EventPB<EvEchoPing, EchoPing, kEvEchoPing> {};
struct EvEchoPong final : EventPB<EvEchoPong, EchoPing, kEvEchoPong> {};
struct EvLoadStart final : EventPB<EvLoadStart, LoadStart, kEvLoadStart> {};
struct EvLoadData final : EventPB<EvLoadData, LoadData, kEvLoadData> {};
struct EvLoadAck final : EventPB<EvLoadAck, LoadAck, kEvLoadAck> {};
struct EvLoadProgress final : EventPB<EvLoadProgress, LoadProgress, kEvLoadProgress> {};
struct EvLoadReport final : EventPB<EvLoadReport, LoadReport, kEvLoadReport> {};

inline constexpr ActorId kEchoService = ServiceId("echo");
inline constexpr ActorId kLoadSenderService = ServiceId("lg/sender");
inline constexpr ActorId kLoadReceiverService = ServiceId("lg/recv");

// Converts an ActorId to and from its wire words.
ActorIdWords ToWords(const ActorId& id);
ActorId FromWords(const ActorIdWords& words);

// Appends the non-empty buckets of `histogram` to `out`.
void HistogramToProto(const LatencyHistogram& histogram,
                      google::protobuf::RepeatedPtrField<HistogramBucket>* out);
// Adds `buckets` (as HistogramToProto wrote them) to `histogram`; out-of-range indices are ignored.
void AddHistogramProto(const google::protobuf::RepeatedPtrField<HistogramBucket>& buckets,
                       LatencyHistogram* histogram);

// Registers the echo, lg/sender and lg/recv services on `system`'s default pool. Returns the
// error of ActorSystem::RegisterService, or kResourceExhausted when an actor cannot be registered.
absl::Status RegisterNodeServices(ActorSystem* system);

// Ends every LoadSender of `system` cleanly before its node leaves the cluster: each stops
// sending, waits for the acknowledgements of what it sent (the cluster still routes to this node
// normally) and sends the controller its report with `sender_left` set; a LoadStart that arrives
// later is answered with a report saying the node is leaving. Blocks until every sender has
// reported or `timeout` passes; returns the senders still running then (0: all reported). Call it
// from a plain thread, before troupe::node::Node::Shutdown; a second call only waits again.
size_t StopLoadSenders(ActorSystem* system, absl::Duration timeout);

}  // namespace troupe::examples
