// SPDX-License-Identifier: Apache-2.0
//
// ExecutorPool's metrics: the pool's and each worker's series in the node's MetricsRegistry
// (actors/metrics.h), the rows of pool_metrics.h read from the counters the workers own.
#include <string>

#include "actors/internal/executor_pool.h"
#include "actors/internal/pool_metrics.h"
#include "actors/internal/runtime.h"
#include "actors/metric_table.h"
#include "actors/metrics.h"

namespace troupe::internal {

void ExecutorPool::PublishPoolMetrics() {
  MetricsRegistry& registry = runtime_->metrics();
  const MetricLabels pool = {{"pool", settings_.name}};
  PublishRows(registry, kPoolMetrics, *this, pool, &metrics_);
  metrics_.push_back(registry.AddHistogram(
      {.name = "troupe_pool_handler_seconds",
       .help = "Time in handlers, one event in 64 timed (one clock read pair per 64 events).",
       .labels = pool},
      &handler_time_));
}

void ExecutorPool::PublishWorkerMetrics(const WorkerContext* context) {
  const MetricLabels labels = {{"pool", settings_.name},
                               {"worker", std::to_string(context->index)}};
  PublishRows(runtime_->metrics(), kWorkerMetrics, *context, labels, &metrics_);
}

}  // namespace troupe::internal
