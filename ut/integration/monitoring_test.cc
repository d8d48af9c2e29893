// SPDX-License-Identifier: Apache-2.0
//
// The monitoring server (node/monitoring.h) of a running two-node cluster, scraped over
// loopback HTTP as Prometheus would: the text format line by line, the node label, values that
// move under traffic, 404 elsewhere, a port in use refused with the address, and a server that
// answers while the node's only pool is stuck in a handler.
#include "node/monitoring.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/protocol.h"
#include "node/node.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using node::Node;
using testutil::Eventually;
using testutil::StartNode;

// One scrape: the HTTP status, the content type and the body.
struct Scrape {
  int status = 0;
  std::string content_type;
  std::string body;
};

Scrape Get(const std::string& url, const std::string& path) {
  httplib::Client client(url);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(10, 0);
  Scrape scrape;
  if (httplib::Result result = client.Get(path)) {
    scrape.status = result->status;
    scrape.content_type = result->get_header_value("Content-Type");
    scrape.body = result->body;
  }
  return scrape;
}

bool IsNameChar(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)) != 0);
}

// Reads a metric or label name at `pos` (label names take no ':'); returns it, or "" when none.
std::string ReadName(const std::string& line, size_t* pos, bool label) {
  const size_t begin = *pos;
  while (*pos < line.size() && IsNameChar(line[*pos], *pos == begin) &&
         !(label && line[*pos] == ':')) {
    ++*pos;
  }
  return line.substr(begin, *pos - begin);
}

// Reads `{name="value",...}` at `pos` (escapes \\, \" and \n in values); false when malformed.
bool ReadLabels(const std::string& line, size_t* pos) {
  if (*pos >= line.size() || line[*pos] != '{') {
    return true;  // no labels
  }
  ++*pos;
  while (true) {
    if (ReadName(line, pos, /*label=*/true).empty() || line.compare(*pos, 2, "=\"") != 0) {
      return false;
    }
    *pos += 2;
    while (*pos < line.size() && line[*pos] != '"') {
      if (line[*pos] == '\\') {
        if (*pos + 1 >= line.size() ||
            std::string("\\\"n").find(line[*pos + 1]) == std::string::npos) {
          return false;
        }
        ++*pos;
      }
      ++*pos;
    }
    if (*pos >= line.size()) {
      return false;
    }
    ++*pos;  // the closing quote
    if (*pos < line.size() && line[*pos] == ',') {
      ++*pos;
      continue;
    }
    if (*pos < line.size() && line[*pos] == '}') {
      ++*pos;
      return true;
    }
    return false;
  }
}

// The samples of a Prometheus text body, keyed by "name{labels}"; fails the test on any line
// that is not a HELP, a TYPE (counter, gauge or histogram) or a sample (with node="..." among its
// labels) whose name had its TYPE first (a histogram's: its _bucket, _sum and _count series).
std::map<std::string, double> ParseExposition(const std::string& body) {
  std::map<std::string, double> samples;
  std::set<std::string> typed;
  std::set<std::string> histograms;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# HELP ")) {
      size_t pos = 7;
      EXPECT_FALSE(ReadName(line, &pos, /*label=*/false).empty()) << line;
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      size_t pos = 7;
      const std::string name = ReadName(line, &pos, /*label=*/false);
      const std::string type = line.substr(std::min(pos + 1, line.size()));
      EXPECT_TRUE(line[pos] == ' ' && (type == "counter" || type == "gauge" || type == "histogram"))
          << line;
      EXPECT_TRUE(typed.insert(name).second) << "a second TYPE for " << name;
      if (type == "histogram") {
        histograms.insert(name);
      }
      continue;
    }
    size_t pos = 0;
    const std::string name = ReadName(line, &pos, /*label=*/false);
    const size_t labels_begin = pos;
    const bool labels_ok = ReadLabels(line, &pos);
    const std::string series = line.substr(0, pos);
    const std::string value = pos < line.size() ? line.substr(pos + 1) : "";
    const bool value_ok = pos < line.size() && line[pos] == ' ' && !value.empty() &&
                          value.find_first_not_of("-+.e0123456789") == std::string::npos;
    if (name.empty() || !labels_ok || !value_ok) {
      ADD_FAILURE() << "not a Prometheus text line: '" << line << "'";
      continue;
    }
    std::string family = name;
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (name.ends_with(suffix) &&
          histograms.contains(name.substr(0, name.size() - suffix.size()))) {
        family = name.substr(0, name.size() - suffix.size());
      }
    }
    EXPECT_TRUE(typed.contains(family)) << "a sample before its TYPE: " << line;
    EXPECT_NE(series.find("node=\"", labels_begin), std::string::npos) << line;
    EXPECT_TRUE(samples.emplace(series, std::stod(value)).second)
        << "the same series twice: " << line;
  }
  return samples;
}

