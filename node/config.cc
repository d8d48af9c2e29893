// SPDX-License-Identifier: Apache-2.0
#include "node/config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "actors/config.h"
#include "interconnect/config.h"

namespace troupe::node {
namespace {

absl::Status ValidateEtcd(const proto::InterconnectConfig& ic) {
  if (!ic.has_etcd()) {
    return absl::OkStatus();
  }
  const proto::EtcdConfig& etcd = ic.etcd();
  if (ic.nodes_size() > 0) {
    return ConfigFieldError("interconnect.etcd",
                            "membership is either the static table (interconnect.nodes) or etcd, "
                            "not both");
  }
  if (!absl::StartsWith(etcd.endpoint(), "http://") || etcd.endpoint().size() <= 7) {
    return ConfigFieldError("interconnect.etcd.endpoint",
                            absl::StrCat(R"(must be etcd's client URL, "http://host:port", got ")",
                                         etcd.endpoint(), "\""));
  }
  if (etcd.has_lease_ttl_s()) {
    if (absl::Status s =
            CheckConfigRange("interconnect.etcd.lease_ttl_s", etcd.lease_ttl_s(), 2, 3600);
        !s.ok()) {
      return s;
    }
  }
  if (etcd.has_connect_timeout_ms()) {
    if (absl::Status s = CheckConfigRange("interconnect.etcd.connect_timeout_ms",
                                          etcd.connect_timeout_ms(), 100, 600'000);
        !s.ok()) {
      return s;
    }
  }
  if (ic.listen().has_port()) {
    if (absl::Status s = CheckConfigRange("interconnect.listen.port", ic.listen().port(), 0, 65535);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Every section but the actor system's, which troupe::ParseConfig and LoadConfigFile check.
absl::Status ValidateBeyondActors(const proto::ActorSystemConfig& config) {
  if (config.monitoring().has_port()) {
    if (absl::Status s = CheckConfigRange("monitoring.port", config.monitoring().port(), 0, 65535);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = interconnect::ValidateConfig(config.interconnect()); !s.ok()) {
    return s;
  }
  return ValidateEtcd(config.interconnect());
}

}  // namespace

absl::Status ValidateConfig(const proto::ActorSystemConfig& config) {
  if (absl::Status s = troupe::ValidateConfig(config); !s.ok()) {
    return s;
  }
  return ValidateBeyondActors(config);
}

absl::StatusOr<proto::ActorSystemConfig> ParseConfig(std::string_view text) {
  absl::StatusOr<proto::ActorSystemConfig> config = troupe::ParseConfig(text);
  if (!config.ok()) {
    return config.status();
  }
  if (absl::Status s = ValidateBeyondActors(*config); !s.ok()) {
    return s;
  }
  return config;
}

absl::StatusOr<proto::ActorSystemConfig> LoadConfigFile(const std::string& path) {
  absl::StatusOr<proto::ActorSystemConfig> config = troupe::LoadConfigFile(path);
  if (!config.ok()) {
    return config.status();  // names the file and the field, or the line and column
  }
  if (absl::Status s = ValidateBeyondActors(*config); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return config;
}

proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config) {
  proto::ActorSystemConfig full = troupe::WithDefaults(config);
  proto::InterconnectConfig& ic = *full.mutable_interconnect();
  ic = interconnect::WithDefaults(ic);
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

}  // namespace troupe::node
