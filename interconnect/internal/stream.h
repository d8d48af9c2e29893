// SPDX-License-Identifier: Apache-2.0
//
// The reliable-stream state of one interconnect session: what is queued, sent, acknowledged and
// received, across connections that break and come back while the session lives.
//
// OutboundStream (sending side):
//   | state of an event | where it lives                      | on session death             |
//   |-------------------|-------------------------------------|------------------------------|
//   | queued            | a lane of serialized handles        | Undelivered (certain)        |
//   | being chunked     | the bulk lane's front               | Undelivered (certain)        |
//   | sent, unacked     | the encoded frame, kept for resend  | Undelivered{unsure}          |
//   |                   | (a chunked event: also its handle,  |                              |
//   |                   | kept with its last chunk's frame)   |                              |
//   | acknowledged      | nowhere: freed                      | —                            |
// Two lanes, so that a large event does not hold back small ones (no head-of-line blocking):
//   - the regular lane takes events whose body fits one chunk (`chunk_size`);
//   - the bulk lane takes larger events, and every later event of a sender that has one there
//     (which keeps each sender's order). Pack cuts its front into chunks, at most one per frame
//     and no more than `max_unacked_chunk_bytes` of them unacknowledged, so small events of other
//     senders ride in the frames between; a bulk-lane event completes (its last chunk, or the
//     event itself) only after every regular-lane event queued before it has been sent.
// A sender's events therefore arrive in the order it sent them; events of different senders may
// overtake a large one.
// Pack moves queued events into frames only while the bytes of unacknowledged frames stay under
// `max_unacked_bytes` (backpressure), and never builds a frame larger than the peer accepts
// (SetPeerLimits, from its handshake): an event the peer cannot take is handed back to be
// reported Undelivered{kTooLarge}, and the stream goes on.
//
// Every event is charged HeldCharge() bytes from Enqueue until it leaves the process for good
// (acknowledged, refused or failed); the stream counts what it releases (TakeReleased) so that
// the router's per-peer budget (PeerChannel::held_bytes) can be given back. After a
// reconnect the peer says which sequence it has received in order; Resend drops what it has and
// appends the rest again, byte for byte (same sequence numbers), so nothing is lost.
//
// InboundStream (receiving side): frames arrive in sequence order on one connection; after a
// reconnect the sender may repeat frames the receiver already has. Accept tells duplicates
// (dropped) from new frames (delivered) and refuses a gap, which only a broken peer produces.
// `received()` is what to acknowledge and what to tell the peer at reconnect.
//
// Thread-safety: thread-compatible (owned by one session actor).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/event.h"
#include "actors/metrics.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {

struct StreamLimits {
  // Bytes of sent but unacknowledged frames above which Pack stops (default 16 MiB).
  size_t max_unacked_bytes = 16u << 20;
  // Payload bytes above which a frame is closed and the next one started (default 256 KiB).
  size_t max_frame_payload = 256u << 10;
  // Largest event body accepted by Enqueue (default 8 MiB).
  size_t max_event_size = 8u << 20;
  // Events with a larger body travel in chunks of this size (default 128 KiB, so that 64 KiB
  // events still go whole; at most max_frame_payload counts).
  size_t chunk_size = 128u << 10;
  // Bytes of chunks sent but not acknowledged above which Pack cuts no more (default 256 KiB,
  // two chunks): a small event queued behind a stream of large ones waits for about this much.
  size_t max_unacked_chunk_bytes = 256u << 10;

  // Returns the size of the pieces large events are cut into.
  size_t Chunk() const { return std::max<size_t>(1, std::min(chunk_size, max_frame_payload)); }
  // Returns the largest frame payload this side produces: what the peer's FrameDecoder limit
  // must admit.
  size_t MaxPayload() const { return max_frame_payload + kMaxRecordOverhead; }
};

// The bytes one queued event is charged against a peer's budget: its body plus what holding it
// costs (the handle, the body's block header, allocator and queue overhead; an estimate).
inline size_t HeldCharge(const EventHandle& ev) {
  constexpr size_t kOverhead = sizeof(EventHandle) + sizeof(EventBytes) + 64;
  return ev.bytes().size() + kOverhead;
}

