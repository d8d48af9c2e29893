// SPDX-License-Identifier: Apache-2.0
//
// Metric tables: a family of metrics (one peer's session, one pool's workers) declared once, one
// row per counter or gauge. A row holds the metric's name, type and help text, the reader that
// takes its value from the publisher's struct, and the field of the typed view it fills
// (SessionCounters, PoolCounters). The registration (PublishRows) and the typed view
// (FillFromRows) walk the same rows, so a metric cannot be registered under one name and read back
// under another, and renaming one is a one-line change.
//
// Why a constexpr table rather than an X-macro list: the atomics a hot path bumps stay plain,
// named fields of their structs (`stats.events_sent.fetch_add(1, std::memory_order_relaxed)`). A
// row only points at one, through a reader instantiated from its member pointer
// (LoadRelaxed<&SessionStats::events_sent>), so the hot path does not change, the rows read as
// data, and the compiler checks every member pointer. Macros would only be needed if the atomics
// themselves had to be generated from the list.
//
// Histograms are registered on their own (MetricsRegistry::AddHistogram): no typed view has them.
//
// Thread-safety: the tables are constants. Readers run as MetricsRegistry readers (relaxed loads
// on the enumerating thread); FillFromRows is thread-compatible (one view per caller).
//
// Example:
//
//   struct Stats { std::atomic<uint64_t> sent{0}; };
//   struct View { uint64_t sent = 0; };
//   Stats stats;
//   constexpr std::array<troupe::MetricRow<Stats, View>, 1> kRows = {{
//       {"myapp_sent_total", troupe::MetricType::kCounter, "Orders sent.",
//        troupe::LoadRelaxed<&Stats::sent>, troupe::SetField<&View::sent>},
//   }};
//   std::vector<troupe::MetricsRegistry::Registration> registrations;
//   troupe::PublishRows(registry, kRows, stats, {{"venue", "X"}}, &registrations);
//   View view;
//   registry.ForEach([&](const troupe::MetricSample& s) { troupe::FillFromRows(kRows, s, view); });
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/time/time.h"

#include "actors/metrics.h"

namespace troupe {

// One counter or gauge of a family: `Source` is what its publisher reads it from, `View` the
// typed struct a sample of it fills.
template <typename Source, typename View>
struct MetricRow {
  std::string_view name;
  MetricType type = MetricType::kCounter;
  std::string_view help;
  // Returns the current value (runs as a MetricsRegistry::Reader: loads only).
  int64_t (*read)(const Source&) = nullptr;
  // Stores a sample in the view's field; null when the view has no field for the metric.
  void (*fill)(View&, const MetricSample&) = nullptr;
  // kNanoseconds for a time (the name says seconds; read returns nanoseconds).
  MetricUnit unit = MetricUnit::kNone;
};

namespace metric_table_internal {
template <typename MemberPointer>
struct Member;
template <typename Class, typename Type>
struct Member<Type Class::*> {
  using ClassType = Class;
  using FieldType = Type;
};
}  // namespace metric_table_internal

// The class of the member pointer `kMember`, and the type of the member.
template <auto kMember>
using MemberClass = typename metric_table_internal::Member<decltype(kMember)>::ClassType;
template <auto kMember>
using MemberType = typename metric_table_internal::Member<decltype(kMember)>::FieldType;

// Returns the atomic `source.*kMember` as a metric value. Relaxed: each metric is one independent
// number.
template <auto kMember>
int64_t LoadRelaxed(const MemberClass<kMember>& source) {
  return static_cast<int64_t>((source.*kMember).load(std::memory_order_relaxed));
}

// Returns a sample's value as a view field of type T: a flag is value != 0, a Duration is value
// nanoseconds, a number is the value.
template <typename T>
T MetricValueAs(int64_t value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != 0;
  } else if constexpr (std::is_same_v<T, absl::Duration>) {
    return absl::Nanoseconds(value);
  } else {
    return static_cast<T>(value);
  }
}

// Stores the sample's value in `view.*kField`.
template <auto kField>
void SetField(MemberClass<kField>& view, const MetricSample& sample) {
  view.*kField = MetricValueAs<MemberType<kField>>(sample.value);
}

// Adds the sample's value to `view.*kField` (a view summed over several series).
template <auto kField>
void AddToField(MemberClass<kField>& view, const MetricSample& sample) {
  view.*kField += MetricValueAs<MemberType<kField>>(sample.value);
}

// Registers every row of `rows` with `registry`, read from `source` and labelled `labels`, and
// appends the registrations to `out`. `source` must outlive them.
template <typename Source, typename View, size_t N>
void PublishRows(MetricsRegistry& registry, const std::array<MetricRow<Source, View>, N>& rows,
                 const Source& source, const MetricLabels& labels,
                 std::vector<MetricsRegistry::Registration>* out) {
  for (const MetricRow<Source, View>& row : rows) {
    out->push_back(
        registry.Add({std::string(row.name), row.type, std::string(row.help), labels, row.unit},
                     [read = row.read, &source] { return read(source); }));
  }
}

// Fills `view` from `sample` when a row of `rows` has its name; returns whether one has.
template <typename Source, typename View, size_t N>
bool FillFromRows(const std::array<MetricRow<Source, View>, N>& rows, const MetricSample& sample,
                  View& view) {
  for (const MetricRow<Source, View>& row : rows) {
    if (row.name == sample.name) {
      if (row.fill != nullptr) {
        row.fill(view, sample);
      }
      return true;
    }
  }
  return false;
}

}  // namespace troupe
