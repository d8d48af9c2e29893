// SPDX-License-Identifier: Apache-2.0
//
// The local events between a shard region, its entities and its nameservice watcher
// (node/sharding.h): never serialized, never leave their node.
//
// Thread-safety: value types; thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "actors/event.h"
#include "node/sharding.h"

namespace troupe::node::internal {

// An event for the entity `key` on its first hop, to the local region: the handle's sender,
// cookie and flags are the original ones, the payload is moved, not serialized.
struct EvShardLocal final : EventLocal<EvShardLocal, kEvShardLocal> {
  EvShardLocal(std::string key_value, std::unique_ptr<EventBase> payload_value)
      : key(std::move(key_value)), payload(std::move(payload_value)) {}
  std::string key;
  std::unique_ptr<EventBase> payload;
};

// The region orders its entity to stop (Save, then end).
struct EvShardStop final : EventLocal<EvShardStop, kEvShardStop> {};
// An entity asks its region to passivate it.
struct EvShardPassivate final : EventLocal<EvShardPassivate, kEvShardPassivate> {};
// The region's nameservice changed.
struct EvShardViewChanged final : EventLocal<EvShardViewChanged, kEvShardViewChanged> {};

// Sets what a region tells its new entity before registering it.
class ShardEntityAccess {
 public:
  static void Init(ShardedEntity& entity, std::string kind, std::string key, ActorId region) {
    entity.kind_ = std::move(kind);
    entity.key_ = std::move(key);
    entity.region_ = region;
  }
};

}  // namespace troupe::node::internal
