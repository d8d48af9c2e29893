// SPDX-License-Identifier: Apache-2.0
#include "actors/log.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/check.h"

namespace troupe {
namespace internal {

// Every component starts at kInfo (2).
std::array<std::atomic<int>, static_cast<int>(LogComponent::kCount)> g_log_levels = {2, 2, 2, 2, 2};
static_assert(static_cast<int>(LogLevel::kInfo) == 2 &&
              static_cast<int>(LogComponent::kCount) == 5);

}  // namespace internal

namespace {

class StderrSink final : public LogSink {
 public:
  void Write(LogLevel /*level*/, LogComponent /*component*/, std::string_view line) override {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
};

troupe::Mutex g_sink_mu;
LogSink* g_sink ABSL_GUARDED_BY(g_sink_mu) = nullptr;
// The last kRecentWarnings warn and error lines, oldest first.
constexpr size_t kRecentWarnings = 64;
std::deque<std::string> g_recent ABSL_GUARDED_BY(g_sink_mu);

LogSink& DefaultSink() {
  static StderrSink sink;
  return sink;
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

std::string_view LogComponentName(LogComponent component) {
  switch (component) {
    case LogComponent::kActors:
      return "actors";
    case LogComponent::kScheduler:
      return "scheduler";
    case LogComponent::kConfig:
      return "config";
    case LogComponent::kInterconnect:
      return "interconnect";
    case LogComponent::kUser:
      return "user";
    case LogComponent::kCount:
      break;
  }
  return "?";
}

absl::Status ParseLogLevel(std::string_view text, LogLevel* level) {
  for (int i = static_cast<int>(LogLevel::kTrace); i <= static_cast<int>(LogLevel::kError); ++i) {
    if (text == LogLevelName(static_cast<LogLevel>(i))) {
      *level = static_cast<LogLevel>(i);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level \"", absl::string_view(text.data(), text.size()),
                   "\" (expected trace, debug, info, warn or error)"));
}

void SetLogLevel(LogLevel level, LogComponent component) {
  for (int i = 0; i < static_cast<int>(LogComponent::kCount); ++i) {
    if (component == LogComponent::kCount || i == static_cast<int>(component)) {
      internal::g_log_levels[i].store(static_cast<int>(level), std::memory_order_relaxed);
    }
  }
}

bool LogEnabled(LogLevel level, LogComponent component) {
  return static_cast<int>(level) >= TROUPE_LOG_MIN_LEVEL && internal::LogIsOn(level, component);
}

LogSink* SetLogSink(LogSink* sink) {
  troupe::MutexLock lock(&g_sink_mu);
  LogSink* previous = g_sink;
  g_sink = sink;
  return previous;
}

CapturingLogSink::CapturingLogSink() : previous_(SetLogSink(this)) {}

CapturingLogSink::~CapturingLogSink() { SetLogSink(previous_); }

void CapturingLogSink::Write(LogLevel /*level*/, LogComponent /*component*/,
                             std::string_view line) {
  troupe::MutexLock lock(&mu_);
  lines_.emplace_back(line);
}

std::vector<std::string> CapturingLogSink::Lines() const {
  troupe::MutexLock lock(&mu_);
  return lines_;
}

bool CapturingLogSink::Contains(std::string_view needle) const {
  troupe::MutexLock lock(&mu_);
  for (const auto& line : lines_) {
    if (absl::StrContains(line, absl::string_view(needle.data(), needle.size()))) {
      return true;
    }
  }
  return false;
}

namespace internal {

LogMessage::LogMessage(LogLevel level, LogComponent component, const char* file, int line)
    : level_(level), component_(component) {
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) {
    path.remove_prefix(slash + 1);
  }
  stream_ << absl::FormatTime("%H:%M:%E6S", absl::Now(), absl::UTCTimeZone()) << ' '
          << LogLevelName(level) << ' ' << LogComponentName(component) << ' ' << path << ':' << line
          << "] ";
}

LogMessage::~LogMessage() {
  const std::string text = stream_.str();
  troupe::MutexLock lock(&g_sink_mu);
  LogSink* sink = g_sink != nullptr ? g_sink : &DefaultSink();
  sink->Write(level_, component_, text);
  if (level_ >= LogLevel::kWarn) {
    if (g_recent.size() == kRecentWarnings) {
      g_recent.pop_front();
    }
    g_recent.push_back(text);
  }
}

}  // namespace internal

std::vector<std::string> RecentWarnings(size_t max) {
  troupe::MutexLock lock(&g_sink_mu);
  const size_t count = std::min(max, g_recent.size());
  return {g_recent.end() - static_cast<std::ptrdiff_t>(count), g_recent.end()};
}

namespace internal {

CheckFailure::CheckFailure(const char* condition, const char* file, int line) {
  stream_ << file << ':' << line << ": check failed: " << condition << ' ';
}

CheckFailure::~CheckFailure() {
  const std::string text = stream_.str();
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal
}  // namespace troupe
