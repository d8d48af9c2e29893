// SPDX-License-Identifier: Apache-2.0
#include "interconnect/interconnect.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/session_events.h"
#include "actors/sync.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/internal/stream.h"
#include "interconnect/internal/wire.h"
#include "interconnect/tcp_transport.h"

namespace troupe::interconnect {

namespace {

enum ProxyEventType : EventType {
  // The router queued events for the proxy.
  kEvKick = EventSpaceBegin(kInterconnectEventSpace) + 0x200,
  // The listener hands an incoming connection, its handshake checked, to the peer's proxy.
  kEvIncoming,
  kEvProxyEnd,
};
static_assert(InEventSpace(kEvProxyEnd - 1, kInterconnectEventSpace));

struct EvKick final : EventLocal<EvKick, kEvKick> {};

struct EvIncoming final : EventLocal<EvIncoming, kEvIncoming> {
  EvIncoming(ConnectionId id, proto::Handshake hs) : connection(id), handshake(std::move(hs)) {}
  ConnectionId connection;
  proto::Handshake handshake;
};

// Counters of one proxy, written by the proxy, read by Interconnect::Counters.
struct ProxyStats {
  std::atomic<bool> up{false};
  std::atomic<bool> connected{false};
  std::atomic<uint64_t> sessions{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> events_sent{0};
  std::atomic<uint64_t> events_received{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> frames_resent{0};
  std::atomic<uint64_t> duplicates_dropped{0};
  std::atomic<uint64_t> queued_events{0};
  std::atomic<uint64_t> unacked_bytes{0};
  std::atomic<uint64_t> backpressure_stalls{0};
  std::atomic<uint64_t> protocol_errors{0};
};

void Bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.fetch_add(by, std::memory_order_relaxed);
}

}  // namespace

// What the router (on senders' threads) and one peer's proxy share.
struct PeerChannel {
  NodeId node = 0;
  ActorId proxy;
  troupe::Mutex mu;
  // Serialized events waiting for the proxy, in the order they were routed.
  std::vector<EventHandlePtr> queue ABSL_GUARDED_BY(mu);
  // An EvKick is on its way to the proxy; the events routed meanwhile ride on it.
  bool kicked ABSL_GUARDED_BY(mu) = false;
  ProxyStats stats;

  std::vector<EventHandlePtr> Take() {
    troupe::MutexLock lock(&mu);
    kicked = false;
    return std::exchange(queue, {});
  }
};

// The node's remote router: hands each event to its node's proxy.
class Router final : public RemoteRouter {
 public:
  Router(ActorSystem* system, absl::flat_hash_map<NodeId, std::shared_ptr<PeerChannel>> peers,
         size_t max_event_size)
      : system_(system), peers_(std::move(peers)), max_event_size_(max_event_size) {}

  void Route(EventHandlePtr ev) override {
    // acquire: pairs with the release in Close; a router seen closed is drained or draining.
    if (closed_.load(std::memory_order_acquire)) {
      ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kShutdown);
      return;
    }
    auto peer = peers_.find(ev->recipient().node_id());
    if (peer == peers_.end()) {
      ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kNoRoute);
      return;
    }
    if (ev->HasEvent()) {
      if (absl::Status status = ev->Serialize(); !status.ok()) {
        TROUPE_LOG(kDebug, kInterconnect) << ev->ToString() << " cannot cross nodes: " << status;
        ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kNotSerializable);
        return;
      }
    }
    if (ev->bytes().size() > max_event_size_) {
      ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kTooLarge);
      return;
    }
    PeerChannel& channel = *peer->second;
    bool kick = false;
    {
      troupe::MutexLock lock(&channel.mu);
      channel.queue.push_back(std::move(ev));
      kick = !std::exchange(channel.kicked, true);
    }
    if (kick) {
      system_->Send(
          std::make_unique<EventHandle>(channel.proxy, ActorId(), std::make_unique<EvKick>()));
    }
  }

  // Refuses every later event and reports those still queued as kShutdown.
  void Close() {
    closed_.store(true, std::memory_order_release);
    for (auto& [node, channel] : peers_) {
      for (EventHandlePtr& ev : channel->Take()) {
        ReportUndelivered(*system_, std::move(ev), UndeliveredReason::kShutdown);
      }
    }
  }

  const absl::flat_hash_map<NodeId, std::shared_ptr<PeerChannel>>& peers() const { return peers_; }

 private:
  ActorSystem* const system_;
  const absl::flat_hash_map<NodeId, std::shared_ptr<PeerChannel>> peers_;
  const size_t max_event_size_;
  std::atomic<bool> closed_{false};
};

