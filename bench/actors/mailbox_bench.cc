// SPDX-License-Identifier: Apache-2.0
//
// mailbox_bench: the mailbox kinds (actors/mailbox_kind.h) measured directly on
// troupe::internal::Mailbox, without an ActorSystem: no scheduler, no dispatch, no actors.
//
// What is measured, for each concrete kind (LockFree, Simple, Revolving, HTSwap, Priority; the
// `kind:K` argument is the MailboxKind value and the label names it):
//   - BM_PushPop             one item = one event pushed and popped by the same thread, which
//                            holds the mailbox throughout (activated once before the loop, never
//                            given up in it): the uncontended cost of a push into a running
//                            mailbox plus the pop. Eight preallocated handles are reused in turn,
//                            so the event allocator is not measured.
//   - BM_Activation          one item = one idle -> scheduled -> idle cycle on one thread: a Push
//                            on the idle mailbox (must activate it), a Pop that returns the event,
//                            a Pop that returns nothing and a TryIdle that succeeds. One reused
//                            handle. This is what an actor that receives one event at a time pays.
//   - BM_OneToOne            one item = one event streamed from a writer thread to the reader
//                            (the benchmark thread); kStreamEvents events per iteration.
//   - BM_ManyToOne/writers:N one item = one event; N writer threads (each with its own sender id:
//                            Revolving picks a sender's lane from it) share kStreamEvents events
//                            per iteration into one reader. The contended multi-writer push.
//   - BM_IdleFootprint       one item = one mailbox of the kind constructed, given its kind and
//                            destroyed (kFootprintMailboxes per iteration). The counters are what
//                            matter: `bytes_per_mailbox` = FootprintBytes() of an idle, never used
//                            mailbox (the 64-byte slot plus the kind's out-of-line queue), and
//                            `bytes_after_use` = the same after kFootprintMailboxes events were
//                            pushed and then drained through it (what a drained mailbox keeps).
//
// The streams (OneToOne, ManyToOne) follow the activation protocol exactly as a pool worker does
// (ExecutorPool::Run): a writer whose Push returns true hands the mailbox to the reader through an
// atomic grant counter; the reader, once granted, pops with a local cursor until Pop returns
// nullptr, writes the cursor back and calls TryIdle; if TryIdle returns false (work arrived) it
// owns the mailbox again and keeps popping. Events are recycled, not allocated: each writer owns
// kWindow preallocated handles and reuses one only after the reader has acknowledged it
// (acknowledgements every kAckEvery events and before each TryIdle). This is credit-based flow
// control, as in actors_bench's BM_FanIn: it keeps the queue at most kWindow per writer long and
// keeps malloc and the cross-thread allocator hand-off out of the figures. The reader checks that
// every writer's events arrive in order and that none is lost (else SkipWithError). Counters:
// `activations_per_item` (grants per event, 1/batching) and `reclaims_per_item` (TryIdle calls
// that found new work and kept the mailbox). Times are wall-clock (UseRealTime) and the `CPU`
// column is the whole process's CPU time, spinning included; the writer threads are started and
// joined inside each iteration (tens of µs against a batch of tens of ms).
// With more writers than cores (this VM has 2 vCPUs) the threads are oversubscribed and the
// figures include preemption; every wait spins with pause, yields every 64 tries and gives up
// after kTimeout, so a wedged run is reported with SkipWithError instead of hanging.
//
// Why: the mailbox is on every hop of every actor program; these figures separate the queue from
// the scheduler that actors_bench measures around it, and tell which kind suits which traffic.
// Excluded: dispatch, scheduling, ready queues, event bodies and event allocation. Sizes shrink
// under sanitizers.
//
//   build/bench/bench/actors/mailbox_bench --benchmark_filter=ManyToOne
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/internal/cpu_relax.h"
#include "actors/internal/mailbox.h"
#include "actors/internal/mailbox_node.h"
#include "actors/mailbox_kind.h"
#include "bench/sanitized.h"

