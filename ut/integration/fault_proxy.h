// SPDX-License-Identifier: Apache-2.0
//
// FaultProxy: a loopback TCP relay for tests. A node is told that its peer lives at the proxy's
// port; the proxy relays every connection to the real port and can cut all connections, stall
// them (bytes wait) or blackhole them (bytes vanish while the connections stay up).
//
// It runs on its own small ActorSystem with the TCP transport: one Relay actor owns every
// connection pair.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/transport.h"

namespace troupe::testutil {

enum : EventType {
  kEvRelayCut = EventSpaceBegin(kUserEventSpace + 8),
  kEvRelayResume,
  kEvRelayEnd,
};
static_assert(InEventSpace(kEvRelayEnd - 1, kUserEventSpace + 8));

struct EvRelayCut final : EventLocal<EvRelayCut, kEvRelayCut> {};
struct EvRelayResume final : EventLocal<EvRelayResume, kEvRelayResume> {};

struct RelayState {
  std::atomic<bool> stalled{false};
  std::atomic<bool> blackholed{false};
  std::atomic<uint64_t> cuts{0};
  std::atomic<uint64_t> accepted{0};
};

class Relay final : public Actor {
 public:
  Relay(interconnect::Transport* transport, uint16_t target, RelayState* state)
      : Actor(&Relay::StateWork), transport_(transport), target_(target), state_(state) {}

 private:
  struct End {
    interconnect::ConnectionId peer = 0;
    bool up = false;
    // Bytes for this end, held while it is not up or while the relay is stalled.
    std::string held;
  };

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(interconnect::EvConnectionUp, HandleUp);
      TROUPE_HFUNC(interconnect::EvBytesReceived, HandleBytes);
      TROUPE_HFUNC(interconnect::EvConnectionDown, HandleDown);
      TROUPE_CFUNC(kEvRelayCut, CutAll);
      TROUPE_CFUNC(kEvRelayResume, FlushAll);
      default:
        Unhandled(ev);
    }
  }

  void HandleUp(EventPtr<interconnect::EvConnectionUp> ev) {
    const interconnect::ConnectionId id = ev.Get()->connection;
    if (ev.Get()->incoming) {
      state_->accepted.fetch_add(1);
      const interconnect::ConnectionId out = transport_->Connect("127.0.0.1", target_, SelfId());
      ends_[id] = End{.peer = out, .up = true, .held = {}};
      ends_[out] = End{.peer = id, .up = false, .held = {}};
      return;
    }
    auto it = ends_.find(id);
    if (it == ends_.end()) {
      transport_->Close(id);
      return;
    }
    it->second.up = true;
    Flush(id);
  }

  void HandleBytes(EventPtr<interconnect::EvBytesReceived> ev) {
    auto it = ends_.find(ev.Get()->connection);
    if (it == ends_.end() || state_->blackholed.load()) {
      return;
    }
    const interconnect::ConnectionId to = it->second.peer;
    ends_[to].held += ev.Get()->bytes;
    Flush(to);
  }

  void HandleDown(EventPtr<interconnect::EvConnectionDown> ev) {
    auto it = ends_.find(ev.Get()->connection);
    if (it == ends_.end()) {
      return;
    }
    const interconnect::ConnectionId peer = it->second.peer;
    ends_.erase(it);
    ends_.erase(peer);
    transport_->Close(peer);
  }

  void Flush(interconnect::ConnectionId id) {
    auto it = ends_.find(id);
    if (it == ends_.end() || !it->second.up || state_->stalled.load() || it->second.held.empty()) {
      return;
    }
    transport_->Write(id, std::exchange(it->second.held, {}));
  }

  void FlushAll() {
    for (auto& [id, end] : ends_) {
      if (end.up && !end.held.empty() && !state_->stalled.load()) {
        transport_->Write(id, std::exchange(end.held, {}));
      }
    }
  }

  void CutAll() {
    for (const auto& [id, end] : ends_) {
      transport_->Close(id);
    }
    ends_.clear();
    state_->cuts.fetch_add(1);
  }

  interconnect::Transport* transport_;
  uint16_t target_;
  RelayState* state_;
  absl::flat_hash_map<interconnect::ConnectionId, End> ends_;
};

class FaultProxy {
 public:
  // Relays 127.0.0.1:port() to 127.0.0.1:target.
  explicit FaultProxy(uint16_t target) {
    proto::ActorSystemConfig config;
    proto::PoolConfig* pool = config.add_pools();
    pool->set_name("User");
    pool->set_threads(1);
    pool->set_spin_time_us(5);
    config.set_node_id(999);
    auto system = ActorSystem::Create(config);
    EXPECT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    auto transport = interconnect::MakeTcpTransport(system_.get());
    EXPECT_TRUE(transport.ok()) << transport.status();
    transport_ = std::move(*transport);
    relay_ = system_->Register(std::make_unique<Relay>(transport_.get(), target, &state_));
    auto port = transport_->Listen("127.0.0.1", 0, relay_);
    EXPECT_TRUE(port.ok()) << port.status();
    port_ = port.value_or(0);
  }
  ~FaultProxy() {
    transport_->Shutdown();
    system_->Stop();
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;
  FaultProxy(FaultProxy&&) = delete;
  FaultProxy& operator=(FaultProxy&&) = delete;

  uint16_t port() const { return port_; }
  // Closes every relayed connection (both sides see it go down).
  void Cut() { system_->Send(relay_, std::make_unique<EvRelayCut>()); }
  // Holds bytes (both directions) until Resume.
  void Stall() { state_.stalled.store(true); }
  void Resume() {
    state_.stalled.store(false);
    system_->Send(relay_, std::make_unique<EvRelayResume>());
  }
  // Drops every byte while set; the connections stay up.
  void Blackhole(bool on) { state_.blackholed.store(on); }
  uint64_t cuts() const { return state_.cuts.load(); }
  uint64_t accepted() const { return state_.accepted.load(); }

 private:
  RelayState state_;
  std::unique_ptr<ActorSystem> system_;
  std::unique_ptr<interconnect::Transport> transport_;
  ActorId relay_;
  uint16_t port_ = 0;
};

}  // namespace troupe::testutil
