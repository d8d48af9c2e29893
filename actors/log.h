// SPDX-License-Identifier: Apache-2.0
//
// Logging facade of Troupe.
//
// `TROUPE_LOG(kInfo, kActors) << "actor " << id << " started";` formats and writes one line to the
// current sink when the level is enabled for the component; otherwise the streamed arguments are
// not evaluated. Levels below `TROUPE_LOG_MIN_LEVEL` (a compile-time floor, 0 = trace) compile to
// nothing. The runtime level is per component and starts at `kInfo`.
//
// Thread-safety: thread-safe. Sinks are called under an internal mutex, one line at a time.
//
// Example (capturing logs in a test):
//
//   troupe::CapturingLogSink sink;             // installs itself, restores the old sink on exit
//   ... run code that logs ...
//   EXPECT_TRUE(sink.Contains("exception"));
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

#include "actors/sync.h"

#ifndef TROUPE_LOG_MIN_LEVEL
#define TROUPE_LOG_MIN_LEVEL 0
#endif

namespace troupe {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarn = 3, kError = 4 };

enum class LogComponent : int { kActors = 0, kScheduler, kConfig, kInterconnect, kUser, kCount };

// Returns a short lower-case name ("info", "actors").
std::string_view LogLevelName(LogLevel level);
std::string_view LogComponentName(LogComponent component);

// Parses "trace", "debug", "info", "warn" or "error"; kInvalidArgument otherwise.
absl::Status ParseLogLevel(std::string_view text, LogLevel* level);

// Receives finished log lines. Implementations must not log themselves.
class LogSink {
 public:
  LogSink() = default;
  virtual ~LogSink() = default;
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;
  LogSink(LogSink&&) = delete;
  LogSink& operator=(LogSink&&) = delete;
  // Writes one line; `line` has no trailing newline.
  virtual void Write(LogLevel level, LogComponent component, std::string_view line) = 0;
};

// Sets the minimum level for one component (all components when `component` is kCount).
void SetLogLevel(LogLevel level, LogComponent component = LogComponent::kCount);

// Returns true when a message of `level` for `component` would be written.
bool LogEnabled(LogLevel level, LogComponent component);

// Replaces the sink (nullptr restores stderr) and returns the previous one.
LogSink* SetLogSink(LogSink* sink);

// Returns the last `max` (at most 64) warn and error lines written in this process, oldest first,
// whatever the sink: what a status page shows as recent warnings.
std::vector<std::string> RecentWarnings(size_t max = 64);

// Keeps every line in memory; installs itself for its lifetime. Thread-safe.
class CapturingLogSink final : public LogSink {
 public:
  CapturingLogSink();
  ~CapturingLogSink() override;
  CapturingLogSink(const CapturingLogSink&) = delete;
  CapturingLogSink& operator=(const CapturingLogSink&) = delete;
  CapturingLogSink(CapturingLogSink&&) = delete;
  CapturingLogSink& operator=(CapturingLogSink&&) = delete;

  void Write(LogLevel level, LogComponent component, std::string_view line) override;
  // Returns a copy of every line written so far.
  std::vector<std::string> Lines() const;
  // Returns true when some line contains `needle`.
  bool Contains(std::string_view needle) const;

 private:
  LogSink* previous_;
  mutable troupe::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

namespace internal {

extern std::array<std::atomic<int>, static_cast<int>(LogComponent::kCount)> g_log_levels;

// One log statement; writes its line to the sink when destroyed.
class LogMessage {
 public:
  LogMessage(LogLevel level, LogComponent component, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  LogMessage(LogMessage&&) = delete;
  LogMessage& operator=(LogMessage&&) = delete;

  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  LogComponent component_;
  std::ostringstream stream_;
};

// Lets `TROUPE_LOG` be used as an expression statement in if/else without dangling-else issues.
struct LogVoidify {
  void operator&(std::ostream& /*unused*/) {}
};

inline bool LogIsOn(LogLevel level, LogComponent component) {
  // Relaxed: the level is a hint, a stale value only delays a level change by a few messages.
  return static_cast<int>(level) >=
         g_log_levels[static_cast<int>(component)].load(std::memory_order_relaxed);
}

}  // namespace internal
}  // namespace troupe

// Writes one log line when `level` (kTrace..kError) is enabled for `component` (kActors...).
// The expansion is the left operand of the caller's <<, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TROUPE_LOG(level, component)                                                              \
  (static_cast<int>(::troupe::LogLevel::level) < TROUPE_LOG_MIN_LEVEL ||                          \
   !::troupe::internal::LogIsOn(::troupe::LogLevel::level, ::troupe::LogComponent::component))    \
      ? (void)0                                                                                   \
      : ::troupe::internal::LogVoidify() &                                                        \
            ::troupe::internal::LogMessage(::troupe::LogLevel::level,                             \
                                           ::troupe::LogComponent::component, __FILE__, __LINE__) \
                .stream()
// NOLINTEND(bugprone-macro-parentheses)