namespace {

struct SessionSettings {
  LocalIdentity identity;
  NodeId peer = 0;
  std::string host;
  uint16_t port = 0;
  // This side dials (the lower node id of the pair); the other accepts.
  bool dials = false;
  absl::Duration heartbeat;
  absl::Duration dead_timeout;
  StreamLimits limits;
};

// One peer's proxy: owns the session with it (see interconnect.h for the behaviour).
class Proxy final : public Actor {
 public:
  Proxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel,
        std::shared_ptr<Transport> transport)
      : Actor(&Proxy::StateWork),
        settings_(std::move(settings)),
        channel_(std::move(channel)),
        transport_(std::move(transport)),
        out_(std::in_place, settings_.limits),
        decoder_(
            static_cast<uint32_t>(std::min<size_t>(settings_.limits.MaxPayload(), UINT32_MAX))) {}

  ~Proxy() override {
    if (conn_ != 0) {
      transport_->Close(conn_);
    }
  }
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;
  Proxy(Proxy&&) = delete;
  Proxy& operator=(Proxy&&) = delete;

 private:
  enum class Link : uint8_t {
    kNone,
    // Connect called, waiting for EvConnectionUp.
    kDialing,
    // Our handshake sent on a dialled connection, waiting for the reply.
    kHandshake,
    // Frames flow.
    kUp,
  };

  // EvWakeup tags: the periodic tick, and a redial after a refused connect.
  static constexpr uint64_t kTick = 0;
  static constexpr uint64_t kRedial = 1;
  static constexpr absl::Duration kFirstRedialDelay = absl::Milliseconds(20);

