// SPDX-License-Identifier: Apache-2.0
//
// MetricsRegistry: one node's counters and gauges, by name and labels, enumerable at any time
// without stopping anything. Pools, mailboxes and the interconnect's sessions publish into it; a
// metrics page or a test walks it (ForEach) or reads one value (Value, Sum). The typed views
// ActorSystem::Counters() and Interconnect::Counters() are read from it.
//
// A metric is a name ("troupe_pool_events_total"), a type (a monotonic counter, a gauge that
// goes up and down, or a histogram of durations), a help line, labels ({"pool", "User"}, {"worker",
// "0"}, {"peer", "2"}) and a reader: a function that returns the current value. The publisher keeps
// the value where its hot path wants it (a relaxed atomic on the owning thread's cache line); the
// registry only reads it when someone enumerates, so publishing costs nothing per event. Every
// sample also carries the registry's common labels (a node's: {"node", "<id>"}), first.
//
// Names follow Prometheus: snake_case, counters end in `_total`, base units only (seconds, bytes),
// and the unit is in the name (`_seconds_total`, `_bytes`). A time is kept where it is counted in
// integer nanoseconds and registered with MetricUnit::kNanoseconds: readers, Value and Sum return
// nanoseconds (exact), and PrometheusText writes seconds. A metric exists from Add until its
// Registration is destroyed (or Reset); a publisher keeps the Registration next to the value it
// reads, so a reader never outlives its value.
//
// Thread-safety: thread-safe. Readers run on the enumerating thread under the registry's lock,
// concurrently with the publisher: they must only load (relaxed atomics, or values fixed at
// registration) and must not call the registry. Destroying a Registration waits for an
// enumeration in progress.
//
// Example:
//
//   std::atomic<uint64_t> sent{0};
//   troupe::MetricsRegistry::Registration r = system->metrics().Add(
//       {.name = "myapp_orders_sent_total", .type = troupe::MetricType::kCounter,
//        .help = "Orders sent to the exchange.", .labels = {{"venue", "X"}}},
//       [&sent] { return static_cast<int64_t>(sent.load(std::memory_order_relaxed)); });
//   system->metrics().ForEach([](const troupe::MetricSample& s) {
//     std::cout << s.name << " " << s.value << "\n";
//   });
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"

#include "actors/sync.h"

namespace troupe {

enum class MetricType : uint8_t {
  // Only goes up (events handled, bytes written); name ends in `_total`.
  kCounter,
  // Goes up and down (queue length, sessions up).
  kGauge,
  // A distribution of durations (a Histogram); name ends in `_seconds`.
  kHistogram,
};

// Returns "counter", "gauge" or "histogram".
std::string_view MetricTypeName(MetricType type);

// What a counter's or gauge's integer value counts.
enum class MetricUnit : uint8_t {
  // The value as it is: events, bytes, a state.
  kNone,
  // Nanoseconds: the name says seconds (`_seconds`, `_seconds_total`) and PrometheusText divides
  // the value by 1e9.
  kNanoseconds,
};

// A histogram's buckets as read at one moment, for exposition.
struct HistogramSnapshot {
  // Upper bounds in seconds, ascending; the last bucket (+Inf) is implied.
  std::vector<double> upper_bounds;
  // Values at or under each bound (cumulative), one per bound.
  std::vector<uint64_t> cumulative;
  uint64_t count = 0;
  double sum_seconds = 0;
};

// A distribution of durations in power-of-two buckets of nanoseconds: bucket k counts values in
// (2^(k-1), 2^k] ns. Record costs two relaxed atomic adds and is safe from any thread; a reader
// may see a value in `count` a moment before its bucket (each number is exact on its own).
class Histogram {
 public:
  // Exposes the buckets with bounds 2^min_exponent .. 2^max_exponent ns (e.g. 10 .. 34: 1 us to
  // 17 s); values outside still count (in the first bucket, or only in +Inf). 0 <= min <= max < 63.
  Histogram(int min_exponent, int max_exponent);

  // Adds one value (negative values count as 0).
  void Record(int64_t nanoseconds);
  // Returns the number of values recorded.
  uint64_t count() const;
  HistogramSnapshot Read() const;

