// SPDX-License-Identifier: Apache-2.0
//
// counters_load: the load and the final check of the sharded counters service (counters.h). It
// joins the cluster as a client node (it dials the counters nodes and hosts no counter), waits for
// --expect_nodes counters nodes in etcd, then --pairs writers send updates to --keys counters for
// --seconds, each update tracked, at most --window unanswered per writer. It prints a line per
// second and, once the writers are done, reads every counter back and checks that every
// acknowledged update is in the final state, once.
//
// It takes the flags troupe_cluster gives a load generator, so that
//   troupe_cluster --membership=etcd --nodes=3 --seconds=8 --node_binary=counters_node
//                  --loadgen_binary=counters_load
// runs the service on 3 nodes while one more node joins half-way and node 3 leaves at three
// quarters (troupe_cluster's churn): counters move to the joined node, and away from the leaving
// one, under the load. --payload, --rate, --node_pids and --launcher_command are accepted and
// unused; --report and --baseline are refused (this load writes no report).
//
// Exit status (cli.h): 0 when every acknowledged update is in the final state exactly once and
// every counter answered the final read; 1 otherwise; 2 on a bad flag; 3 on a bad config.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "chaos.h"
#include "cli.h"
#include "counters.h"
#include "node/node.h"
#include "node/sharding.h"
#include "node_runner.h"

ABSL_FLAG(std::string, config, "", "cluster config (protobuf text) with etcd membership");
ABSL_FLAG(uint32_t, node_id, 0, "unused with etcd membership (etcd gives the id)");
ABSL_FLAG(std::string, id_file, "", "once up, write this node's id here");
ABSL_FLAG(int, expect_nodes, 3, "counters nodes to wait for in etcd before the load");
ABSL_FLAG(int, pairs, 3, "writers (each its own actor and update numbers)");
ABSL_FLAG(int, window, 16, "updates in flight per writer, at most");
ABSL_FLAG(int, seconds, 5, "how long the writers send");
ABSL_FLAG(int, keys, 1000, "counters the writers update (keys counter-0 .. counter-N-1)");
ABSL_FLAG(int, connect_timeout_s, 30, "how long to wait for the counters nodes");
ABSL_FLAG(std::string, load_start_file, "", "write the load's start time here (troupe_cluster)");
ABSL_FLAG(std::string, chaos_log, "", "accepted for troupe_cluster; unused");
ABSL_FLAG(std::string, payload, "64", "accepted for troupe_cluster; unused");
ABSL_FLAG(uint64_t, rate, 0, "accepted for troupe_cluster; must be 0 (closed loop only)");
ABSL_FLAG(std::string, node_pids, "", "accepted for troupe_cluster; unused");
ABSL_FLAG(std::string, launcher_command, "", "accepted for troupe_cluster; unused");
ABSL_FLAG(std::string, report, "", "refused: this load writes no report");
ABSL_FLAG(std::string, baseline, "", "refused: this load writes no report");

