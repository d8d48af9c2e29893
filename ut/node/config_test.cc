// SPDX-License-Identifier: Apache-2.0
//
// A whole node's config (node/config.h): the node layer's own checks (etcd membership, monitoring)
// name the field, every other layer's check is run too, a file's errors name the file, and the
// defaults of every section are filled in and stay valid.
#include "node/config.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace troupe::node {
namespace {

void ExpectFieldError(const std::string& text, absl::string_view field) {
  const absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(text);
  ASSERT_FALSE(config.ok()) << "accepted: " << text;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), field))
      << "message \"" << config.status().message() << "\" does not name " << field;
}

TEST(NodeConfigTest, RejectsBadEtcdMembershipNamingTheField) {
  ExpectFieldError(
      R"(interconnect { nodes { node_id: 1 host: "h" port: 1 } etcd { endpoint: "http://e:1" } })",
      "interconnect.etcd: membership is either the static table");
  ExpectFieldError(R"(interconnect { etcd { endpoint: "e:2379" } })", "interconnect.etcd.endpoint");
  ExpectFieldError(R"(interconnect { etcd { endpoint: "http://" } })",
                   "interconnect.etcd.endpoint");
  ExpectFieldError(R"(interconnect { etcd { endpoint: "http://e:1" lease_ttl_s: 1 } })",
                   "interconnect.etcd.lease_ttl_s");
  ExpectFieldError(R"(interconnect { etcd { endpoint: "http://e:1" connect_timeout_ms: 10 } })",
                   "interconnect.etcd.connect_timeout_ms");
  ExpectFieldError(R"(interconnect { etcd { endpoint: "http://e:1" } listen { port: 70000 } })",
                   "interconnect.listen.port");
  EXPECT_TRUE(ParseConfig(R"(interconnect { etcd { endpoint: "http://127.0.0.1:2379" } })").ok());
}

TEST(NodeConfigTest, TakesSeveralEtcdEndpointsAndRejectsBadOnesByIndex) {
  EXPECT_TRUE(ParseConfig(R"(interconnect { etcd { endpoints: "http://a:1" endpoints: "http://b:1"
                                                   endpoints: "http://c:1" } })")
                  .ok());
  ExpectFieldError(R"(interconnect { etcd { endpoint: "http://a:1" endpoints: "http://b:1" } })",
                   "interconnect.etcd.endpoints: set this or interconnect.etcd.endpoint");
  ExpectFieldError(R"(interconnect { etcd { } })", "interconnect.etcd.endpoint");
  ExpectFieldError(R"(interconnect { etcd { endpoints: "http://a:1" endpoints: "b:1" } })",
                   "interconnect.etcd.endpoints[1]");
  ExpectFieldError(R"(interconnect { etcd { endpoints: "http://a:1" endpoints: "http://a:1" } })",
                   "interconnect.etcd.endpoints[1]: \"http://a:1\" is also");
  ExpectFieldError(R"(interconnect { etcd { endpoints: "https://a:1" endpoints: "http://b:1" } })",
                   "interconnect.etcd.endpoints[1]: \"http://b:1\" mixes http:// and https://");
  std::string many = "interconnect { etcd { ";
  for (int i = 0; i < 17; ++i) {
    many += "endpoints: \"http://e:" + std::to_string(i + 1) + "\" ";
  }
  ExpectFieldError(many + "} }", "interconnect.etcd.endpoints: at most 16");
}