  void Bootstrap() override {
    last_heard_ = Now();
    waiting_since_ = Now();
    ScheduleWakeup(settings_.heartbeat, kTick);
    Dial();
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvKick, HandleKick);
      TROUPE_HFUNC(EvIncoming, HandleIncoming);
      TROUPE_HFUNC(EvConnectionUp, HandleConnectionUp);
      TROUPE_HFUNC(EvBytesReceived, HandleBytes);
      TROUPE_HFUNC(EvConnectionDown, HandleConnectionDown);
      TROUPE_HFUNC(EvWakeup, HandleTick);
      default:
        Unhandled(ev);
    }
  }

  // -- events from the router --------------------------------------------------------------------

  void HandleKick(EventPtr<EvKick> /*ev*/) {
    if (!session_up() && !HasPendingWork()) {
      waiting_since_ = Now();  // the wait for a session starts with its first event
    }
    for (EventHandlePtr& ev : channel_->Take()) {
      if (ev->HasFlag(kSubscribeOnSession) && !ev->sender().IsEmpty() &&
          subscribers_.insert(ev->sender()).second && session_up()) {
        Send(ev->sender(), std::make_unique<EvNodeConnected>(settings_.peer));
      }
      if (absl::Status status = out_->Enqueue(ev); !status.ok()) {
        ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kTooLarge);
      }
    }
    Flush();
  }

  // -- connections -------------------------------------------------------------------------------

  void Dial() {
    if (!settings_.dials || link_ != Link::kNone) {
      return;
    }
    link_ = Link::kDialing;
    conn_ = transport_->Connect(settings_.host, settings_.port, SelfId());
  }

  void HandleConnectionUp(EventPtr<EvConnectionUp> ev) {
    if (ev.Get()->connection != conn_ || link_ != Link::kDialing) {
      transport_->Close(ev.Get()->connection);  // a stale dial
      return;
    }
    // Not a sign of life of the peer (a relay or a stale listener may accept): only its bytes are.
    link_ = Link::kHandshake;
    handshake_since_ = Now();
    reader_ = HandshakeReader();
    std::string bytes;
    AppendHandshake(MakeHandshake(peer_incarnation_), &bytes);
    Write(std::move(bytes));
  }

  // An accepted connection whose handshake the listener checked.
  void HandleIncoming(EventPtr<EvIncoming> ev) {
    const ConnectionId connection = ev.Get()->connection;
    if (down_unowned_.erase(connection) > 0) {
      return;  // it went down before it reached us
    }
    if (conn_ != 0) {
      TROUPE_LOG(kInfo, kInterconnect)
          << "node " << settings_.peer << " connected again: the new connection replaces the old";
      DropConnection();
    }
    conn_ = connection;
    const proto::Handshake& hs = ev.Get()->handshake;
    const bool resume = StartOrResume(hs);
    std::string bytes;
    AppendHandshake(MakeHandshake(resume ? hs.incarnation() : 0), &bytes);
    Write(std::move(bytes));
    LinkUp(resume ? hs.received() : 0);
  }

  void HandleBytes(EventPtr<EvBytesReceived> ev) {
    if (ev.Get()->connection != conn_) {
      return;  // a connection we left
    }
    Bump(channel_->stats.bytes_read, ev.Get()->bytes.size());
    last_heard_ = Now();
    if (link_ == Link::kHandshake) {
      reader_.Append(ev.Get()->bytes);
      absl::StatusOr<std::optional<proto::Handshake>> hs = reader_.Next();
      if (!hs.ok()) {
        ProtocolError(hs.status());
        return;
      }
      if (!hs->has_value()) {
        return;
      }
      if (absl::Status status = CheckHandshake(**hs, settings_.identity, settings_.peer);
          !status.ok()) {
        ProtocolError(status);
        return;
      }
      const bool resume = StartOrResume(**hs);
      decoder_.Append(reader_.rest());
      LinkUp(resume ? (*hs)->received() : 0);
      if (link_ == Link::kUp) {
        ProcessFrames();
      }
      return;
    }
    if (link_ == Link::kUp) {
      decoder_.Append(ev.Get()->bytes);
      ProcessFrames();
    }
  }

  void HandleConnectionDown(EventPtr<EvConnectionDown> ev) {
    if (ev.Get()->connection != conn_) {
      if (down_unowned_.size() > 64) {
        down_unowned_.clear();
      }
      down_unowned_.insert(ev.Get()->connection);
      return;
    }
    const bool was_up = link_ == Link::kUp;
    const bool was_dialing = link_ == Link::kDialing;
    if (was_up) {
      TROUPE_LOG(kInfo, kInterconnect)
          << "connection to node " << settings_.peer << " down: " << ev.Get()->reason.message();
    }
    conn_ = 0;
    ResetLink();
    if (was_up) {
      Dial();  // at once: a cut connection usually comes back
    } else if (was_dialing && !redial_pending_) {
      // Refused (the peer is not listening yet, or restarting): try again soon, backing off.
      redial_pending_ = true;
      ScheduleWakeup(redial_delay_, kRedial);
      redial_delay_ = std::min(redial_delay_ * 2, settings_.heartbeat);
    }
  }

  // -- the session --------------------------------------------------------------------------------

  bool session_up() const { return peer_incarnation_ != 0; }

  // Events or subscribers wait for (or ride on) a session.
  bool HasPendingWork() const {
    return out_->queued_events() > 0 || out_->unacked_frames() > 0 || !subscribers_.empty();
  }

  // A peer that accepted our connection answers the handshake at once; one that does not (a
  // black hole, a stuck relay) is redialled after two heartbeats rather than the whole timeout.
  absl::Duration HandshakeTimeout() const {
    return std::min(2 * settings_.heartbeat, settings_.dead_timeout);
  }

  proto::Handshake MakeHandshake(uint64_t peer_incarnation) const {
    proto::Handshake hs;
    hs.set_protocol_version(kProtocolVersion);
    hs.set_cluster_id(settings_.identity.cluster_id);
    hs.set_from_node(settings_.identity.node);
    hs.set_to_node(settings_.peer);
    hs.set_incarnation(settings_.identity.incarnation);
    hs.set_peer_incarnation(peer_incarnation);
    hs.set_received(in_.received());
    return hs;
  }

  // Decides from the peer's handshake whether this connection resumes the living session (both
  // sides name each other's incarnation) or starts a new one, ending the old. Returns true to
  // resume.
  bool StartOrResume(const proto::Handshake& hs) {
    const bool resume = session_up() && hs.incarnation() == peer_incarnation_ &&
                        hs.peer_incarnation() == settings_.identity.incarnation;
    if (resume) {
      return true;
    }
    if (session_up()) {
      EndSession(hs.incarnation() != peer_incarnation_
                     ? "the peer restarted"
                     : "the peer lost the session (it timed out on its side)");
    }
    peer_incarnation_ = hs.incarnation();
    in_ = InboundStream();
    ack_sent_ = 0;
    Bump(channel_->stats.sessions);
    channel_->stats.up.store(true, std::memory_order_relaxed);
    TROUPE_LOG(kInfo, kInterconnect) << "session with node " << settings_.peer
                                     << " up (peer incarnation " << peer_incarnation_ << ")";
    for (const ActorId& subscriber : subscribers_) {
      Send(subscriber, std::make_unique<EvNodeConnected>(settings_.peer));
    }
    return false;
  }

  // The connection carries the session from now on: resend what the peer has not received.
  void LinkUp(uint64_t peer_received) {
    link_ = Link::kUp;
    redial_delay_ = kFirstRedialDelay;
    last_heard_ = Now();
    Bump(channel_->stats.connections);
    channel_->stats.connected.store(true, std::memory_order_relaxed);
    std::string bytes;
    if (absl::Status status = out_->Resend(peer_received, &bytes); !status.ok()) {
      EndSession(absl::StrCat("the peer's resume point is impossible: ", status.message()));
      DropConnection();
      return;
    }
    Bump(channel_->stats.frames_resent, out_->unacked_frames());
    if (!bytes.empty()) {
      Write(std::move(bytes));
    }
    Flush();
  }

  void ProcessFrames() {
    Frame frame;
    const NodeId self = settings_.identity.node;
    while (true) {
      absl::StatusOr<bool> got = decoder_.Next(&frame);
      if (!got.ok()) {
        ProtocolError(got.status());
        return;
      }
      if (!*got) {
        break;
      }
      if (frame.kind == FrameKind::kData) {
        absl::StatusOr<InboundStream::Verdict> verdict = in_.Accept(frame.sequence);
        if (!verdict.ok()) {
          ProtocolError(verdict.status());
          return;
        }
        if (*verdict == InboundStream::Verdict::kDuplicate) {
          Bump(channel_->stats.duplicates_dropped);
        } else {
          absl::Status decoded = DecodeEvents(frame, [&](EventHandlePtr ev) {
            if (ev->recipient().node_id() != self) {
              TROUPE_LOG(kWarn, kInterconnect)
                  << "node " << settings_.peer << " sent " << ev->ToString()
                  << ", not addressed to this node (" << self << "): dropped";
              return;
            }
            Bump(channel_->stats.events_received);
            Send(std::move(ev));
          });
          if (!decoded.ok()) {
            ProtocolError(decoded);
            return;
          }
        }
      }
      if (absl::Status status = out_->Acknowledge(frame.ack); !status.ok()) {
        ProtocolError(status);
        return;
      }
    }
    Flush();
  }

  // Packs queued events into frames (as far as backpressure allows) and writes them, with an
  // acknowledgement of what we received.
  void Flush() {
    channel_->stats.queued_events.store(out_->queued_events(), std::memory_order_relaxed);
    if (link_ != Link::kUp) {
      return;
    }
    std::string bytes;
    const bool was_blocked = out_->blocked();
    const size_t queued = out_->queued_events();
    out_->Pack(in_.received(), &bytes);
    Bump(channel_->stats.events_sent, queued - out_->queued_events());
    if (!was_blocked && out_->blocked()) {
      Bump(channel_->stats.backpressure_stalls);
    }
    if (bytes.empty() && in_.received() > ack_sent_) {
      AppendControlFrame(in_.received(), &bytes);
    }
    if (!bytes.empty()) {
      ack_sent_ = in_.received();
      Write(std::move(bytes));
    }
    channel_->stats.queued_events.store(out_->queued_events(), std::memory_order_relaxed);
    channel_->stats.unacked_bytes.store(out_->unacked_bytes(), std::memory_order_relaxed);
  }

  void Write(std::string bytes) {
    Bump(channel_->stats.bytes_written, bytes.size());
    last_written_ = Now();
    transport_->Write(conn_, std::move(bytes));
  }

  // Heartbeats, dead-peer detection, redialling.
  void HandleTick(EventPtr<EvWakeup> ev) {
    if (ev.Get()->tag == kRedial) {
      redial_pending_ = false;
      Dial();
      return;
    }
    const absl::Time now = Now();
    const bool silent = now - last_heard_ > settings_.dead_timeout;
    if (silent && link_ == Link::kUp) {
      TROUPE_LOG(kWarn, kInterconnect) << "node " << settings_.peer << " silent for "
                                       << (now - last_heard_) << ": closing the connection";
      DropConnection();
    }
    if (link_ == Link::kHandshake && now - handshake_since_ > HandshakeTimeout()) {
      TROUPE_LOG(kWarn, kInterconnect)
          << "node " << settings_.peer << " did not answer the handshake within "
          << HandshakeTimeout() << ": dialling again";
      DropConnection();
    }
    const bool pending = HasPendingWork();
    if (session_up()) {
      if (silent) {
        EndSession(absl::StrCat("no sign of life for ", absl::FormatDuration(now - last_heard_)));
      }
    } else if (!pending) {
      waiting_since_ = now;
    } else if (now - waiting_since_ > settings_.dead_timeout) {
      EndSession(
          absl::StrCat("could not reach it for ", absl::FormatDuration(now - waiting_since_)));
    }
    if (link_ == Link::kUp && now - last_written_ >= settings_.heartbeat) {
      std::string bytes;
      AppendControlFrame(in_.received(), &bytes);
      ack_sent_ = in_.received();
      Write(std::move(bytes));
    }
    Dial();
    ScheduleWakeup(settings_.heartbeat, kTick);
  }

  // Ends the session: reports every event it holds and tells the subscribers.
  void EndSession(std::string_view reason) {
    size_t reported = 0;
    out_->Fail([&](EventHandlePtr ev, bool unsure) {
      ++reported;
      ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kDisconnected, unsure);
    });
    out_.emplace(settings_.limits);
    in_ = InboundStream();
    ack_sent_ = 0;
    TROUPE_LOG(kWarn, kInterconnect)
        << "session with node " << settings_.peer << " ended: " << reason << " (" << reported
        << " events not known delivered)";
    for (const ActorId& subscriber : subscribers_) {
      Send(subscriber, std::make_unique<EvNodeDisconnected>(settings_.peer));
    }
    subscribers_.clear();
    peer_incarnation_ = 0;
    waiting_since_ = Now();
    channel_->stats.up.store(false, std::memory_order_relaxed);
    channel_->stats.queued_events.store(0, std::memory_order_relaxed);
    channel_->stats.unacked_bytes.store(0, std::memory_order_relaxed);
  }

  // Closes the connection for a fault of the peer's bytes; the session lives on (a redial resends
  // what was lost).
  void ProtocolError(const absl::Status& status) {
    Bump(channel_->stats.protocol_errors);
    TROUPE_LOG(kWarn, kInterconnect)
        << "closing the connection to node " << settings_.peer << ": " << status.message();
    DropConnection();
  }

  void DropConnection() {
    if (conn_ != 0) {
      transport_->Close(conn_);
      conn_ = 0;
    }
    ResetLink();
  }

  void ResetLink() {
    link_ = Link::kNone;
    decoder_.Reset();
    reader_ = HandshakeReader();
    channel_->stats.connected.store(false, std::memory_order_relaxed);
  }

  const SessionSettings settings_;
  const std::shared_ptr<PeerChannel> channel_;
  const std::shared_ptr<Transport> transport_;

  // The session: streams, the peer's incarnation (0: none), subscribers.
  std::optional<OutboundStream> out_;
  InboundStream in_;
  uint64_t ack_sent_ = 0;
  uint64_t peer_incarnation_ = 0;
  absl::flat_hash_set<ActorId> subscribers_;

  // The connection carrying it.
  Link link_ = Link::kNone;
  ConnectionId conn_ = 0;
  HandshakeReader reader_;
  FrameDecoder decoder_;
  // Connections reported down before the listener handed them over.
  absl::flat_hash_set<ConnectionId> down_unowned_;
  // Backoff of redials after refused connects (reset when a connection carries the session).
  absl::Duration redial_delay_ = kFirstRedialDelay;
  bool redial_pending_ = false;

  absl::Time last_heard_;
  absl::Time last_written_;
  // When our handshake went out on the connection being dialled.
  absl::Time handshake_since_;
  // When a session-less proxy started holding work (events, subscribers).
  absl::Time waiting_since_;
};

