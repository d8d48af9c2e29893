// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/listener.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

#include "actors/log.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/handover.h"

namespace troupe::interconnect::internal {
namespace {

class Listener final : public Actor {
 public:
  Listener(HandshakeSettings settings, std::shared_ptr<PeerTable> peers, RegisterOptions handshakes)
      : Actor(&Listener::StateWork),
        settings_(std::move(settings)),
        peers_(std::move(peers)),
        handshakes_(handshakes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvConnectionUp, HandleConnectionUp);
      TROUPE_HFUNC(EvHandoverEnd, HandleFence);
      case EvBytesReceived::kEventType:
      case EvConnectionDown::kEventType:
        Forward(ev);
        break;
      default:
        Unhandled(ev);
    }
  }

  void HandleConnectionUp(EventPtr<EvConnectionUp> ev) {
    const ConnectionId connection = ev.Get()->connection;
    const ActorId handshake =
        Register(MakeIncomingHandshake(settings_, connection, ev.Get()->remote, SelfId(), peers_),
                 handshakes_);
    if (handshake.IsEmpty()) {
      TROUPE_LOG(kWarn, kInterconnect) << "refused incoming connection from "
                                       << (ev.Get()->remote.empty() ? "?" : ev.Get()->remote)
                                       << " (connection " << connection << "): no handshake actor";
      settings_.transport->Close(connection);
      return;
    }
    // handover.h: the new owner, then a fence behind what the transport already sent us.
    settings_.transport->SetOwner(connection, handshake);
    handing_.emplace(connection, handshake);
    Send(SelfId(), std::make_unique<EvHandoverEnd>(connection));
  }

  // Re-sends an event of a connection being handed over to its handshake actor, from us.
  void Forward(EventHandlePtr& ev) {
    ConnectionId connection = 0;
    std::unique_ptr<EventBase> copy = TakeConnectionEvent(*ev, &connection);
    if (auto it = handing_.find(connection); copy != nullptr && it != handing_.end()) {
      Send(it->second, std::move(copy));
    }
  }

  void HandleFence(EventPtr<EvHandoverEnd> ev) {
    auto it = handing_.find(ev.Get()->connection);
    if (ev->sender() != SelfId() || it == handing_.end()) {
      return;
    }
    Send(it->second, std::make_unique<EvHandoverEnd>(ev.Get()->connection));
    handing_.erase(it);
  }

  const HandshakeSettings settings_;
  const std::shared_ptr<PeerTable> peers_;
  const RegisterOptions handshakes_;
  // Connections whose events we still forward, with their handshake actors.
  absl::flat_hash_map<ConnectionId, ActorId> handing_;
};

}  // namespace

std::unique_ptr<Actor> MakeListener(HandshakeSettings settings, std::shared_ptr<PeerTable> peers,
                                    RegisterOptions handshakes) {
  return std::make_unique<Listener>(std::move(settings), std::move(peers), handshakes);
}

}  // namespace troupe::interconnect::internal
