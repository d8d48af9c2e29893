// SPDX-License-Identifier: Apache-2.0
//
// PeerChannel's hand-off from the router's threads to the proxy (interconnect/internal/
// peer_table.h): senders push without a lock and kick only when no kick is on its way; the proxy
// drains on each kick. No event may be left behind after the last kick is handled, and each
// sender's events come out in its order.
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/event.h"
#include "interconnect/internal/peer_table.h"

namespace troupe::interconnect::internal {
namespace {

constexpr EventType kTestType = 0x7e57;

TEST(PeerChannelTest, EveryPushedEventIsDrainedByAKickInEachSendersOrder) {
  constexpr int kSenders = 3;
  constexpr uint64_t kPerSender = 20000;
  PeerChannel channel(2);
  // The kicks "on their way": Push returning true sends one; the proxy handles them one by one.
  std::atomic<int64_t> kicks{0};
  std::atomic<int> senders_done{0};
  std::vector<std::thread> senders;
  senders.reserve(kSenders);
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (uint64_t seq = 0; seq < kPerSender; ++seq) {
        auto ev = std::make_unique<EventHandle>(kTestType, ActorId(), ActorId(), kNoFlags,
                                                (uint64_t{static_cast<uint32_t>(s)} << 32) | seq);
        if (channel.Push(std::move(ev))) {
          kicks.fetch_add(1, std::memory_order_acq_rel);
        }
      }
      senders_done.fetch_add(1, std::memory_order_acq_rel);
    });
  }
  std::vector<uint64_t> next(kSenders, 0);
  uint64_t received = 0;
  uint64_t out_of_order = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  // The proxy: handles kicks until every sender is done and no kick is left; bounded in time.
  while (absl::Now() < deadline) {
    if (kicks.load(std::memory_order_acquire) == 0) {
      if (senders_done.load(std::memory_order_acquire) == kSenders &&
          kicks.load(std::memory_order_acquire) == 0) {
        break;
      }
      std::this_thread::yield();
      continue;
    }
    kicks.fetch_sub(1, std::memory_order_acq_rel);
    channel.Drain([&](EventHandlePtr ev) {
      const auto sender = static_cast<size_t>(ev->cookie() >> 32);
      const uint64_t seq = ev->cookie() & 0xffffffffU;
      if (sender >= next.size() || seq != next[sender]) {
        ++out_of_order;
      } else {
        ++next[sender];
      }
      ++received;
    });
  }
  for (std::thread& sender : senders) {
    sender.join();
  }
  EXPECT_EQ(received, kSenders * kPerSender) << "events were left in the channel with no kick";
  EXPECT_EQ(out_of_order, 0U);
  uint64_t left = 0;
  channel.Drain([&](EventHandlePtr /*ev*/) { ++left; });
  EXPECT_EQ(left, 0U);
}

TEST(PeerChannelTest, ADrainWithNothingQueuedLeavesTheNextPushToKick) {
  PeerChannel channel(2);
  EXPECT_TRUE(
      channel.Push(std::make_unique<EventHandle>(kTestType, ActorId(), ActorId(), kNoFlags, 1)));
  EXPECT_FALSE(
      channel.Push(std::make_unique<EventHandle>(kTestType, ActorId(), ActorId(), kNoFlags, 2)))
      << "a kick is already on its way";
  int drained = 0;
  channel.Drain([&](EventHandlePtr /*ev*/) { ++drained; });
  EXPECT_EQ(drained, 2);
  channel.Drain([&](EventHandlePtr /*ev*/) { ++drained; });
  EXPECT_EQ(drained, 2);
  EXPECT_TRUE(
      channel.Push(std::make_unique<EventHandle>(kTestType, ActorId(), ActorId(), kNoFlags, 3)));
  // Left queued: the channel frees it.
}

}  // namespace
}  // namespace troupe::interconnect::internal
