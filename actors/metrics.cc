// SPDX-License-Identifier: Apache-2.0
#include "actors/metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe {

std::string_view MetricTypeName(MetricType type) {
  return type == MetricType::kCounter ? "counter" : "gauge";
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
    visit(MetricSample{.name = entry.info.name,
                       .type = entry.info.type,
                       .help = entry.info.help,
                       .labels = entry.labels,
                       .value = entry.read()});
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
    out.append(sample.name);
    if (!sample.labels.empty()) {
      out.push_back('{');
      for (size_t i = 0; i < sample.labels.size(); ++i) {
        absl::StrAppend(&out, i == 0 ? "" : ",", sample.labels[i].name, "=\"");
        AppendEscaped(sample.labels[i].value, /*quote=*/true, &out);
        out.push_back('"');
      }
      out.push_back('}');
    }
    absl::StrAppend(&out, " ", sample.value, "\n");
  });
  return out;
}

}  // namespace troupe
