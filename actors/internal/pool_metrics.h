// SPDX-License-Identifier: Apache-2.0
//
// The troupe_pool_* counters and gauges, one row each (actors/metric_table.h): the pool's own,
// labelled {"pool", name}, and each worker's, labelled {"pool", name}, {"worker", "<index>"}.
// ExecutorPool::PublishPoolMetrics and PublishWorkerMetrics (executor_pool_metrics.cc) register
// them; ActorSystem::Counters() reads them back into PoolCounters, summing the workers' series
// into the pool's totals and keeping some per worker (WorkerCounters). The handler-time histogram
// (troupe_pool_handler_seconds) is registered next to them and has no row.
//
// Thread-safety: constant tables; their readers only load.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "actors/actor_system.h"
#include "actors/internal/executor_pool.h"
#include "actors/metric_table.h"
#include "actors/metrics.h"

namespace troupe::internal {

// Adds a worker's sample to the pool's total `kPool` and stores it in that worker's `kWorker`.
template <auto kPool, auto kWorker>
void AddToPoolAndWorker(PoolCounters& pool, const MetricSample& sample) {
  AddToField<kPool>(pool, sample);
  const std::string_view label = sample.label("worker");
  size_t worker = 0;
  if (label.empty() ||
      std::from_chars(label.data(), label.data() + label.size(), worker).ec != std::errc()) {
    return;
  }
  if (pool.workers.size() <= worker) {
    pool.workers.resize(worker + 1);
  }
  SetField<kWorker>(pool.workers[worker], sample);
}

using PoolMetric = MetricRow<ExecutorPool, PoolCounters>;
using WorkerMetric = MetricRow<WorkerContext, PoolCounters>;

inline constexpr auto kPoolMetrics = std::to_array<PoolMetric>({
    {"troupe_pool_threads", MetricType::kGauge,
     "Worker threads the pool runs now (threads move between pools by load; a temporary one "
     "included).",
     [](const ExecutorPool& pool) { return int64_t{pool.threads()} + (pool.temporary() ? 1 : 0); },
     SetField<&PoolCounters::threads>},
    {"troupe_pool_threads_min", MetricType::kGauge,
     "Fewest threads the pool runs when it lends threads (min_threads).",
     [](const ExecutorPool& pool) { return int64_t{pool.settings().min_threads}; },
     SetField<&PoolCounters::min_threads>},
    {"troupe_pool_threads_max", MetricType::kGauge,
     "Most threads the pool runs when it borrows threads (max_threads).",
     [](const ExecutorPool& pool) { return int64_t{pool.settings().max_threads}; },
     SetField<&PoolCounters::max_threads>},
    {"troupe_pool_threads_borrowed_total", MetricType::kCounter,
     "Threads the pool took from the budget or another pool.",
     [](const ExecutorPool& pool) { return static_cast<int64_t>(pool.threads_borrowed()); },
     SetField<&PoolCounters::threads_borrowed>},
    {"troupe_pool_threads_lent_total", MetricType::kCounter,
     "Threads the pool gave to the budget or another pool.",
     [](const ExecutorPool& pool) { return static_cast<int64_t>(pool.threads_lent()); },
     SetField<&PoolCounters::threads_lent>},
    {"troupe_pool_temporary_threads_total", MetricType::kCounter,
     "Temporary threads the pool got while all its workers were inside long handlers.",
     [](const ExecutorPool& pool) { return static_cast<int64_t>(pool.temporary_threads()); },
     SetField<&PoolCounters::temporary_threads>},
    {"troupe_pool_queue_length", MetricType::kGauge,
     "Ready mailboxes waiting (shared queue plus the workers' local queues).",
     [](const ExecutorPool& pool) { return pool.QueueLength(); },
     SetField<&PoolCounters::queue_length>},
    {"troupe_pool_handlers_running", MetricType::kGauge, "Workers inside a handler now.",
     [](const ExecutorPool& pool) {
       int64_t running = 0;
       for (uint32_t w = 0; w < pool.worker_count(); ++w) {
         // Odd while the worker is inside a handler (HandlerTrace).
         running +=
             static_cast<int64_t>(pool.trace(w).sequence.load(std::memory_order_acquire) & 1);
       }
       return running;
     },
     SetField<&PoolCounters::handlers_running>},
    {"troupe_pool_stuck_reports_total", MetricType::kCounter,
     "Handlers reported stuck for longer than the pool's stuck_threshold_ms.",
     [](const ExecutorPool& pool) { return static_cast<int64_t>(pool.stuck_reports()); },
     SetField<&PoolCounters::stuck_reports>},
});

inline constexpr auto kWorkerMetrics = std::to_array<WorkerMetric>({
    {"troupe_pool_events_total", MetricType::kCounter, "Events handled.",
     LoadRelaxed<&WorkerContext::events>,
     AddToPoolAndWorker<&PoolCounters::events, &WorkerCounters::events>},
    {"troupe_pool_activations_total", MetricType::kCounter,
     "Mailbox activations (one handles up to the event budget).",
     LoadRelaxed<&WorkerContext::activations>,
     AddToPoolAndWorker<&PoolCounters::activations, &WorkerCounters::activations>},
    {"troupe_pool_steals_total", MetricType::kCounter,
     "Mailboxes taken from another worker's local queue.", LoadRelaxed<&WorkerContext::steals>,
     AddToPoolAndWorker<&PoolCounters::steals, &WorkerCounters::steals>},
    {"troupe_pool_budget_preemptions_total", MetricType::kCounter,
     "Activations cut short by the event or time budget.",
     LoadRelaxed<&WorkerContext::budget_preemptions>,
     AddToField<&PoolCounters::budget_preemptions>},
    {"troupe_pool_parks_total", MetricType::kCounter, "Times the worker parked.",
     LoadRelaxed<&WorkerContext::parks>, AddToField<&PoolCounters::parks>},
    {"troupe_pool_busy_seconds_total", MetricType::kCounter,
     "Time since start not spent looking for work (spinning or parked).",
     [](const WorkerContext& context) { return WorkerBusyNanos(context, SteadyNanos()); },
     AddToField<&PoolCounters::busy_time>, MetricUnit::kNanoseconds},
    {"troupe_pool_parked_seconds_total", MetricType::kCounter, "Time parked.",
     [](const WorkerContext& context) {
       const int64_t parked_since = context.parked_since_ns.load(std::memory_order_relaxed);
       return context.parked_ns.load(std::memory_order_relaxed) +
              (parked_since != 0 ? std::max<int64_t>(0, SteadyNanos() - parked_since) : 0);
     },
     AddToField<&PoolCounters::parked_time>, MetricUnit::kNanoseconds},
    {"troupe_pool_cpu_seconds_total", MetricType::kCounter,
     "CPU time of the worker's thread (idle spinning included).",
     [](const WorkerContext& context) {
       // A worker that exited left its total; a live one's clock is read now (the read fails
       // harmlessly if the thread exits meanwhile, and the total is read again).
       int64_t cpu = context.exit_cpu_ns.load(std::memory_order_acquire);
       if (cpu < 0 && context.cpu_clock_set.load(std::memory_order_acquire)) {
         cpu = ThreadCpuNanos(context.cpu_clock.load(std::memory_order_relaxed));
         if (cpu < 0) {
           cpu = context.exit_cpu_ns.load(std::memory_order_acquire);
         }
       }
       return std::max<int64_t>(0, cpu);
     },
     AddToField<&PoolCounters::cpu_time>, MetricUnit::kNanoseconds},
});

}  // namespace troupe::internal
