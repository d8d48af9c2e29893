// SPDX-License-Identifier: Apache-2.0
//
// The session's reliable stream: backpressure, acknowledgement, resend after a broken connection
// with neither loss nor duplicate, and what is reported when the session dies.
#include "interconnect/internal/stream.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "actors/event.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect {
namespace {

constexpr EventType kEvData = EventSpaceBegin(kUserEventSpace + 5);

// A serialized event whose cookie numbers it and whose body has `size` bytes.
EventHandlePtr Numbered(uint64_t n, size_t size = 10) {
  return std::make_unique<EventHandle>(kEvData, ActorId(2, 0, 1, 1), ActorId(1, 0, 1, 1),
                                       std::string(size, 'd'), kTrackDelivery, n);
}

// Reads a stream of frames on the receiving side; records delivered cookies.
struct Receiver {
  FrameDecoder decoder;
  InboundStream inbound;
  std::vector<uint64_t> delivered;
  uint64_t duplicates = 0;

  // Feeds bytes; returns the first protocol error.
  absl::Status Feed(std::string_view bytes) {
    decoder.Append(bytes);
    Frame frame;
    while (true) {
      absl::StatusOr<bool> got = decoder.Next(&frame);
      if (!got.ok()) {
        return got.status();
      }
      if (!*got) {
        return absl::OkStatus();
      }
      if (frame.kind != FrameKind::kData) {
        continue;
      }
      absl::StatusOr<InboundStream::Verdict> verdict = inbound.Accept(frame.sequence);
      if (!verdict.ok()) {
        return verdict.status();
      }
      if (*verdict == InboundStream::Verdict::kDuplicate) {
        ++duplicates;
        continue;
      }
      if (absl::Status s =
              DecodeEvents(frame, [this](EventHandlePtr ev) { delivered.push_back(ev->cookie()); });
          !s.ok()) {
        return s;
      }
    }
  }
  // A new connection: bytes of the old one are gone, the stream state stays.
  void Reconnect() { decoder.Reset(); }
};

TEST(StreamTest, PacksManyEventsPerFrameUnderThePayloadLimit) {
  OutboundStream out({.max_unacked_bytes = 1 << 20, .max_frame_payload = 1000});
  for (uint64_t i = 0; i < 100; ++i) {
    EventHandlePtr ev = Numbered(i, 10);  // 86-byte records: 11 per 1000-byte frame
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  EXPECT_EQ(out.Pack(0, &bytes), 10u);
  EXPECT_EQ(out.last_sent(), 10u);
  EXPECT_EQ(out.queued_events(), 0u);
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  ASSERT_EQ(receiver.delivered.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(receiver.delivered[i], i);
  }
  EXPECT_EQ(receiver.inbound.received(), 10u);
}

TEST(StreamTest, StopsAtTheUnackedLimitAndResumesOnAck) {
  OutboundStream out({.max_unacked_bytes = 2000, .max_frame_payload = 500});
  for (uint64_t i = 0; i < 100; ++i) {
    EventHandlePtr ev = Numbered(i, 100);
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  const size_t frames = out.Pack(0, &bytes);
  EXPECT_TRUE(out.blocked());
  EXPECT_GT(out.queued_events(), 0u) << "backpressure: the rest waits in the queue";
  EXPECT_LT(out.unacked_bytes(), 2000u + 500u + kFrameHeaderSize + 200u) << "limit plus a frame";
  EXPECT_EQ(out.Pack(0, &bytes), 0u);
  ASSERT_TRUE(out.Acknowledge(frames).ok());
  EXPECT_EQ(out.unacked_bytes(), 0u);
  EXPECT_FALSE(out.blocked());
  EXPECT_GT(out.Pack(0, &bytes), 0u);
}

TEST(StreamTest, RefusesOversizedAndLiveEventsAndKeepsThem) {
  OutboundStream out({.max_event_size = 64});
  EventHandlePtr big = Numbered(1, 65);
  EXPECT_EQ(out.Enqueue(big).code(), absl::StatusCode::kOutOfRange);
  ASSERT_NE(big, nullptr) << "the caller keeps it, to report it undelivered";
  EventHandlePtr fits = Numbered(2, 64);
  EXPECT_TRUE(out.Enqueue(fits).ok());
  struct EvLive final : EventLocal<EvLive, kEvData + 1> {};
  EventHandlePtr live =
      std::make_unique<EventHandle>(ActorId(2, 0, 1, 1), ActorId(), std::make_unique<EvLive>());
  EXPECT_EQ(out.Enqueue(live).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(live, nullptr);
  EXPECT_EQ(out.queued_events(), 1u);
}

TEST(StreamTest, MaxPayloadAdmitsTheLargestEventAlone) {
  const StreamLimits limits{.max_frame_payload = 1000, .max_event_size = 5000};
  EXPECT_EQ(limits.MaxPayload(), 5000 + kEventRecordHeaderSize);
  OutboundStream out(limits);
  EventHandlePtr big = Numbered(1, 5000);
  ASSERT_TRUE(out.Enqueue(big).ok());
  std::string bytes;
  ASSERT_EQ(out.Pack(0, &bytes), 1u);
  FrameDecoder decoder(static_cast<uint32_t>(limits.MaxPayload()));
  decoder.Append(bytes);
  Frame frame;
  absl::StatusOr<bool> got = decoder.Next(&frame);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got);
  EXPECT_EQ(frame.payload.size(), limits.MaxPayload());
}

TEST(StreamTest, RefusesAcksAndGapsOnlyABrokenPeerSends) {
  OutboundStream out;
  EventHandlePtr ev = Numbered(1);
  ASSERT_TRUE(out.Enqueue(ev).ok());
  std::string bytes;
  out.Pack(0, &bytes);
  EXPECT_EQ(out.Acknowledge(2).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(out.Resend(5, &bytes).code(), absl::StatusCode::kDataLoss);
  InboundStream in;
  EXPECT_EQ(in.Accept(0).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(*in.Accept(1), InboundStream::Verdict::kDeliver);
  EXPECT_EQ(*in.Accept(1), InboundStream::Verdict::kDuplicate);
  EXPECT_EQ(in.Accept(3).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(in.received(), 1u);
}

TEST(StreamTest, FailReportsUnackedAsUnsureThenQueuedAsCertain) {
  OutboundStream out({.max_unacked_bytes = 300, .max_frame_payload = 100});
  for (uint64_t i = 0; i < 10; ++i) {
    EventHandlePtr ev = Numbered(i, 10);
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  const size_t frames = out.Pack(0, &bytes);
  ASSERT_GE(frames, 2u);
  ASSERT_TRUE(out.Acknowledge(1).ok());  // frame 1 (one event) arrived for sure
  std::vector<std::pair<uint64_t, bool>> reports;
  out.Fail([&](EventHandlePtr ev, bool unsure) { reports.emplace_back(ev->cookie(), unsure); });
  ASSERT_EQ(reports.size(), 9u);
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].first, i + 1) << "oldest first";
    EXPECT_EQ(reports[i].second, i + 1 < frames) << "sent frames are unsure, queued are certain";
  }
  EXPECT_EQ(out.unacked_bytes(), 0u);
  EXPECT_EQ(out.queued_events(), 0u);
}

// A link that breaks at random points (mid-frame too) and reconnects; acknowledgements flow back
// at random. Every event must arrive exactly once, in order, and memory stays bounded.
TEST(StreamTest, NoLossNoDuplicateAcrossRandomDisconnects) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const StreamLimits limits{.max_unacked_bytes = 4000, .max_frame_payload = 700};
    OutboundStream out(limits);
    Receiver receiver;
    std::string wire;  // bytes sent on the current connection, not yet read by the receiver
    constexpr uint64_t kEvents = 2000;
    uint64_t next = 0;
    size_t max_unacked = 0;
    int reconnects = 0;
    for (int step = 0; step < 200'000 && receiver.delivered.size() < kEvents; ++step) {
      switch (rng() % 6) {
        case 0:
        case 1: {  // the application sends a few events
          for (uint64_t n = rng() % 8; n > 0 && next < kEvents; --n) {
            EventHandlePtr ev = Numbered(next++, rng() % 300);
            ASSERT_TRUE(out.Enqueue(ev).ok());
          }
          out.Pack(receiver.inbound.received(), &wire);
          max_unacked = std::max(max_unacked, out.unacked_bytes());
          break;
        }
        case 2:
        case 3: {  // the receiver reads part of what is on the wire
          const size_t take = std::min<size_t>(wire.size(), rng() % 1500);
          ASSERT_TRUE(receiver.Feed(wire.substr(0, take)).ok()) << "seed " << seed;
          wire.erase(0, take);
          break;
        }
        case 4:  // an acknowledgement comes back
          ASSERT_TRUE(out.Acknowledge(receiver.inbound.received()).ok());
          out.Pack(receiver.inbound.received(), &wire);
          break;
        case 5:  // the connection breaks (sometimes): unread bytes are lost; then it comes back
          if (rng() % 8 == 0) {
            wire.clear();
            receiver.Reconnect();
            ++reconnects;
            ASSERT_TRUE(out.Resend(receiver.inbound.received(), &wire).ok());
            out.Pack(receiver.inbound.received(), &wire);
          }
          break;
      }
    }
    ASSERT_EQ(receiver.delivered.size(), kEvents) << "seed " << seed;
    for (uint64_t i = 0; i < kEvents; ++i) {
      ASSERT_EQ(receiver.delivered[i], i) << "seed " << seed;
    }
    EXPECT_GT(reconnects, 0) << "seed " << seed;
    // The limit, plus at most one frame (a frame is closed at max_frame_payload, and a record of
    // up to 300 + 76 bytes may straddle it).
    EXPECT_LE(max_unacked,
              limits.max_unacked_bytes + limits.max_frame_payload + 376 + kFrameHeaderSize)
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace troupe::interconnect
