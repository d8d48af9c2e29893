// SPDX-License-Identifier: Apache-2.0
#include "interconnect/config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

#include "actors/actor_id.h"
#include "actors/config.h"

namespace troupe::interconnect {
namespace {

// The cluster id travels in every handshake, which has a limit of 4096 bytes.
constexpr size_t kMaxClusterIdSize = 256;
// The defaults proto/config.proto documents; the checks of one field against another use them
// when the other is not set.
constexpr uint64_t kDefaultHeartbeatMs = 500;
constexpr uint64_t kDefaultMaxUnackedBytes = 16u << 20;
constexpr uint32_t kDefaultMaxEventSize = 8u << 20;

absl::Status ValidateNodeTable(const proto::InterconnectConfig& config) {
  absl::flat_hash_set<uint32_t> ids;
  for (int i = 0; i < config.nodes_size(); ++i) {
    const proto::NodeAddress& node = config.nodes(i);
    const std::string field = absl::StrCat("interconnect.nodes[", i, "]");
    if (!node.has_node_id()) {
      return ConfigFieldError(absl::StrCat(field, ".node_id"), "is required");
    }
    if (absl::Status s =
            CheckConfigRange(absl::StrCat(field, ".node_id"), node.node_id(), 1, ActorId::kMaxNode);
        !s.ok()) {
      return s;
    }
    if (!ids.insert(node.node_id()).second) {
      return ConfigFieldError(absl::StrCat(field, ".node_id"),
                              absl::StrCat("node ", node.node_id(), " is listed twice"));
    }
    if (node.client()) {
      continue;  // a client only dials: it has no address
    }
    if (node.host().empty()) {
      return ConfigFieldError(absl::StrCat(field, ".host"), "must not be empty");
    }
    if (!node.has_port()) {
      return ConfigFieldError(absl::StrCat(field, ".port"), "is required");
    }
    if (absl::Status s = CheckConfigRange(absl::StrCat(field, ".port"), node.port(), 1, 65535);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const proto::InterconnectConfig& config) {
  if (absl::Status s = ValidateNodeTable(config); !s.ok()) {
    return s;
  }
  if (config.cluster_id().size() > kMaxClusterIdSize) {
    return ConfigFieldError(
        "interconnect.cluster_id",
        absl::StrCat("at most ", kMaxClusterIdSize, " bytes, got ", config.cluster_id().size()));
  }
  const uint64_t heartbeat =
      config.has_heartbeat_interval_ms() ? config.heartbeat_interval_ms() : kDefaultHeartbeatMs;
  if (config.has_heartbeat_interval_ms()) {
    if (absl::Status s = CheckConfigRange("interconnect.heartbeat_interval_ms",
                                          config.heartbeat_interval_ms(), 10, 60'000);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_dead_peer_timeout_ms()) {
    if (absl::Status s = CheckConfigRange("interconnect.dead_peer_timeout_ms",
                                          config.dead_peer_timeout_ms(), heartbeat + 1, 600'000);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_unacked_bytes()) {
    if (absl::Status s = CheckConfigRange("interconnect.max_unacked_bytes",
                                          config.max_unacked_bytes(), 65'536, 4'294'967'295);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_event_size()) {
    if (absl::Status s = CheckConfigRange("interconnect.max_event_size", config.max_event_size(),
                                          1024, 64u << 20);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_queued_bytes()) {
    const uint64_t unacked =
        config.has_max_unacked_bytes() ? config.max_unacked_bytes() : kDefaultMaxUnackedBytes;
    const uint64_t event =
        config.has_max_event_size() ? config.max_event_size() : kDefaultMaxEventSize;
    if (absl::Status s =
            CheckConfigRange("interconnect.max_queued_bytes", config.max_queued_bytes(),
                             std::max(2 * unacked, event + unacked), uint64_t{64} << 30);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_redial_delay_ms()) {
    if (absl::Status s = CheckConfigRange("interconnect.max_redial_delay_ms",
                                          config.max_redial_delay_ms(), heartbeat, 600'000);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

proto::InterconnectConfig WithDefaults(const proto::InterconnectConfig& config) {
  proto::InterconnectConfig full = config;
  if (full.cluster_id().empty()) {
    full.set_cluster_id("troupe");
  }
  if (!full.has_heartbeat_interval_ms()) {
    full.set_heartbeat_interval_ms(kDefaultHeartbeatMs);
  }
  if (!full.has_dead_peer_timeout_ms()) {
    full.set_dead_peer_timeout_ms(std::max<uint64_t>(3000, full.heartbeat_interval_ms() + 1));
  }
  if (!full.has_max_unacked_bytes()) {
    full.set_max_unacked_bytes(kDefaultMaxUnackedBytes);
  }
  if (!full.has_max_event_size()) {
    full.set_max_event_size(kDefaultMaxEventSize);
  }
  if (!full.has_max_queued_bytes()) {
    full.set_max_queued_bytes(
        std::max<uint64_t>({uint64_t{64} << 20, 2 * full.max_unacked_bytes(),
                            uint64_t{full.max_event_size()} + full.max_unacked_bytes()}));
  }
  if (!full.has_max_redial_delay_ms()) {
    full.set_max_redial_delay_ms(std::max<uint64_t>(10'000, full.heartbeat_interval_ms()));
  }
  if (!full.has_per_peer_histograms()) {
    full.set_per_peer_histograms(true);
  }
  return full;
}

}  // namespace troupe::interconnect
