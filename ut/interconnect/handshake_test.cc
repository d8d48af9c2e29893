// SPDX-License-Identifier: Apache-2.0
//
// The handshake: framing, garbage, and every refusal named in interconnect/internal/handshake.h.
#include "interconnect/internal/handshake.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "interconnect/protocol.h"

namespace troupe::interconnect::internal {
namespace {

LocalIdentity Self() {
  return LocalIdentity{.cluster_id = "blue",
                       .node = 2,
                       .incarnation = 77,
                       .protocol = {},
                       .is_member = [](NodeId node) { return node >= 1 && node <= 3; }};
}

proto::Handshake FromNode1() {
  proto::Handshake hello;
  hello.set_protocol_version(kNewestProtocolVersion);
  hello.set_min_protocol_version(kOldestProtocolVersion);
  hello.add_features(kFeatureLeave);
  hello.set_cluster_id("blue");
  hello.set_from_node(1);
  hello.set_to_node(2);
  hello.set_incarnation(1234);
  hello.set_received(9);
  return hello;
}

void ExpectRefused(const proto::Handshake& hello, std::optional<NodeId> dialed,
                   const std::string& why) {
  const absl::Status status = CheckHandshake(hello, Self(), dialed);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(std::string(status.message()).find(why), std::string::npos) << status;
}

TEST(HandshakeTest, RoundTripsInAnySplitAndKeepsTheBytesAfterIt) {
  std::string bytes;
  AppendHandshake(FromNode1(), &bytes);
  bytes += "FRAMES";
  for (size_t chunk : {size_t{1}, size_t{5}, bytes.size()}) {
    HandshakeReader reader;
    std::optional<proto::Handshake> got;
    for (size_t at = 0; at < bytes.size() && !got.has_value(); at += chunk) {
      reader.Append(std::string_view(bytes).substr(at, chunk));
      absl::StatusOr<std::optional<proto::Handshake>> next = reader.Next();
      ASSERT_TRUE(next.ok()) << next.status();
      got = *next;
      if (got.has_value()) {
        reader.Append(std::string_view(bytes).substr(at + chunk));
      }
    }
    ASSERT_TRUE(got.has_value()) << "chunk " << chunk;
    EXPECT_EQ(got->from_node(), 1u);
    EXPECT_EQ(got->received(), 9u);
    EXPECT_EQ(reader.rest(), "FRAMES") << "chunk " << chunk;
  }
}

TEST(HandshakeTest, RefusesGarbage) {
  for (const std::string& garbage :
       {std::string("GET / HTTP/1.1\r\n"), std::string("X"), std::string("TRPF0000")}) {
    HandshakeReader reader;
    reader.Append(garbage);
    EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kDataLoss) << garbage;
  }
  std::string huge;
  AppendHandshake(FromNode1(), &huge);
  huge[5] = 0x7f;  // length ~ 8 M
  HandshakeReader reader;
  reader.Append(huge);
  EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kDataLoss);
  std::string unparsable;
  AppendHandshake(FromNode1(), &unparsable);
  unparsable[8] = static_cast<char>(0xff);  // an invalid field tag
  HandshakeReader bad;
  bad.Append(unparsable);
  EXPECT_EQ(bad.Next().status().code(), absl::StatusCode::kDataLoss);
}

TEST(HandshakeTest, AcceptsAKnownPeerBothWays) {
  EXPECT_TRUE(CheckHandshake(FromNode1(), Self(), std::nullopt).ok());
  EXPECT_TRUE(CheckHandshake(FromNode1(), Self(), NodeId{1}).ok());
}

TEST(HandshakeTest, RefusesWrongVersionClusterOrNodes) {
  proto::Handshake version = FromNode1();
  version.set_protocol_version(kNewestProtocolVersion + 2);
  version.set_min_protocol_version(kNewestProtocolVersion + 1);
  ExpectRefused(version, std::nullopt,
                absl::StrCat("node 1 speaks protocol version ", kNewestProtocolVersion + 1, "..",
                             kNewestProtocolVersion + 2, "; this node speaks ",
                             RangeText(kOldestProtocolVersion, kNewestProtocolVersion)));
  proto::Handshake cluster = FromNode1();
  cluster.set_cluster_id("red");
  ExpectRefused(cluster, std::nullopt, "belongs to cluster \"red\"");
  proto::Handshake addressee = FromNode1();
  addressee.set_to_node(3);
  ExpectRefused(addressee, std::nullopt, "wanted node 3; this is node 2");
  ExpectRefused(FromNode1(), NodeId{3}, "dialed node 3 but node 1 answered");
  proto::Handshake stranger = FromNode1();
  stranger.set_from_node(9);
  ExpectRefused(stranger, std::nullopt, "node 9 is not another node");
  proto::Handshake self = FromNode1();
  self.set_from_node(2);
  ExpectRefused(self, std::nullopt, "node 2 is not another node");
  proto::Handshake no_incarnation = FromNode1();
  no_incarnation.set_incarnation(0);
  ExpectRefused(no_incarnation, std::nullopt, "incarnation 0");
}

