// SPDX-License-Identifier: Apache-2.0
#include "actors/log.h"

#include <cxxabi.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/check.h"

namespace troupe {
namespace internal {

thread_local constinit LogScope* tls_log_scope [[gnu::tls_model("initial-exec")]] = nullptr;

namespace {

// Every component at `level`; a prvalue, since atomics cannot be copied.
template <size_t... I>
constexpr LogLevels LevelsAt(LogLevel level, std::index_sequence<I...> /*unused*/) {
  return {{((void)I, static_cast<int>(level))...}};
}

constexpr LogLevels MakeLevels(LogLevel level) {
  return LevelsAt(level, std::make_index_sequence<kMaxLogComponents>());
}

}  // namespace

// Every component starts at kInfo. Constant-initialized: lines logged during static
// initialization see it too.
constinit LogLevels g_log_levels = MakeLevels(LogLevel::kInfo);

std::string TypeName(const std::type_info* type) {
  if (type == nullptr) {
    return "?";
  }
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  if (status != 0 || name == nullptr) {
    return type->name();
  }
  // Log lines are space-separated fields: "troupe::(anonymous namespace)::Pinger" and
  // "Echo<Ping, Pong>" would split.
  std::string readable = name.get();
  absl::StrReplaceAll({{"(anonymous namespace)::", ""}, {", ", ","}}, &readable);
  return readable;
}

}  // namespace internal

namespace {

constexpr int kBuiltInComponents = static_cast<int>(LogComponent::kCount);
constexpr size_t kMaxComponentName = 32;

// Names of user components, index kBuiltInComponents + 1 onwards (kCount means "all"). A name is
// written once, before g_named_count's release store publishes it; readers load it with acquire.
std::array<std::string, kMaxLogComponents> g_component_names;
std::atomic<int> g_named_count{kBuiltInComponents + 1};
troupe::Mutex g_registry_mu;
// Every LogContext alive, so that SetLogLevel reaches them.
std::vector<LogContext*> g_contexts ABSL_GUARDED_BY(g_registry_mu);

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
  const int index = static_cast<int>(component);
  if (index > kBuiltInComponents && index < g_named_count.load(std::memory_order_acquire)) {
    return g_component_names[static_cast<size_t>(index)];
  }
  return "?";
}

absl::Status CheckLogComponentName(std::string_view name) {
  if (name.empty() || name.size() > kMaxComponentName) {
    return absl::InvalidArgumentError(absl::StrCat("component name \"",
                                                   absl::string_view(name.data(), name.size()),
                                                   "\" must have 1 to 32 characters"));
  }
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("component name \"",
                                                     absl::string_view(name.data(), name.size()),
                                                     "\" may only use a-z, 0-9, '_', '-' and '.'"));
    }
  }
  return absl::OkStatus();
}

LogComponent LogComponentNamed(std::string_view name) {
  for (int i = 0; i < kBuiltInComponents; ++i) {
    if (LogComponentName(static_cast<LogComponent>(i)) == name) {
      return static_cast<LogComponent>(i);
    }
  }
  const absl::Status valid = CheckLogComponentName(name);
  TROUPE_CHECK(valid.ok()) << valid.message();
  troupe::MutexLock lock(&g_registry_mu);
  const int count = g_named_count.load(std::memory_order_relaxed);
  for (int i = kBuiltInComponents + 1; i < count; ++i) {
    if (g_component_names[static_cast<size_t>(i)] == name) {
      return static_cast<LogComponent>(i);
    }
  }
  TROUPE_CHECK(count < kMaxLogComponents)
      << "too many log components: " << kMaxLogComponents - kBuiltInComponents - 1
      << " user-named ones exist; \"" << name << "\" cannot be added";
  g_component_names[static_cast<size_t>(count)] = std::string(name);
  // release: pairs with the acquire loads in LogComponentName; the name is written first.
  g_named_count.store(count + 1, std::memory_order_release);
  return static_cast<LogComponent>(count);
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

namespace {

void SetLevels(internal::LogLevels& levels, LogLevel level, LogComponent component) {
  for (int i = 0; i < kMaxLogComponents; ++i) {
    if (component == LogComponent::kCount || i == static_cast<int>(component)) {
      levels[static_cast<size_t>(i)].store(static_cast<int>(level), std::memory_order_relaxed);
    }
  }
}

}  // namespace

LogContext::LogContext(uint32_t node_id, LogLevel level)
    : node_id_(node_id), levels_(internal::MakeLevels(level)) {
  troupe::MutexLock lock(&g_registry_mu);
  g_contexts.push_back(this);
}

LogContext::~LogContext() {
  troupe::MutexLock lock(&g_registry_mu);
  std::erase(g_contexts, this);
}

void LogContext::SetLevel(LogLevel level, LogComponent component) {
  SetLevels(levels_, level, component);
}

bool LogContext::Enabled(LogLevel level, LogComponent component) const {
  return static_cast<int>(level) >= TROUPE_LOG_MIN_LEVEL &&
         static_cast<int>(level) >=
             levels_[static_cast<unsigned>(component) % kMaxLogComponents].load(
                 std::memory_order_relaxed);
}

namespace {

// Makes `scope` the calling thread's innermost scope, saying what the one it hides says until the
// caller overrides a field.
void PushScope(internal::LogScope& scope) {
  internal::LogScope* previous = internal::tls_log_scope;
  if (previous != nullptr) {
    scope = *previous;
  }
  scope.previous = previous;
  internal::tls_log_scope = &scope;
}

}  // namespace

LogBinding::LogBinding(const LogContext* context) {
  PushScope(scope_);
  scope_.context = context;
}

LogBinding::~LogBinding() { internal::tls_log_scope = scope_.previous; }

uint64_t NewTraceId() {
  thread_local std::mt19937_64 random(std::random_device{}() ^
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()));
  uint64_t id = 0;
  while (id == 0) {
    id = random();
  }
  return id;
}

TraceScope::TraceScope(uint64_t trace_id) {
  PushScope(scope_);
  scope_.trace_id = trace_id;
}

TraceScope::~TraceScope() { internal::tls_log_scope = scope_.previous; }

void SetLogLevel(LogLevel level, LogComponent component) {
  SetLevels(internal::g_log_levels, level, component);
  troupe::MutexLock lock(&g_registry_mu);
  for (LogContext* context : g_contexts) {
    context->SetLevel(level, component);
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

std::vector<std::string> CapturingLogSink::LinesWith(std::string_view needle) const {
  troupe::MutexLock lock(&mu_);
  std::vector<std::string> found;
  for (const auto& line : lines_) {
    if (absl::StrContains(line, absl::string_view(needle.data(), needle.size()))) {
      found.push_back(line);
    }
  }
  return found;
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
  stream_ << absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()) << ' '
          << LogLevelName(level);
  const LogScope* scope = tls_log_scope;
  if (scope != nullptr && scope->context != nullptr) {
    stream_ << " node=" << scope->context->node_id();
  }
  // 16 bytes is Linux's limit for a thread name, the terminator included.
  std::array<char, 16> thread_name{};
  if (pthread_getname_np(pthread_self(), thread_name.data(), thread_name.size()) == 0) {
    stream_ << " thread=" << thread_name.data();
  }
  if (scope != nullptr && scope->actor != nullptr) {
    stream_ << " actor=" << *scope->actor << " class=" << TypeName(scope->actor_class);
  }
  if (scope != nullptr && scope->trace_id != 0) {
    stream_ << " trace=" << absl::StrFormat("%016x", scope->trace_id);
  }
  stream_ << ' ' << LogComponentName(component) << ' ' << path << ':' << line << "] ";
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
