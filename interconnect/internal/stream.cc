// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/stream.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

#include "actors/check.h"

namespace troupe::interconnect::internal {

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
  if (ev->bytes().size() > limits_.Chunk() ||
      (!bulk_senders_.empty() && bulk_senders_.contains(ev->sender()))) {
    ++bulk_senders_[ev->sender()];
    bulk_.push_back(BulkEvent{std::move(ev), regular_enqueued_});
  } else {
    ++regular_enqueued_;
    queued_.push_back(std::move(ev));
  }
  return absl::OkStatus();
}

void OutboundStream::Refuse(EventHandlePtr ev, std::vector<EventHandlePtr>* too_large) {
  TROUPE_DCHECK(too_large != nullptr);
  released_ += HeldCharge(*ev);
  too_large->push_back(std::move(ev));
}

EventHandlePtr OutboundStream::PopBulk() {
  EventHandlePtr ev = std::move(bulk_.front().ev);
  bulk_.pop_front();
  bulk_cut_ = 0;
  auto sender = bulk_senders_.find(ev->sender());
  if (--sender->second == 0) {
    bulk_senders_.erase(sender);
  }
  return ev;
}

void RoundTrips::Record(absl::Duration round_trip) {
  const int64_t ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(round_trip));
  histogram.Record(ns);
  if (all_peers != nullptr) {
    all_peers->Record(ns);
  }
  // The proxy is the only writer: a plain load and store.
  const auto before = static_cast<int64_t>(smoothed_ns.load(std::memory_order_relaxed));
  smoothed_ns.store(static_cast<uint64_t>(before == 0 ? ns : before + (ns - before) / 8),
                    std::memory_order_relaxed);
}

