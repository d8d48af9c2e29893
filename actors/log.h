// SPDX-License-Identifier: Apache-2.0
//
// Logging facade of Troupe.
//
// `TROUPE_LOG(kInfo, kActors) << "actor " << id << " started";` formats and writes one line to the
// current sink when the level is enabled for the component; otherwise the streamed arguments are
// not evaluated. Levels below `TROUPE_LOG_MIN_LEVEL` (a compile-time floor, 0 = trace) compile to
// nothing. `TROUPE_LOG_TO(kInfo, component)` does the same for a component held in a variable,
// such as one your code names with `LogComponentNamed("billing")`.
//
// Every line says who wrote it:
//
//   2026-11-24T05:19:37.123456Z info node=1 thread=User:0 actor=[1:7:0] class=Pinger
//       trace=00000000000004d2 user pinger.cc:42] got pong 17
//
// (one line; wrapped here): the UTC date and time, the level, the node (on threads a node runs,
// see LogContext), the thread's name, and inside a handler the actor's id and class and the trace
// id of the event being handled (see actor.h); then the component and the source location.
// Fields that do not apply (no node on a plain thread, no actor outside a handler, no trace) are
// left out. The text format writes the message as it was streamed, newlines included.
//
// Formats: a node whose config says `log { format: "json" }` (LogContext::SetFormat) writes each
// line as one JSON object instead, with the same fields under fixed keys, in this order:
//
//   {"time":"2026-11-24T05:19:37.123456Z","level":"info","node":1,"thread":"User:0",
//    "actor":"[1:7:0]","class":"Pinger","trace":"00000000000004d2","component":"user",
//    "source":"pinger.cc:42","message":"got pong 17"}
//
// `node` is a number, every other value a string; absent fields are left out as in the text
// format. Strings are escaped for JSON (quotes, backslashes, control characters as \n or \u001b);
// bytes that are not UTF-8 become U+FFFD, so every line parses as JSON whatever the message
// holds, and a message's newlines never split a record. Threads no node runs use the
// process-wide format (SetLogFormat), text until set.
//
// Levels: each node has its own (LogContext, set from its config's `log` section), so two nodes
// in one process log independently: a default level and, over it, levels of single components.
// Threads no node runs use the process-wide levels, which start at `kInfo`. `SetLogLevel` sets a
// level process-wide: the default and every node's. A node's monitoring server changes its levels
// over HTTP (node/monitoring.h, /loglevels).
//
// Components: the built-in ones and those your code names with LogComponentNamed. A config or an
// HTTP request may only name a component that exists (FindLogComponent): a built-in one, one the
// process has named already, or one the config declares in `log.user_components`; any other name
// is refused, so a misspelt "interconect" is an error rather than a level nobody reads.
//
// Thread-safety: thread-safe. Sinks are called under an internal mutex, one line at a time.
//
// Example (capturing logs in a test):
//
//   troupe::CapturingLogSink sink;             // installs itself, restores the old sink on exit
//   TROUPE_LOG(kWarn, kUser) << "exception in a handler";   // the code under test logs
//   EXPECT_TRUE(sink.Contains("exception"));
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "actors/sync.h"

#ifndef TROUPE_LOG_MIN_LEVEL
#define TROUPE_LOG_MIN_LEVEL 0
#endif

namespace troupe {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarn = 3, kError = 4 };

// The built-in components. Values from kCount + 1 up to kMaxLogComponents - 1 are components
// named by users (LogComponentNamed); kCount itself stands for "every component" in SetLogLevel.
enum class LogComponent : int { kActors = 0, kScheduler, kConfig, kInterconnect, kUser, kCount };

// How many components there can be, built-in and named together.
inline constexpr int kMaxLogComponents = 32;

// Returns a short lower-case name ("info", "actors", or the name a user component was given).
std::string_view LogLevelName(LogLevel level);
std::string_view LogComponentName(LogComponent component);

// Parses "trace", "debug", "info", "warn" or "error"; kInvalidArgument otherwise.
absl::Status ParseLogLevel(std::string_view text, LogLevel* level);

// How lines are written (see the top of this file).
enum class LogFormat : int { kText = 0, kJson = 1 };

// Returns "text" or "json".
std::string_view LogFormatName(LogFormat format);

// Parses "text" or "json"; kInvalidArgument otherwise, naming the values expected.
absl::Status ParseLogFormat(std::string_view text, LogFormat* format);

// Checks a component name: 1 to 32 characters of a-z, 0-9, '_', '-' and '.'. kInvalidArgument
// otherwise, saying why.
absl::Status CheckLogComponentName(std::string_view name);

