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
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/check.h"
#include "actors/log_json.h"

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
// Fixed buffers, not std::string: constant-initialized, so that code naming a component during
// static initialization (a namespace-scope `static const auto kBilling = LogComponentNamed(...)`
// in another file) finds the registry ready whatever the order of initialization.
struct ComponentName {
  std::array<char, kMaxComponentName> text;
  size_t size;
};
constinit std::array<ComponentName, kMaxLogComponents> g_component_names{};
std::atomic<int> g_named_count{kBuiltInComponents + 1};
// Built on first use, even during static initialization, and never destroyed, so that contexts
// and components of static objects can come and go in any order.
struct LogRegistry {
  troupe::Mutex mu;
  // Every LogContext alive, so that SetLogLevel reaches them.
  std::vector<LogContext*> contexts ABSL_GUARDED_BY(mu);
};

LogRegistry& TheLogRegistry() {
  static LogRegistry& registry = *new LogRegistry;
  return registry;
}

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
    const ComponentName& named = g_component_names[static_cast<size_t>(index)];
    return {named.text.data(), named.size};
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
  LogRegistry& registry = TheLogRegistry();
  troupe::MutexLock lock(&registry.mu);
  const int count = g_named_count.load(std::memory_order_relaxed);
  for (int i = kBuiltInComponents + 1; i < count; ++i) {
    if (LogComponentName(static_cast<LogComponent>(i)) == name) {
      return static_cast<LogComponent>(i);
    }
  }
  TROUPE_CHECK(count < kMaxLogComponents)
      << "too many log components: " << kMaxLogComponents - kBuiltInComponents - 1
      << " user-named ones exist; \"" << name << "\" cannot be added";
  ComponentName& named = g_component_names[static_cast<size_t>(count)];
  std::copy(name.begin(), name.end(), named.text.begin());
  named.size = name.size();
  // release: pairs with the acquire loads in LogComponentName; the name is written first.
  g_named_count.store(count + 1, std::memory_order_release);
  return static_cast<LogComponent>(count);
}

namespace {

// Levenshtein distance between two short names (at most kMaxComponentName characters).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> LogComponentNames() {
  std::vector<std::string> names;
  const int count = g_named_count.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    if (i != kBuiltInComponents) {
      names.emplace_back(LogComponentName(static_cast<LogComponent>(i)));
    }
  }
  return names;
}

int FreeLogComponentSlots() {
  return kMaxLogComponents - g_named_count.load(std::memory_order_acquire);
}

absl::StatusOr<LogComponent> FindLogComponent(std::string_view name) {
  if (absl::Status known = CheckLogComponentKnown(name); !known.ok()) {
    return known;
  }
  // Known, so this finds it and names nothing new.
  return LogComponentNamed(name);
}

absl::Status CheckLogComponentKnown(std::string_view name,
                                    const std::vector<std::string>& declared) {
  if (absl::Status valid = CheckLogComponentName(name); !valid.ok()) {
    return valid;
  }
  std::vector<std::string> known = LogComponentNames();
  known.insert(known.end(), declared.begin(), declared.end());
  // A typo is a letter or two off; "db" must not suggest "user".
  const size_t tolerance = name.size() >= 5 ? 2 : 1;
  const std::string* closest = nullptr;
  size_t best = tolerance + 1;
  for (const std::string& candidate : known) {
    if (candidate == name) {
      return absl::OkStatus();
    }
    if (const size_t distance = EditDistance(name, candidate); distance < best) {
      best = distance;
      closest = &candidate;
    }
  }
  const absl::string_view quoted(name.data(), name.size());
  if (closest != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown component \"", quoted, "\" (did you mean \"", *closest, "\"?)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown component \"", quoted, "\" (known: ", absl::StrJoin(known, ", "), ")"));
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

std::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

absl::Status ParseLogFormat(std::string_view text, LogFormat* format) {
  if (text == "text" || text == "json") {
    *format = text == "json" ? LogFormat::kJson : LogFormat::kText;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown log format \"",
                                                 absl::string_view(text.data(), text.size()),
                                                 "\" (expected text or json)"));
}

namespace {

// Process-wide format, for threads no node runs. Relaxed: like the levels, a hint read per line.
constinit std::atomic<int> g_log_format{static_cast<int>(LogFormat::kText)};

// Sets the components whose bit is in `mask` (all when `mask` is ~0) to `level`.
void SetLevels(internal::LogLevels& levels, LogLevel level, uint32_t mask) {
  for (int i = 0; i < kMaxLogComponents; ++i) {
    if ((mask >> i & 1u) != 0) {
      levels[static_cast<size_t>(i)].store(static_cast<int>(level), std::memory_order_relaxed);
    }
  }
}

uint32_t BitOf(LogComponent component) {
  return 1u << (static_cast<unsigned>(component) % kMaxLogComponents);
}

}  // namespace

LogContext::LogContext(uint32_t node_id, LogLevel level)
    : node_id_(node_id),
      levels_(internal::MakeLevels(level)),
      default_level_(static_cast<int>(level)) {
  LogRegistry& registry = TheLogRegistry();
  troupe::MutexLock lock(&registry.mu);
  registry.contexts.push_back(this);
}

LogContext::~LogContext() {
  LogRegistry& registry = TheLogRegistry();
  troupe::MutexLock lock(&registry.mu);
  std::erase(registry.contexts, this);
}

void LogContext::SetLevel(LogLevel level, LogComponent component) {
  troupe::MutexLock lock(&mu_);
  if (component == LogComponent::kCount) {
    own_levels_ = 0;
    default_level_.store(static_cast<int>(level), std::memory_order_relaxed);
    SetLevels(levels_, level, ~0u);
    return;
  }
  own_levels_ |= BitOf(component);
  SetLevels(levels_, level, BitOf(component));
}

