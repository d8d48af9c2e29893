// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/proxy.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/session_events.h"
#include "interconnect/internal/dial_backoff.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/handover.h"
#include "interconnect/internal/session_subscribers.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {
namespace {

using Stats = SessionStats;

class Proxy final : public Actor {
 public:
  Proxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel)
      : Actor(&Proxy::StateWork),
        settings_(std::move(settings)),
        channel_(std::move(channel)),
        stats_(channel_->stats),
        out_(std::in_place, settings_.limits, &stats_.round_trips),
        decoder_(
            static_cast<uint32_t>(std::min<size_t>(settings_.limits.MaxPayload(), UINT32_MAX))),
        records_(settings_.limits.max_event_size),
        backoff_(settings_.heartbeat, settings_.max_redial_delay) {}

  ~Proxy() override {
    if (conn_ != 0) {
      settings_.transport->Close(conn_);
    }
  }
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;
  Proxy(Proxy&&) = delete;
  Proxy& operator=(Proxy&&) = delete;

 private:
  enum class Link : uint8_t { kNone, kDialing, kUp };

  // EvWakeup tags: the periodic tick, and a redial after a refused connect.
  enum WakeupTag : uint64_t { kTick, kRedial };

  void Bootstrap() override {
    last_heard_ = Now();
    waiting_since_ = Now();
    ScheduleWakeup(settings_.heartbeat, kTick);
    Dial();
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvKick, HandleKick);
      TROUPE_HFUNC(EvHandshakeDone, HandleHandshakeDone);
      TROUPE_HFUNC(EvHandshakeFailed, HandleHandshakeFailed);
      TROUPE_HFUNC(EvHandoverEnd, HandleHandoverEnd);
      TROUPE_HFUNC(EvWakeup, HandleTick);
      TROUPE_HFUNC(EvCloseSession, HandleClose);
      TROUPE_HFUNC(EvMembership, HandleMembership);
      case EvSubscribeSession::kEventType:
        Subscribe(ev->sender());
        break;
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

  // -- events from the router --------------------------------------------------------------------

