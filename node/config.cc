// SPDX-License-Identifier: Apache-2.0
#include "node/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "actors/config.h"
#include "interconnect/config.h"

namespace troupe::node {
namespace {

constexpr int kMaxEtcdEndpoints = 16;

// Checks one etcd client URL: a scheme and something after it.
absl::Status CheckEtcdUrl(const std::string& field, const std::string& url) {
  const bool http = absl::StartsWith(url, "http://") && url.size() > 7;
  const bool https = absl::StartsWith(url, "https://") && url.size() > 8;
  if (!http && !https) {
    return ConfigFieldError(field,
                            absl::StrCat(R"(must be etcd's client URL, "http://host:port" or )",
                                         R"("https://host:port", got ")", url, "\""));
  }
  return absl::OkStatus();
}

// Checks that `path` names a file this process can read.
absl::Status CheckReadable(const std::string& field, const std::string& path) {
  if (path.empty()) {
    return ConfigFieldError(field, "required");
  }
  if (!std::ifstream(path).good()) {
    return ConfigFieldError(field, absl::StrCat("cannot read \"", path, "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateEtcdEndpoints(const proto::EtcdConfig& etcd) {
  std::vector<std::pair<std::string, std::string>> urls;  // field, URL
  if (!etcd.endpoint().empty() && etcd.endpoints_size() > 0) {
    return ConfigFieldError("interconnect.etcd.endpoints",
                            "set this or interconnect.etcd.endpoint, not both");
  }
  if (etcd.endpoints_size() == 0) {
    if (absl::Status s = CheckEtcdUrl("interconnect.etcd.endpoint", etcd.endpoint()); !s.ok()) {
      return s;
    }
    urls.emplace_back("interconnect.etcd.endpoint", etcd.endpoint());
  }
  if (etcd.endpoints_size() > kMaxEtcdEndpoints) {
    return ConfigFieldError(
        "interconnect.etcd.endpoints",
        absl::StrCat("at most ", kMaxEtcdEndpoints, " endpoints, got ", etcd.endpoints_size()));
  }
  for (int i = 0; i < etcd.endpoints_size(); ++i) {
    const std::string field = absl::StrCat("interconnect.etcd.endpoints[", i, "]");
    if (absl::Status s = CheckEtcdUrl(field, etcd.endpoints(i)); !s.ok()) {
      return s;
    }
    for (const auto& [other, url] : urls) {
      if (url == etcd.endpoints(i)) {
        return ConfigFieldError(field, absl::StrCat("\"", url, "\" is also ", other));
      }
    }
    urls.emplace_back(field, etcd.endpoints(i));
  }
  const bool https = absl::StartsWith(urls.front().second, "https://");
  for (const auto& [field, url] : urls) {
    if (absl::StartsWith(url, "https://") != https) {
      return ConfigFieldError(
          field, absl::StrCat("\"", url, "\" mixes http:// and https:// (", urls.front().first,
                              " is \"", urls.front().second, "\")"));
    }
    if (etcd.has_tls() && !https) {
      return ConfigFieldError("interconnect.etcd.tls",
                              absl::StrCat("set, but ", field, " \"", url,
                                           "\" is http://: TLS needs https:// endpoints"));
    }
  }
  if (etcd.has_tls()) {
    const proto::EtcdTlsConfig& tls = etcd.tls();
    if (absl::Status s = CheckReadable("interconnect.etcd.tls.ca_file", tls.ca_file()); !s.ok()) {
      return s;
    }
    if (tls.cert_file().empty() != tls.key_file().empty()) {
      return ConfigFieldError(tls.cert_file().empty() ? "interconnect.etcd.tls.cert_file"
                                                      : "interconnect.etcd.tls.key_file",
                              "cert_file and key_file go together (a client certificate and its "
                              "key), or neither is set");
    }
    if (!tls.cert_file().empty()) {
      for (const auto& [field, path] :
           {std::pair{"interconnect.etcd.tls.cert_file", tls.cert_file()},
            std::pair{"interconnect.etcd.tls.key_file", tls.key_file()}}) {
        if (absl::Status s = CheckReadable(field, path); !s.ok()) {
          return s;
        }
      }
    }
  }
  return absl::OkStatus();
}

// Where the node listens and where the others dial it, with either membership.
absl::Status ValidateAddresses(const proto::InterconnectConfig& ic) {
  const proto::NodeAddress& listen = ic.listen();
  if (listen.has_port()) {
    if (absl::Status s = CheckConfigRange("interconnect.listen.port", listen.port(), 0, 65535);
        !s.ok()) {
      return s;
    }
  }
  if (!ic.has_etcd()) {
    if (ic.has_advertise()) {
      return ConfigFieldError("interconnect.advertise",
                              "only with interconnect.etcd: with a static table the others dial "
                              "this node where its entry in interconnect.nodes says");
    }
    if (listen.has_port() && listen.port() == 0) {
      return ConfigFieldError("interconnect.listen.port",
                              "with a static table, 1 to 65535: the others dial the port of this "
                              "node's entry, which must lead to a port known in advance");
    }
    if (listen.client()) {
      return ConfigFieldError("interconnect.listen.client",
                              "only with interconnect.etcd: with a static table this node's "
                              "entry in interconnect.nodes says whether it is a client");
    }
    return absl::OkStatus();
  }
  const proto::AdvertiseAddress& advertise = ic.advertise();
  if (listen.client()) {
    if (ic.has_advertise()) {
      return ConfigFieldError("interconnect.advertise",
                              "a client node (interconnect.listen.client) is dialled by no one");
    }
    return absl::OkStatus();
  }
  if (IsWildcardAddress(advertise.host())) {
    return ConfigFieldError("interconnect.advertise.host",
                            absl::StrCat("\"", advertise.host(),
                                         "\" is a wildcard address, which names no machine: give "
                                         "the host name or address the others dial"));
  }
  if (advertise.host().empty() && IsWildcardAddress(listen.host())) {
    return ConfigFieldError(
        "interconnect.advertise.host",
        absl::StrCat("required when interconnect.listen.host is the wildcard address \"",
                     listen.host(),
                     "\", which names no machine: give the host name or address "
                     "the others dial"));
  }
  if (advertise.has_port()) {
    if (absl::Status s =
            CheckConfigRange("interconnect.advertise.port", advertise.port(), 1, 65535);
        !s.ok()) {
      return s;
    }
    if (listen.port() == 0) {
      return ConfigFieldError("interconnect.advertise.port",
                              "needs a fixed interconnect.listen.port: with port 0 the port "
                              "bound is not known in advance, so nothing can forward to it");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateEtcd(const proto::InterconnectConfig& ic) {
  if (!ic.has_etcd()) {
    return ValidateAddresses(ic);
  }
  const proto::EtcdConfig& etcd = ic.etcd();
  if (ic.nodes_size() > 0) {
    return ConfigFieldError("interconnect.etcd",
                            "membership is either the static table (interconnect.nodes) or etcd, "
                            "not both");
  }
  if (absl::Status s = ValidateEtcdEndpoints(etcd); !s.ok()) {
    return s;
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
  return ValidateAddresses(ic);
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

bool IsWildcardAddress(std::string_view host) {
  std::string address(host);
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return v4.s_addr == htonl(INADDR_ANY);
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    return std::memcmp(&v6, &in6addr_any, sizeof(v6)) == 0;
  }
  return false;
}

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