proto::ActorSystemConfig Monitored(proto::ActorSystemConfig config) {
  config.mutable_monitoring()->set_port(0);
  return config;
}

TEST(MonitoringTest, MetricsOfATwoNodeClusterAreValidPrometheusTextAndMoveUnderTraffic) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(Monitored(ports.ConfigFor(1, "test")));
  std::unique_ptr<Node> two = StartNode(Monitored(ports.ConfigFor(2, "test")));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  ASSERT_NE(one->monitoring(), nullptr);
  EXPECT_NE(one->monitoring()->port(), 0);
  EXPECT_EQ(one->monitoring()->url(), absl::StrCat("http://127.0.0.1:", one->monitoring()->port()));
  std::atomic<uint64_t> received{0};
  ASSERT_TRUE(testutil::StartSink(*two, &received).ok());
  ASSERT_TRUE(one->WaitForPeer(2, absl::Seconds(30)).ok());

  const std::string sent_key = R"(troupe_session_events_sent_total{node="1",peer="2"})";
  const std::string received_key = R"(troupe_session_events_received_total{node="2",peer="1"})";
  const Scrape before = Get(one->monitoring()->url(), "/metrics");
  ASSERT_EQ(before.status, 200);
  EXPECT_EQ(before.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const std::map<std::string, double> first = ParseExposition(before.body);
  ASSERT_TRUE(first.contains(sent_key)) << before.body;
  EXPECT_TRUE(first.contains(R"(troupe_session_up{node="1",peer="2"})")) << before.body;
  EXPECT_EQ(first.at(R"(troupe_session_up{node="1",peer="2"})"), 1);
  bool pools = false;
  for (const auto& [series, value] : first) {
    pools = pools || series.starts_with(R"(troupe_pool_events_total{node="1",pool=")");
  }
  EXPECT_TRUE(pools) << before.body;

  constexpr uint64_t kEvents = 1000;
  for (uint64_t i = 1; i <= kEvents; ++i) {
    one->system().Send(ServiceId("sink", 2), testutil::MakeData(i));
  }
  ASSERT_TRUE(Eventually([&] { return received.load() == kEvents; }, absl::Seconds(30)));
  // The receiver can have every event before the acknowledgement that times a frame has come back
  // to node 1, so the scrape that checks the round trips waits until one has been timed.
  const std::string rtt = R"(troupe_session_round_trip_seconds)";
  const std::string peer_labels = R"({node="1",peer="2")";
  const std::string round_trips_key = rtt + "_count" + peer_labels + "}";
  std::map<std::string, double> after;
  ASSERT_TRUE(Eventually(
      [&] {
        after = ParseExposition(Get(one->monitoring()->url(), "/metrics").body);
        return after.contains(round_trips_key) && after.at(round_trips_key) > 0;
      },
      absl::Seconds(30)))
      << "no acknowledged frame was timed";
  ASSERT_TRUE(after.contains(sent_key));
  EXPECT_GE(after.at(sent_key) - first.at(sent_key), static_cast<double>(kEvents));
  // The round trips of the data frames: a histogram whose buckets only grow, ending at +Inf ==
  // _count, and a smoothed gauge.
  const double round_trips = after.at(round_trips_key);
  EXPECT_EQ(after.at(rtt + "_bucket" + peer_labels + R"(,le="+Inf"})"), round_trips);
  EXPECT_GT(after.at(rtt + "_sum" + peer_labels + "}"), 0);
  std::map<double, double> buckets;  // by bound: le="+Inf" is infinity
  const std::string bucket_prefix = rtt + "_bucket" + peer_labels + R"(,le=")";
  for (const auto& [series, value] : after) {
    if (series.starts_with(bucket_prefix)) {
      const std::string le =
          series.substr(bucket_prefix.size(), series.size() - 2 - bucket_prefix.size());
      buckets[le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le)] = value;
    }
  }
  EXPECT_EQ(buckets.size(), 26u) << "1 us .. 17 s, and +Inf";
  double previous = 0;
  for (const auto& [bound, count] : buckets) {
    EXPECT_GE(count, previous) << "le=" << bound;
    previous = count;
  }
  // A round trip on loopback, in seconds: above 0, far below one.
  const double smoothed =
      after.at(R"(troupe_session_smoothed_round_trip_seconds{node="1",peer="2"})");
  EXPECT_GT(smoothed, 0);
  EXPECT_LT(smoothed, 1);
  const std::map<std::string, double> peer =
      ParseExposition(Get(two->monitoring()->url(), "/metrics").body);
  ASSERT_TRUE(peer.contains(received_key));
  EXPECT_GE(peer.at(received_key), static_cast<double>(kEvents));

  EXPECT_EQ(Get(one->monitoring()->url(), "/nothing-here").status, 404);
  two->Shutdown(absl::Seconds(5));
  EXPECT_EQ(Get(absl::StrCat("http://127.0.0.1:", ports.port(2)), "/metrics").status, 0)
      << "the interconnect's port does not speak HTTP";
}