// Takes incoming connections until their handshake is checked, then hands each to its proxy.
class Listener final : public Actor {
 public:
  Listener(LocalIdentity identity, absl::flat_hash_map<NodeId, ActorId> proxies,
           std::shared_ptr<Transport> transport, absl::Duration timeout)
      : Actor(&Listener::StateWork),
        identity_(std::move(identity)),
        proxies_(std::move(proxies)),
        transport_(std::move(transport)),
        timeout_(timeout) {}

 private:
  struct Pending {
    HandshakeReader reader;
    absl::Time since;
  };

  void Bootstrap() override { ScheduleWakeup(timeout_); }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvConnectionUp, HandleConnectionUp);
      TROUPE_HFUNC(EvBytesReceived, HandleBytes);
      TROUPE_HFUNC(EvConnectionDown, HandleConnectionDown);
      TROUPE_HFUNC(EvWakeup, HandleTick);
      default:
        Unhandled(ev);
    }
  }

  void HandleConnectionUp(EventPtr<EvConnectionUp> ev) {
    pending_[ev.Get()->connection].since = Now();
  }

  void HandleBytes(EventPtr<EvBytesReceived> ev) {
    auto it = pending_.find(ev.Get()->connection);
    if (it == pending_.end()) {
      return;
    }
    HandshakeReader& reader = it->second.reader;
    reader.Append(ev.Get()->bytes);
    absl::StatusOr<std::optional<proto::Handshake>> hs = reader.Next();
    if (!hs.ok()) {
      Refuse(ev.Get()->connection, hs.status());
      return;
    }
    if (!hs->has_value()) {
      return;
    }
    if (absl::Status status = CheckHandshake(**hs, identity_, std::nullopt); !status.ok()) {
      Refuse(ev.Get()->connection, status);
      return;
    }
    if (!reader.rest().empty()) {
      Refuse(ev.Get()->connection,
             absl::DataLossError("bytes after the handshake, before our reply"));
      return;
    }
    const ActorId proxy = proxies_.at((*hs)->from_node());
    transport_->SetOwner(ev.Get()->connection, proxy);
    Send(proxy, std::make_unique<EvIncoming>(ev.Get()->connection, std::move(**hs)));
    pending_.erase(it);
  }

  void HandleConnectionDown(EventPtr<EvConnectionDown> ev) { pending_.erase(ev.Get()->connection); }

  void HandleTick(EventPtr<EvWakeup> /*ev*/) {
    const absl::Time now = Now();
    std::vector<ConnectionId> late;
    for (const auto& [connection, pending] : pending_) {
      if (now - pending.since > timeout_) {
        late.push_back(connection);
      }
    }
    for (const ConnectionId connection : late) {
      Refuse(connection, absl::DeadlineExceededError(
                             absl::StrCat("no handshake within ", absl::FormatDuration(timeout_))));
    }
    ScheduleWakeup(timeout_);
  }

  void Refuse(ConnectionId connection, const absl::Status& reason) {
    TROUPE_LOG(kWarn, kInterconnect)
        << "refused incoming connection " << connection << ": " << reason.message();
    transport_->Close(connection);
    pending_.erase(connection);
  }

  const LocalIdentity identity_;
  const absl::flat_hash_map<NodeId, ActorId> proxies_;
  const std::shared_ptr<Transport> transport_;
  const absl::Duration timeout_;
  absl::flat_hash_map<ConnectionId, Pending> pending_;
};

