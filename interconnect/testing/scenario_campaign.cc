// SPDX-License-Identifier: Apache-2.0
//
// Campaigns of scenarios (scenario.h): many seeds in a row, and the main() of a campaign binary.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/log.h"
#include "interconnect/testing/scenario.h"
#include "interconnect/testing/scenario_workloads.h"

namespace troupe::testing {

std::vector<std::unique_ptr<Workload>> MakeBuiltinWorkloads() {
  std::vector<std::unique_ptr<Workload>> workloads;
  workloads.push_back(scenario_internal::MakeMessagingWorkload());
  workloads.push_back(scenario_internal::MakeAskWorkload());
  workloads.push_back(scenario_internal::MakeWatchWorkload());
  return workloads;
}

double CampaignReport::SeedsPerSecond() const {
  const double seconds = absl::ToDoubleSeconds(wall_time);
  return seconds > 0 ? static_cast<double>(run) / seconds : 0;
}

CampaignReport RunCampaign(const CampaignOptions& options, const WorkloadFactory& workloads) {
  CampaignReport report;
  const auto started = std::chrono::steady_clock::now();
  for (uint64_t seed = options.start; seed < options.start + options.seeds; ++seed) {
    const ScenarioResult result = RunScenario(seed, options.scenario, workloads);
    ++report.run;
    if (!result.ok()) {
      report.failed.push_back(seed);
      if (options.out != nullptr) {
        *options.out << "FAILED seed " << seed << ":\n";
        for (const std::string& violation : result.violations) {
          *options.out << "  " << violation << "\n";
        }
        *options.out << "  " << result.summary << "\n"
                     << "replay: " << result.replay << "\n";
      }
    }
    if (options.out != nullptr && report.run % 100 == 0) {
      *options.out << absl::StrFormat("... %d seeds, %d failed\n", report.run,
                                      report.failed.size());
      options.out->flush();
    }
  }
  report.wall_time = absl::FromChrono(std::chrono::steady_clock::now() - started);
  return report;
}

namespace {

// Parses `--name=value` into `value`; true when `arg` is that flag.
bool Flag(const std::string& arg, const std::string& name, uint64_t* value, bool* bad) {
  const std::string prefix = "--" + name + "=";
  if (arg.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  *bad = *bad || !absl::SimpleAtoi(absl::string_view(arg).substr(prefix.size()), value);
  return true;
}

}  // namespace

int ScenarioMain(int argc, char** argv, const WorkloadFactory& workloads) {
  uint64_t seed = 0;
  uint64_t seeds = 0;
  uint64_t start = 1;
  uint64_t run_ms = 0;
  bool one = false;
  bool bad = false;
  LogLevel log_level = LogLevel::kError;
  std::string log_name = "error";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--log=")) {
      log_name = arg.substr(6);
      bad = bad || !ParseLogLevel(log_name, &log_level).ok();
    } else if (Flag(arg, "seed", &seed, &bad)) {
      one = true;
    } else if (!Flag(arg, "seeds", &seeds, &bad) && !Flag(arg, "start", &start, &bad) &&
               !Flag(arg, "run_ms", &run_ms, &bad)) {
      bad = true;
    }
  }
  if (bad || (!one && seeds == 0)) {
    std::cerr << "usage: " << argv[0]
              << " --seed=N | --seeds=K [--start=S]   [--run_ms=M] [--log=LEVEL]\n"
                 "  --seed=N: one scenario, its summary and trace fingerprint\n"
                 "  --seeds=K: seeds S..S+K-1 (S defaults to 1)\n"
                 "  --log=LEVEL: the nodes' log level (default error)\n";
    return 2;
  }
  // The nodes' own logs say what the faults do (refusals, corrupt frames): quiet unless asked,
  // the verdicts are the violations.
  SetLogLevel(log_level);
  ScenarioOptions options;
  options.log_level = log_name;
  options.replay_prefix = argv[0];
  if (run_ms > 0) {
    options.run_time = absl::Milliseconds(static_cast<int64_t>(run_ms));
    options.replay_prefix = absl::StrCat(argv[0], " --run_ms=", run_ms);
  }
  if (one) {
    const ScenarioResult result = RunScenario(seed, options, workloads);
    std::cout << "seed " << seed << (result.ok() ? " ok" : " FAILED") << "\n  " << result.summary
              << "\n";
    for (const std::string& violation : result.violations) {
      std::cout << "  violation: " << violation << "\n";
    }
    std::cout << absl::StrFormat("fingerprint %016x\n", result.fingerprint);
    if (!result.ok()) {
      std::cout << "replay: " << result.replay << "\n";
    }
    return result.ok() ? 0 : 1;
  }
  CampaignOptions campaign;
  campaign.start = start;
  campaign.seeds = seeds;
  campaign.scenario = options;
  campaign.out = &std::cout;
  const CampaignReport report = RunCampaign(campaign, workloads);
  std::cout << absl::StrFormat("%d seeds (%d..%d), %d failed, %.1f s, %.2f seeds/s\n", report.run,
                               start, start + seeds - 1, report.failed.size(),
                               absl::ToDoubleSeconds(report.wall_time), report.SeedsPerSecond());
  for (const uint64_t failed : report.failed) {
    std::cout << "replay: " << options.replay_prefix << " --seed=" << failed << "\n";
  }
  return report.failed.empty() ? 0 : 1;
}

}  // namespace troupe::testing