 private:
  const int min_exponent_;
  const int max_exponent_;
  std::array<std::atomic<uint64_t>, 64> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

struct MetricLabel {
  std::string name;
  std::string value;
  friend bool operator==(const MetricLabel&, const MetricLabel&) = default;
  friend bool operator<(const MetricLabel& a, const MetricLabel& b) {
    return a.name != b.name ? a.name < b.name : a.value < b.value;
  }
};
using MetricLabels = std::vector<MetricLabel>;

// What a metric is, apart from its value.
struct MetricInfo {
  std::string name;
  MetricType type = MetricType::kCounter;
  std::string help;
  MetricLabels labels;
  MetricUnit unit = MetricUnit::kNone;
};

// One reading handed to a ForEach visitor; valid during the call only.
struct MetricSample {
  std::string_view name;
  MetricType type;
  std::string_view help;
  // The registry's common labels, then the metric's own.
  const MetricLabels& labels;
  // A histogram's count.
  int64_t value;
  // A histogram's buckets (null for a counter or gauge).
  const HistogramSnapshot* histogram = nullptr;
  MetricUnit unit = MetricUnit::kNone;

  // Returns the value of the label `name`, or an empty view.
  std::string_view label(std::string_view name) const;
};

class MetricsRegistry {
 public:
  // Returns the current value; see the file comment for what a reader may do.
  using Reader = std::function<int64_t()>;

  // Keeps a metric in the registry; removes it when destroyed or Reset. Movable.
  class Registration {
   public:
    Registration() = default;
    ~Registration() { Reset(); }
    Registration(Registration&& other) noexcept
        : registry_(std::exchange(other.registry_, nullptr)), id_(other.id_) {}
    Registration& operator=(Registration&& other) noexcept {
      if (this != &other) {
        Reset();
        registry_ = std::exchange(other.registry_, nullptr);
        id_ = other.id_;
      }
      return *this;
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

    // Removes the metric now (waits for an enumeration in progress). Idempotent.
    void Reset();

   private:
    friend class MetricsRegistry;
    Registration(MetricsRegistry* registry, uint64_t id) : registry_(registry), id_(id) {}
    MetricsRegistry* registry_ = nullptr;
    uint64_t id_ = 0;
  };

  // `common` labels are put first on every sample (a node's registry: {"node", "<id>"}).
  explicit MetricsRegistry(MetricLabels common = {}) : common_(std::move(common)) {}
  ~MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;
  MetricsRegistry(MetricsRegistry&&) = delete;
  MetricsRegistry& operator=(MetricsRegistry&&) = delete;

  // Adds a metric read through `read`. Two metrics may share a name (they differ in labels); the
  // registry does not check that labels are unique. The registry must outlive the Registration.
  [[nodiscard]] Registration Add(MetricInfo info, Reader read);
  // Adds a histogram (info.type is set to kHistogram); `histogram` must outlive the Registration.
  // Value and Sum read its count.
  [[nodiscard]] Registration AddHistogram(MetricInfo info, const Histogram* histogram);

  // Calls `visit` for every metric, ordered by name, then labels, then registration order.
  void ForEach(absl::FunctionRef<void(const MetricSample&)> visit) const;
  // Returns the value of the metric `name` whose own labels are exactly `labels`, or nullopt.
  std::optional<int64_t> Value(std::string_view name, const MetricLabels& labels = {}) const;
  // Returns the sum of every metric `name` that carries each label of `match` (all when empty).
  int64_t Sum(std::string_view name, const MetricLabels& match = {}) const;
  // Returns the number of metrics registered.
  size_t size() const;

 private:
  struct Entry {
    MetricInfo info;
    MetricLabels labels;  // common_ + info.labels
    Reader read;
    const Histogram* histogram = nullptr;
  };

  void Remove(uint64_t id);

  const MetricLabels common_;
  mutable troupe::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Keyed by (name, labels, id): the enumeration order.
  std::map<std::tuple<std::string, MetricLabels, uint64_t>, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::tuple<std::string, MetricLabels, uint64_t>> keys_ ABSL_GUARDED_BY(mu_);
};

// Returns every metric of `registry` in the Prometheus text exposition format (version 0.0.4):
// for each name a `# HELP` and a `# TYPE` line, then one `name{label="value",...} value` line per
// metric (a kNanoseconds value in seconds; a histogram: `name_bucket{...,le="<seconds>"}` per bound
// and `le="+Inf"`, then `name_sum` and `name_count`). Label values and help text are escaped as the
// format requires (backslash, double quote in label values, line break). What /metrics serves
// (node/monitoring.h).
std::string PrometheusText(const MetricsRegistry& registry);

}  // namespace troupe
