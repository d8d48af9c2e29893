// SPDX-License-Identifier: Apache-2.0
#include "actors/config.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

#include "actors/actor_id.h"
#include "actors/check.h"
#include "actors/log.h"

namespace troupe {
namespace {

constexpr uint32_t kMaxThreads = 256;
// Linux's highest niceness.
constexpr uint32_t kMaxNice = 19;

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

proto::PoolConfig DefaultPool(std::string name, uint32_t threads) {
  proto::PoolConfig pool;
  pool.set_name(std::move(name));
  pool.set_threads(threads);
  return pool;
}

// Checks a pool's lending fields (min_threads, max_threads, priority, extra_thread_after_ms)
// against its thread count.
absl::Status ValidatePoolLending(const proto::PoolConfig& pool, const std::string& field) {
  const uint32_t threads = pool.has_threads() ? pool.threads() : 1;
  if (pool.has_min_threads()) {
    if (absl::Status s =
            CheckConfigRange(absl::StrCat(field, ".min_threads"), pool.min_threads(), 0, threads);
        !s.ok()) {
      return s;
    }
  }
  if (pool.has_max_threads()) {
    if (absl::Status s = CheckConfigRange(absl::StrCat(field, ".max_threads"), pool.max_threads(),
                                          threads, kMaxThreads);
        !s.ok()) {
      return s;
    }
  }
  if (pool.has_priority()) {
    if (absl::Status s =
            CheckConfigRange(absl::StrCat(field, ".priority"), pool.priority(), 0, 100);
        !s.ok()) {
      return s;
    }
  }
  if (pool.has_extra_thread_after_ms() && pool.extra_thread_after_ms() != 0) {
    return CheckConfigRange(absl::StrCat(field, ".extra_thread_after_ms"),
                            pool.extra_thread_after_ms(), 1, 3'600'000);
  }
  return absl::OkStatus();
}

// Checks the log section. A component's name must exist when the node starts (built-in, named by
// the code already, or declared in user_components), so that a misspelt one is refused here
// instead of setting a level nobody reads.
absl::Status ValidateLogConfig(const proto::LogConfig& log) {
  LogLevel level;
  LogFormat format;
  if (!log.level().empty()) {
    if (absl::Status s = ParseLogLevel(log.level(), &level); !s.ok()) {
      return ConfigFieldError("log.level", s.message());
    }
  }
  if (!log.format().empty()) {
    if (absl::Status s = ParseLogFormat(log.format(), &format); !s.ok()) {
      return ConfigFieldError("log.format", s.message());
    }
  }
  std::vector<std::string> declared;
  int unnamed = 0;
  for (int i = 0; i < log.user_components_size(); ++i) {
    const std::string& name = log.user_components(i);
    const std::string field = absl::StrCat("log.user_components[", i, "]");
    if (absl::Status s = CheckLogComponentName(name); !s.ok()) {
      return ConfigFieldError(field, s.message());
    }
    const absl::StatusOr<LogComponent> existing = FindLogComponent(name);
    if (existing.ok() && static_cast<int>(*existing) < static_cast<int>(LogComponent::kCount)) {
      return ConfigFieldError(field, absl::StrCat("\"", name, "\" is a built-in component"));
    }
    if (std::find(declared.begin(), declared.end(), name) != declared.end()) {
      return ConfigFieldError(field, absl::StrCat("\"", name, "\" is listed twice"));
    }
    declared.push_back(name);
    unnamed += existing.ok() ? 0 : 1;
  }
  if (unnamed > FreeLogComponentSlots()) {
    return ConfigFieldError(
        "log.user_components",
        absl::StrCat(unnamed, " new components, but only ", FreeLogComponentSlots(),
                     " more can be named in this process (at most ",
                     kMaxLogComponents - static_cast<int>(LogComponent::kCount) - 1, ")"));
  }
  absl::flat_hash_set<std::string> configured;
  for (int i = 0; i < log.components_size(); ++i) {
    const proto::LogComponentLevel& component = log.components(i);
    const std::string field = absl::StrCat("log.components[", i, "]");
    if (absl::Status s = CheckLogComponentKnown(component.name(), declared); !s.ok()) {
      const bool unknown = CheckLogComponentName(component.name()).ok();
      return ConfigFieldError(
          field + ".name",
          unknown ? absl::StrCat(s.message(),
                                 "; a component your code names after the node starts must be "
                                 "listed in log.user_components")
                  : std::string{s.message()});
    }
    if (!configured.insert(component.name()).second) {
      return ConfigFieldError(field + ".name",
                              absl::StrCat("\"", component.name(), "\" is set twice"));
    }
    if (absl::Status s = ParseLogLevel(component.level(), &level); !s.ok()) {
      return ConfigFieldError(field + ".level", s.message());
    }
  }
  return absl::OkStatus();
}

proto::PoolConfig LendingPool(std::string name, uint32_t threads, uint32_t max_threads,
                              uint32_t priority) {
  proto::PoolConfig pool = DefaultPool(std::move(name), threads);
  pool.set_min_threads(1);
  pool.set_max_threads(std::max(threads, max_threads));
  pool.set_priority(priority);
  return pool;
}

}  // namespace

absl::Status ConfigFieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

absl::Status CheckConfigRange(absl::string_view field, uint64_t value, uint64_t low,
                              uint64_t high) {
  if (value < low || value > high) {
    return ConfigFieldError(field,
                            absl::StrCat("must be between ", low, " and ", high, ", got ", value));
  }
  return absl::OkStatus();
}

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
    if (absl::Status s = CheckConfigRange("node_id", config.node_id(), 1, ActorId::kMaxNode);
        !s.ok()) {
      return s;
    }
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < config.pools_size(); ++i) {
    const proto::PoolConfig& pool = config.pools(i);
    const std::string field = absl::StrCat("pools[", i, "]");
    if (pool.name().empty()) {
      return ConfigFieldError(absl::StrCat(field, ".name"), "must not be empty");
    }
    if (!names.insert(pool.name()).second) {
      return ConfigFieldError(absl::StrCat(field, ".name"),
                              absl::StrCat("duplicate pool name \"", pool.name(), "\""));
    }
    if (pool.has_threads()) {
      if (absl::Status s =
              CheckConfigRange(absl::StrCat(field, ".threads"), pool.threads(), 1, kMaxThreads);
          !s.ok()) {
        return s;
      }
    }
    if (pool.has_max_events_per_activation() && pool.max_events_per_activation() == 0) {
      return ConfigFieldError(absl::StrCat(field, ".max_events_per_activation"), "must be > 0");
    }
    if (pool.has_max_activation_time_us() && pool.max_activation_time_us() == 0) {
      return ConfigFieldError(absl::StrCat(field, ".max_activation_time_us"), "must be > 0");
    }
    if (pool.has_spin_time_us()) {
      if (absl::Status s = CheckConfigRange(absl::StrCat(field, ".spin_time_us"),
                                            pool.spin_time_us(), 0, 1'000'000);
          !s.ok()) {
        return s;
      }
    }
    if (!proto::MailboxKind_IsValid(pool.default_mailbox())) {
      return ConfigFieldError(absl::StrCat(field, ".default_mailbox"),
                              absl::StrCat("unknown mailbox kind ", pool.default_mailbox()));
    }
    if (pool.has_nice()) {
      if (absl::Status s = CheckConfigRange(absl::StrCat(field, ".nice"), pool.nice(), 0, kMaxNice);
          !s.ok()) {
        return s;
      }
    }
    if (pool.has_stuck_threshold_ms()) {
      if (absl::Status s = CheckConfigRange(absl::StrCat(field, ".stuck_threshold_ms"),
                                            pool.stuck_threshold_ms(), 0, 3'600'000);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ValidatePoolLending(pool, field); !s.ok()) {
      return s;
    }
  }
  if (config.lending().has_budget()) {
    if (absl::Status s = CheckConfigRange("lending.budget", config.lending().budget(), 1, 4096);
        !s.ok()) {
      return s;
    }
  }
  if (config.lending().has_period_ms()) {
    if (absl::Status s =
            CheckConfigRange("lending.period_ms", config.lending().period_ms(), 1, 10'000);
        !s.ok()) {
      return s;
    }
  }
  if (config.pools_size() > static_cast<int>(ActorId::kMaxPool) + 1) {
    return ConfigFieldError("pools", absl::StrCat("at most ", ActorId::kMaxPool + 1, " pools"));
  }
  if (!config.default_pool().empty()) {
    const bool known =
        config.pools_size() == 0
            ? (config.default_pool() == "System" || config.default_pool() == "User" ||
               config.default_pool() == "Batch" || config.default_pool() == "IC")
            : names.contains(config.default_pool());
    if (!known) {
      return ConfigFieldError("default_pool",
                              absl::StrCat("unknown pool \"", config.default_pool(), "\""));
    }
  }
  if (config.scheduler().has_resolution_us()) {
    if (absl::Status s = CheckConfigRange("scheduler.resolution_us",
                                          config.scheduler().resolution_us(), 50, 1'000'000);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateLogConfig(config.log()); !s.ok()) {
    return s;
  }
  if (config.has_max_mailboxes()) {
    if (absl::Status s =
            CheckConfigRange("max_mailboxes", config.max_mailboxes(), 4096, 268'435'456);
        !s.ok()) {
      return s;
    }
  }
  if (config.has_max_services()) {
    if (absl::Status s = CheckConfigRange("max_services", config.max_services(), 16, 1'048'576);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config) {
  proto::ActorSystemConfig full = config;
  if (!full.has_node_id()) {
    full.set_node_id(1);
  }
  if (full.pools_size() == 0) {
    const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
    *full.add_pools() = DefaultPool("System", 1);
    full.mutable_pools(0)->set_priority(3);
    *full.add_pools() = LendingPool("User", cores, cores, 1);
    *full.add_pools() = LendingPool("Batch", 1, cores, 0);
    *full.add_pools() = DefaultPool("IC", 1);
    full.mutable_pools(3)->set_priority(2);
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
    if (!pool.has_min_threads()) {
      pool.set_min_threads(pool.threads());
    }
    if (!pool.has_max_threads()) {
      pool.set_max_threads(pool.threads());
    }
    if (!pool.has_priority()) {
      pool.set_priority(0);
    }
    if (!pool.has_extra_thread_after_ms()) {
      pool.set_extra_thread_after_ms(0);
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
  if (full.log().format().empty()) {
    full.mutable_log()->set_format("text");
  }
  if (!full.has_max_mailboxes()) {
    full.set_max_mailboxes(16'777'216);
  }
  if (!full.has_max_services()) {
    full.set_max_services(4096);
  }
  if (!full.lending().has_budget()) {
    full.mutable_lending()->set_budget(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (!full.lending().has_period_ms()) {
    full.mutable_lending()->set_period_ms(10);
  }
  return full;
}

void ApplyLogConfig(const proto::LogConfig& log, LogContext* context) {
  for (const std::string& name : log.user_components()) {
    LogComponentNamed(name);
  }
  LogLevel level = LogLevel::kInfo;
  if (!log.level().empty()) {
    TROUPE_CHECK(ParseLogLevel(log.level(), &level).ok()) << "log.level: " << log.level();
  }
  context->SetLevel(level);
  for (const proto::LogComponentLevel& component : log.components()) {
    TROUPE_CHECK(ParseLogLevel(component.level(), &level).ok())
        << "log.components: " << component.level();
    context->SetLevel(level, LogComponentNamed(component.name()));
  }
  LogFormat format = LogFormat::kText;
  if (!log.format().empty()) {
    TROUPE_CHECK(ParseLogFormat(log.format(), &format).ok()) << "log.format: " << log.format();
  }
  context->SetFormat(format);
}

}  // namespace troupe
