// SPDX-License-Identifier: Apache-2.0
#include "actors/metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe {

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

Histogram::Histogram(int min_exponent, int max_exponent)
    : min_exponent_(std::clamp(min_exponent, 0, 62)),
      max_exponent_(std::clamp(max_exponent, min_exponent_, 62)) {}

void Histogram::Record(int64_t nanoseconds) {
  const uint64_t value = nanoseconds > 0 ? static_cast<uint64_t>(nanoseconds) : 0;
  // The smallest k with value <= 2^k.
  const int bucket = value <= 1 ? 0 : static_cast<int>(std::bit_width(value - 1));
  // Relaxed: each counter is an independent number; Read tolerates a moment's skew.
  buckets_[static_cast<size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(value, std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  uint64_t count = 0;
  for (const std::atomic<uint64_t>& bucket : buckets_) {
    count += bucket.load(std::memory_order_relaxed);
  }
  return count;
}

HistogramSnapshot Histogram::Read() const {
  HistogramSnapshot snapshot;
  uint64_t cumulative = 0;
  for (int k = 0; k < static_cast<int>(buckets_.size()); ++k) {
    cumulative += buckets_[static_cast<size_t>(k)].load(std::memory_order_relaxed);
    if (k >= min_exponent_ && k <= max_exponent_) {
      snapshot.upper_bounds.push_back(std::ldexp(1.0, k) * 1e-9);
      snapshot.cumulative.push_back(cumulative);
    }
  }
  snapshot.count = cumulative;
  snapshot.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return snapshot;
}

std::string_view MetricSample::label(std::string_view name) const {
  for (const MetricLabel& l : labels) {
    if (l.name == name) {
      return l.value;
    }
  }
  return {};
}

void MetricsRegistry::Registration::Reset() {
  if (registry_ != nullptr) {
    std::exchange(registry_, nullptr)->Remove(id_);
  }
}

MetricsRegistry::Registration MetricsRegistry::Add(MetricInfo info, Reader read) {
  MetricLabels labels = common_;
  labels.insert(labels.end(), info.labels.begin(), info.labels.end());
  troupe::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  auto key = std::make_tuple(info.name, info.labels, id);
  keys_.emplace(id, key);
  entries_.emplace(
      std::move(key),
      Entry{.info = std::move(info), .labels = std::move(labels), .read = std::move(read)});
  return {this, id};
}

MetricsRegistry::Registration MetricsRegistry::AddHistogram(MetricInfo info,
                                                            const Histogram* histogram) {
  info.type = MetricType::kHistogram;
  Registration registration =
      Add(std::move(info), [histogram] { return static_cast<int64_t>(histogram->count()); });
  troupe::MutexLock lock(&mu_);
  entries_.at(keys_.at(registration.id_)).histogram = histogram;
  return registration;
}

void MetricsRegistry::Remove(uint64_t id) {
  troupe::MutexLock lock(&mu_);
  auto key = keys_.find(id);
  if (key == keys_.end()) {
    return;
  }
  entries_.erase(key->second);
  keys_.erase(key);
}

void MetricsRegistry::ForEach(absl::FunctionRef<void(const MetricSample&)> visit) const {
  troupe::MutexLock lock(&mu_);
  for (const auto& [key, entry] : entries_) {
    std::optional<HistogramSnapshot> buckets;
    if (entry.histogram != nullptr) {
      buckets = entry.histogram->Read();
    }
    visit(MetricSample{
        .name = entry.info.name,
        .type = entry.info.type,
        .help = entry.info.help,
        .labels = entry.labels,
        .value = buckets.has_value() ? static_cast<int64_t>(buckets->count) : entry.read(),
        .histogram = buckets.has_value() ? &*buckets : nullptr,
        .unit = entry.info.unit});
  }
}

std::optional<int64_t> MetricsRegistry::Value(std::string_view name,
                                              const MetricLabels& labels) const {
  troupe::MutexLock lock(&mu_);
  // The first entry at or after (name, labels) is the metric when it exists (ids start at 1).
  auto it = entries_.lower_bound(std::make_tuple(std::string(name), labels, uint64_t{0}));
  if (it == entries_.end() || std::get<0>(it->first) != name || std::get<1>(it->first) != labels) {
    return std::nullopt;
  }
  return it->second.read();
}

int64_t MetricsRegistry::Sum(std::string_view name, const MetricLabels& match) const {
  troupe::MutexLock lock(&mu_);
  int64_t sum = 0;
  for (auto it =
           entries_.lower_bound(std::make_tuple(std::string(name), MetricLabels(), uint64_t{0}));
       it != entries_.end() && std::get<0>(it->first) == name; ++it) {
    const MetricLabels& own = std::get<1>(it->first);
    const bool matches = std::all_of(match.begin(), match.end(), [&](const MetricLabel& wanted) {
      return std::find(own.begin(), own.end(), wanted) != own.end();
    });
    if (matches) {
      sum += it->second.read();
    }
  }
  return sum;
}

size_t MetricsRegistry::size() const {
  troupe::MutexLock lock(&mu_);
  return entries_.size();
}

namespace {

// Escapes `text` for a label value (`quote`) or a help line: backslash, line break and, in a label
// value, the double quote.
void AppendEscaped(std::string_view text, bool quote, std::string* out) {
  for (const char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        out->append(quote ? "\\\"" : "\"");
        break;
      default:
        out->push_back(c);
    }
  }
}

// Appends `name``suffix`{labels[,le="<le>"]}, without the value.
void AppendSeries(std::string_view name, std::string_view suffix, const MetricLabels& labels,
                  const std::string& le, std::string* out) {
  out->append(name);
  out->append(suffix);
  if (labels.empty() && le.empty()) {
    return;
  }
  out->push_back('{');
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(out, i == 0 ? "" : ",", labels[i].name, "=\"");
    AppendEscaped(labels[i].value, /*quote=*/true, out);
    out->push_back('"');
  }
  if (!le.empty()) {
    absl::StrAppend(out, labels.empty() ? "" : ",", "le=\"", le, "\"");
  }
  out->push_back('}');
}

// Appends " <nanoseconds in seconds>\n", exact: nine decimals carry every nanosecond.
void AppendSeconds(int64_t nanoseconds, std::string* out) {
  const uint64_t magnitude =
      nanoseconds < 0 ? 0 - static_cast<uint64_t>(nanoseconds) : static_cast<uint64_t>(nanoseconds);
  absl::StrAppend(out, " ", nanoseconds < 0 ? "-" : "",
                  absl::StrFormat("%d.%09d", magnitude / 1000000000, magnitude % 1000000000), "\n");
}

}  // namespace