uint64_t RandomIncarnation() {
  std::random_device device;
  std::mt19937_64 bits((static_cast<uint64_t>(device()) << 32) ^ device());
  uint64_t value = 0;
  while (value == 0) {
    value = bits();
  }
  return value;
}

}  // namespace

ActorId ProxyServiceId(NodeId peer) { return ServiceId(absl::StrCat("ic/", peer)); }

absl::StatusOr<std::unique_ptr<Interconnect>> Interconnect::Start(ActorSystem* system,
                                                                  InterconnectOptions options) {
  const proto::InterconnectConfig& config = system->config().interconnect();
  const NodeId self = system->node_id();
  const proto::NodeAddress* own = nullptr;
  LocalIdentity identity;
  identity.cluster_id = config.cluster_id();
  identity.node = self;
  identity.incarnation = options.incarnation.value_or(RandomIncarnation());
  if (identity.incarnation == 0) {
    return absl::InvalidArgumentError("incarnation: must not be 0");
  }
  for (const proto::NodeAddress& node : config.nodes()) {
    identity.known_nodes.insert(node.node_id());
    if (node.node_id() == self) {
      own = &node;
    }
  }
  if (own == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("interconnect.nodes: no entry for this node (node_id ", self, ")"));
  }

  std::string pool_name = options.pool;
  if (pool_name.empty()) {
    pool_name = system->PoolIndex("IC").ok() ? "IC" : "";
  }
  RegisterOptions register_options;
  if (!pool_name.empty()) {
    absl::StatusOr<uint32_t> pool = system->PoolIndex(pool_name);
    if (!pool.ok()) {
      return pool.status();
    }
    register_options.pool = *pool;
  }

  auto ic = std::unique_ptr<Interconnect>(new Interconnect());
  ic->system_ = system;
  ic->incarnation_ = identity.incarnation;
  ic->transport_ = options.transport != nullptr
                       ? std::move(options.transport)
                       : std::shared_ptr<Transport>(MakeTcpTransport(system));

  StreamLimits limits;
  limits.max_unacked_bytes = config.max_unacked_bytes();
  limits.max_event_size = config.max_event_size();
  const absl::Duration heartbeat = absl::Milliseconds(config.heartbeat_interval_ms());
  const absl::Duration dead_timeout = absl::Milliseconds(config.dead_peer_timeout_ms());

  absl::flat_hash_map<NodeId, std::shared_ptr<PeerChannel>> channels;
  absl::flat_hash_map<NodeId, ActorId> proxies;
  for (const proto::NodeAddress& node : config.nodes()) {
    if (node.node_id() == self) {
      continue;
    }
    auto channel = std::make_shared<PeerChannel>();
    channel->node = node.node_id();
    SessionSettings settings{.identity = identity,
                             .peer = node.node_id(),
                             .host = node.host(),
                             .port = static_cast<uint16_t>(node.port()),
                             .dials = self < node.node_id(),
                             .heartbeat = heartbeat,
                             .dead_timeout = dead_timeout,
                             .limits = limits};
    channel->proxy = system->Register(
        std::make_unique<Proxy>(std::move(settings), channel, ic->transport_), register_options);
    if (channel->proxy.IsEmpty()) {
      return absl::ResourceExhaustedError("could not register the interconnect's proxies");
    }
    if (absl::Status s = system->RegisterService(ProxyServiceId(node.node_id()), channel->proxy);
        !s.ok()) {
      return s;
    }
    ic->actors_.push_back(channel->proxy);
    ic->peers_.push_back(node.node_id());
    proxies.emplace(node.node_id(), channel->proxy);
    channels.emplace(node.node_id(), std::move(channel));
  }
  const ActorId listener = system->Register(
      std::make_unique<Listener>(identity, std::move(proxies), ic->transport_, dead_timeout),
      register_options);
  ic->actors_.push_back(listener);
  absl::StatusOr<uint16_t> port =
      ic->transport_->Listen(own->host(), static_cast<uint16_t>(own->port()), listener);
  if (!port.ok()) {
    return absl::UnavailableError(absl::StrCat("interconnect: cannot listen on ", own->host(), ":",
                                               own->port(), ": ", port.status().message()));
  }
  ic->port_ = *port;
  ic->router_ = std::make_shared<Router>(system, std::move(channels), limits.max_event_size);
  SetRemoteRouter(*system, ic->router_);
  TROUPE_LOG(kInfo, kInterconnect)
      << "node " << self << " listening on " << own->host() << ":" << ic->port_ << " (cluster \""
      << identity.cluster_id << "\", " << ic->router_->peers().size() << " peers)";
  return ic;
}

