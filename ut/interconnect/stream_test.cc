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

namespace troupe::interconnect::internal {
namespace {

constexpr EventType kEvData = EventSpaceBegin(kUserEventSpace + 5);

// A serialized event whose cookie numbers it and whose body has `size` bytes, from actor
// `sender` of node 1.
EventHandlePtr Numbered(uint64_t n, size_t size = 10, uint64_t sender = 1) {
  std::string body(size, 'd');
  if (size > 0) {
    body[size - 1] = static_cast<char>('a' + n % 26);  // a reassembly mix-up shows
  }
  return std::make_unique<EventHandle>(kEvData, ActorId(2, 0, 1, 1), ActorId(1, 0, sender, 1),
                                       std::move(body), kTrackDelivery, n);
}

// Reads a stream of frames on the receiving side; records delivered cookies.
struct Receiver {
  FrameDecoder decoder;
  InboundStream inbound;
  RecordDecoder records{8u << 20};
  std::vector<uint64_t> delivered;
  std::vector<size_t> sizes;
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
              records.Decode(frame,
                             [this](EventHandlePtr ev) {
                               const std::string_view body = ev->bytes();
                               if (!body.empty()) {
                                 EXPECT_EQ(body.back(), static_cast<char>('a' + ev->cookie() % 26))
                                     << "event " << ev->cookie() << " reassembled wrong";
                               }
                               delivered.push_back(ev->cookie());
                               sizes.push_back(body.size());
                             });
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
    EventHandlePtr ev = Numbered(i, 10);  // 24-byte records: over 30 per 1000-byte frame
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  const size_t frames = out.Pack(0, &bytes);
  EXPECT_LE(frames, 4u);
  EXPECT_LE(bytes.size(), 100 * 24 + frames * kFrameHeaderSize) << "about 24 bytes per record";
  EXPECT_EQ(out.last_sent(), frames);
  EXPECT_EQ(out.queued_events(), 0u);
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  ASSERT_EQ(receiver.delivered.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(receiver.delivered[i], i);
  }
  EXPECT_EQ(receiver.inbound.received(), frames);
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

TEST(StreamTest, LargeEventsTravelInChunksWithinTheFrameLimit) {
  const StreamLimits limits{.max_frame_payload = 1000, .max_event_size = 5000};
  EXPECT_EQ(limits.MaxPayload(), 1000 + kMaxRecordOverhead);
  OutboundStream out(limits);
  EventHandlePtr big = Numbered(1, 5000);
  ASSERT_TRUE(out.Enqueue(big).ok());
  std::string bytes;
  ASSERT_EQ(out.Pack(0, &bytes), 5u) << "5000 bytes in 1000-byte chunks, one per frame";
  EXPECT_EQ(out.unacked_chunk_bytes(), 5000u);
  FrameDecoder decoder(static_cast<uint32_t>(limits.MaxPayload()));
  decoder.Append(bytes);
  Frame frame;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<bool> got = decoder.Next(&frame);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(*got);
    EXPECT_LE(frame.payload.size(), limits.MaxPayload());
  }
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  ASSERT_EQ(receiver.delivered.size(), 1u) << "whole, once";
  EXPECT_EQ(receiver.sizes[0], 5000u);
  ASSERT_TRUE(out.Acknowledge(5).ok());
  EXPECT_EQ(out.unacked_chunk_bytes(), 0u);
  EXPECT_EQ(out.TakeReleased(), HeldCharge(*Numbered(1, 5000)));
}

// Sender 1 sends a large event, then sender 2 small ones: they ride between its chunks. Sender
// 1's own later event stays behind its large one, and its earlier one before it.
TEST(StreamTest, SmallEventsOfOtherSendersOvertakeALargeOne) {
  OutboundStream out({.chunk_size = 64u << 10, .max_unacked_chunk_bytes = 1 << 20});
  std::vector<EventHandlePtr> events;
  events.push_back(Numbered(0, 10, /*sender=*/1));
  events.push_back(Numbered(1, 1 << 20, /*sender=*/1));  // 16 chunks of 64 KiB
  events.push_back(Numbered(2, 10, /*sender=*/1));
  for (uint64_t i = 3; i < 13; ++i) {
    events.push_back(Numbered(i, 10, /*sender=*/2));
  }
  for (EventHandlePtr& ev : events) {
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  EXPECT_EQ(out.Pack(0, &bytes), 16u);
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  EXPECT_EQ(receiver.delivered, (std::vector<uint64_t>{0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2}));
  EXPECT_EQ(receiver.sizes[11], size_t{1} << 20);
}

TEST(StreamTest, ChunksInFlightStayUnderTheirWindow) {
  OutboundStream out({.chunk_size = 64u << 10, .max_unacked_chunk_bytes = 256u << 10});
  for (uint64_t i = 0; i < 4; ++i) {
    EventHandlePtr ev = Numbered(i, 1 << 20, /*sender=*/i + 1);
    ASSERT_TRUE(out.Enqueue(ev).ok());
  }
  std::string bytes;
  EXPECT_EQ(out.Pack(0, &bytes), 4u) << "4 chunks of 64 KiB fill the window";
  EventHandlePtr small = Numbered(9, 10, /*sender=*/7);
  ASSERT_TRUE(out.Enqueue(small).ok());
  EXPECT_EQ(out.Pack(0, &bytes), 1u) << "a small event is not held back by the window";
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  EXPECT_EQ(receiver.delivered, std::vector<uint64_t>{9});
  uint64_t acked = 0;
  for (int round = 0; round < 100 && receiver.delivered.size() < 5; ++round) {
    acked = receiver.inbound.received();
    ASSERT_TRUE(out.Acknowledge(acked).ok());
    bytes.clear();
    out.Pack(acked, &bytes);
    EXPECT_LE(out.unacked_chunk_bytes(), 256u << 10);
    ASSERT_TRUE(receiver.Feed(bytes).ok());
  }
  EXPECT_EQ(receiver.delivered, (std::vector<uint64_t>{9, 0, 1, 2, 3}));
}

TEST(StreamTest, RefusesEventsLargerThanThePeerTakes) {
  OutboundStream out;
  out.SetPeerLimits(kMaxRecordOverhead + (256u << 10), /*max_event_size=*/4096);
  EventHandlePtr big = Numbered(1, 100'000);
  EventHandlePtr fits = Numbered(2, 4096);
  ASSERT_TRUE(out.Enqueue(big).ok());
  ASSERT_TRUE(out.Enqueue(fits).ok());
  std::string bytes;
  std::vector<EventHandlePtr> too_large;
  EXPECT_EQ(out.Pack(0, &bytes, &too_large), 1u);
  ASSERT_EQ(too_large.size(), 1u);
  EXPECT_EQ(too_large[0]->cookie(), 1u);
  EXPECT_EQ(out.TakeReleased(), HeldCharge(*too_large[0]));
  Receiver receiver;
  ASSERT_TRUE(receiver.Feed(bytes).ok());
  EXPECT_EQ(receiver.delivered, std::vector<uint64_t>{2});
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

// A chunked event is reported once: certain while its last chunk is unsent, unsure after.
TEST(StreamTest, FailReportsAChunkedEventOnce) {
  for (const bool all_sent : {false, true}) {
    OutboundStream out(
        {.chunk_size = 64u << 10, .max_unacked_chunk_bytes = all_sent ? 1u << 20 : 128u << 10});
    EventHandlePtr big = Numbered(1, 300'000);
    ASSERT_TRUE(out.Enqueue(big).ok());
    std::string bytes;
    EXPECT_EQ(out.Pack(0, &bytes), all_sent ? 5u : 2u);
    std::vector<std::pair<uint64_t, bool>> reports;
    out.Fail([&](EventHandlePtr ev, bool unsure) { reports.emplace_back(ev->cookie(), unsure); });
    EXPECT_EQ(reports, (std::vector<std::pair<uint64_t, bool>>{{1, all_sent}}));
    EXPECT_EQ(out.TakeReleased(), HeldCharge(*Numbered(1, 300'000)));
    EXPECT_EQ(out.queued_events(), 0u);
    EXPECT_EQ(out.unacked_chunk_bytes(), 0u);
  }
}

// The peer restarted: a chunked event cut in part starts again from its first chunk.
TEST(StreamTest, RestartCutsAChunkedEventFromTheStartAgain) {
  OutboundStream out({.chunk_size = 64u << 10, .max_unacked_chunk_bytes = 128u << 10});
  EventHandlePtr big = Numbered(1, 300'000);
  ASSERT_TRUE(out.Enqueue(big).ok());
  std::string bytes;
  ASSERT_EQ(out.Pack(0, &bytes), 2u);
  size_t reported = 0;
  out.Restart([&](EventHandlePtr /*ev*/, bool /*unsure*/) { ++reported; });
  EXPECT_EQ(reported, 0u) << "only chunks were sent: the event itself is still queued";
  EXPECT_EQ(out.queued_events(), 1u);
  Receiver receiver;  // the peer's new session
  for (int round = 0; round < 20 && receiver.delivered.empty(); ++round) {
    ASSERT_TRUE(out.Acknowledge(receiver.inbound.received()).ok());
    bytes.clear();
    out.Pack(receiver.inbound.received(), &bytes);
    ASSERT_TRUE(receiver.Feed(bytes).ok());
  }
  EXPECT_EQ(receiver.delivered, std::vector<uint64_t>{1});
  EXPECT_EQ(receiver.sizes, std::vector<size_t>{300'000});
}

// A link that breaks at random points (mid-frame too) and reconnects; acknowledgements flow back
// at random. Every event must arrive exactly once, in order, and memory stays bounded.
TEST(StreamTest, NoLossNoDuplicateAcrossRandomDisconnects) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const StreamLimits limits{.max_unacked_bytes = 4000,
                              .max_frame_payload = 700,
                              .chunk_size = 256,
                              .max_unacked_chunk_bytes = 1024};
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
            // Mostly small events; one in ten is cut into 256-byte chunks.
            EventHandlePtr ev = Numbered(next, rng() % 10 == 0 ? 257 + rng() % 3000 : rng() % 300);
            ++next;
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
    // The limit, plus at most one frame (a frame holds at most MaxPayload bytes of records).
    EXPECT_LE(max_unacked, limits.max_unacked_bytes + limits.MaxPayload() + kFrameHeaderSize)
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace troupe::interconnect::internal