// /healthz says the process serves; /readyz says 503 and which session is missing until every
// listening member is reached, then 200.
// Without per-peer histograms a node exports no troupe_session_round_trip_seconds series, and
// the node's histogram over every peer still counts the round trips.
TEST(MonitoringTest, PerPeerHistogramsCanBeSwitchedOffAndTheNodesHistogramStays) {
  testutil::LoopbackPorts ports(2);
  proto::ActorSystemConfig config_one = Monitored(ports.ConfigFor(1, "test"));
  config_one.mutable_interconnect()->set_per_peer_histograms(false);
  std::unique_ptr<Node> one = StartNode(config_one);
  std::unique_ptr<Node> two = StartNode(Monitored(ports.ConfigFor(2, "test")));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  std::atomic<uint64_t> received{0};
  ASSERT_TRUE(testutil::StartSink(*two, &received).ok());
  ASSERT_TRUE(one->WaitForPeer(2, absl::Seconds(30)).ok());
  constexpr uint64_t kEvents = 1000;
  for (uint64_t i = 1; i <= kEvents; ++i) {
    one->system().Send(ServiceId("sink", 2), testutil::MakeData(i));
  }
  ASSERT_TRUE(Eventually([&] { return received.load() == kEvents; }, absl::Seconds(30)));
  const std::string all = R"(troupe_interconnect_round_trip_seconds_count{node="1"})";
  std::string body;
  std::map<std::string, double> samples;
  ASSERT_TRUE(Eventually(
      [&] {
        body = Get(one->monitoring()->url(), "/metrics").body;
        samples = ParseExposition(body);
        return samples.contains(all) && samples.at(all) > 0;
      },
      absl::Seconds(30)))
      << body;
  EXPECT_EQ(body.find("troupe_session_round_trip_seconds"), std::string::npos) << body;
  EXPECT_TRUE(samples.contains(R"(troupe_session_smoothed_round_trip_seconds{node="1",peer="2"})"));
  // Node 2 kept the default: its peer's histogram is there.
  const std::string peer = Get(two->monitoring()->url(), "/metrics").body;
  EXPECT_NE(peer.find(R"(troupe_session_round_trip_seconds_count{node="2",peer="1"})"),
            std::string::npos);
}