std::string PrometheusText(const MetricsRegistry& registry) {
  std::string out;
  std::string last_name;
  registry.ForEach([&](const MetricSample& sample) {
    if (out.empty() || sample.name != last_name) {
      last_name = std::string(sample.name);
      absl::StrAppend(&out, "# HELP ", last_name, " ");
      AppendEscaped(sample.help, /*quote=*/false, &out);
      absl::StrAppend(&out, "\n# TYPE ", last_name, " ");
      out.append(MetricTypeName(sample.type));
      out.push_back('\n');
    }
    if (sample.histogram == nullptr) {
      AppendSeries(sample.name, "", sample.labels, "", &out);
      if (sample.unit == MetricUnit::kNanoseconds) {
        AppendSeconds(sample.value, &out);
      } else {
        absl::StrAppend(&out, " ", sample.value, "\n");
      }
      return;
    }
    const HistogramSnapshot& h = *sample.histogram;
    for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
      AppendSeries(sample.name, "_bucket", sample.labels,
                   absl::StrFormat("%.9g", h.upper_bounds[i]), &out);
      absl::StrAppend(&out, " ", h.cumulative[i], "\n");
    }
    AppendSeries(sample.name, "_bucket", sample.labels, "+Inf", &out);
    absl::StrAppend(&out, " ", h.count, "\n");
    AppendSeries(sample.name, "_sum", sample.labels, "", &out);
    absl::StrAppend(&out, " ", absl::StrFormat("%.9f", h.sum_seconds), "\n");
    AppendSeries(sample.name, "_count", sample.labels, "", &out);
    absl::StrAppend(&out, " ", h.count, "\n");
  });
  return out;
}

}  // namespace troupe
