// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/wire.h"

#include <xxhash.h>

#include <array>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"

#include "actors/check.h"
#include "interconnect/internal/little_endian.h"

namespace troupe::interconnect::internal {

namespace {

// Bits of a record's first byte.
constexpr uint8_t kKindMask = 0x03;
constexpr uint8_t kHasFlags = 1u << 2;
constexpr uint8_t kHasCookie = 1u << 3;
constexpr uint8_t kHasTrace = 1u << 4;
constexpr uint8_t kHasSender = 1u << 5;
constexpr uint8_t kHasForward = 1u << 6;
// The recipient and sender are those of the frame's previous event or first chunk (left out).
constexpr uint8_t kSameIds = 1u << 7;

// The header checksum covers bytes 0..31 (the fields); the payload has its own.
uint64_t HeaderChecksum(const char* header) { return XXH3_64bits(header, 32); }
uint64_t PayloadChecksum(std::string_view payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

// Appends `value` as a varint (protobuf's encoding: LEB128, shortest form).
void PutVarint(std::string* out, uint64_t value) {
  std::array<uint8_t, 10> bytes = {};
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(value, bytes.data());
  out->append(reinterpret_cast<const char*>(bytes.data()), static_cast<size_t>(end - bytes.data()));
}

void PutId(std::string* out, const ActorId& id) {
  PutVarint(out, id.local_id());
  PutVarint(out, id.hint());
  PutVarint(out, id.node_word());
}

// Reads one record at a time out of a frame's payload, refusing anything but the one encoding
// FrameEncoder writes. Every read is bounds-checked; the first fault sticks.
class RecordReader {
 public:
  explicit RecordReader(std::string_view payload)
      : at_(payload.data()), end_(at_ + payload.size()) {}

  bool done() const { return at_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - at_); }

  // Reads record `index` (1-based, for messages) into `record`.
  absl::Status Next(uint32_t index, Record* record) {
    if (at_ == end_) {
      return Fault(index, "is missing: the frame ends before it");
    }
    *record = Record();
    const auto head = static_cast<uint8_t>(*at_++);
    const uint8_t kind = head & kKindMask;
    if (kind > static_cast<uint8_t>(RecordKind::kNextChunk)) {
      return Fault(index, absl::StrFormat("has an unknown kind byte 0x%02x", head));
    }
    record->kind = static_cast<RecordKind>(kind);
    if (record->kind == RecordKind::kNextChunk) {
      if ((head & ~kKindMask) != 0) {
        return Fault(index, "is a next chunk with envelope fields");
      }
    } else {
      if (left() < 4) {
        return Fault(index, "runs past the end of its frame");
      }
      record->type = Get32(at_);
      at_ += 4;
      uint64_t flags = 0;
      if (!Optional(head, kHasFlags, UINT32_MAX, &flags) ||
          !Optional(head, kHasCookie, UINT64_MAX, &record->cookie) ||
          !Optional(head, kHasTrace, UINT64_MAX, &record->trace_id)) {
        return Fault(index, fault_);
      }
      if ((head & kSameIds) != 0) {
        if (!has_previous_ || (head & kHasSender) != 0) {
          return Fault(index, has_previous_ ? "repeats the previous ids and has a sender too"
                                            : "repeats the ids of a record before the first");
        }
        record->recipient = previous_recipient_;
        record->sender = previous_sender_;
      } else if (!Id(&record->recipient) || !OptionalId(head, kHasSender, &record->sender)) {
        return Fault(index, fault_);
      } else if (has_previous_ && record->recipient == previous_recipient_ &&
                 record->sender == previous_sender_) {
        return Fault(index, "repeats the previous record's ids without saying so");
      }
      if (!OptionalId(head, kHasForward, &record->forward_to)) {
        return Fault(index, fault_);
      }
      has_previous_ = true;
      previous_recipient_ = record->recipient;
      previous_sender_ = record->sender;
      record->flags = static_cast<uint32_t>(flags);
      if (record->kind == RecordKind::kFirstChunk) {
        uint64_t total = 0;
        if (!Varint(UINT32_MAX, &total)) {
          return Fault(index, fault_);
        }
        record->total_size = static_cast<uint32_t>(total);
      }
    }
    uint64_t length = 0;
    if (!Varint(UINT32_MAX, &length)) {
      return Fault(index, fault_);
    }
    if (length > left()) {
      return Fault(index,
                   absl::StrFormat("has a body of %u bytes, past the end of its frame", length));
    }
    if (record->kind != RecordKind::kEvent &&
        (length == 0 ||
         (record->kind == RecordKind::kFirstChunk && record->total_size <= length))) {
      return Fault(index, "is a chunk that is empty or holds the whole event");
    }
    record->bytes = std::string_view(at_, length);
    at_ += length;
    return absl::OkStatus();
  }

 private:
  static absl::Status Fault(uint32_t index, const std::string& what) {
    return absl::DataLossError(absl::StrCat("record ", index, " ", what));
  }

  // Reads a varint of at most `max`, in its shortest form.
  bool Varint(uint64_t max, uint64_t* value) {
    if (at_ != end_ && static_cast<uint8_t>(*at_) < 0x80) {
      *value = static_cast<uint8_t>(*at_++);  // one byte: the common case, and always canonical
      return *value <= max || Fail("has a varint too large for its field");
    }
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == end_) {
        fault_ = "runs past the end of its frame";
        return false;
      }
      const auto byte = static_cast<uint8_t>(*at_++);
      if (shift == 63 && byte > 1) {
        fault_ = "has a varint over 64 bits";
        return false;
      }
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        if (byte == 0 && shift != 0) {
          fault_ = "has a varint with a redundant zero byte";
          return false;
        }
        if (result > max) {
          fault_ = "has a varint too large for its field";
          return false;
        }
        *value = result;
        return true;
      }
    }
    fault_ = "has a varint over 64 bits";
    return false;
  }

  // A field present when `bit` is set in `head`; present means not zero.
  bool Optional(uint8_t head, uint8_t bit, uint64_t max, uint64_t* value) {
    *value = 0;
    if ((head & bit) == 0) {
      return true;
    }
    if (!Varint(max, value)) {
      return false;
    }
    if (*value == 0) {
      fault_ = "marks a field present that is zero";
      return false;
    }
    return true;
  }

  bool Id(ActorId* id) {
    uint64_t local = 0;
    uint64_t hint = 0;
    uint64_t word = 0;
    if (!Varint(UINT64_MAX, &local) || !Varint(UINT32_MAX, &hint) || !Varint(UINT32_MAX, &word)) {
      return false;
    }
    *id = ActorId::FromRaw(local, static_cast<uint32_t>(hint), static_cast<uint32_t>(word));
    return true;
  }

  bool OptionalId(uint8_t head, uint8_t bit, ActorId* id) {
    *id = ActorId();
    if ((head & bit) == 0) {
      return true;
    }
    if (!Id(id)) {
      return false;
    }
    if (id->IsEmpty()) {
      fault_ = "marks an id present that is empty";
      return false;
    }
    return true;
  }

  bool Fail(const char* fault) {
    fault_ = fault;
    return false;
  }

  const char* at_;
  const char* const end_;
  const char* fault_ = "";
  // The ids of the previous event or first chunk, for kSameIds.
  bool has_previous_ = false;
  ActorId previous_recipient_;
  ActorId previous_sender_;
};

