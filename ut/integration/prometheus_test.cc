// SPDX-License-Identifier: Apache-2.0
//
// A node's /metrics as the Prometheus tools take it: `promtool check metrics` finds nothing to
// lint in a live node's output; a real Prometheus (Debian's `prometheus`) scrapes a three-node
// cluster under traffic and answers a PromQL query for each node's event rate over its HTTP API;
// every query of the shipped Grafana dashboard (deploy/grafana/troupe.json) is valid PromQL and
// names only metrics a live node exports; the shipped scrape configuration and alert rules pass
// `promtool check`.
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

#include "actors/version.h"
#include "interconnect/testing/free_ports.h"
#include "node/node.h"
#include "ut/integration/node_util.h"
#include "ut/integration/test_process.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using node::Node;
using testutil::Eventually;

constexpr const char* kPromtool = "/usr/bin/promtool";
constexpr const char* kPrometheus = "/usr/bin/prometheus";

// A scratch directory of this test's own, removed with it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(absl::StrCat(::testing::TempDir(), "troupe-", name, "-", ::getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ScratchDir(ScratchDir&&) = delete;
  ScratchDir& operator=(ScratchDir&&) = delete;
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs `command` through the shell; returns its exit status and puts its output in `output`.
int RunCommand(const std::string& command, const std::string& dir, std::string* output) {
  const std::string out = dir + "/command.out";
  const int status = std::system((command + " >" + out + " 2>&1").c_str());
  *output = ReadFile(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Get(const std::string& url, const std::string& path, int* status = nullptr) {
  httplib::Client client(url);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  httplib::Result result = client.Get(path);
  if (status != nullptr) {
    *status = result ? result->status : 0;
  }
  return result ? result->body : "";
}

// `n` nodes with monitoring on free ports, each with a sink, each sending to the next until the
// cluster is destroyed (bounded: at most `kMaxEvents` events per node).
class BusyCluster {
 public:
  explicit BusyCluster(int n) : ports_(static_cast<size_t>(n)), received_(static_cast<size_t>(n)) {
    for (int i = 1; i <= n; ++i) {
      proto::ActorSystemConfig config = ports_.ConfigFor(static_cast<NodeId>(i), "prometheus");
      config.mutable_monitoring()->set_port(0);
      nodes_.push_back(testutil::StartNode(config));
      if (nodes_.back() == nullptr) {
        return;
      }
      EXPECT_TRUE(testutil::StartSink(*nodes_.back(), &received_[i - 1]).ok());
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const auto next = static_cast<NodeId>((i + 1) % nodes_.size() + 1);
      EXPECT_TRUE(nodes_[i]->WaitForPeer(next, absl::Seconds(30)).ok());
    }
    sender_ = std::thread([this] {
      for (uint64_t seq = 1; seq <= kMaxEvents && !stop_.load(); ++seq) {
        for (size_t i = 0; i < nodes_.size(); ++i) {
          const auto next = static_cast<NodeId>((i + 1) % nodes_.size() + 1);
          nodes_[i]->system().Send(ServiceId("sink", next), testutil::MakeData(seq));
        }
        if (seq % 100 == 0) {
          absl::SleepFor(absl::Milliseconds(10));
        }
      }
    });
  }
  ~BusyCluster() {
    stop_.store(true);
    if (sender_.joinable()) {
      sender_.join();
    }
  }
  BusyCluster(const BusyCluster&) = delete;
  BusyCluster& operator=(const BusyCluster&) = delete;
  BusyCluster(BusyCluster&&) = delete;
  BusyCluster& operator=(BusyCluster&&) = delete;

  bool ok() const {
    return !nodes_.empty() && nodes_.back() != nullptr && nodes_.size() == received_.size();
  }
  Node& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  // Waits until every sink has counted an event.
  bool WaitForTraffic() {
    return Eventually(
        [&] {
          for (const std::atomic<uint64_t>& received : received_) {
            if (received.load() == 0) {
              return false;
            }
          }
          return true;
        },
        absl::Seconds(30));
  }

 private:
  static constexpr uint64_t kMaxEvents = 2'000'000;
  testutil::LoopbackPorts ports_;
  std::vector<std::atomic<uint64_t>> received_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::atomic<bool> stop_{false};
  std::thread sender_;
};

// The metric names in an exposition body (a histogram's family name, not its _bucket/_sum/_count).
std::set<std::string> ExportedNames(const std::string& body) {
  std::set<std::string> names;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) {
      names.insert(line.substr(7, line.find(' ', 7) - 7));
    }
  }
  return names;
}