  void HandleKick(EventPtr<EvKick> /*ev*/) {
    if (refusing_.has_value()) {
      channel_->ReportQueued(*system(), *refusing_);
      return;
    }
    NoteWaiting();
    channel_->Drain([this](EventHandlePtr ev) {
      if (ev->HasFlag(kSubscribeOnSession) && !ev->sender().IsEmpty()) {
        Subscribe(ev->sender());
      }
      if (absl::Status status = out_->Enqueue(ev); !status.ok()) {
        channel_->Release(HeldCharge(*ev));
        ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kTooLarge);
      }
    });
    Flush();
  }

  // Without a session, the wait for one starts with the first event or subscriber.
  void NoteWaiting() {
    if (!session_up() && !HasPendingWork()) {
      waiting_since_ = Now();
    }
  }

  // Adds `who` to the subscribers; it hears at once if the session is up (or closed for good).
  void Subscribe(const ActorId& who) {
    if (refusing_.has_value()) {
      Send(who, std::make_unique<EvNodeDisconnected>(settings_.peer));
      return;
    }
    NoteWaiting();
    subscribers_.Add(*system(), who, session_up());
  }

  // Drain: everything held is reported Undelivered{kShutdown} (unsure if sent and not
  // acknowledged), the connection closes, and later events are refused the same way.
  void HandleClose(EventPtr<EvCloseSession> ev) {
    uint64_t reported = 0;
    if (!closed()) {
      refusing_ = UndeliveredReason::kShutdown;
      reported = EndSession("the interconnect is shutting down", /*keep_queued=*/false,
                            UndeliveredReason::kShutdown) +
                 channel_->ReportQueued(*system(), UndeliveredReason::kShutdown);
      DropConnection();
    }
    if (ev.Get()->done) {
      ev.Get()->done(reported);
    }
  }

  // The peer left the table: the session ends; events for it are refused until it is back.
  void HandleMembership(EventPtr<EvMembership> ev) {
    if (!closed()) {
      refusing_ = ev.Get()->member ? std::nullopt : std::optional(UndeliveredReason::kNoRoute);
    }
    if (refusing_ == UndeliveredReason::kNoRoute && (session_up() || HasPendingWork())) {
      EndSession("it left the cluster");
      DropConnection();
    }
    if (refusing_ == UndeliveredReason::kNoRoute && link_ == Link::kDialing) {
      handshake_ = ActorId();  // the dial is given up (its end ignored); the peer's return redials
      link_ = Link::kNone;
    }
    Dial();
  }

  // -- connections -------------------------------------------------------------------------------

  // Starts an outgoing handshake actor when this side dials and no connection is up or coming.
  void Dial() {
    if (refusing_ || !settings_.dials || link_ != Link::kNone || !backoff_.MayDial(Now())) {
      return;
    }
    std::optional<NodeEndpoint> endpoint = settings_.nameservice->Resolve(settings_.peer);
    if (!endpoint.has_value()) {
      TROUPE_LOG(kDebug, kInterconnect)
          << "node " << settings_.peer << " has no address in the nameservice: not dialling";
      return;
    }
    HandshakeSettings handshake{.identity = settings_.identity,
                                .transport = settings_.transport,
                                .timeout = backoff_.HandshakeTimeout(settings_.dead_timeout),
                                .refusals = settings_.refusals};
    handshake_ =
        Register(MakeOutgoingHandshake(std::move(handshake), std::move(*endpoint), SelfId(),
                                       MakeHandshake(settings_, peer_incarnation_, in_.received())),
                 settings_.handshakes);
    if (!handshake_.IsEmpty()) {
      link_ = Link::kDialing;
    }
  }

  // A handshake actor hands over a checked connection (handover.h).
  void HandleHandshakeDone(EventPtr<EvHandshakeDone> ev) {
    const EvHandshakeDone& done = *ev.Get();
    if (refusing_ || (!done.incoming && (link_ != Link::kDialing || ev->sender() != handshake_))) {
      settings_.transport->Close(done.connection);  // a dial we gave up on, or a closed session
      return;
    }
    if (done.incoming && conn_ != 0) {
      TROUPE_LOG(kInfo, kInterconnect)
          << "node " << settings_.peer << " connected again: the new connection replaces the old";
      DropConnection();
    }
    handshake_ = ActorId();
    conn_ = done.connection;
    gate_.Begin(ev->sender());
    const proto::Handshake& hs = done.handshake;
    const bool resume = StartOrResume(hs);
    out_->SetPeerLimits(hs.max_frame_payload(), hs.max_event_size());
    if (done.incoming) {
      std::string bytes;
      AppendHandshake(MakeHandshake(settings_, resume ? hs.incarnation() : 0, in_.received()),
                      &bytes);
      Write(std::move(bytes));
    } else {
      decoder_.Append(done.rest);
    }
    LinkUp(resume ? hs.received() : 0);
    if (!done.incoming && link_ == Link::kUp) {
      ProcessFrames();
    }
  }

  void HandleHandshakeFailed(EventPtr<EvHandshakeFailed> ev) {
    if (link_ != Link::kDialing || ev->sender() != handshake_) {
      return;
    }
    handshake_ = ActorId();
    link_ = Link::kNone;
    switch (ev.Get()->kind) {
      case EvHandshakeFailed::Kind::kUnreachable:
        // Refused (the peer is not listening yet, or restarting): try again soon, backing off.
        channel_->NoteFailure(absl::StrCat("unreachable: ", ev.Get()->reason.message()));
        if (std::optional<absl::Duration> delay = backoff_.Unreachable(); delay.has_value()) {
          ScheduleWakeup(*delay, kRedial);
        }
        break;
      case EvHandshakeFailed::Kind::kTimeout:
        Dial();  // a black hole or a stuck relay: a new connection may fare better
        break;
      case EvHandshakeFailed::Kind::kRefused:
        // The handshake actor logged why (once per change of reason).
        Stats::Bump(stats_.refusals);
        backoff_.NoteFailure(absl::StrCat(ev.Get()->reason.message()));
        channel_->NoteFailure(absl::StrCat("refused: ", backoff_.last_failure()));
        PauseDialling();
        break;
      case EvHandshakeFailed::Kind::kDown:
        break;  // the next tick dials again
    }
  }

  // The handshake actor forwarded everything it still had for the connection.
  void HandleHandoverEnd(EventPtr<EvHandoverEnd> ev) {
    if (ev.Get()->connection != conn_ || gate_.idle()) {
      return;
    }
    for (EventHandlePtr& held : gate_.End()) {
      HandleConnectionEvent(held);
    }
  }

  void HandleConnectionEvent(EventHandlePtr& ev) {
    if (const auto* bytes = ev->Get<EvBytesReceived>(); bytes != nullptr) {
      HandleBytes(*bytes);
    } else if (const auto* down = ev->Get<EvConnectionDown>(); down != nullptr) {
      HandleConnectionDown(*down);
    }
  }

  void HandleBytes(const EvBytesReceived& ev) {
    if (ev.connection != conn_ || link_ != Link::kUp) {
      return;  // a connection we left
    }
    Stats::Bump(stats_.bytes_read, ev.bytes.size());
    decoder_.Append(ev.bytes);
    ProcessFrames();
  }

  void HandleConnectionDown(const EvConnectionDown& ev) {
    if (ev.connection != conn_) {
      return;
    }
    const bool was_up = link_ == Link::kUp;
    if (was_up) {
      TROUPE_LOG(kInfo, kInterconnect)
          << "connection to " << Peer() << " down: " << ev.reason.message();
    }
    conn_ = 0;
    ResetLink();
    if (was_up && LinkEnded(absl::StrCat(ev.reason.message()), /*fault=*/false)) {
      Dial();  // at once: a cut connection usually comes back
    }
  }

  // -- the session --------------------------------------------------------------------------------

  bool session_up() const { return peer_incarnation_ != 0; }
  std::string Peer() const { return NodeAt(settings_.peer, *settings_.transport, conn_); }

  // Events or subscribers wait for (or ride on) a session.
  bool HasPendingWork() const {
    return out_->queued_events() > 0 || out_->unacked_frames() > 0 || !subscribers_.empty();
  }

  // Resumes the living session when both handshakes name each other's incarnation (returns
  // true); otherwise starts a new one, ending the old.
  bool StartOrResume(const proto::Handshake& hs) {
    const bool resume = session_up() && hs.incarnation() == peer_incarnation_ &&
                        hs.peer_incarnation() == settings_.identity.incarnation;
    if (resume) {
      return true;
    }
    if (session_up()) {
      // Events still queued were never sent: they go to the new session, first.
      EndSession(hs.incarnation() != peer_incarnation_
                     ? "the peer restarted"
                     : "the peer lost the session (it timed out on its side)",
                 /*keep_queued=*/true);
    }
    peer_incarnation_ = hs.incarnation();
    last_heard_ = Now();  // a new session starts alive; from now on only frames count
    in_ = InboundStream();
    records_.Reset();
    ack_sent_ = 0;
    Stats::Bump(stats_.sessions);
    channel_->SetSessionUp(true);
    TROUPE_LOG(kInfo, kInterconnect)
        << "session with " << Peer() << " up (peer incarnation " << peer_incarnation_ << ")";
    subscribers_.Connected(*system());
    return false;
  }

  // The connection carries the session from now on: resend what the peer has not received.
  void LinkUp(uint64_t peer_received) {
    link_ = Link::kUp;
    backoff_.LinkUp();
    link_progress_ = false;
    Stats::Bump(stats_.connections);
    stats_.connected.store(true, std::memory_order_relaxed);
    std::string bytes;
    if (absl::Status status = out_->Resend(peer_received, &bytes); !status.ok()) {
      EndSession(absl::StrCat("the peer's resume point is impossible: ", status.message()));
      DropConnection();
      return;
    }
    Stats::Bump(stats_.frames_resent, out_->unacked_frames());
    link_acknowledged_ = out_->acknowledged();
    link_received_ = in_.received();
    const bool resent = !bytes.empty();
    if (resent) {
      Write(std::move(bytes));
    }
    if (!Flush() && !resent) {
      WriteControlFrame();  // at once: the peer's sign of life that this connection works
    }
  }

  void ProcessFrames() {
    Frame frame;
    while (true) {
      absl::StatusOr<bool> got = decoder_.Next(&frame);
      if (!got.ok()) {
        ProtocolError(got.status());
        return;
      }
      if (!*got) {
        break;
      }
      last_heard_ = Now();
      // The acknowledgement first, its charge given back at once: the peer wrote the frame's
      // events after reading what it acknowledges (a sender they answer finds its bytes free).
      absl::Status status = out_->Acknowledge(frame.ack, last_heard_);
      ReleaseHeld();
      if (status.ok() && frame.kind == FrameKind::kData) {
        status = Receive(frame);
      }
      if (!status.ok()) {
        ProtocolError(status);
        return;
      }
    }
    if (out_->acknowledged() != link_acknowledged_ || in_.received() != link_received_) {
      LinkProgressed();
    }
    Flush();
  }

  // Delivers the events of a data frame the inbound stream has not seen; drops a duplicate.
  absl::Status Receive(const Frame& frame) {
    absl::StatusOr<InboundStream::Verdict> verdict = in_.Accept(frame.sequence);
    if (!verdict.ok()) {
      return verdict.status();
    }
    if (*verdict == InboundStream::Verdict::kDuplicate) {
      Stats::Bump(stats_.duplicates_dropped);
      return absl::OkStatus();
    }
    return records_.Decode(frame, [this](EventHandlePtr ev) {
      if (const NodeId self = settings_.identity.node; ev->recipient().node_id() != self) {
        TROUPE_LOG(kWarn, kInterconnect)
            << "node " << settings_.peer << " sent " << ev->ToString()
            << ", not addressed to this node (" << self << "): dropped";
        return;
      }
      Stats::Bump(stats_.events_received);
      Send(std::move(ev));
    });
  }

  // Packs queued events into frames (as far as backpressure allows) and writes them, with an
  // acknowledgement of what we received. Returns whether it wrote anything.
  bool Flush() {
    Stats::Set(stats_.queued_events, out_->queued_events());
    if (link_ != Link::kUp) {
      ReleaseHeld();
      return false;
    }
    std::string bytes;
    const bool was_blocked = out_->blocked();
    const size_t queued = out_->queued_events();
    std::vector<EventHandlePtr> too_large;
    out_->Pack(in_.received(), &bytes, &too_large, Now());
    Stats::Bump(stats_.events_sent, queued - out_->queued_events() - too_large.size());
    for (EventHandlePtr& ev : too_large) {
      TROUPE_LOG(kDebug, kInterconnect)
          << ev->ToString() << " of " << ev->bytes().size() << " bytes is larger than node "
          << settings_.peer << " accepts: undelivered";
      ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kTooLarge);
    }
    if (!was_blocked && out_->blocked()) {
      Stats::Bump(stats_.backpressure_stalls);
    }
    if (bytes.empty() && in_.received() > ack_sent_) {
      AppendControlFrame(in_.received(), &bytes);
    }
    const bool wrote = !bytes.empty();
    if (wrote) {
      ack_sent_ = in_.received();
      Write(std::move(bytes));
    }
    Stats::Set(stats_.queued_events, out_->queued_events());
    Stats::Set(stats_.unacked_bytes, out_->unacked_bytes());
    ReleaseHeld();
    return wrote;
  }

  // Gives the peer's budget back what the stream released.
  void ReleaseHeld() { channel_->Release(out_->TakeReleased()); }

  // An acknowledgement alone: a heartbeat, or a connection's first sign of life.
  void WriteControlFrame() {
    std::string bytes;
    AppendControlFrame(in_.received(), &bytes);
    ack_sent_ = in_.received();
    Write(std::move(bytes));
  }

  void Write(std::string bytes) {
    Stats::Bump(stats_.bytes_written, bytes.size());
    last_written_ = Now();
    settings_.transport->Write(conn_, std::move(bytes));
  }

  // Heartbeats, dead-peer detection, redialling.
  void HandleTick(EventPtr<EvWakeup> ev) {
    if (closed()) {
      return;  // no more ticks: the proxy only refuses from now on
    }
    if (ev.Get()->tag == kRedial) {
      backoff_.RedialDue();
      Dial();
      return;
    }
    const absl::Time now = Now();
    const bool silent = now - last_heard_ > settings_.dead_timeout;
    if (silent && link_ == Link::kUp) {
      TROUPE_LOG(kWarn, kInterconnect)
          << Peer() << " silent for " << (now - last_heard_) << ": closing the connection";
      DropConnection();
      LinkEnded("the peer was silent", /*fault=*/false);
    }
    const bool pending = HasPendingWork();
    if (session_up()) {
      if (silent) {
        EndSession(absl::StrCat("no sign of life for ", absl::FormatDuration(now - last_heard_)));
      }
    } else if (!pending) {
      waiting_since_ = now;
    } else if (now - waiting_since_ > settings_.dead_timeout) {
      EndSession(backoff_.GaveUp(now - waiting_since_));
    }
    if (link_ == Link::kUp && now - last_written_ >= settings_.heartbeat) {
      WriteControlFrame();
    }
    Dial();
    ScheduleWakeup(settings_.heartbeat, kTick);
  }

  // Ends the session: reports every event it holds as `why` (with `keep_queued`, only those sent;
  // queued ones wait for the next session), tells the subscribers; returns how many it reported.
  size_t EndSession(std::string_view reason, bool keep_queued = false,
                    UndeliveredReason why = UndeliveredReason::kDisconnected) {
    size_t reported = 0;
    auto report = [&](EventHandlePtr ev, bool unsure) {
      ++reported;
      ReportUndelivered(*system(), std::move(ev), why, unsure);
    };
    if (keep_queued) {
      out_->Restart(report);
    } else {
      out_->Fail(report);
    }
    ReleaseHeld();
    if (!keep_queued) {
      out_.emplace(settings_.limits, &stats_.round_trips);
    }
    in_ = InboundStream();
    records_.Reset();
    ack_sent_ = 0;
    // Without a session (work waited for one that never came) the line must not claim one.
    const bool had_session = session_up();
    if (why != UndeliveredReason::kShutdown || reported > 0) {  // a clean stop is no news
      TROUPE_LOG(kWarn, kInterconnect)
          << (had_session ? "session with node " : "no session with node ") << settings_.peer
          << (had_session ? " ended: " : ": ") << reason << " (" << reported
          << " events not known delivered"
          << (keep_queued ? absl::StrCat(", ", out_->queued_events(), " never sent kept for next")
                          : std::string())
          << ")";
    }
    subscribers_.Disconnected(*system());
    peer_incarnation_ = 0;
    waiting_since_ = Now();
    channel_->NoteFailure(had_session ? "session ended: " + std::string(reason)
                                      : std::string(reason));
    channel_->SetSessionUp(false);
    Stats::Set(stats_.queued_events, out_->queued_events());
    Stats::Set(stats_.unacked_bytes, 0);
    return reported;
  }

  // Closes the connection for a fault of the peer's bytes; the session lives on (redial, resend).
  void ProtocolError(const absl::Status& status) {
    Stats::Bump(stats_.protocol_errors);
    const std::string line =
        absl::StrCat("closing the connection to node ", settings_.peer, ": ", status.message());
    if (backoff_.failed_links() == 0) {
      TROUPE_LOG(kWarn, kInterconnect) << line;
    } else {
      TROUPE_LOG(kDebug, kInterconnect) << line;  // logged when its streak began
    }
    DropConnection();
    LinkEnded(absl::StrCat(status.message()), /*fault=*/true);
  }

  // -- faults that must not become loops ----------------------------------------------------------

  // A connection that carried the session ended. It failed when this side closed it for a fault
  // of the peer's bytes (a cut or a peer's close is the network's doing, or the peer's, which
  // counts its own faults). Returns true when the proxy may dial again at once (no streak).
  bool LinkEnded(const std::string& reason, bool fault) {
    if (!fault) {
      if (link_progress_) {
        ResetFailures();
      }
      return backoff_.failed_links() == 0;
    }
    backoff_.NoteFailure(reason);
    const uint64_t failed = backoff_.AddFailedLink();
    Stats::Set(stats_.failed_links, failed);
    if (failed >= DialBackoff::kMaxFailedLinks) {
      EndSession(absl::StrCat(failed, " connections in a row failed (last: ", reason, ")"));
      backoff_.ForgetFailedLinks();
      Stats::Set(stats_.failed_links, 0);
    }
    PauseDialling();
    return false;
  }

  void LinkProgressed() {
    link_progress_ = true;
    ResetFailures();
  }
  void ResetFailures() {
    if (backoff_.Reset()) {
      Stats::Set(stats_.failed_links, 0);
    }
  }

  // Dials again only after a pause (dial_backoff.h).
  void PauseDialling() {
    const absl::Duration pause = backoff_.Pause(Now());
    if (settings_.dials) {
      ScheduleWakeup(pause, kRedial);
    }
  }

  void DropConnection() {
    if (conn_ != 0) {
      settings_.transport->Close(conn_);
      conn_ = 0;
    }
    ResetLink();
  }
  void ResetLink() {
    if (link_ != Link::kDialing) {
      link_ = Link::kNone;
    }
    decoder_.Reset();
    gate_.Reset();
    stats_.connected.store(false, std::memory_order_relaxed);
  }

  const SessionSettings settings_;
  const std::shared_ptr<PeerChannel> channel_;
  SessionStats& stats_;

  // The session: streams, the peer's incarnation (0: none), subscribers.
  std::optional<OutboundStream> out_;
  InboundStream in_;
  uint64_t ack_sent_ = 0;
  uint64_t peer_incarnation_ = 0;
  SessionSubscribers subscribers_{settings_.peer};
  // Why events are refused: kShutdown once drained, kNoRoute while the peer left the table.
  std::optional<UndeliveredReason> refusing_;
  bool closed() const { return refusing_ == UndeliveredReason::kShutdown; }

  // The connection carrying it, and the handshake actor dialling one (kDialing).
  Link link_ = Link::kNone;
  ConnectionId conn_ = 0;
  ActorId handshake_;
  // Events of conn_ straight from the transport wait here while the handshake actor forwards
  // what it still had (handover.h).
  HandoverGate gate_;
  FrameDecoder decoder_;
  // Reassembles chunked events across the session's frames.
  RecordDecoder records_;
  // When to dial again, the failure streak, the last failure (dial_backoff.h).
  DialBackoff backoff_;
  // The connection up now: where the streams stood when it came up, and whether it moved either
  // stream since (which ends a failure streak).
  uint64_t link_acknowledged_ = 0;
  uint64_t link_received_ = 0;
  bool link_progress_ = false;

  absl::Time last_heard_;
  absl::Time last_written_;
  // When a session-less proxy started holding work (events, subscribers).
  absl::Time waiting_since_;
};

}  // namespace

std::unique_ptr<Actor> MakeProxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel) {
  return std::make_unique<Proxy>(std::move(settings), std::move(channel));
}

}  // namespace troupe::interconnect::internal
