// SPDX-License-Identifier: Apache-2.0
//
// The wire format: round trips, any split of the byte stream, and every malformed input the
// decoder must refuse (with a reason) rather than crash on.
#include "interconnect/internal/wire.h"

#include <xxhash.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

#include "actors/event.h"
#include "actors/events.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::interconnect::internal {
namespace {

enum : EventType { kEvWire = EventSpaceBegin(kUserEventSpace + 4) };
struct EvWire final : EventPB<EvWire, ut::TestPayload, kEvWire> {
  EvWire() = default;
  EvWire(uint64_t seq, std::string text) {
    record.set_seq(seq);
    record.set_text(std::move(text));
  }
};

EventHandlePtr MakeEvent(uint64_t seq, std::string text) {
  auto ev = std::make_unique<EventHandle>(
      ActorId(2, 1, 1000 + seq, 7), ActorId(1, 3, 2000 + seq, 9),
      std::make_unique<EvWire>(seq, std::move(text)), kTrackDelivery | kForwardOnNondelivery,
      /*cookie=*/seq * 10, /*forward_to=*/ActorId(2, 0, 5, 6), /*trace_id=*/seq + 77);
  EXPECT_TRUE(ev->Serialize().ok());
  return ev;
}

// Encodes `count` events into frames of `per_frame` events each, sequences from 1.
std::string EncodeStream(int count, int per_frame, uint64_t ack = 0) {
  std::string out;
  FrameEncoder encoder;
  uint64_t sequence = 0;
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(encoder.Add(*MakeEvent(i, std::string(i % 50, 'x'))).ok());
    if (encoder.event_count() == static_cast<uint32_t>(per_frame) || i == count - 1) {
      encoder.Finish(++sequence, ack, &out);
    }
  }
  return out;
}

// Decodes a whole stream fed in chunks of `chunk` bytes (as strings the decoder may take over
// when `owned`); returns the events in order.
std::vector<EventHandlePtr> DecodeStream(const std::string& stream, size_t chunk,
                                         std::vector<uint64_t>* sequences = nullptr,
                                         bool owned = false) {
  FrameDecoder decoder;
  std::vector<EventHandlePtr> events;
  for (size_t at = 0; at < stream.size(); at += chunk) {
    if (owned) {
      decoder.Append(stream.substr(at, chunk));
    } else {
      decoder.Append(std::string_view(stream).substr(at, chunk));
    }
    Frame frame;
    while (true) {
      absl::StatusOr<bool> got = decoder.Next(&frame);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok() || !*got) {
        break;
      }
      if (sequences != nullptr) {
        sequences->push_back(frame.sequence);
      }
      EXPECT_TRUE(
          DecodeEvents(frame, [&](EventHandlePtr ev) { events.push_back(std::move(ev)); }).ok());
    }
  }
  EXPECT_EQ(decoder.buffered(), 0u);
  return events;
}

TEST(WireTest, RoundTripsEveryEnvelopeFieldAndTheBody) {
  std::vector<uint64_t> sequences;
  const std::vector<EventHandlePtr> events =
      DecodeStream(EncodeStream(10, 4, 33), 1 << 20, &sequences);
  ASSERT_EQ(events.size(), 10u);
  EXPECT_EQ(sequences, (std::vector<uint64_t>{1, 2, 3}));
  for (uint64_t i = 0; i < 10; ++i) {
    const EventHandlePtr expected = MakeEvent(i, std::string(i % 50, 'x'));
    EventHandle& got = *events[i];
    EXPECT_EQ(got.type(), kEvWire);
    EXPECT_EQ(got.recipient(), expected->recipient());
    EXPECT_EQ(got.sender(), expected->sender());
    EXPECT_EQ(got.forward_to(), expected->forward_to());
    EXPECT_EQ(got.flags(), expected->flags());
    EXPECT_EQ(got.cookie(), expected->cookie());
    EXPECT_EQ(got.trace_id(), expected->trace_id());
    EXPECT_TRUE(got.HasBytes()) << "the body stays serialized until a handler asks";
    ASSERT_NE(got.Get<EvWire>(), nullptr);
    EXPECT_EQ(got.Get<EvWire>()->record.seq(), i);
  }
}

