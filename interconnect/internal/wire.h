// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's wire format: frames of events, encoded and decoded without trusting the peer.
//
// A session's byte stream is a sequence of frames. A frame is a 48-byte header and a payload of
// zero or more event records; all integers are little-endian.
//
//   frame header
//     offset  size  field
//     0       4     magic "TRPF"
//     4       1     protocol version (kWireVersion)
//     5       1     kind: data (events) or control (acknowledgement / heartbeat only)
//     6       2     reserved, zero
//     8       4     payload length in bytes (at most the decoder's limit)
//     12      4     number of event records in the payload
//     16      8     sequence number of this frame (data frames count from 1; control frames 0)
//     24      8     acknowledgement: the highest data sequence received in order
//     32      8     XXH3-64 of bytes 0..31: a corrupt length is caught before its bytes arrive
//     40      8     XXH3-64 of the payload
//   event record
//     0       4     event type          4   4   flags          8   8   cookie
//     16      8     trace id            24  16  recipient      40  16  sender
//     56      16    forward target      72  4   body length    76  ... body (serialized EventPB)
//
// The decoder accepts bytes in any split (one byte at a time or many frames at once) and rejects,
// with a status naming what is wrong, a bad magic or version, a reserved field that is not zero,
// a length above its limit, a checksum mismatch, and records that overrun or underrun their
// frame. It never reads outside its buffer and never allocates more than the limit per frame, so
// garbage from a peer costs a closed connection, not a crash.
//
// Thread-safety: thread-compatible (one session owns its encoder and decoder).
//
// Example:
//
//   FrameEncoder encoder;
//   encoder.Add(*handle);                        // handle->Serialize() first
//   std::string out;
//   encoder.Finish(/*sequence=*/1, /*ack=*/0, &out);
//
//   FrameDecoder decoder(/*max_payload=*/64 << 20);
//   decoder.Append(received_bytes);
//   Frame frame;
//   while (true) {
//     absl::StatusOr<bool> got = decoder.Next(&frame);
//     if (!got.ok()) { /* close the connection: got.status() says why */ }
//     if (!*got) break;                          // need more bytes
//     absl::Status s = DecodeEvents(frame, [](EventHandlePtr ev) { /* deliver */ });
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/event.h"

namespace troupe::interconnect {

inline constexpr uint32_t kWireMagic = 0x46505254;  // "TRPF" read as little-endian
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kFrameHeaderSize = 48;
inline constexpr size_t kEventRecordHeaderSize = 76;
// The decoder's default limit on one frame's payload.
inline constexpr uint32_t kDefaultMaxPayload = 64u << 20;

enum class FrameKind : uint8_t {
  // Carries event records and a sequence number.
  kData = 1,
  // Carries no records: an acknowledgement, or a heartbeat when nothing else is sent.
  kControl = 2,
};

// One decoded frame. `payload` points into the decoder's buffer: valid until the next Append or
// Next call.
struct Frame {
  FrameKind kind = FrameKind::kData;
  uint32_t event_count = 0;
  uint64_t sequence = 0;
  uint64_t ack = 0;
  std::string_view payload;
};

// Builds one data frame from events, then starts over.
class FrameEncoder {
 public:
  // Appends `ev`'s envelope and body. Precondition: `ev` carries bytes (EventHandle::Serialize)
  // or no body at all. Returns kFailedPrecondition for a live, unserialized event.
  absl::Status Add(const EventHandle& ev);

  // Returns the number of events added since the last Finish, and the payload size so far.
  uint32_t event_count() const { return event_count_; }
  size_t payload_size() const { return payload_.size(); }

  // Appends the finished data frame (header, then the records added since the last Finish) to
  // `out` and starts a new frame.
  void Finish(uint64_t sequence, uint64_t ack, std::string* out);

 private:
  std::string payload_;
  uint32_t event_count_ = 0;
};

// Appends a control frame (no records) acknowledging `ack` to `out`.
void AppendControlFrame(uint64_t ack, std::string* out);

// Appends a frame with the given header fields and `payload` taken as is (checksum computed). The
// encoder builds on it; tests use it to forge frames that are well signed but badly formed.
void AppendRawFrame(FrameKind kind, uint32_t event_count, uint64_t sequence, uint64_t ack,
                    std::string_view payload, std::string* out);

// Splits a byte stream into checked frames.
class FrameDecoder {
 public:
  explicit FrameDecoder(uint32_t max_payload = kDefaultMaxPayload) : max_payload_(max_payload) {}

  // Adds received bytes.
  void Append(std::string_view bytes);

  // Decodes the next frame into `frame`. Returns true when a whole, valid frame was decoded; false
  // when more bytes are needed; kDataLoss naming the fault when the stream is malformed (the
  // connection must then be closed: the decoder stays failed).
  absl::StatusOr<bool> Next(Frame* frame);

  // Forgets buffered bytes and any failure: a new connection starts a new byte stream.
  void Reset() {
    buffer_.clear();
    consumed_ = 0;
    failure_ = absl::OkStatus();
  }

  // Returns the number of bytes received but not yet decoded.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  const uint32_t max_payload_;
  std::string buffer_;
  size_t consumed_ = 0;
  absl::Status failure_;
};

// Decodes the records of a data frame, in order, into handles that keep their body serialized
// (parsed lazily by the handler). Calls `deliver` for each. Returns kDataLoss when a record runs
// past the payload, the record count does not match, or bytes are left over; the whole frame is
// checked first, so nothing of a malformed frame is delivered.
absl::Status DecodeEvents(const Frame& frame, const std::function<void(EventHandlePtr)>& deliver);

}  // namespace troupe::interconnect
