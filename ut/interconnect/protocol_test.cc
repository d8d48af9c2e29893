// SPDX-License-Identifier: Apache-2.0
//
// Nodes that announce different protocol ranges and features (interconnect/protocol.h), under the
// deterministic runtime: a session uses the newest version both speak, and nodes whose ranges do
// not overlap refuse each other with both ranges named.
#include "interconnect/protocol.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "ut/interconnect/ic_test_util.h"
#include "ut/interconnect/pipe_cluster.h"

namespace troupe::interconnect {
namespace {

// Two nodes over pipes: node 1 announces `one`, node 2 `two`.
struct TwoNodes {
  TwoNodes(ProtocolRange one, ProtocolRange two)
      : cluster(2, 1, nullptr, absl::Microseconds(50), {}, nullptr,
                std::vector<ProtocolRange>{{}, std::move(one), std::move(two)}) {}
  bool Up() {
    return cluster.runtime->DispatchUntil([&] { return cluster.Up(1, 2); },
                                          Within(absl::Seconds(5)));
  }
  PipeCluster cluster;
};

TEST(ProtocolTest, ANodeOfTheNextReleaseTalksToThisOneInThisOnesVersion) {
  TwoNodes nodes({}, {.oldest = kNewestProtocolVersion, .newest = kNewestProtocolVersion + 1});
  ASSERT_TRUE(nodes.Up());
  EXPECT_EQ(nodes.cluster.Session(1, 2).protocol_version, kNewestProtocolVersion);
  EXPECT_EQ(nodes.cluster.Session(2, 1).protocol_version, kNewestProtocolVersion);
}

TEST(ProtocolTest, TwoNodesOfTheNextReleaseUseItsVersion) {
  const ProtocolRange next{.oldest = kNewestProtocolVersion, .newest = kNewestProtocolVersion + 1};
  TwoNodes nodes(next, next);
  ASSERT_TRUE(nodes.Up());
  EXPECT_EQ(nodes.cluster.Session(1, 2).protocol_version, kNewestProtocolVersion + 1);
  EXPECT_EQ(nodes.cluster.Session(2, 1).protocol_version, kNewestProtocolVersion + 1);
}

TEST(ProtocolTest, NodesWithoutACommonVersionRefuseEachOtherAndNeverStartASession) {
  TwoNodes nodes({}, {.oldest = kNewestProtocolVersion + 1, .newest = kNewestProtocolVersion + 2});
  testing::TestRuntime& rt = *nodes.cluster.runtime;
  // Node 1 dials; node 2 refuses, and says why (the log names both ranges).
  ASSERT_TRUE(rt.DispatchUntil([&] { return nodes.cluster.Session(1, 2).refusals > 0; },
                               Within(absl::Seconds(5))));
  EXPECT_TRUE(rt.AdvanceTime(absl::Seconds(2)));
  for (const auto& [node, peer] : {std::pair<NodeId, NodeId>{1, 2}, {2, 1}}) {
    const SessionCounters session = nodes.cluster.Session(node, peer);
    EXPECT_FALSE(session.up) << node;
    EXPECT_EQ(session.sessions, 0u) << node;
    EXPECT_EQ(session.protocol_version, 0u) << node;
  }
}

TEST(ProtocolTest, StartRefusesARangeThatIsNotOne) {
  testing::TestRuntimeOptions options;
  options.nodes = 1;
  options.config = testutil::ClusterConfig("node", {7001});
  testing::TestRuntime rt(std::move(options));
  for (const ProtocolRange& bad :
       {ProtocolRange{.oldest = 0, .newest = 3}, ProtocolRange{.oldest = 4, .newest = 3}}) {
    InterconnectOptions ic_options;
    ic_options.protocol = bad;
    absl::StatusOr<std::unique_ptr<Interconnect>> ic =
        Interconnect::Start(&rt.node(1), std::move(ic_options));
    ASSERT_FALSE(ic.ok());
    EXPECT_EQ(ic.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ic.status().message().find("protocol: versions"), absl::string_view::npos)
        << ic.status();
  }
}

}  // namespace
}  // namespace troupe::interconnect
