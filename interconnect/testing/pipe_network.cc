// SPDX-License-Identifier: Apache-2.0
#include "interconnect/testing/pipe_network.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace troupe::interconnect {

// One node's view of the pipe network.
class PipeTransport final : public Transport {
 public:
  PipeTransport(PipeNetwork* network, ActorSystem* system) : network_(network), system_(system) {}
  ~PipeTransport() override { PipeTransport::Shutdown(); }
  PipeTransport(const PipeTransport&) = delete;
  PipeTransport& operator=(const PipeTransport&) = delete;
  PipeTransport(PipeTransport&&) = delete;
  PipeTransport& operator=(PipeTransport&&) = delete;

  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port,
                                  const ActorId& acceptor) override {
    troupe::MutexLock lock(&network_->mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("the transport is shut down");
    }
    if (port == 0) {
      port = network_->next_port_++;
    }
    const std::string address = absl::StrCat(host, ":", port);
    if (!network_->listeners_.emplace(address, std::pair{system_, acceptor}).second) {
      return absl::AlreadyExistsError(absl::StrCat("address ", address, " is in use"));
    }
    return port;
  }

  ConnectionId Connect(const std::string& host, uint16_t port, const ActorId& owner) override {
    troupe::MutexLock lock(&network_->mu_);
    const ConnectionId client = network_->next_id_++;
    if (shut_down_) {
      return client;
    }
    auto listener = network_->listeners_.find(absl::StrCat(host, ":", port));
    if (listener == network_->listeners_.end()) {
      system_->Send(owner, std::make_unique<EvConnectionDown>(
                               client, absl::UnavailableError(absl::StrCat(
                                           "connection to ", host, ":", port, " refused"))));
      return client;
    }
    if (network_->Partitioned(system_, listener->second.first)) {
      system_->Send(
          owner, std::make_unique<EvConnectionDown>(
                     client, absl::UnavailableError(absl::StrCat("connection to ", host, ":", port,
                                                                 " timed out (partitioned)"))));
      return client;
    }
    const ConnectionId server = network_->next_id_++;
    // Both ends are filled in before either is inserted: an insertion may rehash ends_ and move
    // the other one.
    PipeNetwork::End client_end;
    client_end.system = system_;
    client_end.owner = owner;
    client_end.peer = server;
    client_end.remote = absl::StrCat(host, ":", port);
    PipeNetwork::End server_end;
    server_end.system = listener->second.first;
    server_end.owner = listener->second.second;
    server_end.peer = client;
    server_end.remote = absl::StrCat("pipe-from-node", system_->node_id(), ":", client);
    auto client_up =
        std::make_unique<EvConnectionUp>(client, /*is_incoming=*/false, client_end.remote);
    auto server_up =
        std::make_unique<EvConnectionUp>(server, /*is_incoming=*/true, server_end.remote);
    ActorSystem* const server_system = server_end.system;
    const ActorId server_owner = server_end.owner;
    network_->ends_[client] = std::move(client_end);
    network_->ends_[server] = std::move(server_end);
    system_->Send(owner, std::move(client_up));
    server_system->Send(server_owner, std::move(server_up));
    if (!network_->certificates_.empty() && (!network_->certificates_.contains(system_) ||
                                             !network_->certificates_.contains(server_system))) {
      // As a TLS transport after a failed handshake: both ends learn why.
      const absl::Status refused =
          absl::UnauthenticatedError("TLS: a peer presented no trusted certificate");
      network_->Down(client, refused);
      network_->Down(server, refused);
    }
    return client;
  }

  void SetOwner(ConnectionId connection, const ActorId& owner) override {
    troupe::MutexLock lock(&network_->mu_);
    auto it = network_->ends_.find(connection);
    if (it == network_->ends_.end()) {
      return;
    }
    PipeNetwork::End& end = it->second;
    end.owner = owner;
    // Bytes still on their way arrive at the new owner, in their order, when they were due.
    const absl::Time now = end.system->Now();
    for (PipeNetwork::End::InFlight& delivery : end.in_flight) {
      if (!delivery.cookie.Cancel()) {
        continue;  // delivered already
      }
      delivery.cookie = end.system->Schedule(
          std::max(delivery.due - now, absl::ZeroDuration()),
          std::make_unique<EventHandle>(
              owner, ActorId(), std::make_unique<EvBytesReceived>(connection, delivery.bytes)));
    }
  }

  void Write(ConnectionId connection, std::string bytes) override {
    troupe::MutexLock lock(&network_->mu_);
    auto it = network_->ends_.find(connection);
    if (it == network_->ends_.end() || !it->second.up || bytes.empty()) {
      return;
    }
    PipeNetwork::End& end = it->second;
    if (end.corrupt_next && end.corrupt_skip > 0) {
      --end.corrupt_skip;
    } else if (end.corrupt_next) {
      end.corrupt_next = false;
      bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x04);
    }
    if (end.blackholed) {
      return;
    }
    auto peer = network_->ends_.find(end.peer);
    if (end.stalled || !end.held.empty() ||
        (peer != network_->ends_.end() && network_->Partitioned(end.system, peer->second.system))) {
      end.held += bytes;
      return;
    }
    network_->Transmit(end.peer, std::move(bytes));
  }

  void Close(ConnectionId connection) override {
    troupe::MutexLock lock(&network_->mu_);
    auto it = network_->ends_.find(connection);
    if (it == network_->ends_.end()) {
      return;
    }
    const ConnectionId peer = it->second.peer;
    for (const PipeNetwork::End::InFlight& delivery : it->second.in_flight) {
      delivery.cookie.Cancel();
    }
    network_->ends_.erase(it);
    network_->Down(peer, absl::UnavailableError("connection closed by the peer"));
  }

  PeerInfo Peer(ConnectionId connection) const override {
    troupe::MutexLock lock(&network_->mu_);
    auto it = network_->ends_.find(connection);
    if (it == network_->ends_.end()) {
      return {};
    }
    PeerInfo info{.address = it->second.remote, .certified_node = std::nullopt};
    if (auto peer = network_->ends_.find(it->second.peer); peer != network_->ends_.end()) {
      if (auto cert = network_->certificates_.find(peer->second.system);
          cert != network_->certificates_.end()) {
        info.certified_node = cert->second;
      }
    }
    return info;
  }

  void Shutdown() override {
    std::vector<ConnectionId> mine;
    {
      troupe::MutexLock lock(&network_->mu_);
      if (shut_down_) {
        return;
      }
      shut_down_ = true;
      absl::erase_if(network_->listeners_,
                     [this](const auto& entry) { return entry.second.first == system_; });
      for (const auto& [id, end] : network_->ends_) {
        if (end.system == system_) {
          mine.push_back(id);
        }
      }
    }
    std::sort(mine.begin(), mine.end());  // the map's order varies between runs; a replay must not
    for (const ConnectionId id : mine) {
      Close(id);
    }
  }

 private:
  PipeNetwork* const network_;
  ActorSystem* const system_;
  bool shut_down_ ABSL_GUARDED_BY(network_->mu_) = false;
};