// Every "expr" string anywhere in `value` (a dashboard's panels and targets).
void CollectExprs(const Value& value, std::vector<std::string>* exprs) {
  if (value.has_struct_value()) {
    for (const auto& [key, field] : value.struct_value().fields()) {
      if (key == "expr" && field.has_string_value()) {
        exprs->push_back(field.string_value());
      } else {
        CollectExprs(field, exprs);
      }
    }
  } else if (value.has_list_value()) {
    for (const Value& item : value.list_value().values()) {
      CollectExprs(item, exprs);
    }
  }
}

std::vector<std::string> DashboardExprs() {
  Value dashboard;
  const std::string json = ReadFile(TROUPE_GRAFANA_DASHBOARD);
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &dashboard);
  EXPECT_TRUE(parsed.ok()) << TROUPE_GRAFANA_DASHBOARD << ": " << parsed.ToString();
  std::vector<std::string> exprs;
  CollectExprs(dashboard, &exprs);
  return exprs;
}

// The metric names a PromQL expression reads (histogram suffixes taken off when `known` has the
// family).
std::set<std::string> QueriedNames(const std::string& expr, const std::set<std::string>& known) {
  static const std::regex kName(R"(\b((troupe|process)_[a-z0-9_]+))");
  std::set<std::string> names;
  for (std::sregex_iterator it(expr.begin(), expr.end(), kName), end; it != end; ++it) {
    std::string name = (*it)[1];
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      const std::string family = name.substr(0, name.size() - suffix.size());
      if (name.ends_with(suffix) && known.contains(family)) {
        name = family;
      }
    }
    names.insert(name);
  }
  return names;
}

TEST(PrometheusToolsTest, PromtoolFindsNothingToLintInALiveNodesMetrics) {
  ASSERT_TRUE(std::filesystem::exists(kPromtool))
      << kPromtool << " is missing: scripts/setup.sh installs Debian's prometheus package";
  BusyCluster cluster(2);
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE(cluster.WaitForTraffic());
  const ScratchDir dir("promtool");
  for (size_t i = 0; i < cluster.size(); ++i) {
    const std::string body = Get(cluster.node(i).monitoring()->url(), "/metrics");
    ASSERT_FALSE(body.empty());
    EXPECT_NE(body.find("process_cpu_seconds_total{"), std::string::npos) << body;
    EXPECT_NE(body.find(absl::StrCat("troupe_build_info{node=\"", i + 1, "\",version=\"",
                                     TROUPE_VERSION_STRING, "\",commit=\"", TROUPE_GIT_COMMIT,
                                     "\"} 1\n")),
              std::string::npos)
        << body;
    WriteFile(dir.path() + "/metrics.txt", body);
    std::string output;
    EXPECT_EQ(RunCommand(absl::StrCat(kPromtool, " check metrics <", dir.path(), "/metrics.txt"),
                         dir.path(), &output),
              0)
        << output;
    EXPECT_EQ(output, "") << "promtool's lint on node " << i + 1 << "'s metrics";
  }
}

TEST(PrometheusToolsTest, TheShippedScrapeConfigAndAlertRulesPassPromtool) {
  const ScratchDir dir("promtool-config");
  std::string output;
  EXPECT_EQ(RunCommand(absl::StrCat(kPromtool, " check rules ", TROUPE_PROMETHEUS_DIR,
                                    "/troupe-alerts.yml"),
                       dir.path(), &output),
            0)
      << output;
  // The file_sd directory the config names is the launcher's to write: give it one target file.
  std::filesystem::copy(absl::StrCat(TROUPE_PROMETHEUS_DIR, "/prometheus.yml"),
                        dir.path() + "/prometheus.yml");
  std::filesystem::copy(absl::StrCat(TROUPE_PROMETHEUS_DIR, "/troupe-alerts.yml"),
                        dir.path() + "/troupe-alerts.yml");
  std::filesystem::create_directories(dir.path() + "/targets");
  WriteFile(dir.path() + "/targets/cluster.json", R"([{"targets": ["127.0.0.1:9464"]}])");
  EXPECT_EQ(RunCommand(absl::StrCat(kPromtool, " check config ", dir.path(), "/prometheus.yml"),
                       dir.path(), &output),
            0)
      << output;
}

