// SPDX-License-Identifier: Apache-2.0
#include "actors/config.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

#include "actors/actor_id.h"
#include "actors/log.h"

namespace troupe {
namespace {

constexpr uint32_t kMaxThreads = 256;
// Linux's highest niceness.
constexpr uint32_t kMaxNice = 19;
constexpr uint32_t kMaxNodeId = (1u << 20) - 1;
constexpr size_t kMaxClusterIdSize = 256;

class CollectErrors final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
    }
  }
  void AddWarning(int /*line*/, google::protobuf::io::ColumnNumber /*column*/,
                  const std::string& /*message*/) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

template <typename T>
absl::Status CheckRange(absl::string_view field, T value, T low, T high) {
  if (value < low || value > high) {
    return FieldError(field, absl::StrCat("must be between ", low, " and ", high, ", got ", value));
  }
  return absl::OkStatus();
}

absl::Status ValidateEtcd(const proto::InterconnectConfig& ic) {
  if (!ic.has_etcd()) {
    return absl::OkStatus();
  }
  const proto::EtcdConfig& etcd = ic.etcd();
  if (ic.nodes_size() > 0) {
    return FieldError("interconnect.etcd",
                      "membership is either the static table (interconnect.nodes) or etcd, "
                      "not both");
  }
  if (!absl::StartsWith(etcd.endpoint(), "http://") || etcd.endpoint().size() <= 7) {
    return FieldError("interconnect.etcd.endpoint",
                      absl::StrCat(R"(must be etcd's client URL, "http://host:port", got ")",
                                   etcd.endpoint(), "\""));
  }
  if (etcd.has_lease_ttl_s()) {
    if (absl::Status s =
            CheckRange<uint32_t>("interconnect.etcd.lease_ttl_s", etcd.lease_ttl_s(), 2, 3600);
        !s.ok()) {
      return s;
    }
  }
  if (etcd.has_connect_timeout_ms()) {
    if (absl::Status s = CheckRange<uint64_t>("interconnect.etcd.connect_timeout_ms",
                                              etcd.connect_timeout_ms(), 100, 600'000);
        !s.ok()) {
      return s;
    }
  }
  if (ic.listen().has_port()) {
    if (absl::Status s =
            CheckRange<uint32_t>("interconnect.listen.port", ic.listen().port(), 0, 65535);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateInterconnect(const proto::InterconnectConfig& ic) {
  absl::flat_hash_set<uint32_t> ids;
  for (int i = 0; i < ic.nodes_size(); ++i) {
    const proto::NodeAddress& node = ic.nodes(i);
    const std::string field = absl::StrCat("interconnect.nodes[", i, "]");
    if (!node.has_node_id()) {
      return FieldError(absl::StrCat(field, ".node_id"), "is required");
    }
    if (absl::Status s =
            CheckRange<uint32_t>(absl::StrCat(field, ".node_id"), node.node_id(), 1, kMaxNodeId);
        !s.ok()) {
      return s;
    }
    if (!ids.insert(node.node_id()).second) {
      return FieldError(absl::StrCat(field, ".node_id"),
                        absl::StrCat("node ", node.node_id(), " is listed twice"));
    }
    if (node.client()) {
      continue;  // a client only dials: it has no address
    }
    if (node.host().empty()) {
      return FieldError(absl::StrCat(field, ".host"), "must not be empty");
    }
    if (!node.has_port()) {
      return FieldError(absl::StrCat(field, ".port"), "is required");
    }
    if (absl::Status s = CheckRange<uint32_t>(absl::StrCat(field, ".port"), node.port(), 1, 65535);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateEtcd(ic); !s.ok()) {
    return s;
  }
  // It travels in every handshake, which has a limit of 4096 bytes.
  if (ic.cluster_id().size() > kMaxClusterIdSize) {
    return absl::InvalidArgumentError(absl::StrCat("interconnect.cluster_id: at most ",
                                                   kMaxClusterIdSize, " bytes, got ",
                                                   ic.cluster_id().size()));
  }
  if (ic.has_heartbeat_interval_ms()) {
    if (absl::Status s = CheckRange<uint64_t>("interconnect.heartbeat_interval_ms",
                                              ic.heartbeat_interval_ms(), 10, 60'000);
        !s.ok()) {
      return s;
    }
  }
  if (ic.has_dead_peer_timeout_ms()) {
    const uint64_t heartbeat = ic.has_heartbeat_interval_ms() ? ic.heartbeat_interval_ms() : 500;
    if (absl::Status s = CheckRange<uint64_t>("interconnect.dead_peer_timeout_ms",
                                              ic.dead_peer_timeout_ms(), heartbeat + 1, 600'000);
        !s.ok()) {
      return s;
    }
  }
  if (ic.has_max_unacked_bytes()) {
    if (absl::Status s = CheckRange<uint64_t>("interconnect.max_unacked_bytes",
                                              ic.max_unacked_bytes(), 65'536, 4'294'967'295);
        !s.ok()) {
      return s;
    }
  }
  if (ic.has_max_event_size()) {
    if (absl::Status s = CheckRange<uint32_t>("interconnect.max_event_size", ic.max_event_size(),
                                              1024, 64u << 20);
        !s.ok()) {
      return s;
    }
  }
  if (ic.has_max_queued_bytes()) {
    const uint64_t unacked = ic.has_max_unacked_bytes() ? ic.max_unacked_bytes() : 16u << 20;
    const uint64_t event = ic.has_max_event_size() ? ic.max_event_size() : 8u << 20;
    if (absl::Status s =
            CheckRange<uint64_t>("interconnect.max_queued_bytes", ic.max_queued_bytes(),
                                 std::max(2 * unacked, event + unacked), uint64_t{64} << 30);
        !s.ok()) {
      return s;
    }
  }
  if (ic.has_max_redial_delay_ms()) {
    const uint64_t heartbeat = ic.has_heartbeat_interval_ms() ? ic.heartbeat_interval_ms() : 500;
    if (absl::Status s = CheckRange<uint64_t>("interconnect.max_redial_delay_ms",
                                              ic.max_redial_delay_ms(), heartbeat, 600'000);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

proto::PoolConfig DefaultPool(std::string name, uint32_t threads) {
  proto::PoolConfig pool;
  pool.set_name(std::move(name));
  pool.set_threads(threads);
  return pool;
}

}  // namespace

absl::StatusOr<proto::ActorSystemConfig> ParseConfig(std::string_view text) {
  proto::ActorSystemConfig config;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", errors.first().empty() ? "malformed text" : errors.first()));
  }
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  return config;
}

absl::StatusOr<proto::ActorSystemConfig> LoadConfigFile(const std::string& path) {
  // An ifstream opens a directory and reads it as empty: the config would silently be defaults.
  std::error_code status_error;
  if (std::filesystem::is_directory(path, status_error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file \"", path, "\" is a directory, not a file"));
  }
  std::ifstream in(path);
  if (!in) {
    const int error = errno;
    // std::error_code's message is thread-safe; std::strerror is not.
    const std::string message =
        absl::StrCat("config file \"", path, "\": ", std::generic_category().message(error));
    return error == EACCES ? absl::PermissionDeniedError(message) : absl::NotFoundError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(text.str());
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::Status ValidateConfig(const proto::ActorSystemConfig& config) {
  if (config.has_node_id()) {
    if (absl::Status s = CheckRange<uint32_t>("node_id", config.node_id(), 1, kMaxNodeId);
        !s.ok()) {
      return s;
    }
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < config.pools_size(); ++i) {
    const proto::PoolConfig& pool = config.pools(i);
    const std::string field = absl::StrCat("pools[", i, "]");
    if (pool.name().empty()) {
      return FieldError(absl::StrCat(field, ".name"), "must not be empty");
    }
    if (!names.insert(pool.name()).second) {
      return FieldError(absl::StrCat(field, ".name"),
                        absl::StrCat("duplicate pool name \"", pool.name(), "\""));
    }
    if (pool.has_threads()) {
      if (absl::Status s =
              CheckRange<uint32_t>(absl::StrCat(field, ".threads"), pool.threads(), 1, kMaxThreads);
          !s.ok()) {
        return s;
      }
    }
    if (pool.has_max_events_per_activation() && pool.max_events_per_activation() == 0) {
      return FieldError(absl::StrCat(field, ".max_events_per_activation"), "must be > 0");
    }
    if (pool.has_max_activation_time_us() && pool.max_activation_time_us() == 0) {
      return FieldError(absl::StrCat(field, ".max_activation_time_us"), "must be > 0");
    }
    if (pool.has_spin_time_us()) {
      if (absl::Status s = CheckRange<uint64_t>(absl::StrCat(field, ".spin_time_us"),
                                                pool.spin_time_us(), 0, 1'000'000);
          !s.ok()) {
        return s;
      }
    }
    if (!proto::MailboxKind_IsValid(pool.default_mailbox())) {
      return FieldError(absl::StrCat(field, ".default_mailbox"),
                        absl::StrCat("unknown mailbox kind ", pool.default_mailbox()));
    }
    if (pool.has_nice()) {
      if (absl::Status s =
              CheckRange<uint32_t>(absl::StrCat(field, ".nice"), pool.nice(), 0, kMaxNice);
          !s.ok()) {
        return s;
      }
    }
    if (pool.has_stuck_threshold_ms()) {
      if (absl::Status s = CheckRange<uint64_t>(absl::StrCat(field, ".stuck_threshold_ms"),
                                                pool.stuck_threshold_ms(), 0, 3'600'000);
          !s.ok()) {
        return s;
      }
    }
  }
  if (config.pools_size() > static_cast<int>(ActorId::kMaxPool) + 1) {
    return FieldError("pools", absl::StrCat("at most ", ActorId::kMaxPool + 1, " pools"));
  }
  if (!config.default_pool().empty()) {
    const bool known =
        config.pools_size() == 0
            ? (config.default_pool() == "System" || config.default_pool() == "User" ||
               config.default_pool() == "Batch" || config.default_pool() == "IC")
            : names.contains(config.default_pool());
    if (!known) {
      return FieldError("default_pool",
                        absl::StrCat("unknown pool \"", config.default_pool(), "\""));
    }
  }
  if (config.scheduler().has_resolution_us()) {
    if (absl::Status s = CheckRange<uint64_t>("scheduler.resolution_us",
                                              config.scheduler().resolution_us(), 50, 1'000'000);
        !s.ok()) {
      return s;
    }
  }
  if (!config.log().level().empty()) {
    LogLevel level;
    if (absl::Status s = ParseLogLevel(config.log().level(), &level); !s.ok()) {
      return FieldError("log.level", s.message());
    }
  }
  for (int i = 0; i < config.log().components_size(); ++i) {
    const proto::LogComponentLevel& component = config.log().components(i);
    const std::string field = absl::StrCat("log.components[", i, "]");
    if (absl::Status s = CheckLogComponentName(component.name()); !s.ok()) {
      return FieldError(field + ".name", s.message());
    }
    LogLevel level;
    if (absl::Status s = ParseLogLevel(component.level(), &level); !s.ok()) {
      return FieldError(field + ".level", s.message());
    }
  }
  if (config.has_max_mailboxes()) {
    if (absl::Status s =
            CheckRange<uint32_t>("max_mailboxes", config.max_mailboxes(), 4096, 268'435'456);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_services()) {
    if (absl::Status s = CheckRange<uint32_t>("max_services", config.max_services(), 16, 1'048'576);
        !s.ok()) {
      return s;
    }
  }
  if (config.monitoring().has_port()) {
    if (absl::Status s =
            CheckRange<uint32_t>("monitoring.port", config.monitoring().port(), 0, 65535);
        !s.ok()) {
      return s;
    }
  }
  return ValidateInterconnect(config.interconnect());
}

proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config) {
  proto::ActorSystemConfig full = config;
  if (!full.has_node_id()) {
    full.set_node_id(1);
  }
  if (full.pools_size() == 0) {
    const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
    *full.add_pools() = DefaultPool("System", 1);
    *full.add_pools() = DefaultPool("User", cores);
    *full.add_pools() = DefaultPool("Batch", 1);
    *full.add_pools() = DefaultPool("IC", 1);
  }
  for (proto::PoolConfig& pool : *full.mutable_pools()) {
    if (!pool.has_threads()) {
      pool.set_threads(1);
    }
    if (!pool.has_spin_time_us()) {
      pool.set_spin_time_us(20);
    }
    if (!pool.has_max_events_per_activation()) {
      pool.set_max_events_per_activation(100);
    }
    if (!pool.has_max_activation_time_us()) {
      pool.set_max_activation_time_us(10'000);
    }
    if (pool.default_mailbox() == proto::MAILBOX_KIND_UNSPECIFIED) {
      pool.set_default_mailbox(proto::MAILBOX_KIND_LOCK_FREE);
    }
    if (!pool.has_fair()) {
      pool.set_fair(false);
    }
    if (!pool.has_stuck_threshold_ms()) {
      pool.set_stuck_threshold_ms(1000);
    }
  }
  if (full.default_pool().empty()) {
    full.set_default_pool(full.pools(0).name());
    for (const proto::PoolConfig& pool : full.pools()) {
      if (pool.name() == "User") {
        full.set_default_pool("User");
      }
    }
  }
  if (!full.scheduler().has_resolution_us()) {
    full.mutable_scheduler()->set_resolution_us(1000);
  }
  if (full.log().level().empty()) {
    full.mutable_log()->set_level("info");
  }
  if (!full.has_max_mailboxes()) {
    full.set_max_mailboxes(16'777'216);
  }
  if (!full.has_max_services()) {
    full.set_max_services(4096);
  }
  proto::InterconnectConfig& ic = *full.mutable_interconnect();
  if (ic.cluster_id().empty()) {
    ic.set_cluster_id("troupe");
  }
  if (!ic.has_heartbeat_interval_ms()) {
    ic.set_heartbeat_interval_ms(500);
  }
  if (!ic.has_dead_peer_timeout_ms()) {
    ic.set_dead_peer_timeout_ms(std::max<uint64_t>(3000, ic.heartbeat_interval_ms() + 1));
  }
  if (!ic.has_max_unacked_bytes()) {
    ic.set_max_unacked_bytes(16u << 20);
  }
  if (!ic.has_max_event_size()) {
    ic.set_max_event_size(8u << 20);
  }
  if (!ic.has_max_queued_bytes()) {
    ic.set_max_queued_bytes(
        std::max<uint64_t>({uint64_t{64} << 20, 2 * ic.max_unacked_bytes(),
                            uint64_t{ic.max_event_size()} + ic.max_unacked_bytes()}));
  }
  if (!ic.has_max_redial_delay_ms()) {
    ic.set_max_redial_delay_ms(std::max<uint64_t>(10'000, ic.heartbeat_interval_ms()));
  }
  if (ic.has_etcd()) {
    proto::EtcdConfig& etcd = *ic.mutable_etcd();
    if (!etcd.has_lease_ttl_s()) {
      etcd.set_lease_ttl_s(5);
    }
    if (!etcd.has_connect_timeout_ms()) {
      etcd.set_connect_timeout_ms(10'000);
    }
    proto::NodeAddress& listen = *ic.mutable_listen();
    if (listen.host().empty() && !listen.client()) {
      listen.set_host("127.0.0.1");
    }
    if (!listen.has_port() && !listen.client()) {
      listen.set_port(0);
    }
  }
  return full;
}

}  // namespace troupe
