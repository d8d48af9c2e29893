// SPDX-License-Identifier: Apache-2.0
#include "node/internal/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "actors/version.h"

namespace troupe::node::internal {
namespace {

// Returns the whole of a small /proc file, or "" when it cannot be read.
std::string ReadProcFile(const char* path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Returns field `index` (0: the size) of /proc/self/statm in bytes, or 0.
int64_t StatmBytes(size_t index) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(ReadProcFile("/proc/self/statm"), ' ', absl::SkipWhitespace());
  int64_t pages = 0;
  if (index >= fields.size() || !absl::SimpleAtoi(fields[index], &pages)) {
    return 0;
  }
  return pages * ::sysconf(_SC_PAGESIZE);
}

int64_t CpuNanos() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) {
    return 0;
  }
  const auto nanos = [](const timeval& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_usec) * 1000;
  };
  return nanos(usage.ru_utime) + nanos(usage.ru_stime);
}

// Returns the soft limit of `resource`, -1 when unlimited or unknown.
int64_t SoftLimit(int resource) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return -1;
  }
  return static_cast<int64_t>(limit.rlim_cur);
}

int64_t OpenFds() {
  std::error_code error;
  int64_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++count;
  }
  return count;  // the iterator's own descriptor included, as other clients count it
}

// The process's start, in nanoseconds since the Unix epoch: the boot time (/proc/stat btime) plus
// the start in clock ticks after boot (/proc/self/stat, field 22). 0 when either is missing.
int64_t StartTimeNanos() {
  int64_t boot_seconds = 0;
  for (const absl::string_view line : absl::StrSplit(ReadProcFile("/proc/stat"), '\n')) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "btime ") && absl::SimpleAtoi(rest, &boot_seconds)) {
      break;
    }
  }
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const std::string stat = ReadProcFile("/proc/self/stat");
  const size_t name_end = stat.rfind(')');
  if (boot_seconds == 0 || name_end == std::string::npos) {
    return 0;
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipWhitespace());
  constexpr size_t kStartTimeField = 22 - 3;  // fields[0] is field 3, the state
  int64_t ticks = 0;
  const int64_t ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (fields.size() <= kStartTimeField || !absl::SimpleAtoi(fields[kStartTimeField], &ticks) ||
      ticks_per_second <= 0) {
    return 0;
  }
  return boot_seconds * 1'000'000'000 + ticks * (1'000'000'000 / ticks_per_second);
}

}  // namespace

std::vector<MetricsRegistry::Registration> PublishProcessMetrics(MetricsRegistry& registry) {
  std::vector<MetricsRegistry::Registration> out;
  const auto add = [&](const char* name, MetricType type, const char* help,
                       MetricsRegistry::Reader read, MetricUnit unit = MetricUnit::kNone) {
    out.push_back(registry.Add(
        {.name = name, .type = type, .help = help, .labels = {}, .unit = unit}, std::move(read)));
  };
  add("process_cpu_seconds_total", MetricType::kCounter,
      "Total user and system CPU time spent in seconds.", CpuNanos, MetricUnit::kNanoseconds);
  add("process_resident_memory_bytes", MetricType::kGauge, "Resident memory size in bytes.",
      [] { return StatmBytes(1); });
  add("process_virtual_memory_bytes", MetricType::kGauge, "Virtual memory size in bytes.",
      [] { return StatmBytes(0); });
  add("process_virtual_memory_max_bytes", MetricType::kGauge,
      "Maximum amount of virtual memory available in bytes (-1: unlimited).",
      [] { return SoftLimit(RLIMIT_AS); });
  const int64_t start = StartTimeNanos();
  add(
      "process_start_time_seconds", MetricType::kGauge,
      "Start time of the process since unix epoch in seconds.", [start] { return start; },
      MetricUnit::kNanoseconds);
  add("process_open_fds", MetricType::kGauge, "Number of open file descriptors.", OpenFds);
  add("process_max_fds", MetricType::kGauge, "Maximum number of open file descriptors.",
      [] { return SoftLimit(RLIMIT_NOFILE); });
  const VersionInfo version = Version();
  out.push_back(registry.Add({.name = "troupe_build_info",
                              .type = MetricType::kGauge,
                              .help = "1; the labels say which Troupe the node runs.",
                              .labels = {{"version", std::string{version.version}},
                                         {"commit", std::string{version.commit}}}},
                             [] { return int64_t{1}; }));
  return out;
}

}  // namespace troupe::node::internal
