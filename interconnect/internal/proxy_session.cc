// SPDX-License-Identifier: Apache-2.0
//
// The proxy (proxy_actor.h): the session, its streams and frames, and a node's leaving.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/session_events.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/proxy_actor.h"
#include "interconnect/internal/session_subscribers.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {

void Proxy::HandleLeave(EventPtr<EvLeave> /*ev*/) {
  if (leaving_ || closed()) {
    return;
  }
  leaving_ = true;
  if (!session_up() || !protocol_.leave) {
    // Nobody can send; or the peer cannot hear a leaving notice: what it sends until the
    // sessions close is handled, and it learns of the close as of a lost connection.
    channel_->inbound_done.store(true, std::memory_order_release);
    return;
  }
  if (link_ == Link::kUp) {
    WriteControlFrame(FrameKind::kLeaving);
  }  // else LinkUp says it on the next connection
}

void Proxy::HandlePeerLeaving() {
  if (peer_leaving_) {
    return;  // said again on a new connection
  }
  TROUPE_LOG(kInfo, kInterconnect)
      << Peer() << " is leaving: what was sent to it goes out, new events are refused";
  TakeRouted();  // routed before the notice: they go out
  peer_leaving_ = true;
}

void Proxy::MaybeSayStopped() {
  if (peer_leaving_ && !stopped_said_ && link_ == Link::kUp && session_up() &&
      out_->queued_events() == 0) {
    stopped_said_ = true;
    WriteControlFrame(FrameKind::kStopped);
  }
}

void Proxy::HandleGoodbye() {
  left_incarnation_ = peer_incarnation_;
  TROUPE_LOG(kInfo, kInterconnect) << Peer() << " left: the session ends";
  if (leaving_) {
    channel_->inbound_done.store(true, std::memory_order_release);
  }
  EndSession("it left (shut down)", /*keep_queued=*/false, UndeliveredReason::kShutdown,
             /*left=*/true);
  DropConnection();
  RedialSoon();  // a rolling restart brings its next incarnation within moments
}

bool Proxy::StartOrResume(const proto::Handshake& hs) {
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
  protocol_ = AgreeProtocol(hs, settings_.identity.protocol);
  SessionStats::Set(stats_.protocol_version, protocol_.version);
  peer_leaving_ = false;  // a new incarnation: it takes events again
  stopped_said_ = false;
  left_incarnation_ = 0;
  last_heard_ = Now();  // a new session starts alive; from now on only frames count
  in_ = InboundStream();
  records_.Reset();
  ack_sent_ = 0;
  Stats::Bump(stats_.sessions);
  channel_->SetSessionUp(true);
  MarkChanged();
  TROUPE_LOG(kInfo, kInterconnect)
      << "session with " << Peer() << " up (peer incarnation " << peer_incarnation_
      << ", protocol version " << protocol_.version << ", features: "
      << (protocol_.features.empty() ? "none" : absl::StrJoin(protocol_.features, ", ")) << ")";
  subscribers_.Connected(*system());
  return false;
}

void Proxy::LinkUp(uint64_t peer_received) {
  link_ = Link::kUp;
  backoff_.LinkUp();
  link_progress_ = false;
  Stats::Bump(stats_.connections);
  stats_.connected.store(true, std::memory_order_relaxed);
  MarkChanged();
  std::vector<FrameBytes> frames;
  if (absl::Status status = out_->Resend(peer_received, &frames); !status.ok()) {
    EndSession(absl::StrCat("the peer's resume point is impossible: ", status.message()));
    DropConnection();
    return;
  }
  Stats::Bump(stats_.frames_resent, out_->unacked_frames());
  link_acknowledged_ = out_->acknowledged();
  link_received_ = in_.received();
  const bool resent = !frames.empty();
  if (resent) {
    WriteFrames(std::move(frames));
  }
  if (!Flush() && !resent) {
    WriteControlFrame();  // at once: the peer's sign of life that this connection works
  }
  // What the leaving states said on the last connection, said again after its frames.
  if (leaving_ && protocol_.leave && !channel_->inbound_done.load(std::memory_order_acquire)) {
    WriteControlFrame(FrameKind::kLeaving);
  }
  if (stopped_said_) {
    WriteControlFrame(FrameKind::kStopped);
  }
}

void Proxy::ProcessFrames() {
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
    if (frame.kind == FrameKind::kLeaving) {
      HandlePeerLeaving();
    } else if (frame.kind == FrameKind::kStopped && leaving_) {
      channel_->inbound_done.store(true, std::memory_order_release);
    } else if (frame.kind == FrameKind::kGoodbye) {
      HandleGoodbye();
      return;  // the decoder was reset with the connection
    }
  }
  if (out_->acknowledged() != link_acknowledged_ || in_.received() != link_received_) {
    LinkProgressed();
  }
  Flush();
}

absl::Status Proxy::Receive(const Frame& frame) {
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
      TROUPE_LOG(kWarn, kInterconnect) << "node " << settings_.peer << " sent " << ev->ToString()
                                       << ", not addressed to this node (" << self << "): dropped";
      return;
    }
    Stats::Bump(stats_.events_received);
    Send(std::move(ev));
  });
}

bool Proxy::Flush() {
  Stats::Set(stats_.queued_events, out_->queued_events());
  if (link_ != Link::kUp) {
    ReleaseHeld();
    return false;
  }
  std::vector<FrameBytes> frames;
  const bool was_blocked = out_->blocked();
  const size_t queued = out_->queued_events();
  std::vector<EventHandlePtr> too_large;
  out_->Pack(in_.received(), &frames, &too_large, Now());
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
  const bool wrote = !frames.empty() || in_.received() > ack_sent_;
  if (!frames.empty()) {
    ack_sent_ = in_.received();
    WriteFrames(std::move(frames));
  } else if (wrote) {
    WriteControlFrame();
  }
  Stats::Set(stats_.queued_events, out_->queued_events());
  Stats::Set(stats_.unacked_bytes, out_->unacked_bytes());
  ReleaseHeld();
  MaybeSayStopped();
  return wrote;
}

void Proxy::WriteControlFrame(FrameKind kind) {
  std::string bytes;
  AppendControlFrame(in_.received(), &bytes, kind);
  ack_sent_ = in_.received();
  Write(std::move(bytes));
}

void Proxy::Write(std::string bytes) {
  Stats::Bump(stats_.bytes_written, bytes.size());
  last_written_ = Now();
  settings_.transport->Write(conn_, std::move(bytes));
}

void Proxy::WriteFrames(std::vector<FrameBytes> frames) {
  size_t size = 0;
  for (const FrameBytes& frame : frames) {
    size += frame->size();
  }
  Stats::Bump(stats_.bytes_written, size);
  last_written_ = Now();
  settings_.transport->WriteShared(conn_, std::move(frames));
}

size_t Proxy::EndSession(std::string_view reason, bool keep_queued, UndeliveredReason why,
                         bool left) {
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
  subscribers_.Disconnected(*system(), left);
  if (leaving_) {
    channel_->inbound_done.store(true, std::memory_order_release);  // nothing more can come
  }
  peer_incarnation_ = 0;
  waiting_since_ = Now();
  channel_->NoteFailure(had_session ? "session ended: " + std::string(reason)
                                    : std::string(reason));
  if (had_session) {
    MarkChanged();
  }
  channel_->SetSessionUp(false);
  Stats::Set(stats_.queued_events, out_->queued_events());
  Stats::Set(stats_.unacked_bytes, 0);
  return reported;
}

}  // namespace troupe::interconnect::internal
