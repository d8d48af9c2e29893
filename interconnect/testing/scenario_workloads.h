// SPDX-License-Identifier: Apache-2.0
//
// The built-in workloads of the scenario runner (scenario.h), and the events they exchange (event
// space kUserEventSpace + 0x5C: keep your own workloads' events out of it). Private to
// troupe::scenario; not installed: users reach them through MakeBuiltinWorkloads().
//
// Thread-safety: thread-compatible (everything runs on the scenario's thread).
#pragma once

#include <memory>

#include "google/protobuf/wrappers.pb.h"

#include "actors/event.h"
#include "actors/events.h"
#include "interconnect/testing/scenario.h"

namespace troupe::testing::scenario_internal {

enum : EventType {
  kEvSimData = EventSpaceBegin(kUserEventSpace + 0x5C),
  kEvSimPing,
  kEvSimPong,
  kEvSimAsk,
  kEvSimSpawn,
  kEvSimWatch,
  kEvSimEnd,
};
static_assert(InEventSpace(kEvSimEnd - 1, kUserEventSpace + 0x5C));

// A payload of any size; its sequence number travels as the cookie.
struct EvSimData final : EventPB<EvSimData, google::protobuf::BytesValue, kEvSimData> {};
// A request to the echo service: the first byte says how to answer, the rest is a delay in ms.
struct EvSimPing final : EventPB<EvSimPing, google::protobuf::BytesValue, kEvSimPing> {};
struct EvSimPong final : EventPB<EvSimPong, google::protobuf::BytesValue, kEvSimPong> {};

// Tracked and untracked sends of every size, to a service on every node.
std::unique_ptr<Workload> MakeMessagingWorkload();
// Asks with timeouts to an echo service that answers, answers late, never or wrongly.
std::unique_ptr<Workload> MakeAskWorkload();
// Supervised children that end, throw or live on, and watchers of them.
std::unique_ptr<Workload> MakeWatchWorkload();

}  // namespace troupe::testing::scenario_internal