size_t OutboundStream::Pack(uint64_t ack, std::vector<FrameBytes>* out,
                            std::vector<EventHandlePtr>* too_large, absl::Time now) {
  size_t frames = 0;
  FrameEncoder& encoder = encoder_;
  const uint64_t peer_limit =
      peer_max_payload_ == 0 ? std::numeric_limits<uint64_t>::max() : peer_max_payload_;
  const uint64_t frame_limit = std::min<uint64_t>(limits_.max_frame_payload, peer_limit);
  while ((!queued_.empty() || !bulk_.empty()) && !blocked()) {
    // Fill one frame up to the payload limit with regular events, then bulk-lane records.
    size_t charge = 0;
    while (!queued_.empty()) {
      // An upper bound of the record's size: the exact one would cost as much as encoding it.
      const size_t body = queued_.front()->bytes().size();
      const size_t record = kMaxRecordOverhead + body;
      if (record > peer_limit || (peer_max_event_size_ != 0 && body > peer_max_event_size_)) {
        ++regular_packed_;
        Refuse(std::move(queued_.front()), too_large);
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
      ++regular_packed_;
    }
    size_t chunk_bytes = 0;
    EventHandlePtr completed;
    charge += PackBulk(encoder, frame_limit, peer_limit, &chunk_bytes, &completed, too_large);
    if (encoder.event_count() == 0) {
      break;  // only refused events were left, or the bulk lane waits
    }
    ++last_sent_;
    SentFrame frame{last_sent_, encoder.Finish(last_sent_, ack), charge, chunk_bytes,
                    std::move(completed)};
    out->push_back(frame.bytes);
    unacked_bytes_ += frame.bytes->size();
    unacked_chunk_bytes_ += chunk_bytes;
    unacked_.push_back(std::move(frame));
    ++frames;
  }
  if (frames > 0 && timed_sequence_ == 0 && round_trips_ != nullptr &&
      now != absl::InfinitePast()) {
    timed_sequence_ = last_sent_;
    timed_since_ = now;
  }
  return frames;
}

size_t OutboundStream::PackBulk(FrameEncoder& encoder, uint64_t frame_limit, uint64_t peer_limit,
                                size_t* chunk_bytes, EventHandlePtr* completed,
                                std::vector<EventHandlePtr>* too_large) {
  size_t charge = 0;
  // A chunk's record fits what the peer decodes, whatever it announced.
  const size_t piece_limit = std::min<uint64_t>(
      limits_.Chunk(), peer_limit > kMaxRecordOverhead ? peer_limit - kMaxRecordOverhead : 1);
  while (!bulk_.empty()) {
    const BulkEvent& front = bulk_.front();
    const std::string_view body = front.ev->bytes();
    if (peer_max_event_size_ != 0 && body.size() > peer_max_event_size_) {
      Refuse(PopBulk(), too_large);
      continue;
    }
    const bool in_order = regular_packed_ >= front.regular_before;
    if (bulk_cut_ == 0 && body.size() <= piece_limit) {
      // Small: it is here only to stay behind its sender's large event. Whole, once in order.
      const size_t record = kMaxRecordOverhead + body.size();
      if (!in_order ||
          (encoder.event_count() > 0 && encoder.payload_size() + record > frame_limit)) {
        break;
      }
      (void)encoder.Add(*front.ev);
      charge += HeldCharge(*front.ev);
      (void)PopBulk();
      continue;
    }
    if (*chunk_bytes != 0 || (unacked_chunk_bytes_ != 0 && unacked_chunk_bytes_ + piece_limit >
                                                               limits_.max_unacked_chunk_bytes)) {
      break;  // one chunk per frame, and a bounded amount in flight
    }
    const size_t piece = std::min(piece_limit, body.size() - bulk_cut_);
    const bool last = bulk_cut_ + piece == body.size();
    if ((last && !in_order) ||
        (encoder.event_count() > 0 &&
         encoder.payload_size() + kMaxRecordOverhead + piece > frame_limit)) {
      break;
    }
    if (bulk_cut_ == 0) {
      encoder.AddFirstChunk(*front.ev, piece);
    } else {
      encoder.AddNextChunk(body.substr(bulk_cut_, piece));
    }
    bulk_cut_ += piece;
    *chunk_bytes = piece;
    if (last) {
      charge += HeldCharge(*front.ev);
      *completed = PopBulk();
    }
  }
  return charge;
}

absl::Status OutboundStream::Acknowledge(uint64_t ack, absl::Time now) {
  if (ack > last_sent_) {
    return absl::DataLossError(
        absl::StrFormat("peer acknowledged frame %u, but only %u were sent", ack, last_sent_));
  }
  if (timed_sequence_ != 0 && ack >= timed_sequence_) {
    // A resend's acknowledgement (no time) ends the timing unrecorded: the frame was written twice.
    if (now != absl::InfinitePast()) {
      round_trips_->Record(now - timed_since_);
    }
    timed_sequence_ = 0;
  }
  Release(ack);
  return absl::OkStatus();
}

void OutboundStream::Release(uint64_t ack) {
  while (!unacked_.empty() && unacked_.front().sequence <= ack) {
    unacked_bytes_ -= unacked_.front().bytes->size();
    unacked_chunk_bytes_ -= unacked_.front().chunk_bytes;
    released_ += unacked_.front().charge;
    ++acknowledged_;
    unacked_.pop_front();
  }
}

absl::Status OutboundStream::Resend(uint64_t peer_received, std::vector<FrameBytes>* out) {
  if (absl::Status status = Acknowledge(peer_received); !status.ok()) {
    return status;
  }
  for (const SentFrame& frame : unacked_) {
    out->push_back(frame.bytes);
  }
  return absl::OkStatus();
}

void OutboundStream::FailUnacked(const std::function<void(EventHandlePtr, bool unsure)>& report) {
  for (SentFrame& sent : unacked_) {
    // Our own frames: decoding them cannot fail (and no size limit applies to them). Chunks are
    // skipped: a chunked event is reported once, from the handle kept with its last chunk.
    FrameDecoder decoder(std::numeric_limits<uint32_t>::max());
    decoder.Append(*sent.bytes);
    Frame frame;
    if (absl::StatusOr<bool> got = decoder.Next(&frame); got.ok() && *got) {
      (void)DecodeEvents(frame, [&report](EventHandlePtr ev) { report(std::move(ev), true); });
    }
    if (sent.completed != nullptr) {
      report(std::move(sent.completed), true);
    }
    released_ += sent.charge;
  }
  unacked_.clear();
  unacked_bytes_ = 0;
  unacked_chunk_bytes_ = 0;
  timed_sequence_ = 0;
  // A chunked event cut in part starts again from its first chunk in the next session.
  bulk_cut_ = 0;
}

void OutboundStream::Restart(const std::function<void(EventHandlePtr, bool unsure)>& report) {
  FailUnacked(report);
  last_sent_ = 0;
}

void OutboundStream::Fail(const std::function<void(EventHandlePtr, bool unsure)>& report) {
  FailUnacked(report);
  for (EventHandlePtr& ev : queued_) {
    released_ += HeldCharge(*ev);
    report(std::move(ev), false);
  }
  queued_.clear();
  regular_packed_ = regular_enqueued_;
  while (!bulk_.empty()) {
    EventHandlePtr ev = PopBulk();
    released_ += HeldCharge(*ev);
    report(std::move(ev), false);
  }
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

}  // namespace troupe::interconnect::internal
