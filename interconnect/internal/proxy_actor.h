// SPDX-License-Identifier: Apache-2.0
//
// The proxy actor's class (proxy.h describes the actor; interconnect.h the behaviour a user sees),
// for the two files that define it: proxy.cc (the router's events, dialling, connections,
// heartbeats and faults) and proxy_session.cc (the session: its streams and frames, and a node's
// leaving). Private to them.
//
// Thread-safety: actor-confined.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/session_events.h"
#include "interconnect/internal/dial_backoff.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/handover.h"
#include "interconnect/internal/proxy.h"
#include "interconnect/internal/session_subscribers.h"
#include "interconnect/internal/stream.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {

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
  using Stats = SessionStats;

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
      TROUPE_HFUNC(EvLeave, HandleLeave);
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

  void HandleKick(EventPtr<EvKick> /*ev*/);
  // Moves the events the router queued into the outbound stream (subscribing the senders that
  // asked for it); one too large for any frame is reported Undelivered{kTooLarge}.
  void TakeRouted();

  // Without a session, the wait for one starts with the first event or subscriber.
  void NoteWaiting();

  // Adds `who` to the subscribers; it hears at once if the session is up (or closed for good).
  void Subscribe(const ActorId& who);

  // Drain: the peer hears goodbye, everything held is reported Undelivered{kShutdown} (unsure if
  // sent and not acknowledged), and later events are refused the same way. The connection stays
  // open (link reset: nothing more is read) so that the goodbye goes out; ~Proxy, the peer or the
  // transport's shutdown closes it.
  void HandleClose(EventPtr<EvCloseSession> ev);

  // -- leaving -----------------------------------------------------------------------------------
  //
  // This node leaves (Interconnect::Drain): the peer hears kLeaving and answers kStopped once it
  // has sent all it will; meanwhile both keep acknowledging, delivering and sending (this node's
  // replies still go out). Then EvCloseSession says goodbye. The peer's side is below.

  void HandleLeave(EventPtr<EvLeave> /*ev*/);

  // The peer leaves: what it was sent before goes out (queued events included); new events are
  // refused Undelivered{kShutdown} at once; kStopped follows the last data frame.
  void HandlePeerLeaving();

  // Says kStopped once the peer leaves and nothing is left to pack: every data frame it will get
  // from this side is on the wire before it.
  void MaybeSayStopped();

  // The peer said goodbye: the session ends now, as left. Events for it are refused until a new
  // incarnation of it connects; the one that left is not taken back.
  void HandleGoodbye();

  // The peer left the table: the session ends; events for it are refused until it is back.
  void HandleMembership(EventPtr<EvMembership> ev);

  // -- connections -------------------------------------------------------------------------------

  // Starts an outgoing handshake actor when this side dials and no connection is up or coming.
  void Dial();

  // A handshake actor hands over a checked connection (handover.h).
  void HandleHandshakeDone(EventPtr<EvHandshakeDone> ev);

  void HandleHandshakeFailed(EventPtr<EvHandshakeFailed> ev);

  // The handshake actor forwarded everything it still had for the connection.
  void HandleHandoverEnd(EventPtr<EvHandoverEnd> ev);

  void HandleConnectionEvent(EventHandlePtr& ev);

  // Takes the bytes over (the decoder adopts the transport's read buffer when it can).
  void HandleBytes(EvBytesReceived& ev);

  void HandleConnectionDown(const EvConnectionDown& ev);

  // -- the session --------------------------------------------------------------------------------

  bool session_up() const { return peer_incarnation_ != 0; }
  std::string Peer() const { return NodeAt(settings_.peer, *settings_.transport, conn_); }

  // Events or subscribers wait for (or ride on) a session.
  bool HasPendingWork() const {
    return out_->queued_events() > 0 || out_->unacked_frames() > 0 || !subscribers_.empty();
  }

  // Resumes the living session when both handshakes name each other's incarnation (returns
  // true); otherwise starts a new one, ending the old.
  bool StartOrResume(const proto::Handshake& hs);

  // The connection carries the session from now on: resend what the peer has not received.
  void LinkUp(uint64_t peer_received);

  void ProcessFrames();

  // Delivers the events of a data frame the inbound stream has not seen; drops a duplicate.
  absl::Status Receive(const Frame& frame);

  // Packs queued events into frames (as far as backpressure allows) and writes them, with an
  // acknowledgement of what we received. Returns whether it wrote anything.
  bool Flush();

  // Gives the peer's budget back what the stream released.
  void ReleaseHeld() { channel_->Release(out_->TakeReleased()); }

  // An acknowledgement alone: a heartbeat, or a connection's first sign of life; or, with another
  // kind, one of the leaving notices.
  void WriteControlFrame(FrameKind kind = FrameKind::kControl);

  void Write(std::string bytes);
  // Writes data frames the stream keeps for resend: the transport shares them, no copy.
  void WriteFrames(std::vector<FrameBytes> frames);

  // Heartbeats, dead-peer detection, redialling.
  void HandleTick(EventPtr<EvWakeup> ev);

  // Ends the session: reports every event it holds as `why` (with `keep_queued`, only those sent;
  // queued ones wait for the next session), tells the subscribers (that the peer `left`, when it
  // said goodbye); returns how many it reported.
  size_t EndSession(std::string_view reason, bool keep_queued = false,
                    UndeliveredReason why = UndeliveredReason::kDisconnected, bool left = false);

  // Closes the connection for a fault of the peer's bytes; the session lives on (redial, resend).
  void ProtocolError(const absl::Status& status);

  // -- faults that must not become loops ----------------------------------------------------------

  // A connection that carried the session ended. It failed when this side closed it for a fault
  // of the peer's bytes (a cut or a peer's close is the network's doing, or the peer's, which
  // counts its own faults). Returns true when the proxy may dial again at once (no streak).
  bool LinkEnded(const std::string& reason, bool fault);

  void LinkProgressed();
  void ResetFailures();

  // Dials again only after a pause (dial_backoff.h).
  void PauseDialling();
  // Dials again soon, at the quick pace of a peer that is not listening yet (dial_backoff.h): it
  // is restarting, or its previous incarnation is on its way out.
  void RedialSoon();

  void DropConnection();
  void ResetLink();
  // Stamps SessionStats::changed_unix_ns with the proxy's clock: up or connected changed.
  void MarkChanged();

  const SessionSettings settings_;
  const std::shared_ptr<PeerChannel> channel_;
  SessionStats& stats_;

  // The session: streams, the peer's incarnation (0: none), subscribers.
  std::optional<OutboundStream> out_;
  InboundStream in_;
  uint64_t ack_sent_ = 0;
  uint64_t peer_incarnation_ = 0;
  // The version and features the session uses (AgreeProtocol).
  SessionProtocol protocol_;
  SessionSubscribers subscribers_{settings_.peer};
  // Why events are refused: kShutdown once drained, kNoRoute while the peer left the table.
  std::optional<UndeliveredReason> refusing_;
  bool closed() const { return refusing_ == UndeliveredReason::kShutdown; }
  // This node leaves (EvLeave came). The peer leaves (its kLeaving came; cleared by its next
  // incarnation's session), and this side told it kStopped. The incarnation that said goodbye.
  bool leaving_ = false;
  bool peer_leaving_ = false;
  bool stopped_said_ = false;
  uint64_t left_incarnation_ = 0;

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

}  // namespace troupe::interconnect::internal