TEST(MonitoringTest, ReadyzWaitsForTheMembersAndHealthzOnlyForTheProcess) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(Monitored(ports.ConfigFor(1, "test")));
  ASSERT_NE(one, nullptr);
  const std::string url = one->monitoring()->url();
  const Scrape health = Get(url, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  const Scrape alone = Get(url, "/readyz");
  EXPECT_EQ(alone.status, 503);
  EXPECT_EQ(alone.body, "not ready: no session with node 2\n");
  EXPECT_EQ(one->Readiness().code(), absl::StatusCode::kUnavailable);

  std::unique_ptr<Node> two = StartNode(Monitored(ports.ConfigFor(2, "test")));
  ASSERT_NE(two, nullptr);
  EXPECT_TRUE(Eventually([&] { return Get(url, "/readyz").status == 200; }, absl::Seconds(30)))
      << Get(url, "/readyz").body;
  EXPECT_EQ(Get(url, "/readyz").body, "ready\n");
  const std::string page = Get(url, "/").body;
  EXPECT_NE(page.find(absl::StrCat("<td>node 2</td><td>up</td><td>",
                                   interconnect::kNewestProtocolVersion, "</td>")),
            std::string::npos)
      << "the peer's row shows the session's protocol version: " << page;
  EXPECT_TRUE(Eventually([&] { return Get(two->monitoring()->url(), "/readyz").status == 200; },
                         absl::Seconds(30)));
  // Node 2 leaves: node 1 is not ready again, and says why.
  two->Shutdown(absl::Seconds(5));
  EXPECT_TRUE(Eventually([&] { return Get(url, "/readyz").status == 503; }, absl::Seconds(30)));
}

// Sleeps in its first handler: a node that shuts down meanwhile drains until it is done.
class Sleeper final : public Actor {
 public:
  explicit Sleeper(absl::Duration nap) : Actor(&Sleeper::StateWork), nap_(nap) {}

 private:
  void Bootstrap() override { absl::SleepFor(nap_); }
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  const absl::Duration nap_;
};