void LogContext::SetDefaultLevel(LogLevel level) {
  troupe::MutexLock lock(&mu_);
  default_level_.store(static_cast<int>(level), std::memory_order_relaxed);
  SetLevels(levels_, level, ~own_levels_);
}

void LogContext::ClearLevel(LogComponent component) {
  troupe::MutexLock lock(&mu_);
  own_levels_ &= ~BitOf(component);
  SetLevels(levels_, default_level(), BitOf(component));
}

LogLevel LogContext::default_level() const {
  return static_cast<LogLevel>(default_level_.load(std::memory_order_relaxed));
}

LogLevel LogContext::level(LogComponent component) const {
  return static_cast<LogLevel>(levels_[static_cast<unsigned>(component) % kMaxLogComponents].load(
      std::memory_order_relaxed));
}

bool LogContext::HasOwnLevel(LogComponent component) const {
  troupe::MutexLock lock(&mu_);
  return (own_levels_ & BitOf(component)) != 0;
}

void LogContext::SetFormat(LogFormat format) {
  format_.store(static_cast<int>(format), std::memory_order_relaxed);
}

LogFormat LogContext::format() const {
  return static_cast<LogFormat>(format_.load(std::memory_order_relaxed));
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
  SetLevels(internal::g_log_levels, level,
            component == LogComponent::kCount ? ~0u : BitOf(component));
  LogRegistry& registry = TheLogRegistry();
  troupe::MutexLock lock(&registry.mu);
  for (LogContext* context : registry.contexts) {
    context->SetLevel(level, component);
  }
}

void SetLogFormat(LogFormat format) {
  g_log_format.store(static_cast<int>(format), std::memory_order_relaxed);
  LogRegistry& registry = TheLogRegistry();
  troupe::MutexLock lock(&registry.mu);
  for (LogContext* context : registry.contexts) {
    context->SetFormat(format);
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
namespace {

constexpr const char* kTimeFormat = "%Y-%m-%dT%H:%M:%E6SZ";

std::string_view BaseName(const char* file) {
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) {
    path.remove_prefix(slash + 1);
  }
  return path;
}

// 16 bytes is Linux's limit for a thread name, the terminator included.
using ThreadName = std::array<char, 16>;

bool GetThreadName(ThreadName& name) {
  return pthread_getname_np(pthread_self(), name.data(), name.size()) == 0;
}

void AppendJsonField(std::string_view key, std::string_view value, std::string* out) {
  out->append(",\"");
  out->append(key);
  out->append("\":");
  AppendJsonString(value, out);
}

// The JSON record of one line: the text format's fields under fixed keys (see log.h).
std::string JsonLine(absl::Time time, LogLevel level, LogComponent component, const char* file,
                     int line, std::string_view message) {
  std::string out;
  out.reserve(message.size() + 256);
  out.append(R"({"time":")");
  out.append(absl::FormatTime(kTimeFormat, time, absl::UTCTimeZone()));
  out.append(R"(","level":")");
  out.append(LogLevelName(level));
  out.push_back('"');
  const LogScope* scope = tls_log_scope;
  if (scope != nullptr && scope->context != nullptr) {
    absl::StrAppend(&out, ",\"node\":", scope->context->node_id());
  }
  if (ThreadName thread_name{}; GetThreadName(thread_name)) {
    AppendJsonField("thread", thread_name.data(), &out);
  }
  if (scope != nullptr && scope->actor != nullptr) {
    AppendJsonField("actor", scope->actor->ToString(), &out);
    AppendJsonField("class", TypeName(scope->actor_class), &out);
  }
  if (scope != nullptr && scope->trace_id != 0) {
    AppendJsonField("trace", absl::StrFormat("%016x", scope->trace_id), &out);
  }
  AppendJsonField("component", LogComponentName(component), &out);
  const std::string_view base = BaseName(file);
  AppendJsonField("source", absl::StrCat(absl::string_view(base.data(), base.size()), ":", line),
                  &out);
  AppendJsonField("message", message, &out);
  out.push_back('}');
  return out;
}

}  // namespace

LogMessage::LogMessage(LogLevel level, LogComponent component, const char* file, int line)
    : level_(level), component_(component) {
  const LogScope* scope = tls_log_scope;
  const LogFormat format =
      scope != nullptr && scope->context != nullptr
          ? scope->context->format()
          : static_cast<LogFormat>(g_log_format.load(std::memory_order_relaxed));
  if (format == LogFormat::kJson) {
    // The fields are written around the message once it is complete (the destructor).
    json_ = true;
    file_ = file;
    line_ = line;
    time_ns_ = absl::GetCurrentTimeNanos();
    return;
  }
  stream_ << absl::FormatTime(kTimeFormat, absl::Now(), absl::UTCTimeZone()) << ' '
          << LogLevelName(level);
  if (scope != nullptr && scope->context != nullptr) {
    stream_ << " node=" << scope->context->node_id();
  }
  if (ThreadName thread_name{}; GetThreadName(thread_name)) {
    stream_ << " thread=" << thread_name.data();
  }
  if (scope != nullptr && scope->actor != nullptr) {
    stream_ << " actor=" << *scope->actor << " class=" << TypeName(scope->actor_class);
  }
  if (scope != nullptr && scope->trace_id != 0) {
    stream_ << " trace=" << absl::StrFormat("%016x", scope->trace_id);
  }
  stream_ << ' ' << LogComponentName(component) << ' ' << BaseName(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  const std::string text = json_ ? JsonLine(absl::FromUnixNanos(time_ns_), level_, component_,
                                            file_, line_, stream_.str())
                                 : stream_.str();
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