TEST(NodeConfigTest, RejectsBadEtcdTlsNamingTheField) {
  const std::string ca = ::testing::TempDir() + "/troupe_node_config_test_ca.crt";
  std::ofstream(ca) << "not checked here: the node reads it when it connects\n";
  const std::string missing = ::testing::TempDir() + "/troupe_node_config_test_missing.crt";
  const auto tls = [](const std::string& endpoint, const std::string& fields) {
    return "interconnect { etcd { endpoint: \"" + endpoint + "\" tls { " + fields + " } } }";
  };
  EXPECT_TRUE(ParseConfig(tls("https://e:1", "ca_file: \"" + ca + "\"")).ok());
  EXPECT_TRUE(ParseConfig(tls("https://e:1", "ca_file: \"" + ca + "\" cert_file: \"" + ca +
                                                 "\" key_file: \"" + ca + "\""))
                  .ok());
  EXPECT_TRUE(ParseConfig(R"(interconnect { etcd { endpoint: "https://e:1" } })").ok())
      << "https:// without tls trusts the system's certificate authorities";
  ExpectFieldError(tls("http://e:1", "ca_file: \"" + ca + "\""),
                   "interconnect.etcd.tls: set, but interconnect.etcd.endpoint \"http://e:1\" is "
                   "http://");
  ExpectFieldError(tls("https://e:1", ""), "interconnect.etcd.tls.ca_file: required");
  ExpectFieldError(tls("https://e:1", "ca_file: \"" + missing + "\""),
                   "interconnect.etcd.tls.ca_file: cannot read");
  ExpectFieldError(tls("https://e:1", "ca_file: \"" + ca + "\" cert_file: \"" + ca + "\""),
                   "interconnect.etcd.tls.key_file: cert_file and key_file go together");
  ExpectFieldError(tls("https://e:1", "ca_file: \"" + ca + "\" key_file: \"" + ca + "\""),
                   "interconnect.etcd.tls.cert_file");
  ExpectFieldError(tls("https://e:1", "ca_file: \"" + ca + "\" cert_file: \"" + missing +
                                          "\" key_file: \"" + ca + "\""),
                   "interconnect.etcd.tls.cert_file: cannot read");
  std::remove(ca.c_str());
}

TEST(NodeConfigTest, AWildcardListenAddressNeedsAnAdvertisedHost) {
  const std::string etcd = R"(etcd { endpoint: "http://e:1" } )";
  ExpectFieldError("interconnect { " + etcd + R"(listen { host: "0.0.0.0" } })",
                   "interconnect.advertise.host: required when interconnect.listen.host is the "
                   "wildcard address \"0.0.0.0\"");
  ExpectFieldError("interconnect { " + etcd + R"(listen { host: "::" } })",
                   "interconnect.advertise.host: required");
  EXPECT_TRUE(ParseConfig("interconnect { " + etcd +
                          R"(listen { host: "0.0.0.0" } advertise { host: "10.0.0.7" } })")
                  .ok());
  EXPECT_TRUE(ParseConfig("interconnect { " + etcd + R"(listen { host: "10.0.0.7" } })").ok());
  ExpectFieldError("interconnect { " + etcd + R"(advertise { host: "[::]" } })",
                   "interconnect.advertise.host: \"[::]\" is a wildcard address");
  ExpectFieldError("interconnect { " + etcd + R"(advertise { port: 9000 } })",
                   "interconnect.advertise.port: needs a fixed interconnect.listen.port");
  ExpectFieldError("interconnect { " + etcd + R"(listen { port: 9000 } advertise { port: 0 } })",
                   "interconnect.advertise.port");
  EXPECT_TRUE(ParseConfig("interconnect { " + etcd +
                          R"(listen { host: "0.0.0.0" port: 9000 }
                             advertise { host: "node7.example" port: 30900 } })")
                  .ok());
  ExpectFieldError(
      "interconnect { " + etcd + R"(listen { client: true } advertise { host: "h" } })",
      "interconnect.advertise: a client node");

  // With a static table the entry is what the others dial; listen only moves the bind.
  const std::string table = R"(nodes { node_id: 1 host: "10.0.0.1" port: 9000 } )";
  EXPECT_TRUE(
      ParseConfig("interconnect { " + table + R"(listen { host: "0.0.0.0" port: 9100 } })").ok());
  ExpectFieldError("interconnect { " + table + R"(advertise { host: "h" } })",
                   "interconnect.advertise: only with interconnect.etcd");
  ExpectFieldError("interconnect { " + table + R"(listen { client: true } })",
                   "interconnect.listen.client: only with interconnect.etcd");
  ExpectFieldError("interconnect { " + table + R"(listen { port: 0 } })",
                   "interconnect.listen.port: with a static table");
}

TEST(NodeConfigTest, KnowsWildcardAddresses) {
  for (const char* wildcard : {"0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0"}) {
    EXPECT_TRUE(IsWildcardAddress(wildcard)) << wildcard;
  }
  for (const char* host : {"127.0.0.1", "::1", "10.0.0.7", "localhost", "", "0.0.0.1", "node7"}) {
    EXPECT_FALSE(IsWildcardAddress(host)) << host;
  }
}

TEST(NodeConfigTest, RejectsMonitoringPortOutOfRange) {
  ExpectFieldError("monitoring { port: 70000 }", "monitoring.port");
  EXPECT_TRUE(ParseConfig("monitoring { port: 0 }").ok());
}

// One call checks every layer's section, each with its own layer's message.
TEST(NodeConfigTest, ChecksEverySection) {
  ExpectFieldError(R"(pools { name: "A" threads: 0 })", "pools[0].threads");
  ExpectFieldError("interconnect { heartbeat_interval_ms: 1 }",
                   "interconnect.heartbeat_interval_ms");
  proto::ActorSystemConfig built;
  built.mutable_interconnect()->add_nodes()->set_node_id(1);
  const absl::Status status = ValidateConfig(built);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "interconnect.nodes[0].host")) << status;
  EXPECT_TRUE(ValidateConfig(proto::ActorSystemConfig()).ok());
}

