// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/handshake_actor.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "actors/events.h"
#include "actors/log.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/handover.h"

namespace troupe::interconnect::internal {
namespace {

using Kind = EvHandshakeFailed::Kind;

class HandshakeActor final : public Actor {
 public:
  // How long a refusing side waits for the dialler to read its refusal and close.
  static constexpr absl::Duration kRefusalLinger = absl::Seconds(1);

  // Outgoing.
  HandshakeActor(HandshakeSettings settings, NodeEndpoint peer, const ActorId& proxy,
                 proto::Handshake hello)
      : Actor(&HandshakeActor::StateReading),
        settings_(std::move(settings)),
        peer_(std::move(peer)),
        proxy_(proxy),
        hello_(std::move(hello)) {}
  // Incoming.
  HandshakeActor(HandshakeSettings settings, ConnectionId connection, std::string remote,
                 const ActorId& listener, std::shared_ptr<PeerTable> peers)
      : Actor(&HandshakeActor::StateReading),
        settings_(std::move(settings)),
        peers_(std::move(peers)),
        listener_(listener),
        conn_(connection),
        address_(std::move(remote)) {}

  ~HandshakeActor() override {
    if (conn_ != 0) {
      settings_.transport->Close(conn_);  // failed, or ended before it was handed over
    }
  }
  HandshakeActor(const HandshakeActor&) = delete;
  HandshakeActor& operator=(const HandshakeActor&) = delete;
  HandshakeActor(HandshakeActor&&) = delete;
  HandshakeActor& operator=(HandshakeActor&&) = delete;

 private:
  bool incoming() const { return !listener_.IsEmpty(); }

  void Bootstrap() override {
    ScheduleWakeup(settings_.timeout);
    if (incoming()) {
      if (address_.empty()) {
        address_ = settings_.transport->Peer(conn_).address;
      }
      gate_.Begin(listener_);
      return;
    }
    conn_ = settings_.transport->Connect(peer_.host, peer_.port, SelfId());
  }

  // -- reading the peer's handshake ---------------------------------------------------------------