// Round trips of one session's data frames, measured by its OutboundStream: from the Pack that
// wrote a frame to the first acknowledgement that covers it. One frame is timed at a time, so a
// window full of frames costs one sample per round trip, not one per frame. The time includes the
// peer's handling of the batch the frame came in (it acknowledges after reading it) but no
// queueing in front of the stream. Written by the proxy, read by the metrics (any thread).
struct RoundTrips {
  // 1 us .. 17 s.
  Histogram histogram{10, 34};
  // The round trip smoothed (each new sample weighs 1/8), in nanoseconds; 0 before the first.
  std::atomic<uint64_t> smoothed_ns{0};
  // Every peer's round trips, when set (before the proxy starts): each sample goes there too.
  std::shared_ptr<Histogram> all_peers;

  void Record(absl::Duration round_trip);
};

class OutboundStream {
 public:
  // `round_trips` (may be null; must outlive the stream) receives the samples of Pack and
  // Acknowledge calls that pass the time.
  explicit OutboundStream(StreamLimits limits = {}, RoundTrips* round_trips = nullptr)
      : limits_(limits), round_trips_(round_trips) {}

  // Queues `ev` for sending. It must be serialized (EventHandle::Serialize) or bodyless.
  // Returns kOutOfRange when its body is larger than max_event_size and kFailedPrecondition when
  // it is not serialized; `ev` then stays with the caller (to report Undelivered{kTooLarge}).
  absl::Status Enqueue(EventHandlePtr& ev);

  // Moves queued events into new data frames appended to `out`, each acknowledging `ack`, while
  // the unacknowledged bytes are under the limit. Events larger than the peer accepts are moved
  // to `too_large` instead (which may be null while no peer limit is set). Returns the number of
  // frames appended. `now` (when the frames are written) starts timing a frame for RoundTrips.
  // The frames in `out` are the ones kept for resend (shared, not copied).
  size_t Pack(uint64_t ack, std::vector<FrameBytes>* out,
              std::vector<EventHandlePtr>* too_large = nullptr,
              absl::Time now = absl::InfinitePast());
  // The same, appending a copy of the frames' bytes to `out` (tests and tools).
  size_t Pack(uint64_t ack, std::string* out, std::vector<EventHandlePtr>* too_large = nullptr,
              absl::Time now = absl::InfinitePast()) {
    std::vector<FrameBytes> frames;
    const size_t packed = Pack(ack, &frames, too_large, now);
    AppendFrames(frames, out);
    return packed;
  }

  // The peer's frame decoder accepts payloads up to `max_payload` bytes and events up to
  // `max_event_size` (0: unknown, no limit beyond ours). Set at every handshake, before Pack.
  void SetPeerLimits(uint64_t max_payload, uint64_t max_event_size) {
    peer_max_payload_ = max_payload;
    peer_max_event_size_ = max_event_size;
  }

  // Frees the frames up to and including sequence `ack`. kDataLoss when `ack` names a frame never
  // sent (a broken peer). `now` (when the acknowledgement arrived) ends a frame's timing.
  absl::Status Acknowledge(uint64_t ack, absl::Time now = absl::InfinitePast());

  // After a reconnect: the peer has received everything up to `peer_received`. Frees those frames
  // and appends every later unacknowledged frame to `out`, in order: the very bytes sent before.
  // kDataLoss when `peer_received` names a frame never sent.
  absl::Status Resend(uint64_t peer_received, std::vector<FrameBytes>* out);
  // The same, appending a copy of the frames' bytes to `out` (tests and tools).
  absl::Status Resend(uint64_t peer_received, std::string* out) {
    std::vector<FrameBytes> frames;
    absl::Status status = Resend(peer_received, &frames);
    AppendFrames(frames, out);
    return status;
  }

  // Ends the stream: calls `report(ev, unsure)` for every event still held: those sent but
  // unacknowledged with unsure = true, oldest first, then the queued ones (the regular lane, then
  // the bulk lane, each in order) with unsure = false.
  void Fail(const std::function<void(EventHandlePtr, bool unsure)>& report);

  // The peer restarted (or lost the session): its new session never saw our frames. Calls
  // `report(ev, true)` for every sent but unacknowledged event and numbers frames from 1 again;
  // queued events stay, in order, for the new session (they were never sent).
  void Restart(const std::function<void(EventHandlePtr, bool unsure)>& report);