std::unique_ptr<Transport> PipeNetwork::TransportFor(ActorSystem* system) {
  return std::make_unique<PipeTransport>(this, system);
}

void PipeNetwork::SetCertificate(ActorSystem* system, NodeId node) {
  troupe::MutexLock lock(&mu_);
  certificates_[system] = node;
}

void PipeNetwork::Transmit(ConnectionId to, std::string bytes) {
  auto it = ends_.find(to);
  if (it == ends_.end() || !it->second.up) {
    return;
  }
  End& end = it->second;
  auto ev = std::make_unique<EventHandle>(end.owner, ActorId(),
                                          std::make_unique<EvBytesReceived>(to, std::move(bytes)));
  if (latency_ <= absl::ZeroDuration()) {
    end.system->Send(std::move(ev));
    return;
  }
  while (!end.in_flight.empty() && !end.in_flight.front().cookie.IsPending()) {
    end.in_flight.pop_front();
  }
  std::string copy = ev->Get<EvBytesReceived>()->bytes;
  const absl::Time due = end.system->Now() + latency_;
  end.in_flight.push_back({end.system->Schedule(latency_, std::move(ev)), std::move(copy), due});
}

void PipeNetwork::Down(ConnectionId id, const absl::Status& reason) {
  auto it = ends_.find(id);
  if (it == ends_.end()) {
    return;
  }
  End& end = it->second;
  for (const PipeNetwork::End::InFlight& delivery : end.in_flight) {
    delivery.cookie.Cancel();
  }
  end.system->Send(end.owner, std::make_unique<EvConnectionDown>(id, reason));
  ends_.erase(it);
}

