// SPDX-License-Identifier: Apache-2.0
#include "node/sharding.h"

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "actors/scoped_actor.h"
#include "node/internal/shard_events.h"
#include "node/internal/shard_region.h"

namespace troupe::node {

namespace {

// Placement must agree across processes, builds and platforms: no seeded hash (absl::Hash), only
// fixed arithmetic. FNV-1a for the key, then splitmix64's finaliser per node.
uint64_t ShardKeyHash(std::string_view bytes) {
  uint64_t hash = 0xCBF29CE484222325u;
  for (const char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001B3u;
  }
  return hash;
}

uint64_t ShardSplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15u;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

}  // namespace

// -- entities -------------------------------------------------------------------------------------

void ShardedEntity::Bootstrap() { Load(); }

void ShardedEntity::StateDispatch(EventHandlePtr& ev) {
  if (ev->type() == kEvShardStop && ev->sender() == region_) {
    if (!stopping_) {
      stopping_ = true;
      Save();
      if (!stop_delayed_) {
        PassAway();
      }
    }
    return;
  }
  (this->*user_state_)(ev);
}

void ShardedEntity::Passivate() {
  if (!region_.IsEmpty() && !stopping_) {
    Send(region_, std::make_unique<internal::EvShardPassivate>());
  }
}

void ShardedEntity::FinishStop() {
  if (stopping_ && stop_delayed_) {
    PassAway();
  }
}

// -- regions --------------------------------------------------------------------------------------

ActorId ShardRegionId(std::string_view kind, NodeId node) {
  // "~" and 11 characters of the kind's hash in base 64: 66 bits, so kinds do not collide in
  // practice, and the name cannot be mistaken for a service of another component.
  constexpr std::string_view kDigits =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint64_t hash = ShardSplitMix(ShardKeyHash(kind));
  std::string name = "~";
  for (int i = 0; i < 11; ++i) {
    name.push_back(kDigits[hash & 63]);
    hash >>= 6;
  }
  return ServiceId(name, node);
}

absl::StatusOr<ActorId> StartShardRegion(ActorSystem& system, std::string_view kind,
                                         std::shared_ptr<interconnect::Nameservice> nameservice,
                                         EntityFactory factory, ShardingOptions options) {
  if (kind.empty()) {
    return absl::InvalidArgumentError("a shard kind must not be empty");
  }
  if (nameservice == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard kind ", std::string(kind), ": no nameservice"));
  }
  if (options.max_hops == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard kind ", std::string(kind), ": max_hops is 0"));
  }
  const ActorId service = ShardRegionId(kind);
  if (!system.LookupService(service).IsEmpty()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "shard kind ", std::string(kind), " already has a region on node ", system.node_id()));
  }
  absl::StatusOr<ActorId> region = system.TryRegister(std::make_unique<internal::ShardRegion>(
      std::string(kind), std::move(nameservice), std::move(factory), std::move(options)));
  if (!region.ok()) {
    return region.status();
  }
  if (absl::Status status = system.RegisterService(service, *region); !status.ok()) {
    system.Send(*region, std::make_unique<EvPoison>());
    return status;
  }
  return *region;
}

// -- sending --------------------------------------------------------------------------------------

void SendToEntity(ActorSystem& system, std::string_view kind, std::string_view key,
                  std::unique_ptr<EventBase> event, const ActorId& sender, uint32_t flags,
                  uint64_t cookie) {
  system.Send(ShardRegionId(kind),
              std::make_unique<internal::EvShardLocal>(std::string(key), std::move(event)), flags,
              cookie, sender);
}

void SendToEntity(const Actor& self, std::string_view kind, std::string_view key,
                  std::unique_ptr<EventBase> event, uint32_t flags, uint64_t cookie) {
  SendToEntity(*self.system(), kind, key, std::move(event), self.SelfId(), flags, cookie);
}

// -- leaving and introspection --------------------------------------------------------------------

absl::StatusOr<uint64_t> ShardRegionLeave(ActorSystem& system, std::string_view kind,
                                          absl::Duration timeout) {
  AskResult<EvShardLeft> left =
      AskFuture<EvShardLeft>(system, ShardRegionId(kind, system.node_id()),
                             std::make_unique<EvShardLeave>(), timeout)
          .get();
  if (!left.ok()) {
    return left.status();
  }
  return (*left)->record.stopped();
}

absl::StatusOr<proto::ShardStats> GetShardStats(ActorSystem& system, std::string_view kind,
                                                absl::Duration timeout, bool with_keys,
                                                NodeId node) {
  auto request = std::make_unique<EvShardStatsRequest>();
  request->record.set_with_keys(with_keys);
  AskResult<EvShardStats> stats =
      AskFuture<EvShardStats>(system, ShardRegionId(kind, node == 0 ? system.node_id() : node),
                              std::move(request), timeout)
          .get();
  if (!stats.ok()) {
    return stats.status();
  }
  return std::move((*stats)->record);
}

// -- placement ------------------------------------------------------------------------------------

NodeId ShardOwner(std::string_view key, const std::vector<ShardHost>& hosts) {
  const uint64_t key_hash = ShardKeyHash(key);
  NodeId best = 0;
  double best_score = 0;
  for (const ShardHost& host : hosts) {
    if (host.weight == 0) {
      continue;
    }
    const uint64_t mixed = ShardSplitMix(key_hash ^ ShardSplitMix(host.node));
    // A uniform draw in (0, 1) from the top 53 bits; weight / -ln(u) is the weighted rendezvous
    // score: a host wins with probability weight / total.
    const double unit = (static_cast<double>(mixed >> 11) + 0.5) * 0x1.0p-53;
    const double score = static_cast<double>(host.weight) / -std::log(unit);
    if (best == 0 || score > best_score || (score == best_score && host.node < best)) {
      best = host.node;
      best_score = score;
    }
  }
  return best;
}

}  // namespace troupe::node
