// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's wire format: frames of event records, encoded and decoded without trusting the
// peer.
//
// A session's byte stream is a sequence of frames. A frame is a 48-byte header and a payload of
// zero or more records; fixed-size integers are little-endian, varints are LEB128 (7 bits a byte,
// low first, at most 5 bytes for 32 bits and 10 for 64, no redundant trailing zero byte).
//
//   frame header
//     offset  size  field
//     0       4     magic "TRPF"
//     4       1     protocol version (kWireVersion)
//     5       1     kind: data (records), or one of the control kinds (no records): an
//                   acknowledgement or heartbeat, and the three of a node's leaving (FrameKind)
//     6       2     reserved, zero
//     8       4     payload length in bytes (at most the decoder's limit)
//     12      4     number of records in the payload
//     16      8     sequence number of this frame (data frames count from 1; control frames 0)
//     24      8     acknowledgement: the highest data sequence received in order
//     32      8     XXH3-64 of bytes 0..31: a corrupt length is caught before its bytes arrive
//     40      8     XXH3-64 of the payload
//
//   record (an event, or a chunk of a large one)
//     1 byte    bits 0-1: kind (0 event, 1 first chunk, 2 next chunk); bits 2-6: which optional
//               fields follow (flags, cookie, trace id, sender, forward target); bit 7: the
//               recipient and sender are those of the frame's previous event or first chunk, and
//               are left out (set exactly when they are equal; then the sender bit is clear)
//     event and first chunk:
//       4       event type (fixed)
//       varint  flags, cookie, trace id            (each only when its bit is set; never zero)
//       3 varints  recipient: local id, hint, node word        (unless bit 7)
//       3 varints  sender (when its bit is set; never empty), then forward target (likewise)
//       varint  first chunk only: the whole body's length (more than this chunk's)
//     all kinds:
//       varint  length of what follows, then the body (event) or this piece of it (chunk; never
//               empty)
// A 64-byte body between two actors costs about 30 bytes of record header, under 10 when the
// previous record of the frame had the same two actors (76 in version 1). An event larger than
// the sender's chunk size travels as a first chunk and next chunks, cut so that small events of
// other senders ride between them (stream.h); the receiver reassembles one chunked event at a
// time.
// Every field has one encoding, so decoded records encode back to the same bytes.
//
// The decoder accepts bytes in any split (one byte at a time or many frames at once) and rejects,
// with a status naming what is wrong, a bad magic or version, a reserved field that is not zero,
// a length above its limit, a checksum mismatch, a malformed varint or record, records that
// overrun or underrun their frame, and chunks out of turn. It never reads outside its buffer and
// never allocates more than its limits, so garbage from a peer costs a closed connection, not a
// crash.
//
// Thread-safety: thread-compatible (one session owns its encoder and decoders).
//
// Example:
//
//   FrameEncoder encoder;
//   encoder.Add(*handle);                        // handle->Serialize() first
//   std::string out;
//   encoder.Finish(/*sequence=*/1, /*ack=*/0, &out);
//
//   FrameDecoder decoder(/*max_payload=*/64 << 20);
//   RecordDecoder records(/*max_event_size=*/8 << 20);
//   decoder.Append(received_bytes);
//   Frame frame;
//   while (true) {
//     absl::StatusOr<bool> got = decoder.Next(&frame);
//     if (!got.ok()) { /* close the connection: got.status() says why */ }
//     if (!*got) break;                          // need more bytes
//     absl::Status s = records.Decode(frame, [](EventHandlePtr ev) { /* deliver */ });
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/event.h"

namespace troupe::interconnect::internal {

inline constexpr uint32_t kWireMagic = 0x46505254;  // "TRPF" read as little-endian
inline constexpr uint8_t kWireVersion = 3;
inline constexpr size_t kFrameHeaderSize = 48;
// The most bytes a record takes besides its body (or chunk): kind, type, every optional field at
// its longest, three ids and two lengths.
inline constexpr size_t kMaxRecordOverhead = 1 + 4 + 5 + 10 + 10 + 3 * 20 + 5 + 5;
// The fewest bytes a record can claim (a kind byte and a length): bounds a frame's record count.
inline constexpr size_t kMinRecordSize = 2;
// The decoder's default limit on one frame's payload.
inline constexpr uint32_t kDefaultMaxPayload = 64u << 20;

enum class FrameKind : uint8_t {
  // Carries records and a sequence number.
  kData = 1,
  // Carries no records: an acknowledgement, or a heartbeat when nothing else is sent.
  kControl = 2,
  // The kinds below carry no records either (and acknowledge like kControl). A node leaving
  // the cluster says so on every session: "send me nothing new".
  kLeaving = 3,
  // The answer to kLeaving: "I have sent you all I will; nothing new follows this frame". The
  // leaving node then knows every event for it has arrived.
  kStopped = 4,
  // The leaving node is done: the session ends now, because it left (not a fault).
  kGoodbye = 5,
};

// True for every kind that carries no records.
inline bool IsControlKind(FrameKind kind) { return kind != FrameKind::kData; }

enum class RecordKind : uint8_t {
  // A whole event.
  kEvent = 0,
  // The envelope and first piece of an event cut into chunks.
  kFirstChunk = 1,
  // A later piece of the chunked event in progress; the last one completes it.
  kNextChunk = 2,
};

// One decoded frame. `payload` points into the decoder's buffer: valid until the next Append or
// Next call.
struct Frame {
  FrameKind kind = FrameKind::kData;
  uint32_t event_count = 0;  // records, chunks included
  uint64_t sequence = 0;
  uint64_t ack = 0;
  std::string_view payload;
};

// One decoded record; `bytes` points into the frame's payload. The envelope fields are set for
// kEvent and kFirstChunk only.
struct Record {
  RecordKind kind = RecordKind::kEvent;
  EventType type = 0;
  uint32_t flags = 0;
  uint64_t cookie = 0;
  uint64_t trace_id = 0;
  ActorId recipient;
  ActorId sender;
  ActorId forward_to;
  // kFirstChunk: the length of the whole body.
  uint32_t total_size = 0;
  // The body (kEvent) or this chunk of it.
  std::string_view bytes;
};

// A finished frame's bytes, immutable and shared: a session's stream keeps them for resend while
// the transport writes them (Transport::WriteShared), so a frame is never copied between the
// encoder and the kernel, and a resend is the very same bytes.
using FrameBytes = std::shared_ptr<const std::string>;

// Builds one data frame from records, then starts over.
class FrameEncoder {
 public:
  FrameEncoder() { Reset(); }