TEST(WireTest, DecodesTheSameWhateverTheSplit) {
  const std::string stream = EncodeStream(25, 7);
  // Owned chunks: taken over when the decoder holds nothing (a chunk that ends on a frame's end),
  // else copied behind the partial frame.
  for (const bool owned : {false, true}) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{39}, size_t{40}, size_t{41}, size_t{500},
                         stream.size() / 5, stream.size()}) {
      const std::vector<EventHandlePtr> events = DecodeStream(stream, chunk, nullptr, owned);
      ASSERT_EQ(events.size(), 25u) << "chunk " << chunk << " owned " << owned;
      for (uint64_t i = 0; i < 25; ++i) {
        EXPECT_EQ(events[i]->cookie(), i * 10) << "chunk " << chunk << " owned " << owned;
        EXPECT_EQ(events[i]->bytes(), MakeEvent(i, std::string(i % 50, 'x'))->bytes());
      }
    }
  }
}

TEST(WireTest, BodylessEventsAndControlFramesRoundTrip) {
  std::string stream;
  FrameEncoder encoder;
  EventHandle poison(kEvPoison, ActorId(2, 0, 1, 1), ActorId(1, 0, 2, 2), kNoFlags, 5);
  ASSERT_TRUE(encoder.Add(poison).ok());
  encoder.Finish(1, 0, &stream);
  AppendControlFrame(/*ack=*/41, &stream);
  FrameDecoder decoder;
  decoder.Append(stream);
  Frame frame;
  ASSERT_TRUE(*decoder.Next(&frame));
  EXPECT_EQ(frame.kind, FrameKind::kData);
  std::vector<EventHandlePtr> events;
  ASSERT_TRUE(
      DecodeEvents(frame, [&](EventHandlePtr ev) { events.push_back(std::move(ev)); }).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]->type(), kEvPoison);
  EXPECT_EQ(events[0]->cookie(), 5u);
  ASSERT_TRUE(*decoder.Next(&frame));
  EXPECT_EQ(frame.kind, FrameKind::kControl);
  EXPECT_EQ(frame.ack, 41u);
  EXPECT_EQ(frame.sequence, 0u);
  EXPECT_FALSE(*decoder.Next(&frame));
}

TEST(WireTest, TheLeavingFramesAreControlFramesOfTheirOwnKind) {
  std::string stream;
  for (const FrameKind kind : {FrameKind::kLeaving, FrameKind::kStopped, FrameKind::kGoodbye}) {
    AppendControlFrame(/*ack=*/7, &stream, kind);
  }
  FrameDecoder decoder;
  decoder.Append(stream);
  Frame frame;
  for (const FrameKind kind : {FrameKind::kLeaving, FrameKind::kStopped, FrameKind::kGoodbye}) {
    absl::StatusOr<bool> got = decoder.Next(&frame);
    ASSERT_TRUE(got.ok() && *got) << got.status();
    EXPECT_EQ(frame.kind, kind);
    EXPECT_TRUE(IsControlKind(frame.kind));
    EXPECT_EQ(frame.ack, 7u);
    EXPECT_EQ(frame.event_count, 0u);
  }
  // A leaving kind with records is as malformed as a control frame with them, and a kind past
  // the last is unknown.
  for (const uint8_t kind : {uint8_t{3}, uint8_t{6}}) {
    std::string bad;
    AppendRawFrame(static_cast<FrameKind>(kind), kind == 3 ? 1 : 0, 0, 0,
                   kind == 3 ? std::string_view("xx") : std::string_view(), &bad);
    FrameDecoder strict;
    strict.Append(bad);
    EXPECT_EQ(strict.Next(&frame).status().code(), absl::StatusCode::kDataLoss) << int{kind};
  }
}