  TROUPE_STATE(StateReading) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvConnectionUp, HandleConnectionUp);
      TROUPE_HFUNC(EvHandoverEnd, HandleListenerDone);
      TROUPE_HFUNC(EvWakeup, HandleTimeout);
      case EvBytesReceived::kEventType:
      case EvConnectionDown::kEventType:
        if (gate_.Admit(ev)) {
          HandleConnectionEvent(ev);
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  void HandleConnectionUp(EventPtr<EvConnectionUp> ev) {
    if (ev.Get()->connection != conn_) {
      return;
    }
    up_ = true;
    address_ =
        !ev.Get()->remote.empty() ? ev.Get()->remote : settings_.transport->Peer(conn_).address;
    std::string bytes;
    AppendHandshake(hello_, &bytes);
    settings_.transport->Write(conn_, std::move(bytes));
  }

  void HandleConnectionEvent(EventHandlePtr& ev) {
    if (const auto* bytes = ev->Get<EvBytesReceived>(); bytes != nullptr) {
      if (bytes->connection == conn_) {
        HandleBytes(bytes->bytes);
      }
      return;
    }
    const auto* down = ev->Get<EvConnectionDown>();
    if (down == nullptr || down->connection != conn_) {
      return;
    }
    if (down->reason.code() == absl::StatusCode::kUnauthenticated) {
      Refuse(down->reason, /*down=*/true);  // the transport refused the peer's credentials (TLS)
      return;
    }
    conn_ = 0;  // nothing to close
    if (incoming()) {
      PassAway();
      return;
    }
    Fail(up_ ? Kind::kDown : Kind::kUnreachable, down->reason);
  }

  void HandleBytes(std::string_view bytes) {
    if (complete_) {
      if (incoming()) {
        Refuse(absl::DataLossError("bytes after the handshake, before our reply"));
      }
      return;
    }
    reader_.Append(bytes);
    absl::StatusOr<std::optional<proto::Handshake>> hs = reader_.Next();
    if (!hs.ok()) {
      Refuse(hs.status());
      return;
    }
    if (!hs->has_value()) {
      return;
    }
    claimed_ = (*hs)->from_node();
    if (!incoming() && !(*hs)->refusal().empty()) {
      Refuse(absl::PermissionDeniedError(
          absl::StrCat("it refused the connection: ", (*hs)->refusal())));
      return;
    }
    const std::optional<NodeId> dialed =
        incoming() ? std::nullopt : std::optional<NodeId>(peer_.node);
    const PeerInfo peer = settings_.transport->Peer(conn_);
    if (absl::Status status = CheckHandshake(**hs, settings_.identity, dialed, peer.certified_node);
        !status.ok()) {
      Refuse(status);
      return;
    }
    if (incoming() && !reader_.rest().empty()) {
      Refuse(absl::DataLossError("bytes after the handshake, before our reply"));
      return;
    }
    complete_ = true;
    peer_handshake_ = std::move(**hs);
    MaybeHandOver();
  }

  // The listener forwarded everything it still had for the connection.
  void HandleListenerDone(EventPtr<EvHandoverEnd> ev) {
    if (ev->sender() != listener_ || gate_.idle()) {
      return;
    }
    for (EventHandlePtr& held : gate_.End()) {
      if (handed_ != 0) {
        Forward(held);  // older than anything the transport sends the proxy; before our fence
        continue;
      }
      HandleConnectionEvent(held);
      if (conn_ == 0 && handed_ == 0) {
        return;  // refused or down: this actor has ended
      }
    }
    MaybeHandOver();
  }

  void HandleTimeout(EventPtr<EvWakeup> /*ev*/) {
    const std::string waited = absl::FormatDuration(settings_.timeout);
    if (incoming()) {
      Refuse(absl::DeadlineExceededError(absl::StrCat("no handshake within ", waited)));
      return;
    }
    TROUPE_LOG(kWarn, kInterconnect)
        << "node " << peer_.node << " did not answer the handshake within " << waited
        << ": dialling again";
    Fail(Kind::kTimeout, absl::DeadlineExceededError(absl::StrCat("no handshake within ", waited)));
  }

  // Refuses the connection (or, outgoing, reports the peer's refusal): counted, logged with the
  // remote address once per change of reason (refusal_log.h). Incoming: answers with the reason
  // and waits for the dialler to close; outgoing: closes and tells the proxy.
  void Refuse(const absl::Status& status, bool down = false) {
    const std::string reason(status.message());
    // Asked again: a transport may learn the address late; a closed connection has none left.
    std::string address = conn_ != 0 ? settings_.transport->Peer(conn_).address : std::string();
    if (address.empty()) {
      address = address_;
    }
    // Named before a connection that is down is forgotten (conn_ 0).
    const std::string from = address.empty() ? absl::StrCat("connection ", conn_) : address;
    if (down) {
      conn_ = 0;  // nothing to close, nobody to answer
    }
    if (incoming()) {
      const std::string claims = claimed_ != 0 ? absl::StrCat(" (node ", claimed_, ")") : "";
      const std::string line =
          absl::StrCat("refused incoming connection from ", from, claims, ": ", reason);
      // Keyed by host and claimed node: a dialler's port changes with every connection.
      if (Report(RefusalLog::Direction::kIncoming, RemoteKey(from), reason)) {
        TROUPE_LOG(kWarn, kInterconnect) << line;
      } else {
        TROUPE_LOG(kDebug, kInterconnect) << line;
      }
      NoteRefusal(from, reason);
      if (conn_ == 0) {
        PassAway();
        return;
      }
      std::string bytes;
      AppendHandshake(MakeRefusal(settings_.identity, reason), &bytes);
      settings_.transport->Write(conn_, std::move(bytes));
      if (status.code() == absl::StatusCode::kDataLoss) {
        PassAway();  // not a Troupe peer: it will not close; the destructor does
        return;
      }
      // A Troupe dialler closes once it has read the refusal; wait for that, briefly.
      Become(&HandshakeActor::StateRefused);
      ScheduleWakeup(std::min(settings_.timeout, kRefusalLinger));
      return;
    }
    const std::string at = address.empty() ? std::string() : absl::StrCat(" at ", address);
    const std::string line = absl::StrCat("node ", peer_.node, at, ": ", reason);
    if (Report(RefusalLog::Direction::kOutgoing, RemoteKey(address), reason)) {
      TROUPE_LOG(kWarn, kInterconnect) << line;
    } else {
      TROUPE_LOG(kDebug, kInterconnect) << line;
    }
    Fail(Kind::kRefused, status);
  }

  // Incoming: tells the channel of the node the dialler claims to be why there is no session
  // (WaitForPeer says it); a node that is no member has no channel and is only logged.
  void NoteRefusal(const std::string& from, const std::string& reason) {
    PeerChannel* channel = claimed_ != 0 && peers_ != nullptr ? peers_->Find(claimed_) : nullptr;
    if (channel != nullptr) {
      channel->NoteFailure(absl::StrCat(
          "node ", claimed_, " dialled this node from ", from, " and was refused: ", reason, " at ",
          absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", Now(), absl::UTCTimeZone())));
    }
  }

  bool Report(RefusalLog::Direction direction, std::string_view remote, std::string_view reason) {
    return settings_.refusals == nullptr || settings_.refusals->Report(direction, remote, reason);
  }

  // "host:port" or "[v6]:port" → the host part.
  static std::string_view HostOf(std::string_view address) {
    const size_t colon = address.rfind(':');
    const size_t bracket = address.rfind(']');
    if (colon == std::string_view::npos || (bracket != std::string_view::npos && bracket > colon)) {
      return address;
    }
    return address.substr(0, colon);
  }

  // The key of the refusal memory for this connection's remote end.
  std::string RemoteKey(std::string_view address) const {
    return incoming() ? absl::StrCat(std::string(HostOf(address)),
                                     claimed_ != 0 ? absl::StrCat(" (node ", claimed_, ")") : "")
                      : absl::StrCat("node ", peer_.node);
  }

  // Incoming, refused: the answer is on its way; the dialler closes, or the timeout does.
  TROUPE_STATE(StateRefused) {
    switch (ev->type()) {
      case EvConnectionDown::kEventType:
      case EvWakeup::kEventType:
        if (const auto* down = ev->Get<EvConnectionDown>();
            down != nullptr && down->connection == conn_) {
          conn_ = 0;  // nothing to close
        }
        if (conn_ == 0 || ev->type() == EvWakeup::kEventType) {
          PassAway();
        }
        break;
      default:
        break;  // the peer's further bytes, the listener's hand-over: moot now
    }
  }

  // Outgoing: closes the connection and tells the proxy.
  void Fail(Kind kind, absl::Status reason) {
    if (conn_ != 0) {
      settings_.transport->Close(conn_);
      conn_ = 0;
    }
    Send(proxy_, std::make_unique<EvHandshakeFailed>(kind, std::move(reason)));
    PassAway();
  }

  // -- handing the connection over ----------------------------------------------------------------

  // Hands the checked connection to its proxy once nothing the listener forwards can still come.
  void MaybeHandOver() {
    if (!complete_ || !gate_.idle() || handed_ != 0) {
      return;
    }
    ActorId proxy = proxy_;
    if (incoming()) {
      PeerChannel* channel = peers_->GetOrCreate(peer_handshake_.from_node());
      if (channel == nullptr) {
        Refuse(absl::UnavailableError("the interconnect is shutting down"));
        return;
      }
      proxy = channel->proxy;
    }
    // handover.h: what the proxy needs first (ahead of anything the transport sends it), then the
    // new owner, then our fence behind whatever the transport already sent us.
    if (settings_.refusals != nullptr) {
      settings_.refusals->Clear(RemoteKey(address_));
    }
    const ConnectionId connection = std::exchange(conn_, 0);
    Send(proxy, std::make_unique<EvHandshakeDone>(connection, std::move(peer_handshake_),
                                                  std::string(reader_.rest()), incoming()));
    settings_.transport->SetOwner(connection, proxy);
    handed_ = connection;
    proxy_ = proxy;
    Become(&HandshakeActor::StateHandedOver);
    Send(SelfId(), std::make_unique<EvHandoverEnd>(connection));
  }

  TROUPE_STATE(StateHandedOver) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvHandoverEnd, HandleFence);
      case EvBytesReceived::kEventType:
      case EvConnectionDown::kEventType:
        Forward(ev);
        break;
      default:
        break;  // the timeout; anything else is moot now
    }
  }