namespace {

using troupe::examples::kExitConfig;
using troupe::examples::kExitFailed;
using troupe::examples::kExitOk;
using troupe::examples::kExitUsage;

// The listening members but `self`: the counters nodes.
size_t Hosts(const troupe::interconnect::Nameservice& names, troupe::NodeId self) {
  size_t hosts = 0;
  for (const troupe::interconnect::NodeEndpoint& member : names.Members()) {
    hosts += (member.node != self && !member.client) ? 1 : 0;
  }
  return hosts;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::BlockTerminationSignals();
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "Sends updates to the sharded counters service, then checks that every acknowledged "
      "update is in the final state.");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int pairs = absl::GetFlag(FLAGS_pairs);
  const int window = absl::GetFlag(FLAGS_window);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const int keys = absl::GetFlag(FLAGS_keys);
  if (pairs < 1 || pairs > 64 || window < 1 || window > 4096 || seconds < 1 || keys < 1 ||
      keys > 1000000 || absl::GetFlag(FLAGS_expect_nodes) < 1) {
    std::fprintf(stderr,
                 "counters_load: --pairs 1..64, --window 1..4096, --seconds >= 1, --keys "
                 "1..1000000 and --expect_nodes >= 1\n");
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_rate) != 0 || !absl::GetFlag(FLAGS_report).empty() ||
      !absl::GetFlag(FLAGS_baseline).empty()) {
    std::fprintf(stderr, "counters_load: --rate, --report and --baseline are not supported\n");
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr, "counters_load: --config: required\n");
    return kExitUsage;
  }
  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::examples::LoadNodeConfig(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_node_id));
  if (!config.ok()) {
    std::fprintf(stderr, "counters_load: %s\n", std::string(config.status().message()).c_str());
    return kExitConfig;
  }
  if (!config->interconnect().has_etcd()) {
    std::fprintf(stderr,
                 "counters_load: %s: interconnect.etcd: required (with a static table this node "
                 "would be listed as a counters host; run troupe_cluster --membership=etcd)\n",
                 absl::GetFlag(FLAGS_config).c_str());
    return kExitConfig;
  }
  // A client: it dials the counters nodes and is never a host of the kind.
  config->mutable_interconnect()->mutable_listen()->set_client(true);
  config->mutable_monitoring()->clear_port();

  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node =
      troupe::node::Node::Start(*config, {.on_system_start = nullptr, .interconnect = {}});
  if (!node.ok()) {
    std::fprintf(stderr, "counters_load: %s\n", std::string(node.status().message()).c_str());
    return absl::IsInvalidArgument(node.status()) ? kExitConfig : kExitFailed;
  }
  troupe::ActorSystem& system = (*node)->system();
  const troupe::NodeId self = (*node)->id();
  const std::shared_ptr<troupe::interconnect::Nameservice> names =
      (*node)->interconnect()->nameservice();
  auto stop = [&](int status) {
    (*node)->Shutdown(absl::Seconds(5));
    return status;
  };
  if (absl::StatusOr<troupe::ActorId> region = troupe::node::StartShardRegion(
          system, troupe::examples::kCounterKind, names, /*factory=*/nullptr);
      !region.ok()) {
    std::printf("counters_load: %s\n", std::string(region.status().message()).c_str());
    return stop(kExitFailed);
  }
  if (const std::string id_file = absl::GetFlag(FLAGS_id_file); !id_file.empty()) {
    if (absl::Status written = troupe::examples::WriteNodeIdFile(id_file, self); !written.ok()) {
      std::printf("counters_load: --id_file: %s\n", std::string(written.message()).c_str());
      return stop(kExitFailed);
    }
  }
  const absl::Time connect_deadline =
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  const size_t expect = static_cast<size_t>(absl::GetFlag(FLAGS_expect_nodes));
  while (Hosts(*names, self) < expect) {
    if (absl::Now() > connect_deadline ||
        troupe::examples::WaitForTerminationSignal(absl::Milliseconds(20)) != 0) {
      std::printf("counters_load: %zu of %zu counters nodes in etcd\n", Hosts(*names, self),
                  expect);
      return stop(kExitFailed);
    }
  }
  if (absl::Status up =
          (*node)->WaitForPeers(std::max(absl::Milliseconds(1), connect_deadline - absl::Now()));
      !up.ok()) {
    std::printf("counters_load: %s\n", std::string(up.message()).c_str());
    return stop(kExitFailed);
  }
  std::printf(
      "counters_load: node %u (a client), %zu counters nodes; %d writers, window %d, "
      "%d counters, %d s\n",
      self, Hosts(*names, self), pairs, window, keys, seconds);

  const absl::Time start = absl::Now();
  if (const std::string path = absl::GetFlag(FLAGS_load_start_file); !path.empty()) {
    if (absl::Status written = troupe::examples::WriteLoadStart(path, start); !written.ok()) {
      std::printf("counters_load: --load_start_file: %s\n", std::string(written.message()).c_str());
      return stop(kExitFailed);
    }
  }
  // Before the writers: they count into it until they are done.
  std::atomic<uint64_t> progress{0};
  std::vector<std::future<troupe::examples::WriterResult>> futures;
  for (int i = 0; i < pairs; ++i) {
    std::promise<troupe::examples::WriterResult> promise;
    futures.push_back(promise.get_future());
    system.Register(troupe::examples::MakeCounterWriter(
        {.writer = static_cast<uint64_t>(self) * 1000 + static_cast<uint64_t>(i) + 1,
         .keys = static_cast<uint32_t>(keys),
         .window = static_cast<uint32_t>(window),
         .end = start + absl::Seconds(seconds),
         .drain = absl::Seconds(10),
         .progress = &progress},
        std::move(promise)));
  }
  std::vector<troupe::examples::WriterResult> writers;
  int signal = 0;
  uint64_t last = 0;
  absl::Time next_line = start + absl::Seconds(1);
  for (std::future<troupe::examples::WriterResult>& future : futures) {
    while (future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      if ((signal = troupe::examples::WaitForTerminationSignal(absl::Milliseconds(50))) != 0) {
        std::printf("counters_load: %s: stopping\n", troupe::examples::SignalName(signal).c_str());
        return stop(kExitFailed);
      }
      if (const absl::Time now = absl::Now(); now >= next_line) {
        const uint64_t acknowledged = progress.load(std::memory_order_relaxed);
        std::printf("counters_load: %5.2f s: %llu updates acknowledged this second\n",
                    absl::ToDoubleSeconds(now - start),
                    static_cast<unsigned long long>(acknowledged - last));
        last = acknowledged;
        next_line += absl::Seconds(1);
      }
    }
    writers.push_back(future.get());
  }
  troupe::examples::WriterResult total;
  for (const troupe::examples::WriterResult& writer : writers) {
    total.sent += writer.sent;
    total.acknowledged += writer.acknowledged;
    total.undelivered += writer.undelivered;
    total.unanswered += writer.unanswered;
    total.duplicates += writer.duplicates;
    total.out_of_order += writer.out_of_order;
  }
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "counters_load: %llu updates sent, %llu acknowledged (%.0f/s), %llu reported "
      "undelivered, %llu unanswered; answers that said duplicate %llu, out of order %llu\n",
      static_cast<unsigned long long>(total.sent),
      static_cast<unsigned long long>(total.acknowledged),
      static_cast<double>(total.acknowledged) / std::max(elapsed, 1e-3),
      static_cast<unsigned long long>(total.undelivered),
      static_cast<unsigned long long>(total.unanswered),
      static_cast<unsigned long long>(total.duplicates),
      static_cast<unsigned long long>(total.out_of_order));

  std::promise<troupe::examples::CheckResult> check_promise;
  std::future<troupe::examples::CheckResult> check_future = check_promise.get_future();
  system.Register(troupe::examples::MakeCounterChecker(writers, /*window=*/64, absl::Seconds(30),
                                                       std::move(check_promise)));
  while (check_future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    if ((signal = troupe::examples::WaitForTerminationSignal(absl::Milliseconds(100))) != 0) {
      std::printf("counters_load: %s: stopping\n", troupe::examples::SignalName(signal).c_str());
      return stop(kExitFailed);
    }
  }
  const troupe::examples::CheckResult check = check_future.get();
  std::vector<std::string> served;
  for (const auto& [served_node, count] : check.served_by) {
    served.push_back(absl::StrCat("node ", served_node, ": ", count));
  }
  std::sort(served.begin(), served.end());
  std::printf(
      "counters_load: final state: %llu counters read (%s), %llu unread; %llu updates "
      "applied, %llu incarnations\n",
      static_cast<unsigned long long>(check.counters), absl::StrJoin(served, ", ").c_str(),
      static_cast<unsigned long long>(check.unread), static_cast<unsigned long long>(check.applied),
      static_cast<unsigned long long>(check.incarnations));
  const bool ok =
      check.missing == 0 && check.unread == 0 && total.duplicates == 0 && total.acknowledged > 0;
  std::printf(
      "counters_load: %s: %llu acknowledged updates, %llu missing from the final state, "
      "%llu applied twice\n",
      ok ? "OK" : "FAILED", static_cast<unsigned long long>(total.acknowledged),
      static_cast<unsigned long long>(check.missing),
      static_cast<unsigned long long>(total.duplicates));
  return stop(ok ? kExitOk : kExitFailed);
}