  // Appends `ev` whole: envelope and body. Precondition: `ev` carries bytes
  // (EventHandle::Serialize) or no body at all. Returns kFailedPrecondition for a live,
  // unserialized event.
  absl::Status Add(const EventHandle& ev);
  // Appends the first chunk of `ev` (serialized, with a body longer than `length`): its envelope,
  // the whole body's length and the body's first `length` bytes.
  void AddFirstChunk(const EventHandle& ev, size_t length);
  // Appends a later chunk of the chunked event in progress.
  void AddNextChunk(std::string_view piece);
  // Appends `record` as it is (its fields must be what the decoder accepts): decoded records
  // encode back to the same bytes.
  void Add(const Record& record);

  // Returns the number of records added since the last Finish, and the payload size so far.
  uint32_t event_count() const { return event_count_; }
  size_t payload_size() const { return buffer_.size() - kFrameHeaderSize; }

  // Appends the finished data frame (header, then the records added since the last Finish) to
  // `out` and starts a new frame (the encoder keeps its buffer's capacity for it).
  void Finish(uint64_t sequence, uint64_t ack, std::string* out);
  // Returns the finished data frame and starts a new one. The frame is the encoder's buffer,
  // moved, not copied; the next frame's buffer is reserved at this one's size. (A frame whose
  // buffer has more than half its size spare is copied instead, which bounds the memory a frame
  // holds to 1.5 times its bytes, and the buffer is kept.)
  FrameBytes Finish(uint64_t sequence, uint64_t ack);

 private:
  void Reset();
  // Writes the header of the frame being built.
  void WriteFrameHeader(uint64_t sequence, uint64_t ack);

  // The frame being built: room for the header, then the records.
  std::string buffer_;
  uint32_t event_count_ = 0;
  // The ids of the frame's previous event or first chunk: a record with the same ones leaves
  // them out.
  bool has_previous_ = false;
  ActorId previous_recipient_;
  ActorId previous_sender_;
};

// Appends a control frame (no records) of `kind` acknowledging `ack` to `out`.
void AppendControlFrame(uint64_t ack, std::string* out, FrameKind kind = FrameKind::kControl);

// Appends a frame with the given header fields and `payload` taken as is (checksum computed).
// Tests use it to forge frames that are well signed but badly formed.
void AppendRawFrame(FrameKind kind, uint32_t event_count, uint64_t sequence, uint64_t ack,
                    std::string_view payload, std::string* out);

// Splits a byte stream into checked frames.
class FrameDecoder {
 public:
  explicit FrameDecoder(uint32_t max_payload = kDefaultMaxPayload) : max_payload_(max_payload) {}

  // Adds received bytes.
  void Append(std::string_view bytes);
  // The same, taking `bytes` over instead of copying them when nothing is buffered (frames are
  // then decoded in place, in the transport's read buffer).
  void Append(std::string&& bytes);

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

// Parses the records of a data frame, in order, calling `visit` for each. The whole frame is
// checked first, so nothing of a malformed one is visited: kDataLoss when a record is malformed
// or runs past the payload, the record count does not match, or bytes are left over. Chunk
// order across frames is RecordDecoder's to check.
absl::Status ParseRecords(const Frame& frame, const std::function<void(const Record&)>& visit);

// Decodes the whole events of a data frame into handles that keep their body serialized (parsed
// lazily by the handler), skipping chunk records; all or nothing as ParseRecords. A frame-local
// view for tests and fuzzers (no session keeps state in it); a session's receiver needs
// RecordDecoder, which also reassembles chunked events.
absl::Status DecodeEvents(const Frame& frame, const std::function<void(EventHandlePtr)>& deliver);

// Decodes a session's frames into events: whole ones at once, chunked ones when their last chunk
// arrives (one in progress at a time, as the sender cuts them). kDataLoss for a chunk out of turn
// (a next chunk with none in progress, a first chunk while one is), a chunked event larger than
// `max_event_size`, or pieces that overrun its length; nothing of such a frame is delivered.
class RecordDecoder {
 public:
  explicit RecordDecoder(size_t max_event_size) : max_event_size_(max_event_size) {}

  absl::Status Decode(const Frame& frame, const std::function<void(EventHandlePtr)>& deliver);

  // Drops the chunked event in progress: a new session starts a new stream of records.
  void Reset() {
    assembling_ = false;
    body_.reset();
    filled_ = 0;
  }
  // True while a chunked event waits for more chunks.
  bool assembling() const { return assembling_; }

 private:
  const size_t max_event_size_;
  // The chunked event in progress: its envelope (`total_size` set), the block of its body and how
  // many bytes of it have come.
  bool assembling_ = false;
  Record envelope_;
  EventBytesPtr body_;
  size_t filled_ = 0;
};

}  // namespace troupe::interconnect::internal
