// SPDX-License-Identifier: Apache-2.0
//
// The interconnect's section of the config (interconnect/config.h): every bad field is refused
// with kInvalidArgument naming it by its path from the top of the config, the defaults are the
// documented ones, and Interconnect::Start refuses a system whose config fails the checks.
#include "interconnect/config.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/config.h"
#include "interconnect/interconnect.h"

namespace troupe::interconnect {
namespace {

// Expects the interconnect section of `text` (a whole config's text) to be refused naming `field`.
void ExpectFieldError(const std::string& text, absl::string_view field) {
  const absl::StatusOr<proto::ActorSystemConfig> config = troupe::ParseConfig(text);
  ASSERT_TRUE(config.ok()) << "the actor system's checks refused it: " << config.status();
  const absl::Status status = ValidateConfig(config->interconnect());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text << ": " << status;
  EXPECT_TRUE(absl::StrContains(status.message(), field))
      << "message \"" << status.message() << "\" does not name " << field;
}

TEST(InterconnectConfigTest, RejectsBadNodeTableNamingTheEntry) {
  ExpectFieldError(R"(interconnect { nodes { host: "h" port: 1 } })",
                   "interconnect.nodes[0].node_id");
  ExpectFieldError(
      R"(interconnect { nodes { node_id: 1 host: "h" port: 1 } nodes { node_id: 1 host: "h" port: 2 } })",
      "interconnect.nodes[1].node_id");
  ExpectFieldError(R"(interconnect { nodes { node_id: 2000000 host: "h" port: 1 } })",
                   "interconnect.nodes[0].node_id");
  ExpectFieldError(R"(interconnect { nodes { node_id: 1 port: 1 } })",
                   "interconnect.nodes[0].host");
  ExpectFieldError(R"(interconnect { nodes { node_id: 1 host: "h" } })",
                   "interconnect.nodes[0].port");
  ExpectFieldError(R"(interconnect { nodes { node_id: 1 host: "h" port: 70000 } })",
                   "interconnect.nodes[0].port");
}

TEST(InterconnectConfigTest, RejectsTimingsAndLimitsOutOfRange) {
  ExpectFieldError("interconnect { heartbeat_interval_ms: 1 }",
                   "interconnect.heartbeat_interval_ms");
  ExpectFieldError("interconnect { heartbeat_interval_ms: 1000 dead_peer_timeout_ms: 1000 }",
                   "interconnect.dead_peer_timeout_ms");
  ExpectFieldError("interconnect { max_unacked_bytes: 10 }", "interconnect.max_unacked_bytes");
  ExpectFieldError("interconnect { max_event_size: 100000000 }", "interconnect.max_event_size");
  // The per-peer bound must hold the unacknowledged frames twice (stream and transport) and one
  // largest event beside them.
  ExpectFieldError("interconnect { max_queued_bytes: 1000000 }", "interconnect.max_queued_bytes");
  ExpectFieldError(
      "interconnect { max_unacked_bytes: 65536 max_event_size: 4194304 max_queued_bytes: 131072 }",
      "interconnect.max_queued_bytes");
  ExpectFieldError("interconnect { heartbeat_interval_ms: 500 max_redial_delay_ms: 100 }",
                   "interconnect.max_redial_delay_ms");
  ExpectFieldError(absl::StrCat("interconnect { cluster_id: \"", std::string(300, 'c'), "\" }"),
                   "interconnect.cluster_id");
}

// Membership in etcd is the node layer's: the interconnect does not look at it.
TEST(InterconnectConfigTest, AcceptsClientsAndLeavesMembershipFieldsAlone) {
  proto::InterconnectConfig config;
  proto::NodeAddress& client = *config.add_nodes();
  client.set_node_id(2);
  client.set_client(true);
  config.mutable_etcd()->set_lease_ttl_s(1);
  config.mutable_listen()->set_port(70000);
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
}

TEST(InterconnectConfigTest, WithDefaultsFillsTheDocumentedValues) {
  proto::InterconnectConfig config;
  config.set_heartbeat_interval_ms(5000);
  const proto::InterconnectConfig full = WithDefaults(config);
  EXPECT_EQ(full.cluster_id(), "troupe");
  EXPECT_EQ(full.heartbeat_interval_ms(), 5000u);
  EXPECT_EQ(full.dead_peer_timeout_ms(), 5001u) << "always longer than the heartbeat interval";
  EXPECT_EQ(full.max_unacked_bytes(), 16u << 20);
  EXPECT_EQ(full.max_event_size(), 8u << 20);
  EXPECT_EQ(full.max_queued_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(full.max_redial_delay_ms(), 10'000u);
  EXPECT_TRUE(full.per_peer_histograms());
  proto::InterconnectConfig without;
  without.set_per_peer_histograms(false);
  EXPECT_FALSE(WithDefaults(without).per_peer_histograms()) << "an explicit false stays";
  EXPECT_TRUE(ValidateConfig(full).ok()) << ValidateConfig(full);
  EXPECT_EQ(WithDefaults(proto::InterconnectConfig()).dead_peer_timeout_ms(), 3000u);
}

// The ActorSystem does not check the interconnect's section; the interconnect does, before it
// starts anything.
TEST(InterconnectConfigTest, StartRefusesABadSectionNamingTheField) {
  absl::StatusOr<proto::ActorSystemConfig> config = troupe::ParseConfig(
      R"(pools { name: "IC" threads: 1 }
         interconnect { nodes { node_id: 1 host: "127.0.0.1" port: 1 } heartbeat_interval_ms: 1 })");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = ActorSystem::Create(*config);
  ASSERT_TRUE(system.ok()) << system.status();
  const absl::StatusOr<std::unique_ptr<Interconnect>> ic = Interconnect::Start(system->get());
  ASSERT_FALSE(ic.ok());
  EXPECT_EQ(ic.status().code(), absl::StatusCode::kInvalidArgument) << ic.status();
  EXPECT_TRUE(absl::StrContains(ic.status().message(), "interconnect.heartbeat_interval_ms"))
      << ic.status();
}

}  // namespace
}  // namespace troupe::interconnect
