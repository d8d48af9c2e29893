// SPDX-License-Identifier: Apache-2.0
//
// Shared pieces of the tests that run troupe::node::Node over loopback TCP (node_test.cc,
// monitoring_test.cc): starting a node, and a counting sink registered as a service.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

#include "actors/actor_id.h"
#include "node/node.h"
#include "proto/config.pb.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::testutil {

// The service name of StartSink's counter.
inline constexpr ActorId kSink = ServiceId("sink");

// Starts a node from `config`; fails the test (EXPECT) and returns null when it cannot.
inline std::unique_ptr<node::Node> StartNode(const proto::ActorSystemConfig& config) {
  absl::StatusOr<std::unique_ptr<node::Node>> node = node::Node::Start(config);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? std::move(*node) : nullptr;
}

// Registers a DataCounter counting into `received` as the node's service "sink" (kSink).
inline absl::Status StartSink(node::Node& node, std::atomic<uint64_t>* received) {
  absl::StatusOr<ActorId> sink = node.system().TryRegister(std::make_unique<DataCounter>(received));
  return sink.ok() ? node.system().RegisterService(kSink, *sink) : sink.status();
}

}  // namespace troupe::testutil