  // Re-sends the connection's event to the proxy, from this actor (so its gate lets it through).
  void Forward(EventHandlePtr& ev) {
    ConnectionId connection = 0;
    if (std::unique_ptr<EventBase> copy = TakeConnectionEvent(*ev, &connection);
        copy != nullptr && connection == handed_) {
      Send(proxy_, std::move(copy));
    }
  }

  void HandleFence(EventPtr<EvHandoverEnd> ev) {
    if (ev->sender() == SelfId()) {
      Send(proxy_, std::make_unique<EvHandoverEnd>(handed_));
      PassAway();
    }
  }

  HandshakeSettings settings_;
  // Outgoing: whom we dial, for which proxy, with what. Incoming: where proxies come from.
  NodeEndpoint peer_;
  ActorId proxy_;
  proto::Handshake hello_;
  std::shared_ptr<PeerTable> peers_;
  // Incoming: the listener handing the connection to us.
  ActorId listener_;
  HandoverGate gate_;

  ConnectionId conn_ = 0;
  bool up_ = false;
  HandshakeReader reader_;
  bool complete_ = false;
  // The remote end's address, as the transport reported it when the connection came up.
  std::string address_;
  // The node the peer's handshake claims (0 before it is read).
  NodeId claimed_ = 0;
  proto::Handshake peer_handshake_;
  ConnectionId handed_ = 0;
};

}  // namespace

std::unique_ptr<Actor> MakeOutgoingHandshake(HandshakeSettings settings, NodeEndpoint peer,
                                             const ActorId& proxy, proto::Handshake hello) {
  return std::make_unique<HandshakeActor>(std::move(settings), std::move(peer), proxy,
                                          std::move(hello));
}

std::unique_ptr<Actor> MakeIncomingHandshake(HandshakeSettings settings, ConnectionId connection,
                                             std::string remote, const ActorId& listener,
                                             std::shared_ptr<PeerTable> peers) {
  return std::make_unique<HandshakeActor>(std::move(settings), connection, std::move(remote),
                                          listener, std::move(peers));
}

}  // namespace troupe::interconnect::internal
