// SPDX-License-Identifier: Apache-2.0
#include "interconnect/nameservice.h"

namespace troupe::interconnect {

std::shared_ptr<StaticNameservice> StaticNameservice::FromConfig(
    const proto::InterconnectConfig& config) {
  std::vector<NodeEndpoint> members;
  for (const proto::NodeAddress& node : config.nodes()) {
    members.push_back({.node = node.node_id(),
                       .host = node.host(),
                       .port = static_cast<uint16_t>(node.port()),
                       .client = node.client(),
                       .monitoring_port = static_cast<uint16_t>(node.monitoring_port())});
  }
  auto names = std::make_shared<StaticNameservice>(members);
  if (!config.has_etcd()) {
    names->listen_host_ = config.listen().host();
    if (config.listen().has_port()) {
      names->listen_port_ = static_cast<uint16_t>(config.listen().port());
    }
  }
  return names;
}

StaticNameservice::StaticNameservice(const std::vector<NodeEndpoint>& members) {
  troupe::MutexLock lock(&mu_);
  for (const NodeEndpoint& endpoint : members) {
    members_[endpoint.node] = endpoint;
  }
}

std::optional<NodeEndpoint> StaticNameservice::Resolve(NodeId node) const {
  troupe::MutexLock lock(&mu_);
  auto it = members_.find(node);
  if (it == members_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<NodeEndpoint> StaticNameservice::Local(NodeId self) const {
  std::optional<NodeEndpoint> local = Resolve(self);
  if (local.has_value() && !local->client) {
    if (!listen_host_.empty()) {
      local->host = listen_host_;
    }
    if (listen_port_.has_value()) {
      local->port = *listen_port_;
    }
  }
  return local;
}

std::vector<NodeEndpoint> StaticNameservice::Members() const {
  troupe::MutexLock lock(&mu_);
  std::vector<NodeEndpoint> all;
  all.reserve(members_.size());
  for (const auto& [node, endpoint] : members_) {
    all.push_back(endpoint);
  }
  return all;
}

NameserviceWatch StaticNameservice::Watch(std::function<void()> on_change) {
  troupe::MutexLock lock(&notify_mu_);
  const uint64_t id = next_watch_++;
  watchers_.emplace(id, std::move(on_change));
  return NameserviceWatch([this, id] {
    troupe::MutexLock lock(&notify_mu_);
    watchers_.erase(id);
  });
}

void StaticNameservice::Set(const NodeEndpoint& endpoint) {
  {
    troupe::MutexLock lock(&mu_);
    members_[endpoint.node] = endpoint;
  }
  Notify();
}

void StaticNameservice::Remove(NodeId node) {
  {
    troupe::MutexLock lock(&mu_);
    members_.erase(node);
  }
  Notify();
}

void StaticNameservice::Notify() {
  troupe::MutexLock lock(&notify_mu_);
  for (const auto& [id, watcher] : watchers_) {
    watcher();
  }
}

}  // namespace troupe::interconnect
