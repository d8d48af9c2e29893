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
// `window` unacknowledged, with kTrackDelivery | kSubscribeOnSession. It checks that acks come in
// sequence order, records round-trip times (sender clock both ends) in a LatencyHistogram, sends
// the controller an EvLoadProgress for each second (acks, bytes and round trips of that second)
// and, `duration_ms` after it started, stops sending, waits up to 5 s for the outstanding acks,
// sends the last second's EvLoadProgress (the drain's acks count in it) and EvLoadReport. An
// Undelivered data event or the death of the session to the receiver's node stops it early; the
// report says why.
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

#include <cstdint>

#include "absl/status/status.h"
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

}  // namespace troupe::examples
