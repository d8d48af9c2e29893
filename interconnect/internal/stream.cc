// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/stream.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

#include "actors/check.h"

namespace troupe::interconnect {

// -- outbound -----------------------------------------------------------------------------------

absl::Status OutboundStream::Enqueue(EventHandlePtr& ev) {
  if (ev->HasEvent()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "event 0x%08x is not serialized (call EventHandle::Serialize first)", ev->type()));
  }
  if (ev->bytes().size() > limits_.max_event_size) {
    return absl::OutOfRangeError(absl::StrFormat("event 0x%08x of %u bytes exceeds the limit of %u",
                                                 ev->type(), ev->bytes().size(),
                                                 limits_.max_event_size));
  }
  queued_.push_back(std::move(ev));
  return absl::OkStatus();
}

size_t OutboundStream::Pack(uint64_t ack, std::string* out,
                            std::vector<EventHandlePtr>* too_large) {
  size_t frames = 0;
  FrameEncoder encoder;
  const uint64_t peer_limit =
      peer_max_payload_ == 0 ? std::numeric_limits<uint64_t>::max() : peer_max_payload_;
  const uint64_t frame_limit = std::min<uint64_t>(limits_.max_frame_payload, peer_limit);
  while (!queued_.empty() && !blocked()) {
    // Fill one frame up to the payload limit (a larger event goes alone, if the peer takes it).
    size_t charge = 0;
    while (!queued_.empty()) {
      const size_t record = kEventRecordHeaderSize + queued_.front()->bytes().size();
      if (record > peer_limit) {
        TROUPE_DCHECK(too_large != nullptr);
        released_ += HeldCharge(*queued_.front());
        too_large->push_back(std::move(queued_.front()));
        queued_.pop_front();
        continue;
      }
      if (encoder.event_count() > 0 && encoder.payload_size() + record > frame_limit) {
        break;
      }
      // Enqueue admitted only serialized events: Add cannot fail.
      (void)encoder.Add(*queued_.front());
      charge += HeldCharge(*queued_.front());
      queued_.pop_front();
    }
    if (encoder.event_count() == 0) {
      break;  // only refused events were left
    }
    SentFrame frame{++last_sent_, {}, charge};
    encoder.Finish(frame.sequence, ack, &frame.bytes);
    out->append(frame.bytes);
    unacked_bytes_ += frame.bytes.size();
    unacked_.push_back(std::move(frame));
    ++frames;
  }
  return frames;
}

absl::Status OutboundStream::Acknowledge(uint64_t ack) {
  if (ack > last_sent_) {
    return absl::DataLossError(
        absl::StrFormat("peer acknowledged frame %u, but only %u were sent", ack, last_sent_));
  }
  Release(ack);
  return absl::OkStatus();
}

void OutboundStream::Release(uint64_t ack) {
  while (!unacked_.empty() && unacked_.front().sequence <= ack) {
    unacked_bytes_ -= unacked_.front().bytes.size();
    released_ += unacked_.front().charge;
    ++acknowledged_;
    unacked_.pop_front();
  }
}

absl::Status OutboundStream::Resend(uint64_t peer_received, std::string* out) {
  if (absl::Status status = Acknowledge(peer_received); !status.ok()) {
    return status;
  }
  for (const SentFrame& frame : unacked_) {
    out->append(frame.bytes);
  }
  return absl::OkStatus();
}

void OutboundStream::Restart(const std::function<void(EventHandlePtr, bool unsure)>& report) {
  std::deque<EventHandlePtr> queued = std::move(queued_);
  queued_.clear();
  Fail(report);
  queued_ = std::move(queued);
  last_sent_ = 0;
}

void OutboundStream::Fail(const std::function<void(EventHandlePtr, bool unsure)>& report) {
  for (const SentFrame& sent : unacked_) {
    // Our own frames: decoding them cannot fail (and no size limit applies to them).
    FrameDecoder decoder(std::numeric_limits<uint32_t>::max());
    decoder.Append(sent.bytes);
    Frame frame;
    if (absl::StatusOr<bool> got = decoder.Next(&frame); got.ok() && *got) {
      (void)DecodeEvents(frame, [&report](EventHandlePtr ev) { report(std::move(ev), true); });
    }
  }
  for (const SentFrame& sent : unacked_) {
    released_ += sent.charge;
  }
  unacked_.clear();
  unacked_bytes_ = 0;
  for (EventHandlePtr& ev : queued_) {
    released_ += HeldCharge(*ev);
    report(std::move(ev), false);
  }
  queued_.clear();
}

// -- inbound ------------------------------------------------------------------------------------

absl::StatusOr<InboundStream::Verdict> InboundStream::Accept(uint64_t sequence) {
  if (sequence == 0) {
    return absl::DataLossError("data frame with sequence 0 (data frames count from 1)");
  }
  if (sequence <= received_) {
    return Verdict::kDuplicate;
  }
  if (sequence != received_ + 1) {
    return absl::DataLossError(
        absl::StrFormat("frame %u arrived after frame %u: frames %u..%u are missing", sequence,
                        received_, received_ + 1, sequence - 1));
  }
  received_ = sequence;
  return Verdict::kDeliver;
}

}  // namespace troupe::interconnect
