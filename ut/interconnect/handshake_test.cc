// SPDX-License-Identifier: Apache-2.0
//
// The handshake: framing, garbage, and every refusal named in interconnect/internal/handshake.h.
#include "interconnect/internal/handshake.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace troupe::interconnect::internal {
namespace {

LocalIdentity Self() {
  return LocalIdentity{
      .cluster_id = "blue", .node = 2, .incarnation = 77, .is_member = [](NodeId node) {
        return node >= 1 && node <= 3;
      }};
}

proto::Handshake FromNode1() {
  proto::Handshake hello;
  hello.set_protocol_version(kProtocolVersion);
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
  version.set_protocol_version(kProtocolVersion + 1);
  ExpectRefused(version, std::nullopt,
                absl::StrCat("speaks protocol version ", kProtocolVersion + 1));
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

}  // namespace
}  // namespace troupe::interconnect::internal