namespace {

using troupe::EventHandle;
using troupe::EventHandlePtr;
using troupe::MailboxKind;
using troupe::internal::Mailbox;
using troupe::internal::MailboxNode;
using Clock = std::chrono::steady_clock;

#ifdef TROUPE_BENCH_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Longest a stream batch may take before the benchmark gives up on it.
constexpr Clock::duration kTimeout = kSanitized ? Clock::duration(std::chrono::minutes(5))
                                                : Clock::duration(std::chrono::seconds(60));

// Events per stream iteration, split over the writers, and iterations per stream benchmark.
constexpr uint64_t kStreamEvents = kSanitized ? 1u << 14 : 1u << 20;
constexpr int64_t kStreamIterations = 5;
// Handles each stream writer cycles through (its credit), and how often the reader acknowledges.
constexpr uint32_t kWindow = 1024;
constexpr uint32_t kAckEvery = 128;
static_assert((kWindow & (kWindow - 1)) == 0 && kAckEvery < kWindow);

// Handles BM_PushPop reuses in turn.
constexpr size_t kPushPopHandles = 8;
// Mailboxes BM_IdleFootprint creates per iteration, and events it pushes through one.
constexpr int kFootprintMailboxes = 1000;

constexpr troupe::EventType kEvItem = troupe::EventSpaceBegin(troupe::kUserEventSpace) + 1;

// The concrete kinds, as benchmark arguments (kPoolDefault is not a kind a mailbox can have).
std::vector<int64_t> Kinds() {
  std::vector<int64_t> kinds;
  for (MailboxKind kind : {MailboxKind::kLockFree, MailboxKind::kSimple, MailboxKind::kRevolving,
                           MailboxKind::kHTSwap, MailboxKind::kPriority}) {
    kinds.push_back(static_cast<int64_t>(kind));
  }
  return kinds;
}

// Reads the kind from argument 0 and labels the run with its name.
MailboxKind KindArg(benchmark::State& state) {
  const auto kind = static_cast<MailboxKind>(state.range(0));
  state.SetLabel(std::string(troupe::MailboxKindName(kind)));
  return kind;
}

// A bodyless normal-priority event from writer `writer`: every writer has its own non-empty
// sender id (Revolving hashes it to a lane). `cookie` identifies the handle to the reader.
EventHandlePtr MakeEvent(uint32_t writer, uint64_t cookie) {
  return std::make_unique<EventHandle>(kEvItem, troupe::ActorId(1, 0, 1, 1),
                                       troupe::ActorId(1, 0, 1000 + writer, 1), troupe::kNoFlags,
                                       cookie);
}

// Spins until `ready()` returns true: pause, and a yield every 64 tries (with more threads than
// cores the thread we wait for may need this core). Returns false when `abort` is set or
// `deadline` passes first.
template <typename Ready>
bool SpinUntil(const Ready& ready, const std::atomic<bool>& abort, Clock::time_point deadline) {
  for (uint64_t spin = 1;; ++spin) {
    if (ready()) {
      return true;
    }
    if (spin % 1024 == 0 && (abort.load(std::memory_order_relaxed) || Clock::now() >= deadline)) {
      return false;
    }
    if (spin % 64 == 0) {
      std::this_thread::yield();
    } else {
      troupe::internal::CpuRelax();
    }
  }
}

// -- single thread -------------------------------------------------------------------------------

// Push + Pop on a mailbox the benchmark thread keeps running; one item is one event.
void BM_PushPop(benchmark::State& state) {
  const MailboxKind kind = KindArg(state);
  std::array<EventHandlePtr, kPushPopHandles> events;
  for (size_t i = 0; i < events.size(); ++i) {
    events[i] = MakeEvent(0, i);
  }
  Mailbox mailbox;  // destroyed before `events`; never holds one at that point anyway
  mailbox.InitKind(kind);
  // Take the mailbox as a worker would (the first push activates it) and keep it.
  MailboxNode* cursor = mailbox.cursor();
  if (!mailbox.Push(events[0].get()) || mailbox.Pop(cursor) != events[0].get()) {
    state.SkipWithError("BM_PushPop: the first push did not activate or pop back");
    return;
  }
  size_t next = 0;
  for (auto _ : state) {
    EventHandle* ev = events[next].get();
    next = (next + 1) % kPushPopHandles;
    // A push into a running mailbox never activates it.
    if (mailbox.Push(ev) || mailbox.Pop(cursor) != ev) [[unlikely]] {
      state.SkipWithError("BM_PushPop: push activated a running mailbox or pop lost the event");
      break;
    }
  }
  mailbox.set_cursor(cursor);
  if (!state.error_occurred() && (!mailbox.TryIdle() || !mailbox.IsEmpty())) {
    state.SkipWithError("BM_PushPop: the drained mailbox did not go idle");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PushPop)->ArgName("kind")->ArgsProduct({Kinds()});

// Push on idle (activates), Pop, Pop (nothing), TryIdle; one item is one such cycle.
void BM_Activation(benchmark::State& state) {
  const MailboxKind kind = KindArg(state);
  const EventHandlePtr event = MakeEvent(0, 0);
  EventHandle* const ev = event.get();
  Mailbox mailbox;
  mailbox.InitKind(kind);
  for (auto _ : state) {
    if (!mailbox.Push(ev)) [[unlikely]] {
      state.SkipWithError("BM_Activation: a push on an idle mailbox did not activate it");
      break;
    }
    // As ExecutorPool::Run: pop with a local cursor, write it back before TryIdle.
    MailboxNode* cursor = mailbox.cursor();
    EventHandle* popped = mailbox.Pop(cursor);
    EventHandle* none = mailbox.Pop(cursor);
    mailbox.set_cursor(cursor);
    if (popped != ev || none != nullptr || !mailbox.TryIdle()) [[unlikely]] {
      state.SkipWithError("BM_Activation: pop, second pop or TryIdle misbehaved");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Activation)->ArgName("kind")->ArgsProduct({Kinds()});

// -- streams between threads ---------------------------------------------------------------------

// Events of one writer the reader is done with; the writer may reuse a handle once it is counted.
struct alignas(64) Credit {
  std::atomic<uint64_t> consumed{0};
};

// One stream batch: the mailbox, the grant hand-off and each writer's credit. Fresh per iteration.
struct StreamRun {
  StreamRun(MailboxKind kind, uint32_t writer_count)
      : writers(writer_count), credits(writer_count) {
    mailbox.InitKind(kind);
  }

  Mailbox mailbox;
  // Activations: a writer whose Push returned true adds one; the reader then owns the mailbox.
  alignas(64) std::atomic<uint64_t> grants{0};
  std::atomic<bool> go{false};
  // Set on any failure; every wait gives up when it is set.
  std::atomic<bool> abort{false};
  std::atomic<bool> writer_timed_out{false};
  const uint32_t writers;
  std::vector<Credit> credits;  // never resized: Credit cannot move
};

// Writer `writer`: pushes `count` events, reusing its kWindow handles in turn, each only once the
// reader acknowledged it; hands the mailbox to the reader whenever its push activated it.
void RunWriter(StreamRun& run, uint32_t writer, const std::vector<EventHandlePtr>& ring,
               uint64_t count, Clock::time_point deadline) {
  if (!SpinUntil([&run] { return run.go.load(std::memory_order_acquire); }, run.abort, deadline)) {
    return;
  }
  const std::atomic<uint64_t>& consumed = run.credits[writer].consumed;
  uint64_t limit = kWindow;  // may push events [0, limit)
  for (uint64_t seq = 0; seq < count; ++seq) {
    if (seq >= limit) {
      // acquire: pairs with the reader's release; its reads of the reused handle are done.
      const bool granted = SpinUntil(
          [&] {
            limit = consumed.load(std::memory_order_acquire) + kWindow;
            return seq < limit;
          },
          run.abort, deadline);
      if (!granted) {
        run.writer_timed_out.store(true, std::memory_order_relaxed);
        run.abort.store(true, std::memory_order_relaxed);
        return;
      }
    }
    if (run.mailbox.Push(ring[seq % kWindow].get())) {
      // release: the reader that takes this grant sees everything before the activation.
      run.grants.fetch_add(1, std::memory_order_release);
    }
  }
}

struct ReaderResult {
  uint64_t received = 0;
  uint64_t activations = 0;
  uint64_t reclaims = 0;
  const char* error = nullptr;  // first failure, or null
};

// The reader (the benchmark thread): runs the mailbox whenever granted, exactly as a worker does,
// until `total` events arrived, checking each writer's order by the handles' cookies.
ReaderResult RunReader(StreamRun& run, uint64_t total, Clock::time_point deadline) {
  ReaderResult result;
  std::vector<uint64_t> counts(run.writers, 0);
  std::vector<uint64_t> acked(run.writers, 0);
  const auto ack = [&](uint32_t writer) {
    // release: our reads of the handles counted so far happen before the writer reuses them.
    run.credits[writer].consumed.store(counts[writer], std::memory_order_release);
    acked[writer] = counts[writer];
  };
  const auto fail = [&](const char* error) {
    if (result.error == nullptr) {
      result.error = error;
    }
    run.abort.store(true, std::memory_order_relaxed);
  };
  while (result.received < total && result.error == nullptr) {
    const uint64_t taken = result.activations;
    if (!SpinUntil([&] { return run.grants.load(std::memory_order_acquire) != taken; }, run.abort,
                   deadline)) {
      fail(run.writer_timed_out.load(std::memory_order_relaxed)
               ? "a writer waited for credit past the timeout"
               : "no activation within the timeout (lost wake-up or lost events)");
      break;
    }
    if (run.grants.load(std::memory_order_relaxed) != taken + 1) {
      fail("the mailbox was activated twice without going idle");
      break;
    }
    ++result.activations;
    // As ExecutorPool::Run: pop with a local cursor until nullptr, write it back, TryIdle.
    MailboxNode* cursor = run.mailbox.cursor();
    uint64_t retries = 0;
    while (result.error == nullptr) {
      if (EventHandle* ev = run.mailbox.Pop(cursor); ev != nullptr) {
        retries = 0;
        ++result.received;
        const uint64_t writer = ev->cookie() >> 32;
        const uint64_t slot = ev->cookie() & 0xffffffffu;
        if (writer >= run.writers || slot != counts[writer] % kWindow) [[unlikely]] {
          fail("events of one writer arrived out of order or from nowhere");
          break;
        }
        if (++counts[writer] - acked[writer] >= kAckEvery) {
          ack(static_cast<uint32_t>(writer));
        }
        continue;
      }
      run.mailbox.set_cursor(cursor);
      // Before giving the mailbox up: a writer out of credit may be waiting for this.
      for (uint32_t writer = 0; writer < run.writers; ++writer) {
        if (acked[writer] != counts[writer]) {
          ack(writer);
        }
      }
      if (run.mailbox.TryIdle()) {
        break;
      }
      // Work arrived (or a writer is between the two steps of its push): ours again; another
      // reader might have moved the cursor in general, so reload it as a worker does.
      ++result.reclaims;
      cursor = run.mailbox.cursor();
      if (++retries % 64 == 0) {
        if (Clock::now() >= deadline) {
          fail("a push stayed half-done past the timeout");
          break;
        }
        std::this_thread::yield();
      } else {
        troupe::internal::CpuRelax();
      }
    }
  }
  return result;
}

// Events/s from `writers` threads into one reader, kStreamEvents per iteration.
void RunStream(benchmark::State& state, MailboxKind kind, uint32_t writers, const char* name) {
  // Each writer's handles: cookie = writer << 32 | slot, which the reader checks the order by.
  std::vector<std::vector<EventHandlePtr>> rings(writers);
  for (uint32_t writer = 0; writer < writers; ++writer) {
    rings[writer].reserve(kWindow);
    for (uint32_t slot = 0; slot < kWindow; ++slot) {
      rings[writer].push_back(MakeEvent(writer, (uint64_t{writer} << 32) | slot));
    }
  }
  uint64_t received = 0;
  uint64_t activations = 0;
  uint64_t reclaims = 0;
  for (auto _ : state) {
    auto run = std::make_unique<StreamRun>(kind, writers);
    const Clock::time_point deadline = Clock::now() + kTimeout;
    std::vector<std::thread> threads;
    threads.reserve(writers);
    for (uint32_t writer = 0; writer < writers; ++writer) {
      const uint64_t share = kStreamEvents / writers + (writer < kStreamEvents % writers ? 1 : 0);
      threads.emplace_back(RunWriter, std::ref(*run), writer, std::cref(rings[writer]), share,
                           deadline);
    }
    run->go.store(true, std::memory_order_release);
    ReaderResult result = RunReader(*run, kStreamEvents, deadline);
    for (std::thread& thread : threads) {
      thread.join();  // every writer wait gives up on abort or at the deadline
    }
    const char* error = result.error;
    if (error == nullptr && run->grants.load(std::memory_order_acquire) == result.activations + 1) {
      // The reader took a writer's last event between that writer's two push steps; its
      // activation CAS then found the mailbox idle and won. Legal: run it as a worker would.
      ++result.activations;
      MailboxNode* cursor = run->mailbox.cursor();
      if (run->mailbox.Pop(cursor) != nullptr) {
        error = "an activation after the last event found another event";
      }
      run->mailbox.set_cursor(cursor);
      if (!run->mailbox.TryIdle()) {
        error = "a late empty activation could not go idle";
      }
    }
    if (error == nullptr && result.received != kStreamEvents) {
      error = "the reader received more or fewer events than were sent";
    }
    if (error == nullptr && (run->grants.load(std::memory_order_relaxed) != result.activations ||
                             !run->mailbox.IsIdle() || !run->mailbox.IsEmpty())) {
      error = "the mailbox was left scheduled or not empty after the batch";
    }
    if (error != nullptr) {
      state.SkipWithError(absl::StrCat(name, ": ", error).c_str());
      break;
    }
    received += result.received;
    activations += result.activations;
    reclaims += result.reclaims;
  }
  state.SetItemsProcessed(static_cast<int64_t>(received));
  if (received > 0) {
    state.counters["activations_per_item"] =
        static_cast<double>(activations) / static_cast<double>(received);
    state.counters["reclaims_per_item"] =
        static_cast<double>(reclaims) / static_cast<double>(received);
  }
}

// 1 writer thread -> 1 reader; one item is one event.
void BM_OneToOne(benchmark::State& state) { RunStream(state, KindArg(state), 1, "BM_OneToOne"); }
BENCHMARK(BM_OneToOne)
    ->ArgName("kind")
    ->ArgsProduct({Kinds()})
    ->Iterations(kStreamIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// N writer threads -> 1 reader; one item is one event.
void BM_ManyToOne(benchmark::State& state) {
  RunStream(state, KindArg(state), static_cast<uint32_t>(state.range(1)), "BM_ManyToOne");
}
BENCHMARK(BM_ManyToOne)
    ->ArgNames({"kind", "writers"})
    ->ArgsProduct({Kinds(), {1, 2, 4, 8}})
    ->Iterations(kStreamIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// -- footprint -----------------------------------------------------------------------------------

// Constructing, InitKind and destroying kFootprintMailboxes mailboxes (one item = one mailbox);
// counters: FootprintBytes of an idle mailbox, and of one after kFootprintMailboxes events.
void BM_IdleFootprint(benchmark::State& state) {
  const MailboxKind kind = KindArg(state);
  for (auto _ : state) {
    std::vector<Mailbox> mailboxes(kFootprintMailboxes);  // contiguous 64-byte slots
    for (int i = 0; i < kFootprintMailboxes; ++i) {
      mailboxes[i].InitKind(kind);
    }
    benchmark::DoNotOptimize(mailboxes.data());
  }
  state.SetItemsProcessed(state.iterations() * kFootprintMailboxes);

  std::vector<Mailbox> mailboxes(kFootprintMailboxes);
  size_t idle_bytes = 0;
  for (int i = 0; i < kFootprintMailboxes; ++i) {
    mailboxes[i].InitKind(kind);
    idle_bytes += mailboxes[i].FootprintBytes();
  }
  // A backlog of kFootprintMailboxes events from 8 senders, then drained: what the mailbox keeps.
  std::vector<EventHandlePtr> events;
  events.reserve(kFootprintMailboxes);
  for (int i = 0; i < kFootprintMailboxes; ++i) {
    events.push_back(MakeEvent(static_cast<uint32_t>(i % 8), static_cast<uint64_t>(i)));
  }
  Mailbox& used = mailboxes[0];
  uint64_t activations = 0;
  for (const EventHandlePtr& ev : events) {
    activations += used.Push(ev.get()) ? 1 : 0;
  }
  int popped = 0;
  MailboxNode* cursor = used.cursor();
  while (used.Pop(cursor) != nullptr) {
    ++popped;
  }
  used.set_cursor(cursor);
  if (activations != 1 || popped != kFootprintMailboxes || !used.TryIdle()) {
    state.SkipWithError("BM_IdleFootprint: the backlog did not activate once and drain fully");
    return;
  }
  state.counters["bytes_per_mailbox"] =
      static_cast<double>(idle_bytes) / static_cast<double>(kFootprintMailboxes);
  state.counters["bytes_after_use"] = static_cast<double>(used.FootprintBytes());
}
BENCHMARK(BM_IdleFootprint)->ArgName("kind")->ArgsProduct({Kinds()});

}  // namespace