// A handshake announcing `oldest..newest` (oldest 0: a node that announces one version) and
// `features`.
proto::Handshake Announcing(uint32_t oldest, uint32_t newest, std::vector<std::string> features) {
  proto::Handshake hello = FromNode1();
  hello.set_protocol_version(newest);
  hello.set_min_protocol_version(oldest);
  hello.clear_features();
  for (std::string& feature : features) {
    hello.add_features(std::move(feature));
  }
  return hello;
}

LocalIdentity Speaking(uint32_t oldest, uint32_t newest, std::vector<std::string> features) {
  LocalIdentity self = Self();
  self.protocol = {.oldest = oldest, .newest = newest, .features = std::move(features)};
  return self;
}

TEST(HandshakeTest, AnnouncesThisBuildsRangeAndFeatures) {
  const proto::Handshake hs = MakeSessionHandshake(Self(), 1, 0, 0, 1 << 20, 1 << 20);
  EXPECT_EQ(hs.min_protocol_version(), kOldestProtocolVersion);
  EXPECT_EQ(hs.protocol_version(), kNewestProtocolVersion);
  EXPECT_EQ(std::vector<std::string>(hs.features().begin(), hs.features().end()),
            std::vector<std::string>{kFeatureLeave});
  const proto::Handshake refusal = MakeRefusal(Speaking(3, 5, {}), "no");
  EXPECT_EQ(refusal.min_protocol_version(), 3u);
  EXPECT_EQ(refusal.protocol_version(), 5u);
}

TEST(HandshakeTest, ASessionUsesTheNewestVersionBothSpeak) {
  // This node speaks 3..5; the peer's range overlaps it in every way.
  const LocalIdentity self = Speaking(3, 5, {kFeatureLeave});
  const struct {
    uint32_t oldest, newest, agreed;
  } cases[] = {{3, 5, 5}, {4, 7, 5}, {1, 3, 3}, {4, 4, 4}, {0, 5, 5}, {0, 3, 3}};
  for (const auto& c : cases) {
    const proto::Handshake peer = Announcing(c.oldest, c.newest, {kFeatureLeave});
    ASSERT_TRUE(CheckHandshake(peer, self, std::nullopt).ok())
        << c.oldest << ".." << c.newest << ": " << CheckHandshake(peer, self, std::nullopt);
    EXPECT_EQ(AgreeProtocol(peer, self.protocol).version, c.agreed) << c.oldest << ".." << c.newest;
    // Each side agrees on the same version: the peer's view of us.
    proto::Handshake us = MakeSessionHandshake(self, 1, 0, 0, 0, 0);
    const uint32_t peer_oldest = c.oldest == 0 ? c.newest : c.oldest;
    EXPECT_EQ(AgreeProtocol(us, {.oldest = peer_oldest, .newest = c.newest}).version, c.agreed);
  }
}

TEST(HandshakeTest, RefusesAPeerWhoseRangeMissesOursOrIsEmpty) {
  const LocalIdentity self = Speaking(3, 5, {});
  const auto refused = [&](const proto::Handshake& peer, const std::string& why) {
    const absl::Status status = CheckHandshake(peer, self, std::nullopt);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(std::string(status.message()).find(why), std::string::npos) << status;
  };
  refused(Announcing(0, 2, {}), "node 1 speaks protocol version 2; this node speaks 3..5");
  refused(Announcing(1, 2, {}), "node 1 speaks protocol version 1..2; this node speaks 3..5");
  refused(Announcing(6, 9, {}), "node 1 speaks protocol version 6..9; this node speaks 3..5");
  refused(Announcing(5, 4, {}), "node 1 announces protocol versions 5..4, an empty range");
}

TEST(HandshakeTest, ASessionUsesOnlyTheFeaturesBothAnnounce) {
  const LocalIdentity self = Speaking(3, 3, {kFeatureLeave, "zstd"});
  const SessionProtocol both =
      AgreeProtocol(Announcing(3, 3, {"unheard-of", kFeatureLeave, "zstd"}), self.protocol);
  EXPECT_EQ(both.features, (std::vector<std::string>{kFeatureLeave, "zstd"}));
  EXPECT_TRUE(both.leave);
  const SessionProtocol without = AgreeProtocol(Announcing(3, 3, {"zstd", "zstd"}), self.protocol);
  EXPECT_EQ(without.features, std::vector<std::string>{"zstd"});
  EXPECT_FALSE(without.leave);
  EXPECT_FALSE(AgreeProtocol(Announcing(3, 3, {kFeatureLeave}), Speaking(3, 3, {}).protocol).leave);
}

}  // namespace
}  // namespace troupe::interconnect::internal
