// SPDX-License-Identifier: Apache-2.0
//
// fuzz_frame_decoder (layout in fuzz/targets.h). Checks, for any input:
//   - the decoder never crashes, never hands out a frame that breaks the header rules (kind, limit,
//     control frames empty, event count fits the payload), and stays failed once failed;
//   - the split does not matter: the same frames and the same verdict as one Append of the whole;
//   - every byte is accounted for: frames plus what is buffered equal what was appended;
//   - structured mode: exactly the encoded frames come out, up to the first that breaks a rule or
//     holds the corrupted byte, and that one is refused (a flipped byte is never accepted);
//   - the session logic downstream agrees with a model: InboundStream's verdicts, ParseRecords
//     (all or nothing; re-encoding the records gives back the payload byte for byte),
//     RecordDecoder (chunks in turn across frames, all or nothing per frame) and
//     OutboundStream::Acknowledge of whatever the peer claims.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/check.h"
#include "actors/event.h"
#include "fuzz/input.h"
#include "fuzz/targets.h"
#include "interconnect/internal/stream.h"
#include "interconnect/internal/wire.h"

namespace troupe::fuzz {
namespace {

using interconnect::internal::AppendRawFrame;
using interconnect::internal::Frame;
using interconnect::internal::FrameDecoder;
using interconnect::internal::FrameKind;
using interconnect::internal::InboundStream;
using interconnect::internal::IsControlKind;
using interconnect::internal::kFrameHeaderSize;
using interconnect::internal::kMinRecordSize;
using interconnect::internal::OutboundStream;
using interconnect::internal::RecordDecoder;

constexpr std::array<uint32_t, 4> kLimits = {256, 4096, 65536,
                                             interconnect::internal::kDefaultMaxPayload};

// A frame copied out of the decoder (its payload view dies with the next Append).
struct OwnedFrame {
  FrameKind kind = FrameKind::kData;
  uint32_t event_count = 0;
  uint64_t sequence = 0;
  uint64_t ack = 0;
  std::string payload;