// Returns the component called `name`: a built-in one ("actors", "scheduler", "config",
// "interconnect", "user") or one named by users, registered process-wide the first time the name
// is seen (also when a node's config names it first). Aborts on a name CheckLogComponentName
// rejects, or when kMaxLogComponents components exist. Thread-safe; keep the result in a static:
//
//   static const troupe::LogComponent kBilling = troupe::LogComponentNamed("billing");
//   TROUPE_LOG_TO(kInfo, kBilling) << "invoice " << id << " sent";
LogComponent LogComponentNamed(std::string_view name);

// Returns the component called `name` if it exists already: a built-in one or one named so far
// (LogComponentNamed, or a node's config). Never names a new one. kInvalidArgument otherwise, with
// the reason: a malformed name (CheckLogComponentName), or `unknown component "interconect" (did
// you mean "interconnect"?)`, or the known names when none is close. Thread-safe.
absl::StatusOr<LogComponent> FindLogComponent(std::string_view name);

// Returns OK when FindLogComponent finds `name` or `name` is one of `declared` (names about to be
// named, such as a config's user_components); else FindLogComponent's error, whose "did you mean"
// also considers `declared`.
absl::Status CheckLogComponentKnown(std::string_view name,
                                    const std::vector<std::string>& declared = {});

// Returns the name of every component that exists: the built-in ones, then the user-named ones in
// the order they were named.
std::vector<std::string> LogComponentNames();

// Returns how many more components LogComponentNamed can name in this process.
int FreeLogComponentSlots();

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

class LogContext;

namespace internal {

// What the calling thread writes on behalf of: a node and, inside a handler, an actor and the
// trace id of the event being handled. Scopes live on the stack and chain to the one they hide;
// tls_log_scope is the innermost (null: a plain thread).
struct LogScope {
  const LogContext* context = nullptr;
  const ActorId* actor = nullptr;
  const std::type_info* actor_class = nullptr;
  uint64_t trace_id = 0;
  LogScope* previous = nullptr;
};
// initial-exec: one %fs-relative load, not a __tls_get_addr call, even though the library is built
// position-independent; handlers and sends touch it for every event.
extern thread_local constinit LogScope* tls_log_scope [[gnu::tls_model("initial-exec")]];

using LogLevels = std::array<std::atomic<int>, kMaxLogComponents>;
inline const LogLevels& LevelsOf(const LogContext& context);

}  // namespace internal

// The log identity of one node: its id, which every line written on its behalf carries, its
// format, and its levels: a default level and the components that have a level of their own. Each
// ActorSystem owns one (ActorSystem::log_context()), set from its config, and binds its threads
// and handlers to it; bind threads of your own that work for a node with LogBinding.
// Thread-safe: setters may race with each other and with logging threads; a logging thread sees
// a new level or format within a few lines (relaxed loads).
class LogContext {
 public:
  // Every component starts at `level`, none with a level of its own; the format is text.
  explicit LogContext(uint32_t node_id, LogLevel level = LogLevel::kInfo);
  ~LogContext();
  LogContext(const LogContext&) = delete;
  LogContext& operator=(const LogContext&) = delete;
  LogContext(LogContext&&) = delete;
  LogContext& operator=(LogContext&&) = delete;

  uint32_t node_id() const { return node_id_; }

  // -- levels ------------------------------------------------------------------------------------

  // Gives `component` a level of its own, which the default level no longer changes. With
  // kCount: sets the default level and every component to `level`, dropping their own levels.
  void SetLevel(LogLevel level, LogComponent component = LogComponent::kCount);
  // Sets the default level: the level of every component that has none of its own.
  void SetDefaultLevel(LogLevel level);
  // Drops `component`'s own level: it follows the default level again.
  void ClearLevel(LogComponent component);
  // Returns the default level.
  LogLevel default_level() const;
  // Returns `component`'s level (its own, or the default).
  LogLevel level(LogComponent component) const;
  // Returns true when `component` has a level of its own.
  bool HasOwnLevel(LogComponent component) const;
  // Returns true when this node writes a message of `level` for `component`.
  bool Enabled(LogLevel level, LogComponent component) const;

  // -- format ------------------------------------------------------------------------------------

  // Sets how this node's lines are written; lines already begun keep their format.
  void SetFormat(LogFormat format);
  LogFormat format() const;

 private:
  friend const internal::LogLevels& internal::LevelsOf(const LogContext& context);

  const uint32_t node_id_;
  internal::LogLevels levels_;
  std::atomic<int> default_level_;
  std::atomic<int> format_{static_cast<int>(LogFormat::kText)};
  // Serializes the setters, so that a default level and a component's own level set at the same
  // time leave levels_ as one of the two orders would.
  mutable troupe::Mutex mu_;
  // Bit i: component i has a level of its own.
  uint32_t own_levels_ ABSL_GUARDED_BY(mu_) = 0;
};

