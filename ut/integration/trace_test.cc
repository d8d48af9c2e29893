// SPDX-License-Identifier: Apache-2.0
//
// One request followed through three nodes over loopback TCP by its trace id: the id set by a
// plain thread's TraceScope on node 1 is carried by every event the handlers send on, across two
// node boundaries and back, and every handler's log line names its node, actor, class and the
// trace.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/log.h"
#include "actors/testing/actors.h"
#include "node/node.h"
#include "ut/actors/test_util.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using node::Node;
using testutil::EvIcData;
using testutil::StartNode;

constexpr NodeId kNodes = 3;

// The service each node runs: logs the request it handles and passes it to the next node's hop,
// or, on the last node, to the "done" service of node 1.
class Hop final : public Actor {
 public:
  explicit Hop(NodeId self) : Actor(&Hop::StateWork), self_(self) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcData, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvIcData> ev) {
    const uint64_t seq = ev.Get()->record.seq();
    TROUPE_LOG(kInfo, kUser) << "hop request " << seq;
    const ActorId next = self_ < kNodes ? ServiceId("hop", self_ + 1) : ServiceId("done", 1);
    Send(next, testutil::MakeData(seq), kTrackDelivery);
  }

  NodeId self_;
};

TEST(TraceTest, OneRequestIsFollowedThroughThreeNodesByItsTraceId) {
  CapturingLogSink sink;
  testutil::LoopbackPorts ports(kNodes);
  std::vector<std::unique_ptr<Node>> nodes;
  for (NodeId node = 1; node <= kNodes; ++node) {
    nodes.push_back(StartNode(ports.ConfigFor(node, "trace")));
    ASSERT_NE(nodes.back(), nullptr);
    ASSERT_TRUE(nodes.back()
                    ->system()
                    .RegisterService(ServiceId("hop"),
                                     nodes.back()->system().Register(std::make_unique<Hop>(node)))
                    .ok());
  }
  for (const std::unique_ptr<Node>& node : nodes) {
    ASSERT_TRUE(node->WaitForPeers(testutil::WaitTimeout()).ok());
  }
  testing::Inbox inbox(testutil::WaitTimeout());
  Node& first = *nodes.front();
  ASSERT_TRUE(
      first.system()
          .RegisterService(ServiceId("done"),
                           first.system().Register(std::make_unique<testing::Recorder<>>(&inbox)))
          .ok());

  const uint64_t trace = NewTraceId();
  {
    const TraceScope scope(trace);
    first.system().Send(ServiceId("hop", 1), testutil::MakeData(1));
  }
  // A second request without a trace: its lines and its answer carry none.
  first.system().Send(ServiceId("hop", 1), testutil::MakeData(2));
  ASSERT_TRUE(inbox.WaitForType(EvIcData::kEventType, 2));

  const std::string traced = absl::StrFormat("trace=%016x", trace);
  std::vector<uint64_t> traces;
  for (const testing::Received& r : inbox.Snapshot()) {
    traces.push_back(r.trace_id);
  }
  EXPECT_EQ(traces.size(), 2u);
  EXPECT_EQ(std::count(traces.begin(), traces.end(), trace), 1) << "the traced answer";
  EXPECT_EQ(std::count(traces.begin(), traces.end(), 0u), 1) << "the untraced answer";

  // The three hops of request 1, one per node, each by its actor and class, all by the trace.
  const std::vector<std::string> hops = sink.LinesWith("hop request 1");
  ASSERT_EQ(hops.size(), kNodes);
  for (NodeId node = 1; node <= kNodes; ++node) {
    const std::string at = absl::StrCat(" node=", node, " ");
    const auto line = std::find_if(hops.begin(), hops.end(), [&](const std::string& hop) {
      return absl::StrContains(hop, at);
    });
    ASSERT_NE(line, hops.end()) << "no hop on node " << node;
    const ActorId hop = nodes[node - 1]->system().LookupService(ServiceId("hop"));
    EXPECT_TRUE(absl::StrContains(*line, " actor=" + hop.ToString() + " class=")) << *line;
    EXPECT_TRUE(absl::StrContains(*line, "Hop " + traced)) << *line;
  }
  for (const std::string& line : sink.LinesWith("hop request 2")) {
    EXPECT_FALSE(absl::StrContains(line, "trace=")) << line;
  }
  // Grepping the trace finds exactly the request's path.
  EXPECT_EQ(sink.LinesWith(traced).size(), kNodes);
}

}  // namespace
}  // namespace troupe