TEST(MonitoringTest, ReadyzSaysLeavingWhileTheNodeDrains) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(Monitored(ports.ConfigFor(1, "test")));
  std::unique_ptr<Node> two = StartNode(Monitored(ports.ConfigFor(2, "test")));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const std::string url = two->monitoring()->url();
  ASSERT_TRUE(Eventually([&] { return Get(url, "/readyz").status == 200; }, absl::Seconds(30)));
  // Node 2's drain waits for a handler that runs 1 s.
  two->system().Register(std::make_unique<Sleeper>(absl::Seconds(1)));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    two->Shutdown(absl::Seconds(5));
    stopped.store(true);
  });
  std::optional<Scrape> leaving;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!stopped.load() && absl::Now() < deadline) {
    const Scrape ready = Get(url, "/readyz");
    if (ready.status == 503) {
      leaving = ready;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(leaving.has_value()) << "the drain ended before /readyz said it";
  EXPECT_EQ(leaving->body,
            "not ready: node 2 is leaving: it answers what it accepted, then stops\n");
  EXPECT_EQ(Get(url, "/healthz").status, 200) << "the process still serves";
  EXPECT_FALSE(stopped.load()) << "the drain waits for the handler";
  stopper.join();
}

TEST(MonitoringTest, TheStatusPageShowsPoolsPeersAndEscapedWarnings) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(Monitored(ports.ConfigFor(1, "test")));
  ASSERT_NE(one, nullptr);
  TROUPE_LOG(kWarn, kUser) << "status page test: <b>not markup</b> & more";
  const Scrape page = Get(one->monitoring()->url(), "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<title>Troupe node 1</title>"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("<meta http-equiv=\"refresh\""), std::string::npos);
  EXPECT_NE(page.body.find("<td>User</td>"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("<td>node 2</td><td>down</td>"), std::string::npos)
      << "node 2 never started: " << page.body;
  EXPECT_NE(page.body.find("status page test: &lt;b&gt;not markup&lt;/b&gt; &amp; more"),
            std::string::npos)
      << page.body;
  EXPECT_EQ(page.body.find("<b>not markup</b>"), std::string::npos);
  // The proxy of node 2 is an actor class of this node: alive, so listed.
  EXPECT_NE(page.body.find("<h2>Busiest actor classes</h2>"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("<td>Proxy</td><td>1</td>"), std::string::npos) << page.body;

  proto::ActorSystemConfig alone;
  alone.set_node_id(5);
  alone.mutable_monitoring()->set_port(0);
  std::unique_ptr<Node> five = StartNode(alone);
  ASSERT_NE(five, nullptr);
  const std::string body = Get(five->monitoring()->url(), "/").body;
  EXPECT_NE(body.find("No interconnect"), std::string::npos);
  // The default pools lend threads: each pool's count, range and moves.
  EXPECT_NE(body.find("<th>threads</th><th>range</th><th>borrowed</th><th>lent</th>"
                      "<th>temporary</th>"),
            std::string::npos)
      << body;
  const uint32_t cores = std::max(1U, std::thread::hardware_concurrency());
  EXPECT_NE(body.find(absl::StrCat("<td>User</td><td>", cores, "</td><td>1..", cores, "</td>")),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("<td>System</td><td>1</td><td>1..1</td><td>0</td><td>0</td><td>0</td>"),
            std::string::npos)
      << body;
}

TEST(MonitoringTest, APortInUseFailsTheNodeStartNamingTheAddress) {
  proto::ActorSystemConfig config;
  config.mutable_monitoring()->set_port(0);
  std::unique_ptr<Node> first = StartNode(config);
  ASSERT_NE(first, nullptr);
  proto::ActorSystemConfig clash;
  clash.mutable_monitoring()->set_port(first->monitoring()->port());
  absl::StatusOr<std::unique_ptr<Node>> second = Node::Start(clash);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat("127.0.0.1:", first->monitoring()->port())),
            std::string::npos)
      << second.status();

  proto::ActorSystemConfig bad;
  bad.mutable_monitoring()->set_port(70000);
  absl::StatusOr<std::unique_ptr<Node>> invalid = Node::Start(bad);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("monitoring.port"), std::string::npos)
      << invalid.status();
  proto::ActorSystemConfig off;
  std::unique_ptr<Node> quiet = StartNode(off);
  ASSERT_NE(quiet, nullptr);
  EXPECT_EQ(quiet->monitoring(), nullptr) << "off unless a port is configured";
}

// Blocks its worker until released: the node's only pool is stuck.
class Blocker final : public Actor {
 public:
  Blocker(Notification* entered, Notification* release)
      : Actor(&Blocker::StateWork), entered_(entered), release_(release) {}

 private:
  TROUPE_STATE(StateWork) {
    entered_->Notify();
    release_->WaitForNotificationWithTimeout(absl::Seconds(60));
  }
  Notification* entered_;
  Notification* release_;
};

TEST(MonitoringTest, TheServerAnswersWhileThePoolsAreStuck) {
  proto::ActorSystemConfig config;
  config.mutable_monitoring()->set_port(0);
  proto::PoolConfig* pool = config.add_pools();
  pool->set_name("User");
  pool->set_threads(1);
  std::unique_ptr<Node> node = StartNode(config);
  ASSERT_NE(node, nullptr);
  Notification entered;
  Notification release;
  const ActorId blocker = node->system().Register(std::make_unique<Blocker>(&entered, &release));
  node->system().Send(blocker, testutil::MakeData(1));
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const Scrape scrape = Get(node->monitoring()->url(), "/metrics");
  release.Notify();
  EXPECT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("troupe_pool_events_total"), std::string::npos);
}

}  // namespace
}  // namespace troupe