TEST(NodeConfigTest, LoadConfigFilePrefixesEveryLayersErrorsWithThePath) {
  const std::string actors = ::testing::TempDir() + "/troupe_node_config_test_actors.conf";
  const std::string etcd = ::testing::TempDir() + "/troupe_node_config_test_etcd.conf";
  const std::string good = ::testing::TempDir() + "/troupe_node_config_test_good.conf";
  std::ofstream(actors) << "pools { name: \"Only\" threads: 0 }\n";
  std::ofstream(etcd) << "interconnect { etcd { endpoint: \"http://e:1\" lease_ttl_s: 1 } }\n";
  std::ofstream(good) << "node_id: 4\nmonitoring { port: 9464 }\n";

  const absl::StatusOr<proto::ActorSystemConfig> bad_pool = LoadConfigFile(actors);
  ASSERT_FALSE(bad_pool.ok());
  EXPECT_TRUE(absl::StrContains(bad_pool.status().message(), actors + ": pools[0].threads"))
      << bad_pool.status();
  const absl::StatusOr<proto::ActorSystemConfig> bad_etcd = LoadConfigFile(etcd);
  ASSERT_FALSE(bad_etcd.ok());
  EXPECT_EQ(bad_etcd.status().code(), absl::StatusCode::kInvalidArgument) << bad_etcd.status();
  EXPECT_TRUE(
      absl::StrContains(bad_etcd.status().message(), etcd + ": interconnect.etcd.lease_ttl_s"))
      << bad_etcd.status();
  const absl::StatusOr<proto::ActorSystemConfig> loaded = LoadConfigFile(good);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->node_id(), 4u);
  EXPECT_EQ(loaded->monitoring().port(), 9464u);
  const absl::StatusOr<proto::ActorSystemConfig> missing =
      LoadConfigFile(::testing::TempDir() + "/troupe_node_config_test_missing.conf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  std::remove(actors.c_str());
  std::remove(etcd.c_str());
  std::remove(good.c_str());
}

TEST(NodeConfigTest, WithDefaultsFillsEverySection) {
  const absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(
      R"(interconnect { etcd { endpoint: "http://127.0.0.1:2379" } heartbeat_interval_ms: 5000 })");
  ASSERT_TRUE(config.ok()) << config.status();
  const proto::ActorSystemConfig full = WithDefaults(*config);
  EXPECT_EQ(full.pools_size(), 4) << "the actor system's defaults";
  EXPECT_EQ(full.node_id(), 1u);
  const proto::InterconnectConfig& ic = full.interconnect();
  EXPECT_EQ(ic.cluster_id(), "troupe") << "the interconnect's defaults";
  EXPECT_EQ(ic.dead_peer_timeout_ms(), 5001u);
  EXPECT_EQ(ic.etcd().lease_ttl_s(), 5u) << "the node's own";
  EXPECT_EQ(ic.etcd().connect_timeout_ms(), 10'000u);
  EXPECT_EQ(ic.listen().host(), "127.0.0.1");
  EXPECT_TRUE(ic.listen().has_port());
  EXPECT_EQ(ic.listen().port(), 0u);
  EXPECT_TRUE(ValidateConfig(full).ok()) << ValidateConfig(full);
  // A client listens nowhere: no address is made up for it.
  proto::ActorSystemConfig client = *config;
  client.mutable_interconnect()->mutable_listen()->set_client(true);
  EXPECT_TRUE(WithDefaults(client).interconnect().listen().host().empty());
  EXPECT_FALSE(WithDefaults(proto::ActorSystemConfig()).interconnect().has_etcd());
}

}  // namespace
}  // namespace troupe::node