EventHandlePtr MakeHandle(const Record& record, EventBytesPtr body) {
  return std::make_unique<EventHandle>(record.type, record.recipient, record.sender,
                                       std::move(body), record.flags, record.cookie,
                                       record.forward_to, record.trace_id);
}

}  // namespace

namespace {

// Writes the kFrameHeaderSize bytes of a frame's header at `header`, for `payload`.
void WriteHeader(char* header, FrameKind kind, uint32_t event_count, uint64_t sequence,
                 uint64_t ack, std::string_view payload) {
  Put32(header, kWireMagic);
  header[4] = static_cast<char>(kWireVersion);
  header[5] = static_cast<char>(kind);
  header[6] = 0;
  header[7] = 0;
  Put32(header + 8, static_cast<uint32_t>(payload.size()));
  Put32(header + 12, event_count);
  Put64(header + 16, sequence);
  Put64(header + 24, ack);
  Put64(header + 32, HeaderChecksum(header));
  Put64(header + 40, PayloadChecksum(payload));
}

}  // namespace

void AppendRawFrame(FrameKind kind, uint32_t event_count, uint64_t sequence, uint64_t ack,
                    std::string_view payload, std::string* out) {
  std::array<char, kFrameHeaderSize> header = {};
  WriteHeader(header.data(), kind, event_count, sequence, ack, payload);
  out->append(header.data(), header.size());
  out->append(payload);
}