TEST(WireTest, RefusesALiveEvent) {
  EventHandle live(ActorId(2, 0, 1, 1), ActorId(), std::make_unique<EvWire>(1, "x"));
  FrameEncoder encoder;
  EXPECT_EQ(encoder.Add(live).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(encoder.event_count(), 0u);
}

// Decodes `stream` in one piece and returns the first error (OK if none).
absl::Status FirstError(const std::string& stream, uint32_t max_payload = kDefaultMaxPayload) {
  FrameDecoder decoder(max_payload);
  decoder.Append(stream);
  Frame frame;
  while (true) {
    absl::StatusOr<bool> got = decoder.Next(&frame);
    if (!got.ok()) {
      // The decoder stays failed: a broken stream cannot be resynchronized.
      EXPECT_FALSE(decoder.Next(&frame).ok());
      return got.status();
    }
    if (!*got) {
      return absl::OkStatus();
    }
    if (absl::Status s = DecodeEvents(frame, [](EventHandlePtr) {}); !s.ok()) {
      return s;
    }
  }
}

void ExpectDataLoss(const std::string& stream, std::string_view why,
                    uint32_t max_payload = kDefaultMaxPayload) {
  const absl::Status status = FirstError(stream, max_payload);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(std::string(status.message()).find(why), std::string::npos) << status;
}

TEST(WireTest, RefusesGarbageAtOnce) {
  ExpectDataLoss("GET / HTTP/1.1\r\n", "bad frame magic");
  ExpectDataLoss("X", "bad frame magic");  // one wrong byte is enough
  ExpectDataLoss(std::string(100, '\0'), "bad frame magic");
}

TEST(WireTest, RefusesAFlippedBitAnywhere) {
  // Every bit of header and payload is covered by a checksum; a corrupt length is refused at
  // once, not waited for.
  const std::string stream = EncodeStream(3, 3);
  for (size_t byte = 0; byte < stream.size(); ++byte) {
    std::string broken = stream;
    broken[byte] = static_cast<char>(broken[byte] ^ 0x10);
    const absl::Status status = FirstError(broken);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "byte " << byte;
  }
}

// Recomputes the header checksum of the frame at the start of `frame` after a test edited it, so
// that the field checks (not the checksum) must refuse it.
std::string Resigned(std::string frame) {
  const uint64_t sum = XXH3_64bits(frame.data(), 32);
  for (int i = 0; i < 8; ++i) {
    frame[32 + i] = static_cast<char>(sum >> (8 * i));
  }
  return frame;
}

TEST(WireTest, RefusesBadHeaderFields) {
  const std::string good = EncodeStream(1, 1);
  std::string version = good;
  version[4] = 9;
  ExpectDataLoss(version, "unknown wire version 9");
  std::string edited = good;
  edited[6] = 1;
  ExpectDataLoss(edited, "header checksum mismatch");
  ExpectDataLoss(Resigned(edited), "reserved");
  std::string kind;
  AppendRawFrame(static_cast<FrameKind>(7), 0, 1, 0, "", &kind);
  ExpectDataLoss(kind, "unknown frame kind 7");
  ExpectDataLoss(good, "exceeds the limit of 16", /*max_payload=*/16);
  std::string count = good;
  count[12] = static_cast<char>(0xff);
  ExpectDataLoss(Resigned(count), "claims 255 events");
  std::string payload = good;
  payload.back() = static_cast<char>(payload.back() ^ 1);
  ExpectDataLoss(payload, "payload checksum mismatch");
}

TEST(WireTest, RefusesRecordsThatDoNotFitTheirFrame) {
  // Well-signed frames whose records and lengths disagree: what a buggy or hostile peer can send.
  std::string one;
  FrameEncoder encoder;
  ASSERT_TRUE(encoder.Add(*MakeEvent(3, std::string(100, 'b'))).ok());
  encoder.Finish(1, 0, &one);
  const std::string record = one.substr(kFrameHeaderSize);  // one whole record, 100+ byte body
  auto forge = [](uint32_t count, std::string_view payload) {
    std::string out;
    AppendRawFrame(FrameKind::kData, count, 1, 0, payload, &out);
    return out;
  };
  ASSERT_TRUE(FirstError(forge(1, record)).ok());
  ExpectDataLoss(forge(1, record + "junk"), "4 bytes left over");
  ExpectDataLoss(forge(0, record), "left over");
  ExpectDataLoss(forge(1, record.substr(0, record.size() - 1)), "past the end of its frame");
  ExpectDataLoss(forge(2, record + record.substr(0, 20)), "record 2 ");
  // The body's length is the varint before it (one byte: the body is under 128 bytes).
  const size_t body = MakeEvent(3, std::string(100, 'b'))->bytes().size();
  ASSERT_LT(body, 127u);
  std::string huge_body = record;
  huge_body[record.size() - body - 1] = static_cast<char>(0x7f);
  ExpectDataLoss(forge(1, huge_body), "has a body of 127 bytes, past the end of its frame");
  // Nothing from a malformed frame is delivered, not even the records before the fault.
  FrameDecoder decoder;
  decoder.Append(forge(2, record + record.substr(0, 10)));
  Frame frame;
  absl::StatusOr<bool> got = decoder.Next(&frame);
  ASSERT_TRUE(got.ok() && *got);
  int delivered = 0;
  EXPECT_FALSE(DecodeEvents(frame, [&](EventHandlePtr) { ++delivered; }).ok());
  EXPECT_EQ(delivered, 0);
}

// Every field has one encoding: anything else is refused, so decoded records re-encode to the same
// bytes (the fuzz targets rely on it).
TEST(WireTest, RefusesRecordsInAnyButTheOneEncoding) {
  using namespace std::string_view_literals;  // NOLINT(google-build-using-namespace): "\0"sv
  // A frame of one record, concatenated from `parts`.
  auto frame = [](std::initializer_list<std::string_view> parts) {
    std::string payload;
    for (std::string_view part : parts) {
      payload.append(part);
    }
    std::string out;
    AppendRawFrame(FrameKind::kData, 1, 1, 0, payload, &out);
    return out;
  };
  const std::string_view type = "\x01\x02\x03\x04"sv;
  const std::string_view recipient = "\x01\x01\x02"sv;
  ASSERT_TRUE(FirstError(frame({"\0"sv, type, recipient, "\x02"sv, "ab"sv})).ok());
  ExpectDataLoss(frame({"\x03"sv, type, recipient, "\0"sv}), "unknown kind byte 0x03");
  ExpectDataLoss(frame({"\x80"sv, type, "\0"sv}), "repeats the ids of a record before the first");
  ExpectDataLoss(frame({"\x08"sv, type, "\0"sv, recipient, "\0"sv}),
                 "marks a field present that is zero");
  ExpectDataLoss(frame({"\x20"sv, type, recipient, "\0\0\0"sv, "\0"sv}),
                 "marks an id present that is empty");
  ExpectDataLoss(frame({"\0"sv, type, "\x81\0"sv, "\x01\x02\0"sv}), "redundant zero byte");
  ExpectDataLoss(frame({"\0"sv, type, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"sv}),
                 "varint over 64 bits");
  ExpectDataLoss(frame({"\x06\x01"sv, "x"sv}), "next chunk with envelope fields");
  ExpectDataLoss(frame({"\x02\0"sv}), "empty or holds the whole event");
  ExpectDataLoss(frame({"\x01"sv, type, recipient, "\x02\x02"sv, "ab"sv}),
                 "empty or holds the whole event");
}

// Encodes a 3000-byte event as chunks of 1000 in three frames (sequences 1-3).
std::vector<std::string> ChunkedFrames(const EventHandle& ev) {
  std::vector<std::string> frames(3);
  FrameEncoder encoder;
  encoder.AddFirstChunk(ev, 1000);
  encoder.Finish(1, 0, &frames[0]);
  for (size_t i = 1; i < 3; ++i) {
    encoder.AddNextChunk(ev.bytes().substr(i * 1000, 1000));
    encoder.Finish(i + 1, 0, &frames[i]);
  }
  return frames;
}

// Decodes one frame's bytes with `records`; returns its status and appends what it delivered.
absl::Status DecodeOne(RecordDecoder& records, const std::string& bytes,
                       std::vector<EventHandlePtr>* out) {
  FrameDecoder decoder;
  decoder.Append(bytes);
  Frame frame;
  absl::StatusOr<bool> got = decoder.Next(&frame);
  EXPECT_TRUE(got.ok() && *got);
  return records.Decode(frame, [out](EventHandlePtr ev) { out->push_back(std::move(ev)); });
}

TEST(WireTest, ReassemblesChunkedEventsAndRefusesChunksOutOfTurn) {
  EventHandlePtr big = MakeEvent(4, std::string(2995, 'c'));
  ASSERT_EQ(big->bytes().size(), 3000u) << "the test cuts the body in three";
  const std::vector<std::string> frames = ChunkedFrames(*big);
  RecordDecoder records(/*max_event_size=*/3000);
  std::vector<EventHandlePtr> got;
  for (const std::string& bytes : frames) {
    ASSERT_TRUE(DecodeOne(records, bytes, &got).ok());
  }
  ASSERT_EQ(got.size(), 1u) << "whole, once";
  EXPECT_EQ(got[0]->bytes(), big->bytes());
  EXPECT_EQ(got[0]->cookie(), big->cookie());
  EXPECT_EQ(got[0]->sender(), big->sender());
  EXPECT_EQ(got[0]->forward_to(), big->forward_to());
  EXPECT_FALSE(records.assembling());
  // A sender's own decode (reporting undelivered events) skips the chunks.
  FrameDecoder decoder;
  decoder.Append(frames[0]);
  Frame frame;
  ASSERT_TRUE(*decoder.Next(&frame));
  int whole = 0;
  ASSERT_TRUE(DecodeEvents(frame, [&](EventHandlePtr) { ++whole; }).ok());
  EXPECT_EQ(whole, 0);

  auto refused = [&](RecordDecoder& decoder_under_test, const std::string& bytes,
                     std::string_view why) {
    std::vector<EventHandlePtr> none;
    const absl::Status status = DecodeOne(decoder_under_test, bytes, &none);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(std::string(status.message()).find(why), std::string::npos) << status;
    EXPECT_TRUE(none.empty());
  };
  RecordDecoder fresh(3000);
  refused(fresh, frames[1], "never started");
  RecordDecoder small(2999);
  refused(small, frames[0], "over the limit of 2999");
  RecordDecoder twice(3000);
  ASSERT_TRUE(DecodeOne(twice, frames[0], &got).ok());
  EXPECT_TRUE(twice.assembling());
  refused(twice, frames[0], "while another is incomplete");
  std::string overrun;
  FrameEncoder encoder;
  encoder.AddNextChunk(std::string(2001, 'c'));
  encoder.Finish(2, 0, &overrun);
  refused(twice, overrun, "overruns its chunked event by 1 bytes");
  // The refusals changed nothing: the rest still completes the event.
  ASSERT_TRUE(DecodeOne(twice, frames[1], &got).ok());
  ASSERT_TRUE(DecodeOne(twice, frames[2], &got).ok());
  EXPECT_EQ(got.size(), 2u);
  twice.Reset();
  refused(twice, frames[1], "never started");
}

// The per-event cost the wire format was cut down for: a 64-byte body, to a different actor each
// time, and a stream between the same two actors (which leaves the ids out after the first).
// A frame finished as shared bytes is what the appending Finish writes, holds at most half its size
// spare, and stays unchanged while the encoder builds the next frames (the stream resends it).
TEST(WireTest, ASharedFrameIsTheAppendedBytesAndOutlivesTheNextFrames) {
  FrameEncoder appending;
  FrameEncoder sharing;
  std::vector<std::string> expected;
  std::vector<FrameBytes> shared;
  uint64_t sequence = 0;
  // Small after nothing, large after small (the buffer grew), large after large (reserved), small
  // after large (mostly spare: copied).
  for (const int events : {1, 300, 300, 1, 2}) {
    for (int i = 0; i < events; ++i) {
      const EventHandlePtr ev = MakeEvent(i, std::string(i % 90, 'y'));
      ASSERT_TRUE(appending.Add(*ev).ok());
      ASSERT_TRUE(sharing.Add(*ev).ok());
    }
    ++sequence;
    expected.emplace_back();
    appending.Finish(sequence, /*ack=*/sequence * 3, &expected.back());
    shared.push_back(sharing.Finish(sequence, /*ack=*/sequence * 3));
    EXPECT_EQ(*shared.back(), expected.back()) << "frame " << sequence;
    EXPECT_LE(shared.back()->capacity(), shared.back()->size() * 3 / 2) << "frame " << sequence;
  }
  for (size_t i = 0; i < shared.size(); ++i) {
    EXPECT_EQ(*shared[i], expected[i]) << "frame " << i + 1 << " changed after it was finished";
  }
  const std::vector<EventHandlePtr> events = DecodeStream(*shared[1] + *shared[2], 1000);
  EXPECT_EQ(events.size(), 600u);
}

TEST(WireTest, ASmallEventCostsFewBytesOfHeaders) {
  for (const bool same_actors : {false, true}) {
    FrameEncoder encoder;
    constexpr int kEvents = 1000;
    for (int i = 0; i < kEvents; ++i) {
      const uint64_t recipient = same_actors ? 100'000 : 100'000 + i;
      EventHandle ev(kEvWire, ActorId(2, 1, recipient, 70'000), ActorId(1, 1, 200'000, 1234),
                     std::string(64, 'p'), kNoFlags, /*cookie=*/i);
      ASSERT_TRUE(encoder.Add(ev).ok());
    }
    std::string out;
    encoder.Finish(1, 0, &out);
    EXPECT_LE(out.size(), size_t{kEvents} * (64 + (same_actors ? 10 : 30))) << same_actors;
    // And they decode to what was encoded.
    FrameDecoder decoder;
    decoder.Append(out);
    Frame frame;
    ASSERT_TRUE(*decoder.Next(&frame));
    int i = 0;
    ASSERT_TRUE(DecodeEvents(frame, [&](EventHandlePtr ev) {
                  EXPECT_EQ(ev->recipient().local_id(), same_actors ? 100'000u : 100'000u + i);
                  EXPECT_EQ(ev->sender(), ActorId(1, 1, 200'000, 1234));
                  EXPECT_EQ(ev->cookie(), static_cast<uint64_t>(i));
                  ++i;
                }).ok());
    EXPECT_EQ(i, kEvents);
  }
}

TEST(WireTest, RefusesIdsRepeatedWithoutTheirBit) {
  using namespace std::string_view_literals;  // NOLINT(google-build-using-namespace): "\0"sv
  const std::string_view record = "\0\x01\x02\x03\x04\x01\x01\x02\x01x"sv;  // no sender
  std::string payload(record);
  payload.append(record);
  std::string out;
  AppendRawFrame(FrameKind::kData, 2, 1, 0, payload, &out);
  ExpectDataLoss(out, "record 2 repeats the previous record's ids without saying so");
  // The one encoding of the same two events.
  std::string good;
  FrameEncoder encoder;
  const EventHandle ev(0x04030201, ActorId::FromRaw(1, 1, 2), ActorId(), std::string("x"), kNoFlags,
                       0);
  ASSERT_TRUE(encoder.Add(ev).ok());
  ASSERT_TRUE(encoder.Add(ev).ok());
  encoder.Finish(1, 0, &good);
  EXPECT_EQ(good.substr(kFrameHeaderSize), std::string(record) + "\x80\x01\x02\x03\x04\x01x");
  EXPECT_TRUE(FirstError(good).ok());
}

TEST(WireTest, RefusesAControlFrameWithAPayload) {
  std::string out;
  AppendRawFrame(FrameKind::kControl, 0, 0, 5, "x", &out);
  ExpectDataLoss(out, "control frame carries a payload");
}

TEST(WireTest, SurvivesRandomBytes) {
  std::mt19937_64 rng(12345);
  const std::string good = EncodeStream(2, 2);
  for (int round = 0; round < 2000; ++round) {
    std::string noise = good.substr(0, rng() % good.size());
    const size_t extra = rng() % 200;
    for (size_t i = 0; i < extra; ++i) {
      noise.push_back(static_cast<char>(rng()));
    }
    // OK (a valid prefix, waiting for more) or kDataLoss; never a crash or an out-of-bounds
    // read (ASan checks the latter).
    const absl::Status status = FirstError(noise);
    EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kDataLoss) << status;
  }
}

}  // namespace
}  // namespace troupe::interconnect::internal