  bool operator==(const OwnedFrame&) const = default;
};

struct Decoded {
  std::vector<OwnedFrame> frames;
  absl::Status status;  // the failure, or OK when the stream ended cleanly or mid-frame
  size_t buffered = 0;
};

// The kinds wire.h defines: data, control and the three of a node's leaving.
bool KnownKind(FrameKind kind) { return kind >= FrameKind::kData && kind <= FrameKind::kGoodbye; }

void CheckFrame(const Frame& frame, uint32_t limit) {
  TROUPE_CHECK(KnownKind(frame.kind));
  TROUPE_CHECK(frame.payload.size() <= limit) << frame.payload.size() << " > " << limit;
  if (IsControlKind(frame.kind)) {
    TROUPE_CHECK(frame.payload.empty() && frame.event_count == 0);
  }
  TROUPE_CHECK(frame.event_count <= frame.payload.size() / kMinRecordSize);
}

// Appends each chunk and takes every frame it completes, as a session does.
Decoded Decode(FrameDecoder& decoder, uint32_t limit, const std::vector<std::string_view>& chunks) {
  Decoded out;
  size_t appended = 0;
  size_t taken = 0;
  auto drain = [&]() {
    while (true) {
      Frame frame;
      absl::StatusOr<bool> got = decoder.Next(&frame);
      if (!got.ok()) {
        TROUPE_CHECK(absl::IsDataLoss(got.status())) << got.status();
        TROUPE_CHECK(!got.status().message().empty());
        // A failed decoder stays failed, with the same reason.
        absl::StatusOr<bool> again = decoder.Next(&frame);
        TROUPE_CHECK(!again.ok() && again.status() == got.status());
        out.status = got.status();
        return false;
      }
      if (!*got) {
        return true;
      }
      CheckFrame(frame, limit);
      taken += kFrameHeaderSize + frame.payload.size();
      out.frames.push_back(
          {frame.kind, frame.event_count, frame.sequence, frame.ack, std::string(frame.payload)});
    }
  };
  if (chunks.empty() && !drain()) {
    return out;
  }
  for (std::string_view chunk : chunks) {
    decoder.Append(chunk);
    appended += chunk.size();
    if (!drain()) {
      return out;
    }
  }
  out.buffered = decoder.buffered();
  TROUPE_CHECK(taken + out.buffered == appended)
      << taken << " + " << out.buffered << " != " << appended;
  return out;
}

// Builds the structured stream; returns the frames the decoder must hand out (the prefix before
// the first one it must refuse) and whether it must refuse one.
struct Expected {
  std::vector<OwnedFrame> frames;
  bool refused = false;
};

Expected BuildFrames(InputReader& in, uint32_t limit, std::optional<size_t> corrupt_at,
                     std::string* stream) {
  Expected expected;
  uint64_t next_sequence = 0;
  while (!in.empty()) {
    const uint8_t head = in.Byte();
    const uint8_t kind_selector = head & 3;
    auto kind = static_cast<FrameKind>(kind_selector == 1 ? 2 : 1);
    if (kind_selector == 3) {
      kind = static_cast<FrameKind>(in.Byte());
    }
    uint64_t sequence = 0;
    if ((head & 4) != 0) {
      sequence = in.Byte();
    } else if (kind == FrameKind::kData) {
      sequence = ++next_sequence;
    }
    const uint32_t event_count = in.Byte();
    const uint64_t ack = in.Byte();
    const std::string_view payload = in.Bytes(in.U16());
    const size_t begin = stream->size();
    AppendRawFrame(kind, event_count, sequence, ack, payload, stream);
    if (expected.refused) {
      continue;
    }
    const bool valid = KnownKind(kind) && payload.size() <= limit &&
                       (!IsControlKind(kind) || (payload.empty() && event_count == 0)) &&
                       event_count <= payload.size() / kMinRecordSize;
    const bool corrupted =
        corrupt_at.has_value() && *corrupt_at >= begin && *corrupt_at < stream->size();
    if (!valid || corrupted) {
      expected.refused = true;
      continue;
    }
    expected.frames.push_back({kind, event_count, sequence, ack, std::string(payload)});
  }
  return expected;
}

// Runs the decoded frames through the session's logic, each step against a model.
void CheckSession(const std::vector<OwnedFrame>& frames, uint32_t sent_frames) {
  // The session's own side: `sent_frames` frames of one bodyless event each, unacknowledged.
  OutboundStream out;
  for (uint32_t i = 0; i < sent_frames; ++i) {
    auto ev = std::make_unique<EventHandle>(/*type=*/1, ActorId(), ActorId(), kNoFlags, i);
    TROUPE_CHECK(out.Enqueue(ev).ok());
    std::string bytes;
    TROUPE_CHECK(out.Pack(/*ack=*/0, &bytes) == 1);
  }
  TROUPE_CHECK(out.last_sent() == sent_frames);
  uint64_t acked = 0;

  InboundStream in;
  RecordDecoder records(/*max_event_size=*/1u << 20);
  uint64_t received = 0;
  for (const OwnedFrame& owned : frames) {
    if (owned.kind == FrameKind::kData) {
      absl::StatusOr<InboundStream::Verdict> verdict = in.Accept(owned.sequence);
      if (owned.sequence == 0 || owned.sequence > received + 1) {
        TROUPE_CHECK(!verdict.ok() && absl::IsDataLoss(verdict.status()));
        return;  // the session closes the connection
      }
      TROUPE_CHECK(verdict.ok()) << verdict.status();
      if (owned.sequence <= received) {
        TROUPE_CHECK(*verdict == InboundStream::Verdict::kDuplicate);
      } else {
        TROUPE_CHECK(*verdict == InboundStream::Verdict::kDeliver);
        received = owned.sequence;
        const Frame frame{owned.kind, owned.event_count, owned.sequence, owned.ack, owned.payload};
        if (!CheckRecordsRoundTrip(frame)) {
          return;  // the session closes the connection
        }
        // Chunks must come in turn, across frames; a frame out of turn delivers nothing.
        uint32_t delivered = 0;
        absl::Status assembled = records.Decode(frame, [&](EventHandlePtr ev) {
          TROUPE_CHECK(ev != nullptr && !ev->HasEvent());
          ++delivered;
        });
        if (!assembled.ok()) {
          TROUPE_CHECK(absl::IsDataLoss(assembled));
          TROUPE_CHECK(delivered == 0) << "a frame out of turn delivered " << delivered;
          return;
        }
        TROUPE_CHECK(delivered <= owned.event_count);
      }
      TROUPE_CHECK(in.received() == received);
    }
    absl::Status ack = out.Acknowledge(owned.ack);
    if (owned.ack > sent_frames) {
      TROUPE_CHECK(absl::IsDataLoss(ack)) << ack;
      return;
    }
    TROUPE_CHECK(ack.ok()) << ack;
    acked = std::max(acked, owned.ack);
    TROUPE_CHECK(out.unacked_frames() == sent_frames - acked);
    TROUPE_CHECK((out.unacked_bytes() == 0) == (acked == sent_frames));
  }
  // Whatever is left unacknowledged is reported once, as unsure.
  uint32_t reported = 0;
  out.Fail([&](EventHandlePtr ev, bool unsure) {
    TROUPE_CHECK(unsure && ev != nullptr && ev->cookie() >= acked);
    ++reported;
  });
  TROUPE_CHECK(reported == sent_frames - acked);
  TROUPE_CHECK(out.unacked_frames() == 0 && out.unacked_bytes() == 0);
}

}  // namespace

void FuzzFrameDecoder(std::string_view data) {
  InputReader in(data);
  const uint8_t options = in.Byte();
  const uint32_t limit = kLimits[(options >> kFrameLimitShift) & 3];
  const uint32_t sent_frames = (options >> kFrameSentShift) & 7;
  const SplitPlan plan = ReadSplitPlan(in);

  std::string built;
  std::optional<Expected> expected;
  std::string_view stream;
  if ((options & kStructured) != 0) {
    std::optional<size_t> corrupt_at;
    uint8_t mask = 0;
    if ((options & kFrameCorrupt) != 0) {
      corrupt_at = in.U16();
      mask = in.Byte();
      mask = mask == 0 ? 1 : mask;
    }
    const std::string_view specs = in.Rest();
    InputReader first(specs);
    expected = BuildFrames(first, limit, std::nullopt, &built);
    if (corrupt_at.has_value() && !built.empty()) {
      *corrupt_at %= built.size();
      built[*corrupt_at] = static_cast<char>(built[*corrupt_at] ^ mask);
      // Again, now that the frame holding the flipped byte is known.
      std::string unused;
      InputReader second(specs);
      expected = BuildFrames(second, limit, corrupt_at, &unused);
    }
    stream = built;
  } else {
    stream = in.Rest();
  }

  FrameDecoder decoder(limit);
  const Decoded split = Decode(decoder, limit, Split(stream, plan));
  // The same stream in one Append, through Reset (a new connection on the same decoder).
  decoder.Reset();
  TROUPE_CHECK(decoder.buffered() == 0);
  const Decoded whole = Decode(decoder, limit, {stream});
  TROUPE_CHECK(split.frames == whole.frames) << "the split changed the frames";
  TROUPE_CHECK(split.status == whole.status)
      << "the split changed the verdict: " << split.status << " vs " << whole.status;
  TROUPE_CHECK(split.buffered == whole.buffered);

  if (expected.has_value()) {
    TROUPE_CHECK(whole.frames == expected->frames)
        << "decoded " << whole.frames.size() << " frames, encoded " << expected->frames.size();
    TROUPE_CHECK(!whole.status.ok() == expected->refused) << whole.status;
    if (!expected->refused) {
      TROUPE_CHECK(whole.buffered == 0);
    }
  }
  CheckSession(whole.frames, sent_frames);
}

}  // namespace troupe::fuzz