// -- encoder ------------------------------------------------------------------------------------

void FrameEncoder::Reset() {
  buffer_.assign(kFrameHeaderSize, '\0');
  event_count_ = 0;
  has_previous_ = false;
}

void FrameEncoder::Add(const Record& record) {
  auto head = static_cast<uint8_t>(record.kind);
  if (record.kind != RecordKind::kNextChunk) {
    head |= record.flags != 0 ? kHasFlags : 0;
    head |= record.cookie != 0 ? kHasCookie : 0;
    head |= record.trace_id != 0 ? kHasTrace : 0;
    head |= !record.sender.IsEmpty() ? kHasSender : 0;
    head |= !record.forward_to.IsEmpty() ? kHasForward : 0;
  }
  const bool same_ids = record.kind != RecordKind::kNextChunk && has_previous_ &&
                        record.recipient == previous_recipient_ &&
                        record.sender == previous_sender_;
  if (same_ids) {
    head = static_cast<uint8_t>((head & ~kHasSender) | kSameIds);
  }
  buffer_.push_back(static_cast<char>(head));
  if (record.kind != RecordKind::kNextChunk) {
    has_previous_ = true;
    previous_recipient_ = record.recipient;
    previous_sender_ = record.sender;
    std::array<char, 4> type = {};
    Put32(type.data(), record.type);
    buffer_.append(type.data(), type.size());
    if ((head & kHasFlags) != 0) {
      PutVarint(&buffer_, record.flags);
    }
    if ((head & kHasCookie) != 0) {
      PutVarint(&buffer_, record.cookie);
    }
    if ((head & kHasTrace) != 0) {
      PutVarint(&buffer_, record.trace_id);
    }
    if (!same_ids) {
      PutId(&buffer_, record.recipient);
      if ((head & kHasSender) != 0) {
        PutId(&buffer_, record.sender);
      }
    }
    if ((head & kHasForward) != 0) {
      PutId(&buffer_, record.forward_to);
    }
    if (record.kind == RecordKind::kFirstChunk) {
      PutVarint(&buffer_, record.total_size);
    }
  }
  PutVarint(&buffer_, record.bytes.size());
  buffer_.append(record.bytes);
  ++event_count_;
}

namespace {

// The record of `ev` carrying `bytes` (its body, or a piece of it).
Record EnvelopeOf(const EventHandle& ev, RecordKind kind, std::string_view bytes) {
  return Record{.kind = kind,
                .type = ev.type(),
                .flags = ev.flags(),
                .cookie = ev.cookie(),
                .trace_id = ev.trace_id(),
                .recipient = ev.recipient(),
                .sender = ev.sender(),
                .forward_to = ev.forward_to(),
                .total_size = static_cast<uint32_t>(ev.bytes().size()),
                .bytes = bytes};
}

}  // namespace

absl::Status FrameEncoder::Add(const EventHandle& ev) {
  if (ev.HasEvent()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "event 0x%08x is not serialized (call EventHandle::Serialize first)", ev.type()));
  }
  Add(EnvelopeOf(ev, RecordKind::kEvent, ev.bytes()));
  return absl::OkStatus();
}

void FrameEncoder::AddFirstChunk(const EventHandle& ev, size_t length) {
  TROUPE_DCHECK(!ev.HasEvent() && length > 0 && length < ev.bytes().size());
  Add(EnvelopeOf(ev, RecordKind::kFirstChunk, ev.bytes().substr(0, length)));
}

void FrameEncoder::AddNextChunk(std::string_view piece) {
  TROUPE_DCHECK(!piece.empty());
  Record record;
  record.kind = RecordKind::kNextChunk;
  record.bytes = piece;
  Add(record);
}

void FrameEncoder::WriteFrameHeader(uint64_t sequence, uint64_t ack) {
  const std::string_view payload{buffer_.data() + kFrameHeaderSize,
                                 buffer_.size() - kFrameHeaderSize};
  WriteHeader(buffer_.data(), FrameKind::kData, event_count_, sequence, ack, payload);
}

void FrameEncoder::Finish(uint64_t sequence, uint64_t ack, std::string* out) {
  WriteFrameHeader(sequence, ack);
  out->append(buffer_);
  Reset();
}