// Binds the calling thread to a node's LogContext for this object's lifetime: the lines it writes
// name the node and follow the node's levels. Nests; create and destroy on the same thread.
class LogBinding {
 public:
  explicit LogBinding(const LogContext* context);
  ~LogBinding();
  LogBinding(const LogBinding&) = delete;
  LogBinding& operator=(const LogBinding&) = delete;
  LogBinding(LogBinding&&) = delete;
  LogBinding& operator=(LogBinding&&) = delete;

 private:
  internal::LogScope scope_;
};

// -- trace ids -----------------------------------------------------------------------------------
//
// A trace id follows one request through actors and nodes. Set it on an event (the `trace_id`
// argument of EventHandle, or a TraceScope around a plain thread's sends); every event an actor
// sends while handling that event carries it on (Actor::Send and Schedule, ActorSystem::Send,
// prepared handles without one of their own, replies and Undelivered notices), across nodes too,
// and every line logged meanwhile shows it. 0 means "no trace".

// Returns the trace id of the event being handled on this thread, or of the innermost TraceScope;
// 0 when there is none.
inline uint64_t CurrentTraceId();

// Returns a new random trace id (never 0).
uint64_t NewTraceId();

// Makes the calling thread's sends and log lines carry `trace_id` for this object's lifetime.
// Nests; create and destroy on the same thread.
class TraceScope {
 public:
  explicit TraceScope(uint64_t trace_id);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  TraceScope(TraceScope&&) = delete;
  TraceScope& operator=(TraceScope&&) = delete;

 private:
  internal::LogScope scope_;
};

// -- levels and sinks
// ------------------------------------------------------------------------------

// Sets the minimum level of one component (of all when `component` is kCount) process-wide: for
// threads no node runs, and in every node that exists now (LogContext::SetLevel). A node created
// later starts from its config.
void SetLogLevel(LogLevel level, LogComponent component = LogComponent::kCount);

// Sets the format process-wide: for threads no node runs, and in every node that exists now. A
// node created later starts from its config.
void SetLogFormat(LogFormat format);

// Returns true when a message of `level` for `component` written on the calling thread would be
// written (by the thread's node's levels, or the process-wide ones).
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
  // Returns a copy of the lines that contain `needle`, in order.
  std::vector<std::string> LinesWith(std::string_view needle) const;
  // Returns true when some line contains `needle`.
  bool Contains(std::string_view needle) const;

 private:
  LogSink* previous_;
  mutable troupe::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

namespace internal {

extern LogLevels g_log_levels;

inline const LogLevels& LevelsOf(const LogContext& context) { return context.levels_; }

// Returns "Pinger" for the type of a class Pinger (demangled; the raw name when that fails).
std::string TypeName(const std::type_info* type);

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
  // Set for a JSON line, whose fields are written once the message is complete; a text line's
  // prefix is in stream_ already.
  bool json_ = false;
  const char* file_ = nullptr;
  int line_ = 0;
  int64_t time_ns_ = 0;
  std::ostringstream stream_;
};

// Lets `TROUPE_LOG` be used as an expression statement in if/else without dangling-else issues.
struct LogVoidify {
  void operator&(std::ostream& /*unused*/) {}
};

inline bool LogIsOn(LogLevel level, LogComponent component) {
  const LogScope* scope = tls_log_scope;
  const LogLevels& levels =
      scope != nullptr && scope->context != nullptr ? LevelsOf(*scope->context) : g_log_levels;
  // Relaxed: the level is a hint, a stale value only delays a level change by a few messages.
  return static_cast<int>(level) >=
         levels[static_cast<unsigned>(component) % kMaxLogComponents].load(
             std::memory_order_relaxed);
}

}  // namespace internal

inline uint64_t CurrentTraceId() {
  const internal::LogScope* scope = internal::tls_log_scope;
  return scope != nullptr ? scope->trace_id : 0;
}

}  // namespace troupe

// Writes one log line when `level` (kTrace..kError) is enabled for `component` (kActors...).
// The expansion is the left operand of the caller's <<, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TROUPE_LOG(level, component) TROUPE_LOG_TO(level, ::troupe::LogComponent::component)

// The same for a component held in a variable or returned by LogComponentNamed.
#define TROUPE_LOG_TO(level, component)                                                    \
  (static_cast<int>(::troupe::LogLevel::level) < TROUPE_LOG_MIN_LEVEL ||                   \
   !::troupe::internal::LogIsOn(::troupe::LogLevel::level, component))                     \
      ? (void)0                                                                            \
      : ::troupe::internal::LogVoidify() &                                                 \
            ::troupe::internal::LogMessage(::troupe::LogLevel::level, component, __FILE__, \
                                           __LINE__)                                       \
                .stream()
// NOLINTEND(bugprone-macro-parentheses)