  // -- state ------------------------------------------------------------------------------------

  // True when Pack would not take more because of the unacknowledged-bytes limit.
  bool blocked() const { return unacked_bytes_ >= limits_.max_unacked_bytes; }
  size_t unacked_bytes() const { return unacked_bytes_; }
  size_t unacked_frames() const { return unacked_.size(); }
  size_t queued_events() const { return queued_.size() + bulk_.size(); }
  // Bytes of chunks sent but not acknowledged.
  size_t unacked_chunk_bytes() const { return unacked_chunk_bytes_; }
  // Sequence number of the last data frame sent (0 before the first).
  uint64_t last_sent() const { return last_sent_; }
  // Frames the peer has acknowledged (resumes included), ever.
  uint64_t acknowledged() const { return acknowledged_; }
  // Returns the HeldCharge of the events that left the stream since the last call. The proxy
  // takes it after every Acknowledge, before it delivers the peer's events that came with it.
  size_t TakeReleased() { return std::exchange(released_, 0); }

 private:
  static void AppendFrames(const std::vector<FrameBytes>& frames, std::string* out) {
    for (const FrameBytes& frame : frames) {
      out->append(*frame);
    }
  }

  struct SentFrame {
    uint64_t sequence;
    FrameBytes bytes;
    // The HeldCharge of its events (a chunked event's whole charge is on its last chunk's frame).
    size_t charge;
    // Bytes of chunks in it.
    size_t chunk_bytes;
    // The chunked event whose last chunk it carries (its earlier chunks' frames came before).
    EventHandlePtr completed;
  };
  struct BulkEvent {
    EventHandlePtr ev;
    // The regular-lane events queued before it: it completes only after they are sent.
    uint64_t regular_before;
  };

  // Adds bulk-lane records to the frame being built: small events whole, at most one chunk.
  // Returns the frame's charge and sets `*completed` to a chunked event it completes.
  size_t PackBulk(FrameEncoder& encoder, uint64_t frame_limit, uint64_t peer_limit,
                  size_t* chunk_bytes, EventHandlePtr* completed,
                  std::vector<EventHandlePtr>* too_large);
  // Leaves the bulk lane's front (sent whole or completed, or refused).
  EventHandlePtr PopBulk();
  // Hands the too-large `ev` back, releasing its charge.
  void Refuse(EventHandlePtr ev, std::vector<EventHandlePtr>* too_large);
  // Frees acknowledged frames up to `ack` (checked by the caller).
  void Release(uint64_t ack);
  // Reports every sent but unacknowledged event (unsure) and forgets the frames.
  void FailUnacked(const std::function<void(EventHandlePtr, bool unsure)>& report);

  const StreamLimits limits_;
  RoundTrips* const round_trips_;
  // The frame being timed (0: none) and when Pack wrote it.
  uint64_t timed_sequence_ = 0;
  absl::Time timed_since_;
  // Builds every frame (its buffer's capacity is kept from frame to frame).
  FrameEncoder encoder_;
  uint64_t peer_max_payload_ = 0;
  uint64_t peer_max_event_size_ = 0;
  size_t released_ = 0;
  uint64_t acknowledged_ = 0;
  std::deque<EventHandlePtr> queued_;
  uint64_t regular_enqueued_ = 0;
  uint64_t regular_packed_ = 0;
  std::deque<BulkEvent> bulk_;
  // Bytes of the bulk lane front's body already cut into chunks (0: not started).
  size_t bulk_cut_ = 0;
  // Senders with events in the bulk lane, and how many.
  absl::flat_hash_map<ActorId, uint32_t> bulk_senders_;
  std::deque<SentFrame> unacked_;
  size_t unacked_bytes_ = 0;
  size_t unacked_chunk_bytes_ = 0;
  uint64_t last_sent_ = 0;
};

class InboundStream {
 public:
  enum class Verdict : uint8_t { kDeliver, kDuplicate };

  // Classifies a received data frame by its sequence number. kDataLoss for a gap (a sequence
  // beyond received() + 1).
  absl::StatusOr<Verdict> Accept(uint64_t sequence);

  // Returns the highest sequence received in order (0 before the first).
  uint64_t received() const { return received_; }

 private:
  uint64_t received_ = 0;
};

}  // namespace troupe::interconnect::internal