Interconnect::~Interconnect() {
  if (router_ != nullptr) {
    router_->Close();
  }
  if (transport_ != nullptr) {
    transport_->Shutdown();
  }
  for (const NodeId peer : peers_) {
    (void)system_->RegisterService(ProxyServiceId(peer), ActorId());
  }
  for (const ActorId& actor : actors_) {
    system_->Send(actor, std::make_unique<EvPoison>());
  }
}

std::vector<SessionCounters> Interconnect::Counters() const {
  std::vector<SessionCounters> all;
  if (router_ == nullptr) {
    return all;
  }
  for (const auto& [node, channel] : router_->peers()) {
    const ProxyStats& stats = channel->stats;
    auto load = [](const std::atomic<uint64_t>& value) {
      return value.load(std::memory_order_relaxed);
    };
    all.push_back(SessionCounters{
        .peer = node,
        .up = stats.up.load(std::memory_order_relaxed),
        .connected = stats.connected.load(std::memory_order_relaxed),
        .sessions = load(stats.sessions),
        .connections = load(stats.connections),
        .events_sent = load(stats.events_sent),
        .events_received = load(stats.events_received),
        .bytes_written = load(stats.bytes_written),
        .bytes_read = load(stats.bytes_read),
        .frames_resent = load(stats.frames_resent),
        .duplicates_dropped = load(stats.duplicates_dropped),
        .queued_events = load(stats.queued_events),
        .unacked_bytes = load(stats.unacked_bytes),
        .backpressure_stalls = load(stats.backpressure_stalls),
        .protocol_errors = load(stats.protocol_errors),
    });
  }
  std::sort(all.begin(), all.end(),
            [](const SessionCounters& a, const SessionCounters& b) { return a.peer < b.peer; });
  return all;
}

}  // namespace troupe::interconnect
