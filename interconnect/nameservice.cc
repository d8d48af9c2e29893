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
                       .client = node.client()});
  }
  return std::make_shared<StaticNameservice>(members);
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
