// SPDX-License-Identifier: Apache-2.0
//
// The in-memory pipe transport, driven by the deterministic test runtime: connect and accept,
// ordered bytes across nodes under simulated latency, and the faults it injects.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/internal/wire.h"
#include "interconnect/testing/pipe_network.h"

namespace troupe::interconnect {
namespace {

using internal::AppendControlFrame;
using internal::Frame;
using internal::FrameDecoder;

using testing::TestRuntime;

struct Pair {
  ConnectionId client = 0;
  ConnectionId server = 0;
};

class PipeTest : public ::testing::Test {
 protected:
  explicit PipeTest(absl::Duration latency = absl::ZeroDuration())
      : runtime_({.nodes = 2}), network_(latency) {
    transport1_ = network_.TransportFor(&runtime_.node(1));
    transport2_ = network_.TransportFor(&runtime_.node(2));
    edge1_ = runtime_.AllocateEdgeActor(1);
    edge2_ = runtime_.AllocateEdgeActor(2);
  }

  // Listens on node 2 and connects from node 1; returns both ends' ids.
  Pair Connect() {
    absl::StatusOr<uint16_t> port = transport2_->Listen("10.0.0.2", 0, edge2_);
    EXPECT_TRUE(port.ok()) << port.status();
    Pair pair;
    pair.client = transport1_->Connect("10.0.0.2", *port, edge1_);
    auto up1 = runtime_.GrabEdgeEvent<EvConnectionUp>(edge1_);
    auto up2 = runtime_.GrabEdgeEvent<EvConnectionUp>(edge2_);
    EXPECT_TRUE(up1 && up2);
    if (up1 && up2) {
      EXPECT_EQ(up1->connection, pair.client);
      EXPECT_FALSE(up1->incoming);
      EXPECT_TRUE(up2->incoming);
      pair.server = up2->connection;
    }
    return pair;
  }

  // Dispatches until idle and returns every byte node `edge` received on `connection`.
  std::string Received(const ActorId& edge, ConnectionId connection) {
    runtime_.DispatchEvents();
    std::string all;
    for (EventHandlePtr& ev : runtime_.TakeEdgeEvents(edge)) {
      if (EvBytesReceived* bytes = ev->Get<EvBytesReceived>()) {
        EXPECT_EQ(bytes->connection, connection);
        all += bytes->bytes;
      }
    }
    return all;
  }

  TestRuntime runtime_;
  PipeNetwork network_;
  std::unique_ptr<Transport> transport1_;
  std::unique_ptr<Transport> transport2_;
  ActorId edge1_;
  ActorId edge2_;
};

TEST_F(PipeTest, CarriesBytesInOrderBothWays) {
  const Pair pair = Connect();
  for (int i = 0; i < 100; ++i) {
    transport1_->Write(pair.client, absl::StrCat(i, ","));
  }
  transport2_->Write(pair.server, "pong");
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    absl::StrAppend(&expected, i, ",");
  }
  EXPECT_EQ(Received(edge2_, pair.server), expected);
  EXPECT_EQ(Received(edge1_, pair.client), "pong");
  EXPECT_EQ(network_.Connections(), 1u);
}

TEST_F(PipeTest, RefusesAConnectionNobodyListensFor) {
  const ConnectionId id = transport1_->Connect("10.0.0.9", 1, edge1_);
  auto down = runtime_.GrabEdgeEvent<EvConnectionDown>(edge1_);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->connection, id);
  EXPECT_EQ(down->reason.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(transport2_->Listen("10.0.0.2", 7, edge2_).ok());
  EXPECT_EQ(transport2_->Listen("10.0.0.2", 7, edge2_).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(PipeTest, CutTellsBothEndsAndLosesNothingAfterIt) {
  const Pair pair = Connect();
  transport1_->Write(pair.client, "before");
  network_.Cut(pair.client);
  transport1_->Write(pair.client, "after");  // ignored: the connection is down
  EXPECT_EQ(Received(edge2_, pair.server), "before");
  auto down1 = runtime_.GrabEdgeEvent<EvConnectionDown>(edge1_);
  ASSERT_TRUE(down1);
  EXPECT_EQ(down1->connection, pair.client);
  EXPECT_EQ(network_.Connections(), 0u);
}

TEST_F(PipeTest, CloseTellsOnlyThePeer) {
  const Pair pair = Connect();
  transport1_->Close(pair.client);
  auto down2 = runtime_.GrabEdgeEvent<EvConnectionDown>(edge2_);
  ASSERT_TRUE(down2);
  EXPECT_EQ(down2->connection, pair.server);
  runtime_.DispatchEvents();
  EXPECT_EQ(runtime_.EdgeEventCount(edge1_), 0u);
}

TEST_F(PipeTest, StallHoldsBytesUntilResume) {
  const Pair pair = Connect();
  network_.Stall(pair.server);
  transport1_->Write(pair.client, "held");
  EXPECT_EQ(Received(edge2_, pair.server), "");
  network_.Resume(pair.client);
  EXPECT_EQ(Received(edge2_, pair.server), "held");
}

TEST_F(PipeTest, BlackholeDropsBytesButKeepsTheConnection) {
  const Pair pair = Connect();
  network_.Blackhole(pair.client);
  transport1_->Write(pair.client, "lost");
  transport2_->Write(pair.server, "lost too");
  EXPECT_EQ(Received(edge2_, pair.server), "");
  EXPECT_EQ(Received(edge1_, pair.client), "");
  EXPECT_EQ(network_.Connections(), 1u);
}

TEST_F(PipeTest, CorruptionIsCaughtByTheFrameChecksum) {
  const Pair pair = Connect();
  std::string frame;
  AppendControlFrame(/*ack=*/5, &frame);
  network_.CorruptNextWrite(pair.client);
  transport1_->Write(pair.client, frame);
  transport1_->Write(pair.client, frame);  // only the first is corrupted
  const std::string got = Received(edge2_, pair.server);
  ASSERT_EQ(got.size(), 2 * frame.size());
  EXPECT_NE(got.substr(0, frame.size()), frame);
  EXPECT_EQ(got.substr(frame.size()), frame);
  FrameDecoder decoder;
  decoder.Append(got);
  Frame decoded;
  EXPECT_EQ(decoder.Next(&decoded).status().code(), absl::StatusCode::kDataLoss);
}

class SlowPipeTest : public PipeTest {
 protected:
  SlowPipeTest() : PipeTest(absl::Milliseconds(2)) {}
};

TEST_F(SlowPipeTest, BytesTakeTheLatencyAndACutLosesThoseInFlight) {
  const Pair pair = Connect();
  const absl::Time start = runtime_.Now();
  transport1_->Write(pair.client, "a");
  transport1_->Write(pair.client, "b");
  EXPECT_EQ(Received(edge2_, pair.server), "ab");
  EXPECT_EQ(runtime_.Now(), start + absl::Milliseconds(2));
  transport1_->Write(pair.client, "in flight");
  ASSERT_TRUE(runtime_.AdvanceTime(absl::Milliseconds(1)));
  network_.Cut(pair.client);
  runtime_.DispatchEvents();
  // The cut reaches the server's owner, and the bytes still on their way never do.
  std::vector<EventHandlePtr> events = runtime_.TakeEdgeEvents(edge2_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]->type(), kEvConnectionDown);
}

}  // namespace
}  // namespace troupe::interconnect