FrameBytes FrameEncoder::Finish(uint64_t sequence, uint64_t ack) {
  WriteFrameHeader(sequence, ack);
  const size_t size = buffer_.size();
  FrameBytes frame;
  if (buffer_.capacity() - size > size / 2) {
    frame = std::make_shared<const std::string>(buffer_);
  } else {
    frame = std::make_shared<const std::string>(std::move(buffer_));
    buffer_ = std::string();
    buffer_.reserve(size);
  }
  Reset();
  return frame;
}

void AppendControlFrame(uint64_t ack, std::string* out, FrameKind kind) {
  AppendRawFrame(kind, 0, 0, ack, {}, out);
}

// -- decoder ------------------------------------------------------------------------------------

void FrameDecoder::Append(std::string_view bytes) {
  if (consumed_ > 0) {
    // Frames handed out before this call are no longer referenced: drop their bytes.
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

void FrameDecoder::Append(std::string&& bytes) {
  if (consumed_ == buffer_.size()) {
    buffer_.swap(bytes);
    consumed_ = 0;
    return;
  }
  Append(std::string_view{bytes});
}

absl::StatusOr<bool> FrameDecoder::Next(Frame* frame) {
  if (!failure_.ok()) {
    return failure_;
  }
  const size_t available = buffer_.size() - consumed_;
  if (available < kFrameHeaderSize) {
    // A wrong magic is reported as soon as its bytes are in, not after a whole header.
    const std::string_view unread = buffer_;
    if (!internal::CouldStartWith(unread.substr(consumed_), kWireMagic)) {
      failure_ = absl::DataLossError("bad frame magic (not a Troupe peer, or garbage)");
      return failure_;
    }
    return false;
  }
  const char* header = buffer_.data() + consumed_;
  if (Get32(header) != kWireMagic) {
    failure_ = absl::DataLossError("bad frame magic (not a Troupe peer, or garbage)");
    return failure_;
  }
  // The version comes before the checksum: another version may lay its header out differently.
  if (static_cast<uint8_t>(header[4]) != kWireVersion) {
    failure_ = absl::DataLossError(absl::StrFormat("unknown wire version %d (this node speaks %d)",
                                                   static_cast<uint8_t>(header[4]), kWireVersion));
    return failure_;
  }
  if (HeaderChecksum(header) != Get64(header + 32)) {
    failure_ = absl::DataLossError("frame header checksum mismatch");
    return failure_;
  }
  const auto kind = static_cast<FrameKind>(static_cast<uint8_t>(header[5]));
  if (kind < FrameKind::kData || kind > FrameKind::kGoodbye) {
    failure_ = absl::DataLossError(
        absl::StrFormat("unknown frame kind %d", static_cast<uint8_t>(header[5])));
    return failure_;
  }
  if (header[6] != 0 || header[7] != 0) {
    failure_ = absl::DataLossError("reserved frame header bytes are not zero");
    return failure_;
  }
  const uint32_t length = Get32(header + 8);
  if (length > max_payload_) {
    failure_ = absl::DataLossError(
        absl::StrFormat("frame payload of %u bytes exceeds the limit of %u", length, max_payload_));
    return failure_;
  }
  const uint32_t count = Get32(header + 12);
  if (IsControlKind(kind) && (length != 0 || count != 0)) {
    failure_ = absl::DataLossError("control frame carries a payload");
    return failure_;
  }
  if (count > length / kMinRecordSize) {
    failure_ =
        absl::DataLossError(absl::StrFormat("frame claims %u events in %u bytes", count, length));
    return failure_;
  }
  if (available < kFrameHeaderSize + length) {
    return false;
  }
  const std::string_view payload(header + kFrameHeaderSize, length);
  if (PayloadChecksum(payload) != Get64(header + 40)) {
    failure_ = absl::DataLossError(absl::StrFormat(
        "frame payload checksum mismatch (sequence %u, %u bytes)", Get64(header + 16), length));
    return failure_;
  }
  frame->kind = kind;
  frame->event_count = count;
  frame->sequence = Get64(header + 16);
  frame->ack = Get64(header + 24);
  frame->payload = payload;
  consumed_ += kFrameHeaderSize + length;
  return true;
}

// -- records ------------------------------------------------------------------------------------

namespace {

// Checks every record of `frame` with `check` (a Record -> absl::Status; the first fault stops
// it), then, when all is well, hands each to `apply`. Nothing of a malformed frame is applied.
template <typename Check, typename Apply>
absl::Status CheckThenApply(const Frame& frame, Check check, Apply apply) {
  Record record;
  {
    RecordReader reader(frame.payload);
    for (uint32_t i = 0; i < frame.event_count; ++i) {
      absl::Status status = reader.Next(i + 1, &record);
      if (status.ok()) {
        status = check(i + 1, record);
      }
      if (!status.ok()) {
        return absl::DataLossError(
            absl::StrCat(status.message(), " (", frame.event_count, " records in the frame)"));
      }
    }
    if (!reader.done()) {
      return absl::DataLossError(absl::StrFormat(
          "%u bytes left over after the %u records of a frame", reader.left(), frame.event_count));
    }
  }
  RecordReader reader(frame.payload);
  for (uint32_t i = 0; i < frame.event_count; ++i) {
    (void)reader.Next(i + 1, &record);  // checked above
    apply(record);
  }
  return absl::OkStatus();
}

absl::Status AnyOrder(uint32_t /*index*/, const Record& /*record*/) { return absl::OkStatus(); }

}  // namespace

absl::Status ParseRecords(const Frame& frame, const std::function<void(const Record&)>& visit) {
  return CheckThenApply(frame, AnyOrder, visit);
}

absl::Status DecodeEvents(const Frame& frame, const std::function<void(EventHandlePtr)>& deliver) {
  return CheckThenApply(frame, AnyOrder, [&deliver](const Record& record) {
    if (record.kind == RecordKind::kEvent) {
      deliver(MakeHandle(record, EventBytes::Copy(record.bytes)));
    }
  });
}

absl::Status RecordDecoder::Decode(const Frame& frame,
                                   const std::function<void(EventHandlePtr)>& deliver) {
  // The chunks' turns are checked on a copy of the state, so a bad frame changes nothing.
  bool assembling = assembling_;
  size_t missing = assembling_ ? envelope_.total_size - filled_ : 0;
  auto check = [&](uint32_t index, const Record& record) -> absl::Status {
    switch (record.kind) {
      case RecordKind::kEvent:
        return absl::OkStatus();
      case RecordKind::kFirstChunk:
        if (assembling) {
          return absl::DataLossError(absl::StrCat(
              "record ", index, " starts a chunked event while another is incomplete"));
        }
        if (record.total_size > max_event_size_) {
          return absl::DataLossError(absl::StrCat("record ", index, " starts a chunked event of ",
                                                  record.total_size, " bytes, over the limit of ",
                                                  max_event_size_));
        }
        assembling = true;
        missing = record.total_size - record.bytes.size();
        return absl::OkStatus();
      case RecordKind::kNextChunk:
        if (!assembling) {
          return absl::DataLossError(
              absl::StrCat("record ", index, " continues a chunked event that was never started"));
        }
        if (record.bytes.size() > missing) {
          return absl::DataLossError(absl::StrCat("record ", index,
                                                  " overruns its chunked event by ",
                                                  record.bytes.size() - missing, " bytes"));
        }
        missing -= record.bytes.size();
        assembling = missing > 0;
        return absl::OkStatus();
    }
    return absl::OkStatus();
  };
  return CheckThenApply(frame, check, [&](const Record& record) {
    switch (record.kind) {
      case RecordKind::kEvent:
        deliver(MakeHandle(record, EventBytes::Copy(record.bytes)));
        break;
      case RecordKind::kFirstChunk:
        envelope_ = record;
        envelope_.bytes = {};
        // The block of the whole event; the chunks are copied into place as they come.
        body_ = EventBytes::Make(record.total_size);
        std::memcpy(body_->data(), record.bytes.data(), record.bytes.size());
        filled_ = record.bytes.size();
        assembling_ = true;
        break;
      case RecordKind::kNextChunk:
        std::memcpy(body_->data() + filled_, record.bytes.data(), record.bytes.size());
        filled_ += record.bytes.size();
        if (filled_ == envelope_.total_size) {
          assembling_ = false;
          filled_ = 0;
          deliver(MakeHandle(envelope_, std::move(body_)));
        }
        break;
    }
  });
}

}  // namespace troupe::interconnect::internal