// A real Prometheus scrapes three nodes under traffic; its HTTP API answers the per-node event
// rate, and every query of the dashboard, for names the nodes export.
TEST(PrometheusToolsTest, ARealPrometheusScrapesAThreeNodeClusterAndAnswersPromQl) {
  ASSERT_TRUE(std::filesystem::exists(kPrometheus))
      << kPrometheus << " is missing: scripts/setup.sh installs Debian's prometheus package";
  BusyCluster cluster(3);
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE(cluster.WaitForTraffic());
  std::vector<std::string> targets;
  for (size_t i = 0; i < cluster.size(); ++i) {
    targets.push_back(absl::StrCat("'127.0.0.1:", cluster.node(i).monitoring()->port(), "'"));
  }
  const ScratchDir dir("prometheus");
  WriteFile(dir.path() + "/prometheus.yml",
            absl::StrCat("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                         "scrape_configs:\n  - job_name: troupe\n    static_configs:\n"
                         "      - targets: [",
                         absl::StrJoin(targets, ", "), "]\n"));
  absl::StatusOr<std::vector<uint16_t>> port = interconnect::FreeLoopbackPorts(1);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string api = absl::StrCat("http://127.0.0.1:", (*port)[0]);
  testutil::TestProcess prometheus;
  prometheus.Launch(
      {kPrometheus, "--config.file=" + dir.path() + "/prometheus.yml",
       "--storage.tsdb.path=" + dir.path() + "/data",
       absl::StrCat("--web.listen-address=127.0.0.1:", (*port)[0]), "--log.level=warn"},
      dir.path() + "/prometheus.log");

  // The per-node event rate, once Prometheus has two scrapes of every node.
  const std::string query =
      "/api/v1/query?query=" +
      absl::StrReplaceAll("sum by (node) (rate(troupe_pool_events_total[5s]))",
                          {{" ", "%20"}, {"[", "%5B"}, {"]", "%5D"}});
  Struct answer;
  std::map<std::string, double> rates;
  const bool answered = Eventually(
      [&] {
        answer.Clear();
        rates.clear();
        if (!google::protobuf::util::JsonStringToMessage(Get(api, query), &answer).ok()) {
          return false;
        }
        for (const Value& series : answer.fields()
                                       .at("data")
                                       .struct_value()
                                       .fields()
                                       .at("result")
                                       .list_value()
                                       .values()) {
          const Struct& fields = series.struct_value();
          rates[fields.fields().at("metric").struct_value().fields().at("node").string_value()] =
              std::stod(fields.fields().at("value").list_value().values(1).string_value());
        }
        return rates.size() == 3 && rates.at("1") > 0 && rates.at("2") > 0 && rates.at("3") > 0;
      },
      absl::Seconds(60));
  std::string printed;
  (void)google::protobuf::util::MessageToJsonString(answer, &printed);
  ASSERT_TRUE(answered) << "the last answer: " << printed << "\nPrometheus's log:\n"
                        << prometheus.LogTail();
  std::cout << "PromQL sum by (node) (rate(troupe_pool_events_total[5s])): " << printed << "\n";

  // Every dashboard query: valid PromQL, over names a node exports.
  const std::set<std::string> exported =
      ExportedNames(Get(cluster.node(0).monitoring()->url(), "/metrics"));
  const std::vector<std::string> exprs = DashboardExprs();
  ASSERT_GE(exprs.size(), 10u);
  for (const std::string& expr : exprs) {
    for (const std::string& name : QueriedNames(expr, exported)) {
      EXPECT_TRUE(exported.contains(name))
          << "the dashboard queries " << name << ", which no node exports: " << expr;
    }
    const std::string concrete =
        absl::StrReplaceAll(expr, {{"$__rate_interval", "5s"}, {"$node", ".*"}});
    httplib::Client client(api);
    client.set_read_timeout(10, 0);
    const httplib::Params params = {{"query", concrete}};
    const httplib::Result result = client.Get("/api/v1/query", params, httplib::Headers{});
    ASSERT_TRUE(result) << "Prometheus did not answer: " << concrete;
    EXPECT_EQ(result->status, 200) << concrete << "\n" << result->body;
    EXPECT_NE(result->body.find(R"("status":"success")"), std::string::npos) << result->body;
  }
}

}  // namespace
}  // namespace troupe
