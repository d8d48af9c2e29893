// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/wire.h"

#include <xxhash.h>

#include <array>
#include <memory>

#include "absl/strings/str_format.h"

#include "interconnect/internal/little_endian.h"

namespace troupe::interconnect {

namespace {

using internal::Get32;
using internal::Get64;
using internal::Put32;
using internal::Put64;

void PutId(char* out, const ActorId& id) {
  Put64(out, id.local_id());
  Put32(out + 8, id.hint());
  Put32(out + 12, id.node_word());
}
ActorId GetId(const char* in) { return ActorId::FromRaw(Get64(in), Get32(in + 8), Get32(in + 12)); }

// The header checksum covers bytes 0..31 (the fields); the payload has its own.
uint64_t HeaderChecksum(const char* header) { return XXH3_64bits(header, 32); }
uint64_t PayloadChecksum(std::string_view payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

}  // namespace

void AppendRawFrame(FrameKind kind, uint32_t event_count, uint64_t sequence, uint64_t ack,
                    std::string_view payload, std::string* out) {
  std::array<char, kFrameHeaderSize> bytes = {};
  char* header = bytes.data();
  Put32(header, kWireMagic);
  header[4] = static_cast<char>(kWireVersion);
  header[5] = static_cast<char>(kind);
  Put32(header + 8, static_cast<uint32_t>(payload.size()));
  Put32(header + 12, event_count);
  Put64(header + 16, sequence);
  Put64(header + 24, ack);
  Put64(header + 32, HeaderChecksum(header));
  Put64(header + 40, PayloadChecksum(payload));
  out->append(header, kFrameHeaderSize);
  out->append(payload);
}

// -- encoder ------------------------------------------------------------------------------------

absl::Status FrameEncoder::Add(const EventHandle& ev) {
  if (ev.HasEvent()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "event 0x%08x is not serialized (call EventHandle::Serialize first)", ev.type()));
  }
  const std::string_view body = ev.bytes();
  std::array<char, kEventRecordHeaderSize> bytes = {};
  char* record = bytes.data();
  Put32(record, ev.type());
  Put32(record + 4, ev.flags());
  Put64(record + 8, ev.cookie());
  Put64(record + 16, ev.trace_id());
  PutId(record + 24, ev.recipient());
  PutId(record + 40, ev.sender());
  PutId(record + 56, ev.forward_to());
  Put32(record + 72, static_cast<uint32_t>(body.size()));
  payload_.append(record, kEventRecordHeaderSize);
  payload_.append(body);
  ++event_count_;
  return absl::OkStatus();
}

void FrameEncoder::Finish(uint64_t sequence, uint64_t ack, std::string* out) {
  AppendRawFrame(FrameKind::kData, event_count_, sequence, ack, payload_, out);
  payload_.clear();
  event_count_ = 0;
}

void AppendControlFrame(uint64_t ack, std::string* out) {
  AppendRawFrame(FrameKind::kControl, 0, 0, ack, {}, out);
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
  if (kind != FrameKind::kData && kind != FrameKind::kControl) {
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
  if (kind == FrameKind::kControl && (length != 0 || count != 0)) {
    failure_ = absl::DataLossError("control frame carries a payload");
    return failure_;
  }
  if (count > length / kEventRecordHeaderSize) {
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

absl::Status DecodeEvents(const Frame& frame, const std::function<void(EventHandlePtr)>& deliver) {
  // Check the whole frame first: nothing is delivered from a malformed one.
  const std::string_view payload = frame.payload;
  size_t offset = 0;
  for (uint32_t i = 0; i < frame.event_count; ++i) {
    if (payload.size() - offset < kEventRecordHeaderSize) {
      return absl::DataLossError(absl::StrFormat(
          "event record %u of %u runs past the end of its frame", i + 1, frame.event_count));
    }
    const uint32_t body = Get32(payload.data() + offset + 72);
    if (payload.size() - offset - kEventRecordHeaderSize < body) {
      return absl::DataLossError(
          absl::StrFormat("event record %u of %u has a body of %u bytes, past the end of its frame",
                          i + 1, frame.event_count, body));
    }
    offset += kEventRecordHeaderSize + body;
  }
  if (offset != payload.size()) {
    return absl::DataLossError(
        absl::StrFormat("%u bytes left over after the %u event records of a frame",
                        payload.size() - offset, frame.event_count));
  }
  offset = 0;
  for (uint32_t i = 0; i < frame.event_count; ++i) {
    const char* record = payload.data() + offset;
    const uint32_t body = Get32(record + 72);
    deliver(std::make_unique<EventHandle>(Get32(record), GetId(record + 24), GetId(record + 40),
                                          std::string(record + kEventRecordHeaderSize, body),
                                          Get32(record + 4), Get64(record + 8), GetId(record + 56),
                                          Get64(record + 16)));
    offset += kEventRecordHeaderSize + body;
  }
  return absl::OkStatus();
}

}  // namespace troupe::interconnect
