// SPDX-License-Identifier: Apache-2.0
//
// What one TROUPE_LOG line costs the thread that writes it: formatting the prefix (time, level,
// node, thread name, actor, trace, component, source) and the message, and handing the line to the
// sink under the sink mutex. Handlers log on their own threads, so this is the latency a log line
// adds to a handler; debug lines on per-event paths are why it matters.
//
// Measured on the calling thread with a sink that drops the line, so the figure excludes the
// write(2) to stderr (which the terminal or journal dominates) and includes everything Troupe
// does. The thread is bound to a node's LogContext with a trace id, as a handler's is, so every
// optional field is written. BM_LogLineDisabled is the cost of a line below the level: a load and
// a compare, its arguments unevaluated. BM_LogLineJson writes the same line in the JSON format.
#include <string_view>

#include "benchmark/benchmark.h"

#include "actors/log.h"

namespace troupe {
namespace {

class DropSink final : public LogSink {
 public:
  void Write(LogLevel /*level*/, LogComponent /*component*/, std::string_view line) override {
    benchmark::DoNotOptimize(line.data());
  }
};

// Installs a dropping sink and binds the thread to node 7 with a trace, for the benchmark's
// lifetime.
class BoundThread {
 public:
  BoundThread() : previous_(SetLogSink(&sink_)), binding_(&context_), trace_(0x4d2) {}
  ~BoundThread() { SetLogSink(previous_); }
  BoundThread(const BoundThread&) = delete;
  BoundThread& operator=(const BoundThread&) = delete;
  BoundThread(BoundThread&&) = delete;
  BoundThread& operator=(BoundThread&&) = delete;

  LogContext& context() { return context_; }

 private:
  DropSink sink_;
  LogSink* previous_;
  LogContext context_{7, LogLevel::kInfo};
  LogBinding binding_;
  TraceScope trace_;
};

// A typical line, a few words and two numbers, in `format`.
void LogLines(benchmark::State& state, LogFormat format) {
  BoundThread bound;
  bound.context().SetFormat(format);
  int64_t value = 0;
  for (auto _ : state) {
    TROUPE_LOG(kInfo, kUser) << "session with node " << 2 << " up, incarnation " << ++value;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_LogLineText(benchmark::State& state) { LogLines(state, LogFormat::kText); }
BENCHMARK(BM_LogLineText);

// The same line as a JSON object (log { format: "json" }).
void BM_LogLineJson(benchmark::State& state) { LogLines(state, LogFormat::kJson); }
BENCHMARK(BM_LogLineJson);

void BM_LogLineDisabled(benchmark::State& state) {
  BoundThread bound;
  int64_t value = 0;
  for (auto _ : state) {
    TROUPE_LOG(kDebug, kUser) << "session with node " << 2 << " up, incarnation " << ++value;
  }
  benchmark::DoNotOptimize(value);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LogLineDisabled);

}  // namespace
}  // namespace troupe

BENCHMARK_MAIN();
