// SPDX-License-Identifier: Apache-2.0
//
// ExecutorPool's metrics: the pool's and each worker's series in the node's MetricsRegistry
// (actors/metrics.h), read from the counters the workers own.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "actors/internal/executor_pool.h"
#include "actors/internal/runtime.h"
#include "actors/metrics.h"

namespace troupe::internal {

void ExecutorPool::PublishPoolMetrics() {
  MetricsRegistry& registry = runtime_->metrics();
  const MetricLabels pool = {{"pool", settings_.name}};
  metrics_.push_back(
      registry.Add({"troupe_pool_threads", MetricType::kGauge, "Worker threads of the pool.", pool},
                   [threads = settings_.threads] { return int64_t{threads}; }));
  metrics_.push_back(
      registry.Add({"troupe_pool_queue_length", MetricType::kGauge,
                    "Ready mailboxes waiting (shared queue plus the workers' local queues).", pool},
                   [this] { return QueueLength(); }));
  metrics_.push_back(registry.AddHistogram(
      {.name = "troupe_pool_handler_seconds",
       .help = "Time in handlers, one event in 64 timed (one clock read pair per 64 events).",
       .labels = pool},
      &handler_time_));
  metrics_.push_back(registry.Add(
      {"troupe_pool_stuck_reports_total", MetricType::kCounter,
       "Handlers reported stuck for longer than the pool's stuck_threshold_ms.", pool},
      [this] { return static_cast<int64_t>(stuck_reports_.load(std::memory_order_relaxed)); }));
}

void ExecutorPool::PublishWorkerMetrics(const WorkerContext* context) {
  MetricsRegistry& registry = runtime_->metrics();
  const MetricLabels labels = {{"pool", settings_.name},
                               {"worker", std::to_string(context->index)}};
  auto counter = [&](std::string name, std::string help, const auto& value) {
    metrics_.push_back(registry.Add(
        {std::move(name), MetricType::kCounter, std::move(help), labels},
        [&value] { return static_cast<int64_t>(value.load(std::memory_order_relaxed)); }));
  };
  counter("troupe_pool_events_total", "Events handled.", context->events);
  counter("troupe_pool_activations_total",
          "Mailbox activations (one handles up to the event budget).", context->activations);
  counter("troupe_pool_steals_total", "Mailboxes taken from another worker's local queue.",
          context->steals);
  counter("troupe_pool_budget_preemptions_total",
          "Activations cut short by the event or time budget.", context->budget_preemptions);
  counter("troupe_pool_parks_total", "Times the worker parked.", context->parks);
  metrics_.push_back(registry.Add(
      {"troupe_pool_busy_nanoseconds_total", MetricType::kCounter,
       "Time since start not spent looking for work (spinning or parked).", labels},
      [context] {
        const int64_t now = SteadyNanos();
        const int64_t idle_since = context->idle_since_ns.load(std::memory_order_relaxed);
        const int64_t idle = context->idle_ns.load(std::memory_order_relaxed) +
                             (idle_since != 0 ? std::max<int64_t>(0, now - idle_since) : 0);
        return std::max<int64_t>(0, now - context->start_ns - idle);
      }));
  metrics_.push_back(registry.Add(
      {"troupe_pool_parked_nanoseconds_total", MetricType::kCounter, "Time parked.", labels},
      [context] {
        const int64_t parked_since = context->parked_since_ns.load(std::memory_order_relaxed);
        return context->parked_ns.load(std::memory_order_relaxed) +
               (parked_since != 0 ? std::max<int64_t>(0, SteadyNanos() - parked_since) : 0);
      }));
  metrics_.push_back(
      registry.Add({"troupe_pool_cpu_nanoseconds_total", MetricType::kCounter,
                    "CPU time of the worker's thread (idle spinning included).", labels},
                   [context] {
                     // A worker that exited left its total; a live one's clock is read now (the
                     // read fails harmlessly if the thread exits meanwhile, and the total is read
                     // again).
                     int64_t cpu = context->exit_cpu_ns.load(std::memory_order_acquire);
                     if (cpu < 0 && context->cpu_clock_set.load(std::memory_order_acquire)) {
                       cpu = ThreadCpuNanos(context->cpu_clock.load(std::memory_order_relaxed));
                       if (cpu < 0) {
                         cpu = context->exit_cpu_ns.load(std::memory_order_acquire);
                       }
                     }
                     return std::max<int64_t>(0, cpu);
                   }));
}

}  // namespace troupe::internal
