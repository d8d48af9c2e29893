// SPDX-License-Identifier: Apache-2.0
//
// The proxy (proxy_actor.h): the router's events, dialling and connections, heartbeats and
// faults.
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
#include "interconnect/internal/proxy_actor.h"
#include "interconnect/internal/session_subscribers.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {

void Proxy::HandleKick(EventPtr<EvKick> /*ev*/) {
  if (refusing_.has_value() || peer_leaving_) {
    channel_->ReportQueued(*system(), refusing_.value_or(UndeliveredReason::kShutdown));
    return;
  }
  NoteWaiting();
  TakeRouted();
  Flush();
}

void Proxy::TakeRouted() {
  channel_->Drain([this](EventHandlePtr ev) {
    if (ev->HasFlag(kSubscribeOnSession) && !ev->sender().IsEmpty()) {
      Subscribe(ev->sender());
    }
    if (absl::Status status = out_->Enqueue(ev); !status.ok()) {
      channel_->Release(HeldCharge(*ev));
      ReportUndelivered(*system(), std::move(ev), UndeliveredReason::kTooLarge);
    }
  });
}

void Proxy::NoteWaiting() {
  if (!session_up() && !HasPendingWork()) {
    waiting_since_ = Now();
  }
}

void Proxy::Subscribe(const ActorId& who) {
  if (refusing_.has_value()) {
    Send(who, std::make_unique<EvNodeDisconnected>(settings_.peer));
    return;
  }
  NoteWaiting();
  subscribers_.Add(*system(), who, session_up());
}

void Proxy::HandleClose(EventPtr<EvCloseSession> ev) {
  uint64_t reported = 0;
  if (!closed()) {
    const bool goodbye = link_ == Link::kUp && session_up() && protocol_.leave;
    if (goodbye) {
      WriteControlFrame(FrameKind::kGoodbye);
    }
    refusing_ = UndeliveredReason::kShutdown;
    reported = EndSession("the interconnect is shutting down", /*keep_queued=*/false,
                          UndeliveredReason::kShutdown) +
               channel_->ReportQueued(*system(), UndeliveredReason::kShutdown);
    if (goodbye) {
      ResetLink();
    } else {
      DropConnection();
    }
  }
  if (ev.Get()->done) {
    ev.Get()->done(reported);
  }
}

void Proxy::HandleMembership(EventPtr<EvMembership> ev) {
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

void Proxy::Dial() {
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

void Proxy::HandleHandshakeDone(EventPtr<EvHandshakeDone> ev) {
  const EvHandshakeDone& done = *ev.Get();
  if (refusing_ || (!done.incoming && (link_ != Link::kDialing || ev->sender() != handshake_))) {
    settings_.transport->Close(done.connection);  // a dial we gave up on, or a closed session
    return;
  }
  if (left_incarnation_ != 0 && done.handshake.incarnation() == left_incarnation_) {
    // The node that said goodbye, not yet gone: its next incarnation comes soon (a restart).
    settings_.transport->Close(done.connection);
    if (!done.incoming) {
      handshake_ = ActorId();
      link_ = Link::kNone;
      RedialSoon();
    }
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

void Proxy::HandleHandshakeFailed(EventPtr<EvHandshakeFailed> ev) {
  if (link_ != Link::kDialing || ev->sender() != handshake_) {
    return;
  }
  handshake_ = ActorId();
  link_ = Link::kNone;
  switch (ev.Get()->kind) {
    case EvHandshakeFailed::Kind::kUnreachable:
      // Refused (the peer is not listening yet, or restarting): try again soon, backing off.
      channel_->NoteFailure(absl::StrCat("unreachable: ", ev.Get()->reason.message()));
      RedialSoon();
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
      // Accepted, then closed before it answered: a node that left and is on its way out, or one
      // still starting. Its next incarnation may listen any moment.
      RedialSoon();
      break;
  }
}

void Proxy::HandleHandoverEnd(EventPtr<EvHandoverEnd> ev) {
  if (ev.Get()->connection != conn_ || gate_.idle()) {
    return;
  }
  for (EventHandlePtr& held : gate_.End()) {
    HandleConnectionEvent(held);
  }
}

void Proxy::HandleConnectionEvent(EventHandlePtr& ev) {
  if (auto* bytes = ev->Get<EvBytesReceived>(); bytes != nullptr) {
    HandleBytes(*bytes);
  } else if (const auto* down = ev->Get<EvConnectionDown>(); down != nullptr) {
    HandleConnectionDown(*down);
  }
}

void Proxy::HandleBytes(EvBytesReceived& ev) {
  if (ev.connection != conn_ || link_ != Link::kUp) {
    return;  // a connection we left
  }
  Stats::Bump(stats_.bytes_read, ev.bytes.size());
  decoder_.Append(std::move(ev.bytes));
  ProcessFrames();
}

void Proxy::HandleConnectionDown(const EvConnectionDown& ev) {
  if (ev.connection != conn_) {
    return;
  }
  const bool was_up = link_ == Link::kUp;
  if (was_up) {
    // A warning: an operator looking at a node's recent warnings sees the reset.
    TROUPE_LOG(kWarn, kInterconnect)
        << "connection to " << Peer() << " down: " << ev.reason.message() << "; redialling";
    channel_->NoteFailure(absl::StrCat("connection down: ", ev.reason.message()));
  }
  conn_ = 0;
  ResetLink();
  if (was_up && LinkEnded(absl::StrCat(ev.reason.message()), /*fault=*/false)) {
    Dial();  // at once: a cut connection usually comes back
  }
}

void Proxy::HandleTick(EventPtr<EvWakeup> ev) {
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

void Proxy::ProtocolError(const absl::Status& status) {
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

bool Proxy::LinkEnded(const std::string& reason, bool fault) {
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

void Proxy::LinkProgressed() {
  link_progress_ = true;
  ResetFailures();
}

void Proxy::ResetFailures() {
  if (backoff_.Reset()) {
    Stats::Set(stats_.failed_links, 0);
  }
}

void Proxy::PauseDialling() {
  const absl::Duration pause = backoff_.Pause(Now());
  if (settings_.dials) {
    ScheduleWakeup(pause, kRedial);
  }
}

void Proxy::RedialSoon() {
  if (!settings_.dials) {
    return;
  }
  if (std::optional<absl::Duration> delay = backoff_.Unreachable(); delay.has_value()) {
    ScheduleWakeup(*delay, kRedial);
  }
}

void Proxy::DropConnection() {
  if (conn_ != 0) {
    settings_.transport->Close(conn_);
    conn_ = 0;
  }
  ResetLink();
}

void Proxy::ResetLink() {
  if (link_ != Link::kDialing) {
    link_ = Link::kNone;
  }
  decoder_.Reset();
  gate_.Reset();
  if (stats_.connected.exchange(false, std::memory_order_relaxed)) {
    MarkChanged();
  }
}

void Proxy::MarkChanged() {
  stats_.changed_unix_ns.store(absl::ToUnixNanos(Now()), std::memory_order_relaxed);
}

std::unique_ptr<Actor> MakeProxy(SessionSettings settings, std::shared_ptr<PeerChannel> channel) {
  return std::make_unique<Proxy>(std::move(settings), std::move(channel));
}

}  // namespace troupe::interconnect::internal