void PipeNetwork::Cut(ConnectionId connection) {
  troupe::MutexLock lock(&mu_);
  auto it = ends_.find(connection);
  if (it == ends_.end()) {
    return;
  }
  const ConnectionId peer = it->second.peer;
  const absl::Status reason = absl::UnavailableError("connection cut");
  Down(connection, reason);
  Down(peer, reason);
}

void PipeNetwork::ForBothEnds(ConnectionId connection, const std::function<void(End&)>& apply) {
  auto it = ends_.find(connection);
  if (it == ends_.end()) {
    return;
  }
  const ConnectionId peer = it->second.peer;
  apply(it->second);
  // `apply` may transmit, which never adds or removes ends: `peer` is still looked up afresh.
  if (auto other = ends_.find(peer); other != ends_.end()) {
    apply(other->second);
  }
}

void PipeNetwork::Stall(ConnectionId connection) {
  troupe::MutexLock lock(&mu_);
  ForBothEnds(connection, [](End& end) { end.stalled = true; });
}

void PipeNetwork::Resume(ConnectionId connection) {
  troupe::MutexLock lock(&mu_);
  ForBothEnds(connection, [](End& end) { end.stalled = false; });
  ReleaseHeld();  // what a partition still holds waits for its Heal
}

void PipeNetwork::Blackhole(ConnectionId connection) {
  troupe::MutexLock lock(&mu_);
  ForBothEnds(connection, [](End& end) { end.blackholed = true; });
}

void PipeNetwork::CorruptNextWrite(ConnectionId connection, uint32_t skip) {
  troupe::MutexLock lock(&mu_);
  if (auto it = ends_.find(connection); it != ends_.end()) {
    it->second.corrupt_next = true;
    it->second.corrupt_skip = skip;
  }
}

namespace {

// A partitioned pair's key: the smaller node id first.
std::pair<NodeId, NodeId> PairKey(NodeId a, NodeId b) { return {std::min(a, b), std::max(a, b)}; }

}  // namespace

bool PipeNetwork::Partitioned(const ActorSystem* a, const ActorSystem* b) const {
  if (partitions_.empty() || a == nullptr || b == nullptr) {
    return false;
  }
  const std::pair<NodeId, NodeId> pair = PairKey(a->node_id(), b->node_id());
  return std::find(partitions_.begin(), partitions_.end(), pair) != partitions_.end();
}

void PipeNetwork::ReleaseHeld() {
  std::vector<ConnectionId> ids;
  for (const auto& [id, end] : ends_) {
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (const ConnectionId id : ids) {
    auto it = ends_.find(id);
    if (it == ends_.end() || it->second.stalled || it->second.held.empty()) {
      continue;
    }
    auto peer = ends_.find(it->second.peer);
    if (peer != ends_.end() && Partitioned(it->second.system, peer->second.system)) {
      continue;
    }
    std::string held = std::move(it->second.held);
    it->second.held.clear();
    Transmit(it->second.peer, std::move(held));
  }
}

void PipeNetwork::Partition(NodeId a, NodeId b) {
  troupe::MutexLock lock(&mu_);
  const std::pair<NodeId, NodeId> pair = PairKey(a, b);
  if (a != b && std::find(partitions_.begin(), partitions_.end(), pair) == partitions_.end()) {
    partitions_.push_back(pair);
  }
}

void PipeNetwork::Heal(NodeId a, NodeId b) {
  troupe::MutexLock lock(&mu_);
  std::erase(partitions_, PairKey(a, b));
  ReleaseHeld();
}

void PipeNetwork::HealAll() {
  troupe::MutexLock lock(&mu_);
  partitions_.clear();
  ReleaseHeld();
}

bool PipeNetwork::IsPartitioned(NodeId a, NodeId b) const {
  troupe::MutexLock lock(&mu_);
  const std::pair<NodeId, NodeId> pair = PairKey(a, b);
  return std::find(partitions_.begin(), partitions_.end(), pair) != partitions_.end();
}

std::vector<ConnectionId> PipeNetwork::ConnectionIds() const {
  troupe::MutexLock lock(&mu_);
  std::vector<ConnectionId> ids;
  for (const auto& [id, end] : ends_) {
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

size_t PipeNetwork::Connections() const {
  troupe::MutexLock lock(&mu_);
  return ends_.size() / 2;
}

}  // namespace troupe::interconnect
