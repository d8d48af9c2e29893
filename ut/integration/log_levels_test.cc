// SPDX-License-Identifier: Apache-2.0
//
// /loglevels on a running node's monitoring server (node/internal/log_levels_http.h), over real
// HTTP on loopback: GET answers the levels as JSON; POST changes the default level or one
// component's (built-in or user-named), and the node's lines follow at once; bad requests answer
// 400 naming the parameter and change nothing, name no component; a cross-origin POST is refused.
#include <httplib.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

#include "actors/log.h"
#include "node/monitoring.h"
#include "node/node.h"
#include "ut/integration/node_util.h"

namespace troupe {
namespace {

using google::protobuf::Struct;
using node::Node;
using testutil::StartNode;

struct Answer {
  int status = 0;
  std::string content_type;
  std::string body;
};

Answer Take(const httplib::Result& result) {
  Answer answer;
  if (result) {
    answer.status = result->status;
    answer.content_type = result->get_header_value("Content-Type");
    answer.body = result->body;
  }
  return answer;
}

httplib::Client ClientOf(const Node& node) {
  httplib::Client client(node.monitoring()->url());
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(10, 0);
  return client;
}

Answer Get(const Node& node, const std::string& path) { return Take(ClientOf(node).Get(path)); }

// POSTs with the parameters in the query string (`path` carries them) and an empty body.
Answer Post(const Node& node, const std::string& path, const httplib::Headers& headers = {}) {
  return Take(ClientOf(node).Post(path, headers, "", "application/x-www-form-urlencoded"));
}

// Parses a JSON answer strictly; fails the test and returns an empty Struct when it does not
// parse.
Struct Parse(const Answer& answer) {
  Struct levels;
  const auto status = google::protobuf::util::JsonStringToMessage(answer.body, &levels);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << answer.body;
  return levels;
}

std::string ComponentLevel(const Struct& levels, const std::string& component) {
  const auto& components = levels.fields().at("components").struct_value().fields();
  const auto it = components.find(component);
  return it == components.end() ? "<absent>" : it->second.string_value();
}

std::string OwnLevels(const Struct& levels) {
  std::string names;
  for (const auto& value : levels.fields().at("own_levels").list_value().values()) {
    absl::StrAppend(&names, names.empty() ? "" : ",", value.string_value());
  }
  return names;
}

std::unique_ptr<Node> StartMonitored(const std::string& level) {
  proto::ActorSystemConfig config;
  config.set_node_id(4);
  config.mutable_monitoring()->set_port(0);
  config.mutable_log()->set_level(level);
  proto::LogComponentLevel* interconnect = config.mutable_log()->add_components();
  interconnect->set_name("interconnect");
  interconnect->set_level("debug");
  return StartNode(config);
}

TEST(LogLevelsHttpTest, GetAnswersTheNodesLevelsAsJson) {
  std::unique_ptr<Node> node = StartMonitored("warn");
  ASSERT_NE(node, nullptr);
  const Answer answer = Get(*node, "/loglevels");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.content_type, "application/json");
  const Struct levels = Parse(answer);
  EXPECT_EQ(levels.fields().at("node").number_value(), 4);
  EXPECT_EQ(levels.fields().at("format").string_value(), "text");
  EXPECT_EQ(levels.fields().at("level").string_value(), "warn");
  EXPECT_EQ(ComponentLevel(levels, "interconnect"), "debug");
  EXPECT_EQ(ComponentLevel(levels, "actors"), "warn");
  EXPECT_EQ(ComponentLevel(levels, "user"), "warn");
  EXPECT_EQ(OwnLevels(levels), "interconnect");
}

TEST(LogLevelsHttpTest, PostChangesTheDefaultAndOneComponentAndTheNodeFollows) {
  CapturingLogSink sink;
  std::unique_ptr<Node> node = StartMonitored("info");
  ASSERT_NE(node, nullptr);
  LogContext& context = node->system().log_context();

  Answer answer = Post(*node, "/loglevels?component=user&level=debug");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(ComponentLevel(Parse(answer), "user"), "debug");
  EXPECT_EQ(context.level(LogComponent::kUser), LogLevel::kDebug);
  {
    const LogBinding binding(&context);
    TROUPE_LOG(kDebug, kUser) << "debug line after the POST";
  }
  EXPECT_TRUE(sink.Contains("debug line after the POST"));
  // The change is logged, with who made it.
  const std::vector<std::string> audit = sink.LinesWith("log level of user set to debug");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(absl::StrContains(audit[0], "(was info (the default)) over HTTP by 127.0.0.1:"))
      << audit[0];
  EXPECT_TRUE(absl::StrContains(audit[0], " warn node=4 ")) << audit[0];

  // The default level: components with their own level keep it.
  answer = Post(*node, "/loglevels?level=error");
  ASSERT_EQ(answer.status, 200) << answer.body;
  Struct levels = Parse(answer);
  EXPECT_EQ(levels.fields().at("level").string_value(), "error");
  EXPECT_EQ(ComponentLevel(levels, "actors"), "error");
  EXPECT_EQ(ComponentLevel(levels, "user"), "debug");
  EXPECT_EQ(ComponentLevel(levels, "interconnect"), "debug");
  EXPECT_EQ(OwnLevels(levels), "interconnect,user");

  // "default" drops a component's own level.
  answer = Post(*node, "/loglevels?component=interconnect&level=default");
  ASSERT_EQ(answer.status, 200) << answer.body;
  levels = Parse(answer);
  EXPECT_EQ(ComponentLevel(levels, "interconnect"), "error");
  EXPECT_EQ(OwnLevels(levels), "user");

  // Parameters in a form body, as `curl -d component=... -d level=...` sends them.
  answer = Take(ClientOf(*node).Post("/loglevels", "component=actors&level=trace",
                                     "application/x-www-form-urlencoded"));
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(context.level(LogComponent::kActors), LogLevel::kTrace);

  // A component the code named.
  const LogComponent ledger = LogComponentNamed("http-ledger");
  answer = Post(*node, "/loglevels?component=http-ledger&level=warn");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(ComponentLevel(Parse(answer), "http-ledger"), "warn");
  EXPECT_EQ(context.level(ledger), LogLevel::kWarn);
  EXPECT_EQ(Get(*node, "/loglevels").body, answer.body);
}

TEST(LogLevelsHttpTest, BadRequestsAnswer400NamingTheParameterAndChangeNothing) {
  std::unique_ptr<Node> node = StartMonitored("info");
  ASSERT_NE(node, nullptr);
  const std::string before = Get(*node, "/loglevels").body;
  const std::pair<std::string, std::string> cases[] = {
      {"/loglevels?component=interconect&level=debug",
       "component: unknown component \"interconect\" (did you mean \"interconnect\"?)\n"},
      {"/loglevels?component=no-such-component&level=debug",
       "component: unknown component \"no-such-component\" (known: actors, scheduler, config, "
       "interconnect, user"},
      {"/loglevels?component=Bad!&level=debug", "component: component name \"Bad!\" may only use"},
      {"/loglevels?component=actors&level=loud",
       "level: unknown log level \"loud\" (expected trace, debug, info, warn or error)\n"},
      {"/loglevels?component=actors", "level: missing"},
      {"/loglevels?level=default", "level: default needs a component"},
      {"/loglevels?componnet=actors&level=debug",
       "unknown parameter \"componnet\" (expected component and level)\n"},
      {"/loglevels?component=actors&component=user&level=debug", "component: given twice\n"},
      {"/loglevels?level=debug&level=info", "level: given twice\n"},
  };
  for (const auto& [path, message] : cases) {
    const Answer answer = Post(*node, path);
    EXPECT_EQ(answer.status, 400) << path << ": " << answer.body;
    EXPECT_EQ(answer.content_type, "text/plain; charset=utf-8") << path;
    EXPECT_TRUE(absl::StartsWith(answer.body, message)) << path << ": " << answer.body;
  }
  // A GET that looks like a change is refused rather than answered as if it were one.
  const Answer get = Get(*node, "/loglevels?level=debug");
  EXPECT_EQ(get.status, 400);
  EXPECT_TRUE(absl::StrContains(get.body, "POST")) << get.body;

  EXPECT_EQ(Get(*node, "/loglevels").body, before);
  EXPECT_FALSE(FindLogComponent("no-such-component").ok()) << "a request names no component";
}

TEST(LogLevelsHttpTest, APostFromAnotherOriginIsRefused) {
  std::unique_ptr<Node> node = StartMonitored("info");
  ASSERT_NE(node, nullptr);
  const Answer refused =
      Post(*node, "/loglevels?level=trace", {{"Origin", "http://attacker.example"}});
  EXPECT_EQ(refused.status, 403);
  EXPECT_TRUE(absl::StrContains(refused.body, "http://attacker.example")) << refused.body;
  EXPECT_EQ(node->system().log_context().default_level(), LogLevel::kInfo);

  // The server's own origin (a page it served) may.
  const std::string own = node->monitoring()->url();
  const Answer accepted = Post(*node, "/loglevels?level=warn", {{"Origin", own}});
  EXPECT_EQ(accepted.status, 200) << accepted.body;
  EXPECT_EQ(node->system().log_context().default_level(), LogLevel::kWarn);
}

}  // namespace
}  // namespace troupe
