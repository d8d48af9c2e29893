// SPDX-License-Identifier: Apache-2.0
//
// A named pool of worker threads that run ready mailboxes.
//
// Where a ready mailbox waits (normal mode):
//   - run-next slot, one per worker: a mailbox that a worker's handler activates goes to that
//     worker's slot and runs right after the current activation, on the same thread (a ping-pong
//     pair, a token ring or a fan-in's acknowledgements stay on one core, with no wake-up). An idle
//     worker takes it only once the owner has been inside one handler for kRunNextHoldNs (see
//     "Run-next stealing" below), so a handler that blocks or runs long does not hold it up.
//   - local queue, one per worker: a bounded ring (LocalRunQueue) that its owner pushes to and
//     pops from (FIFO) and that other workers steal half of. A mailbox displaced from the slot by
//     a newer activation goes there (a fan-out spreads); when the ring is full, half of it moves
//     to the shared queue.
//   - shared queue: a mutex FIFO for activations from outside the pool, budget preemptions and
//     local-queue overflow.
// A worker takes, in order: its slot (at most kMaxRunNextStreak times in a row while other work
// waits), every kSharedCheckInterval-th turn the shared queue, its local queue, the shared queue,
// then half of another worker's local queue, then another worker's slot held past the bound; then
// it spins for `spin_time` and parks.
//
// Budgets: one activation handles at most `max_events` events and runs at most `max_time`; then
// the mailbox goes to the back of the shared queue, behind every mailbox that waited there. The
// time is measured from the start of the second event (see Run), so a handler that runs longer
// than the budget ends its activation after itself and one more event at most.
//
// Budget growth: a mailbox whose event budget runs out while it woke no other mailbox during the
// turn and at least one more budget's worth of events (up to kBacklogProbe) is queued behind it (a
// receiver many senders flood faster than one budget per turn drains) gets twice the event budget
// at its next activation, up to 2^kMaxBudgetShift times. It loses half of it each time it drains,
// and each time it wakes another mailbox: a grown turn ends as soon as it has handled the
// configured budget and woken someone (a reply, an acknowledgement to a sender on credit), so the
// woken one runs as soon as it would have without growth. The time budget still ends every
// activation, so other mailboxes wait at most `max_time` for it; a hot actor that only keeps its
// next event queued never grows. Without it, four senders that each send thousands of events per
// activation outran a receiver allowed 100 per turn, until the whole burst sat in its queue (fresh
// memory, cold caches) and one core drained it alone. And a handler that sends to a flooded mailbox
// (Mailbox::Flooded: its budget grew to 64 times) ends its own activation after it (counted as a
// budget preemption), Erlang's penalty for sending to a long queue: the senders take turns with the
// receiver instead of each running a full budget. Not in fair or shuffle mode, whose budgets stay
// as configured.
//
// Fair mode (PoolSettings::fair): every ready mailbox goes to a shared min-heap keyed by the
// mailbox's accumulated run time (ties in arrival order); no slot, no local queues. Each
// activation reads the clock twice to add to that time.
//
// Shuffle (a debug aid, see proto ShuffleConfig): every activation goes through the shared queue
// at a random place among its first kShuffleWindow entries, and each activation's event budget is
// drawn at random, so ready mailboxes run in an order no code should depend on.
//
// Run-next stealing. The slot is an atomic pointer: only its owner makes it non-null (a plain
// release store into an empty slot, an exchange when displacing), and only a thief or the owner's
// Next empties it; each mailbox runs once. The hold is measured without a clock read on the
// owner's side: a thief remembers, per victim, the victim's HandlerTrace sequence (bumped at every
// handler's start and end, odd inside one) and when it first saw that value (RunNextLook); the slot
// is stealable once the sequence has stayed the same odd value for kRunNextHoldNs, i.e. the owner
// has been inside one handler that long. The mailbox may have entered the slot less than that ago;
// what counts is that its owner cannot reach it soon.
// The owner's take in Next is a plain load and store, with no fence or locked instruction (an
// exchange per hop, which waits for the hop's cache-missing stores, measured 0.72 of the hop rate
// on a one-token ring in one A/B; bench/README.md). Thieves pay instead, with an asymmetric Dekker
// handshake (AsymmetricHeavyBarrier, the membarrier system call, acts as a full fence on every
// thread of the process):
//   owner, leaving a handler            thief
//   store trace.sequence (End)          stealing = true (CAS, seq_cst; one thief at a time)
//   compiler-only fence                 membarrier
//   load stealing; if false: take       load trace.sequence; if still the odd value: CAS the slot
//   if true: wait until false, then     stealing = false (release)
//   take what is left (exchange)
// Either the thief sees the sequence move (the owner may be taking: it gives up) or the owner sees
// `stealing` (and waits for the thief's verdict). While the owner is still inside the handler its
// own Schedule may fill or displace concurrently: those are atomic (store into an empty slot,
// exchange), so the thief's CAS and the owner's exchange decide. Without membarrier (an old
// kernel, a sandbox) nothing is stolen. Memory orders:
//   owner fills an empty slot   store(release)     a thief's acquire CAS sees the mailbox's state
//   owner displaces             exchange(release)  as above; the displaced one goes to the ring
//   owner takes (Next)          load/store(relaxed) only it writes non-null; the handshake orders
//   thief takes                 CAS(acquire)       pairs with the owner's release
//   thief reads the sequence    load(relaxed)      after membarrier (above); earlier looks only
//                                                  time the hold
// Who looks at the slots after the bound:
//   state of the other workers             who looks
//   one spins in Idle                      it, on every turn of its spin (HeldRunNext)
//   one is parked as the watcher           it, every kWatchPeriodNs (a timed semaphore wait)
//   all parked without a timeout           the owner, when it fills an empty slot and sees no
//                                          watcher but a sleeper, wakes one (WakeOne); the woken
//                                          one spins, steals after the bound or becomes the watcher
//   one waits in the IoPoller              nobody but the watchdog's Kick (every 1-10 ms while
//                                          handlers run)
// The watcher role (watcher_) belongs to at most one parked worker, taken when it parks while
// another worker is busy (idle_since_ns == 0), kept while one is, and given up when none is or when
// it wakes to run something, a held slot included (it looks again when it next idles). A worker
// that becomes busy clears idle_since_ns and fences (seq_cst) when it leaves Idle, before any look
// at watcher_ and sleepers_ in Schedule (WatchRunNext, relaxed loads). Against a parking worker
// that is Dekker with its seq_cst sleeper registration: either the parker sees it busy (and takes
// the role or leaves it to the watcher there is), or the busy worker sees the sleeper. Against a
// watcher giving up: it stores watcher_ = false (seq_cst), fences and looks at the busy flags
// again, so either it sees the worker busy and stays, or the worker sees no watcher. A pool whose
// other workers all park without a watcher thus pays one wake-up when a handler first fills its
// slot, and a pool kept busy pays one timed wake-up of the watcher per kWatchPeriodNs.
//
// Parking: a worker publishes itself as a sleeper (seq_cst) before re-checking the shared queue
// and every local queue; a producer publishes work (a seq_cst operation or fence) before reading
// the sleeper count, so a wake-up is never lost. A producer wakes one worker per batch; a worker
// that takes work and still sees more wakes the next (chained wake-up). A handler that pushes to
// its local queue and then blocks is covered by the runtime's watchdog, which wakes a parked
// worker (Kick) to steal that work.
//
// I/O polling (IoPoller, actors/node_hooks.h): a pool may run one I/O loop. An idle worker polls
// it on every turn of its spin and then parks in the loop's Wait (if no other worker is inside
// it) rather than on the semaphore; a busy worker polls it every kPollInterval activations. A
// producer wakes a semaphore sleeper first and otherwise interrupts a worker waiting in the loop;
// the worker publishes its wait (seq_cst) before re-checking for work, as a sleeper does. Handlers
// run by a polling worker schedule the pool's mailboxes on that worker, as an activation does.
// One worker at a time holds the loop (poller_busy_, acquire/release): the loop's own state needs
// no lock. Detach clears the pointer, then waits for the holder and for producers in Interrupt.
//
// Thread lending (proto ThreadLendingConfig; the rule is ThreadLending, thread_lending.h): the pool
// starts a thread for each worker it may ever run (max_threads, plus one when extra_thread_after
// is set) and runs those whose index is below running_ (the count the rule chose, plus the
// temporary worker). A worker at or above it, when it next comes to the top of its loop (after its
// activation, or when it wakes from a park), rests (Rest): it hands its run-next slot (the owner's
// take, as in Next) and its local queue to the shared queue in one batch, passes a wake-up on when
// work is queued (it may have taken a token meant for a running worker), and waits on its own
// semaphore, idle for the watcher and the busy time. Resize stores the new count (release) and
// posts the semaphore of each worker it now includes; a post that finds its worker not resting
// leaves a token that costs one extra look later. Workers read running_ relaxed once per turn: a
// late look only delays a rest or a start by one activation. Mailboxes never wait on a resting
// worker: what it held moved before it waits, and its local queue stays empty while it rests. Nor
// does the I/O loop: a worker that leaves it to rest does not come back to it as an idle one would,
// so it wakes a parked worker to take it (KeepPollerWatched), which the watchdog repeats each tick
// for a worker that was registering as a sleeper at that moment.
//
// Handler trace: around each handler the worker records the actor, its type and the event in its
// HandlerTrace (a seqlock: odd sequence = inside a handler); the watchdog reads it to report
// handlers stuck for longer than the pool's threshold.
//
// Thread-safety: Schedule, Stats, QueueLength, Kick, the traces and the lending calls (SetThreads,
// SetTemporary, KeepPollerWatched, BusyNanos) are thread-safe; Start/Stop are called by the owning
// runtime only.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/internal/class_stats.h"
#include "actors/internal/local_run_queue.h"
#include "actors/internal/mailbox.h"
#include "actors/internal/mailbox_table.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"

namespace troupe::internal {

class Runtime;
class ExecutorPool;

// Adds to a counter only the owning worker writes; relaxed load+store (no read-modify-write), the
// atomic only makes concurrent reads by the metrics well-defined.
template <typename T>
inline void AddOwned(std::atomic<T>& counter, T n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

inline int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// xorshift64: plenty for picking places, victims and budgets; `state` must not be zero.
inline uint64_t NextRandom(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// Returns the CPU time of the thread whose clock is `clock` (CLOCK_THREAD_CPUTIME_ID, or one from
// pthread_getcpuclockid), or -1.
inline int64_t ThreadCpuNanos(clockid_t clock) {
  timespec cpu{};
  if (clock_gettime(clock, &cpu) != 0) {
    return -1;
  }
  return static_cast<int64_t>(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec;
}

struct PoolSettings {
  std::string name;
  uint32_t threads = 1;
  absl::Duration spin_time = absl::Microseconds(20);
  uint32_t max_events = 100;
  absl::Duration max_time = absl::Milliseconds(10);
  // Least accumulated run time first (see the file comment).
  bool fair = false;
  // Handlers running longer are reported stuck; zero turns the report off.
  absl::Duration stuck_threshold = absl::Seconds(1);
  // Added to each worker's niceness (capped at 19) when it starts.
  uint32_t nice = 0;
  // Random ready order (debug aid); the seed makes each pool's choices reproducible on one thread.
  bool shuffle = false;
  uint64_t shuffle_seed = 0;
  // Thread lending (file comment): the count may move between these; the priority is the
  // lending rule's (ThreadLending). A temporary thread comes when every worker has been inside one
  // handler for extra_thread_after (zero: never).
  uint32_t min_threads = 1;
  uint32_t max_threads = 1;
  uint32_t priority = 0;
  absl::Duration extra_thread_after = absl::ZeroDuration();
};

// What a worker is handling, for the watchdog. Written by the worker (seqlock), read by others.
struct HandlerTrace {
  // Odd while inside a handler.
  std::atomic<uint64_t> sequence{0};
  // The actor's id as its raw words: local id, and hint << 32 | node word.
  std::atomic<uint64_t> local_id{0};
  std::atomic<uint64_t> hint_node{0};
  std::atomic<uint32_t> event_type{0};
  std::atomic<const std::type_info*> actor_type{nullptr};

  void Begin(const ActorId& actor, uint32_t type, const std::type_info* actor_class) {
    local_id.store(actor.local_id(), std::memory_order_relaxed);
    hint_node.store(static_cast<uint64_t>(actor.hint()) << 32 | actor.node_word(),
                    std::memory_order_relaxed);
    event_type.store(type, std::memory_order_relaxed);
    actor_type.store(actor_class, std::memory_order_relaxed);
    // release: a reader that sees the odd value sees the fields above.
    sequence.store(sequence.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void End() {
    sequence.store(sequence.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // The next Begin's field stores must not become visible before this even value.
    std::atomic_thread_fence(std::memory_order_release);
  }
  ActorId actor() const {
    const uint64_t hn = hint_node.load(std::memory_order_relaxed);
    return ActorId::FromRaw(local_id.load(std::memory_order_relaxed),
                            static_cast<uint32_t>(hn >> 32), static_cast<uint32_t>(hn));
  }
};

// Per-thread state of the worker running on this thread (null on other threads).
struct WorkerContext {
  ExecutorPool* pool = nullptr;
  Runtime* runtime = nullptr;
  // Freed mailbox hints this worker reuses first (see MailboxTable).
  MailboxTable::HintCache hints;
  uint32_t index = 0;
  Mailbox* current = nullptr;
  // Set when this activation pushed to the local queue: the activation's end wakes a sleeper.
  bool pushed_local = false;
  // Inside the pool's IoPoller: mailboxes its handlers activate are scheduled here.
  bool polling = false;
  // Activations since this worker last polled the pool's IoPoller.
  uint32_t since_poll = 0;
  uint32_t streak = 0;
  // Events until the next sampled one (SampledDispatch).
  uint32_t sample_countdown = ClassTable::kSampleEvery;
  uint64_t tick = 0;
  // Steal victims and shuffle budgets (xorshift64, never zero).
  uint64_t random_state = 1;
  // What this worker saw of each other worker's handler trace (HeldRunNext), indexed by worker;
  // owner only.
  struct RunNextLook {
    uint64_t sequence = ~uint64_t{0};
    int64_t since_ns = 0;
  };
  std::vector<RunNextLook> run_next_looks;
  // The run-next slot (file comment of executor_pool.h: the owner fills it, the owner or a thief
  // empties it). On its own line: thieves read it while the owner writes its other fields.
  alignas(64) std::atomic<Mailbox*> run_next{nullptr};
  // Set by the one thief in the handshake over run_next (file comment).
  std::atomic<bool> stealing{false};
  LocalRunQueue local;
  HandlerTrace trace;
  // Counters are written by the owning worker only; atomics so readers on other threads are safe.
  alignas(64) std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> activations{0};
  std::atomic<uint64_t> budget_preemptions{0};
  std::atomic<uint64_t> parks{0};
  std::atomic<uint64_t> steals{0};
  std::atomic<int64_t> idle_ns{0};
  std::atomic<int64_t> parked_ns{0};
  // Steady-clock nanoseconds since when the worker has been looking for work (0 while busy), and
  // since when it has been parked (0 while not): the metrics add the open periods.
  std::atomic<int64_t> idle_since_ns{0};
  std::atomic<int64_t> parked_since_ns{0};
  int64_t start_ns = 0;
  // The thread's CPU clock, published by the worker when it starts; its CPU time is kept when it
  // exits (-1 until then), since a dead thread's clock cannot be read.
  std::atomic<clockid_t> cpu_clock{0};
  std::atomic<bool> cpu_clock_set{false};
  std::atomic<int64_t> exit_cpu_ns{-1};
  // Where the worker waits while its index is at or above the pool's running count (Rest).
  std::counting_semaphore<> resume{0};
};

// Returns the time since `context`'s worker started that it did not spend looking for work
// (spinning, parked or resting), at steady-clock time `now`; any thread.
inline int64_t WorkerBusyNanos(const WorkerContext& context, int64_t now) {
  const int64_t idle_since = context.idle_since_ns.load(std::memory_order_relaxed);
  const int64_t idle = context.idle_ns.load(std::memory_order_relaxed) +
                       (idle_since != 0 ? std::max<int64_t>(0, now - idle_since) : 0);
  return std::max<int64_t>(0, now - context.start_ns - idle);
}

// Runs `block` (a semaphore or I/O wait) counted as one park of `context`'s worker. The open
// period is closed before the total grows: a reader in between undercounts for a moment rather
// than counting the period twice.
template <typename Block>
void Parked(WorkerContext* context, Block&& block) {
  AddOwned<uint64_t>(context->parks, 1);
  const int64_t park_start = SteadyNanos();
  context->parked_since_ns.store(park_start, std::memory_order_relaxed);
  block();
  context->parked_since_ns.store(0, std::memory_order_relaxed);
  AddOwned<int64_t>(context->parked_ns, SteadyNanos() - park_start);
}

// The heavy side of an asymmetric fence (run-next stealing, ExecutorPool's file comment):
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), a full fence on every running thread of the
// process; the light side is a compiler-only fence. Register once (false: the kernel does not
// offer it, and nothing may rely on it); the barrier returns false when the call fails.
bool RegisterAsymmetricBarrier();
bool AsymmetricHeavyBarrier();

// Returns the context of the worker running on the calling thread, or nullptr.
WorkerContext* CurrentWorker();

class ExecutorPool {
 public:
  static constexpr uint32_t kMaxRunNextStreak = 16;
  // Run-next stealing (file comment): how long the owner must have been inside one handler before
  // an idle worker takes its slot (Go's runtime waits ~3 us), and how often the watcher looks.
  static constexpr int64_t kRunNextHoldNs = 5'000;
  static constexpr int64_t kWatchPeriodNs = 1'000'000;
  static constexpr uint32_t kSharedCheckInterval = 61;
  static constexpr uint32_t kShuffleWindow = 64;
  // Budget growth (file comment): at most 2^10 times the configured event budget, and only for
  // budgets small enough that the product fits (larger ones are a time budget in all but name).
  static constexpr uint32_t kMaxBudgetShift = 10;
  static constexpr uint32_t kMaxGrowableBudget = 1u << 20;
  // A budget grows when at least as many events as it allows are still queued, looking at most
  // this far ahead (the walk costs what popping those events will).
  static constexpr uint32_t kBacklogProbe = 4096;
  // A busy worker polls the pool's IoPoller after this many activations.
  static constexpr uint32_t kPollInterval = 32;

  ExecutorPool(Runtime* runtime, uint32_t index, PoolSettings settings);
  ~ExecutorPool();
  ExecutorPool(const ExecutorPool&) = delete;
  ExecutorPool& operator=(const ExecutorPool&) = delete;
  ExecutorPool(ExecutorPool&&) = delete;
  ExecutorPool& operator=(ExecutorPool&&) = delete;

  // Starts the worker threads.
  void Start();
  // Stops and joins the workers; each finishes its current activation first. Queued mailboxes
  // stay queued (the runtime frees their events).
  void Stop();

  // Makes a mailbox that the caller moved to kScheduled runnable.
  void Schedule(Mailbox* mailbox);

  // -- thread lending (see the file comment) ------------------------------------------------------

  // Sets how many workers run (settings' min_threads to max_threads), not counting a temporary
  // one. Thread-safe; workers above the count finish their activation, hand what they hold to the
  // shared queue and rest.
  void SetThreads(uint32_t threads);
  // Adds (true) or retires (false) the temporary worker; a no-op when extra_thread_after is zero.
  void SetTemporary(bool on);
  // The running count (without the temporary worker), and whether the temporary one runs.
  uint32_t threads() const { return threads_now_.load(std::memory_order_relaxed); }
  bool temporary() const { return temporary_.load(std::memory_order_relaxed); }
  uint64_t threads_borrowed() const { return borrowed_.load(std::memory_order_relaxed); }
  uint64_t threads_lent() const { return lent_.load(std::memory_order_relaxed); }
  uint64_t temporary_threads() const { return temporaries_.load(std::memory_order_relaxed); }
  // Busy nanoseconds of all workers since start (troupe_pool_busy_seconds_total).
  int64_t BusyNanos() const;
  // In a pool whose count may change: wakes a worker parked on the semaphore when the pool's I/O
  // loop is attached and nobody holds it (its last holder went to rest), so that one waits in it
  // again. Called when a worker rests and on every watchdog tick (which closes the race with a
  // worker that was just registering as a sleeper).
  void KeepPollerWatched();

  const PoolSettings& settings() const { return settings_; }
  uint32_t index() const { return index_; }
  // Returns the number of mailboxes waiting in the shared queue and the local queues.
  int64_t QueueLength() const;
  // Returns the workers' share of the mailbox table's live count (see MailboxTable::HintCache).
  int64_t LiveMailboxesInCaches() const;

  // -- for the watchdog ---------------------------------------------------------------------------

  uint32_t worker_count() const { return static_cast<uint32_t>(contexts_.size()); }
  const HandlerTrace& trace(uint32_t worker) const { return contexts_[worker]->trace; }
  void CountStuckReport() { stuck_reports_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t stuck_reports() const { return stuck_reports_.load(std::memory_order_relaxed); }
  // Wakes a parked worker when `worker` has mailboxes waiting in its local queue or run-next slot
  // (it is inside a long handler and cannot hand them out itself).
  void Kick(uint32_t worker);

  // -- I/O polling (see the file comment) ---------------------------------------------------------

  // kAlreadyExists when the pool runs another poller.
  absl::Status AttachPoller(IoPoller* poller);
  // Returns once no worker is inside `poller` (a no-op for a poller the pool does not run).
  void DetachPoller(IoPoller* poller);

 private:
  // Publishes the pool-wide metrics (threads, queue length, stuck reports) and, once the workers
  // exist, each worker's (events, activations, steals, preemptions, parks, busy, parked and CPU
  // time), labelled pool and worker.
  void PublishPoolMetrics();
  void PublishWorkerMetrics(const WorkerContext* context);
  void WorkerLoop(WorkerContext* context);
  // Hands what `context` holds (run-next slot, local queue) to the shared queue and waits until
  // the running count includes it again or the pool stops (thread lending).
  void Rest(WorkerContext* context);
  // Publishes threads_now_ + temporary_ as running_ and resumes the workers it now includes.
  void Resize() ABSL_EXCLUSIVE_LOCKS_REQUIRED(resize_mu_);
  // Adds `nice` to the calling worker's niceness (settings_.nice), up to Linux's 19.
  void LowerThreadPriority(uint32_t nice) const;
  // Returns the next mailbox for `context` to run, or nullptr when there is none.
  Mailbox* Next(WorkerContext* context);
  // Runs one activation of `mailbox` within the budget.
  void Run(WorkerContext* context, Mailbox* mailbox) {
    if (settings_.fair) [[unlikely]] {
      RunTimed<true>(context, mailbox);
    } else {
      RunTimed<false>(context, mailbox);
    }
  }
  // Run, with the activation timed from its first event (fair mode: kTimed) or from its second.
  template <bool kTimed>
  void RunTimed(WorkerContext* context, Mailbox* mailbox);
  // Dispatches `ev` as Run does, timing the handler for the pool's histogram and its actor's
  // class (ClassTable): one event in ClassTable::kSampleEvery takes this path.
  void SampledDispatch(WorkerContext* context, Mailbox* mailbox, Actor* actors, EventHandle* ev);
  void Enqueue(Mailbox* mailbox) {
    if (settings_.shuffle) [[unlikely]] {
      EnqueueShuffled(mailbox);
      return;
    }
    if (settings_.fair) [[unlikely]] {
      EnqueueFair(mailbox);
      return;
    }
    EnqueueList(mailbox, mailbox, 1);
  }
  // Inserts `mailbox` at a random place among the first kShuffleWindow queued ones (or last).
  void EnqueueShuffled(Mailbox* mailbox);
  void EnqueueFair(Mailbox* mailbox);
  // Appends the chain first..last (linked through next_ready) of `count` mailboxes.
  void EnqueueList(Mailbox* first, Mailbox* last, uint32_t count);
  // Pushes to the worker's local queue; when it is full, half of it and `mailbox` go to the
  // shared queue.
  void PushLocal(WorkerContext* context, Mailbox* mailbox);
  Mailbox* Dequeue();
  // Takes half of another worker's local queue, or else a run-next slot held past the bound.
  Mailbox* Steal(WorkerContext* context);
  // The thief's side of the run-next handshake: the mailbox in `victim`'s slot if its trace is
  // still `sequence` after the heavy barrier, else nullptr.
  Mailbox* StealRunNext(WorkerContext* victim, uint64_t sequence);
  // The owner's side when a thief is in the handshake: waits for its verdict, takes what is left.
  static Mailbox* TakeRunNextContended(WorkerContext* context);
  // The owner empties its run-next slot between activations and returns what was there.
  static Mailbox* TakeRunNext(WorkerContext* context) {
    Mailbox* mailbox = context->run_next.load(std::memory_order_relaxed);
    if (mailbox == nullptr) {
      return nullptr;
    }
    // The owner's side of the run-next handshake (file comment): our trace's End store came
    // before; a thief's membarrier, not a fence here, orders it before this load of `stealing`.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (context->stealing.load(std::memory_order_relaxed)) [[unlikely]] {
      return TakeRunNextContended(context);
    }
    context->run_next.store(nullptr, std::memory_order_relaxed);
    return mailbox;
  }
  // Looks at the other workers' handler traces at `now` (recording what changed) and returns one
  // whose run-next slot is full and whose trace has not moved for kRunNextHoldNs, or nullptr.
  WorkerContext* HeldRunNext(WorkerContext* context, int64_t now);
  // True when another worker is busy (not in Idle). Relaxed loads; callers fence first.
  bool AnyOtherBusy(const WorkerContext* context) const;
  // Whether a parking worker is (or stays) the watcher, given whether it was one (file comment).
  bool KeepWatch(const WorkerContext* context, bool watching);
  // Schedule's part after filling an empty slot: wakes a sleeper when nobody watches the slots.
  void WatchRunNext() {
    if (!watcher_.load(std::memory_order_relaxed) && sleepers_.load(std::memory_order_relaxed) > 0)
        [[unlikely]] {
      WakeOne();
    }
  }
  // True when the shared queue or another worker's local queue holds a mailbox.
  bool HasWork(const WorkerContext* context) const;
  void WakeOne();
  bool TryCancelSleep();
  // Spins, then parks; returns when there may be work (or the pool stops).
  void Idle(WorkerContext* context);
  // Registers as a sleeper and blocks on the semaphore (unless work came meanwhile).
  void SemaphorePark(WorkerContext* context);
  // Takes the poller when it is attached and no other worker holds it; null otherwise.
  IoPoller* EnterPoller();
  void ExitPoller() { poller_busy_.store(false, std::memory_order_release); }
  // Polls without blocking when the poller is free; true when this worker now has work.
  bool PollIo(WorkerContext* context);
  // Parks in the poller's Wait; false (nothing done) when another worker holds it.
  bool ParkInPoller(WorkerContext* context);
  // Makes a worker waiting in the poller return; any thread.
  void InterruptPoller();
  // After handlers ran on `context` (an activation or a poll): wakes a sleeper for what they
  // pushed to the local queue. Inline: every activation ends here, and most pushed nothing.
  void WakeForLocal(WorkerContext* context) {
    if (context->pushed_local) [[unlikely]] {
      WakeForPushedLocal(context);
    }
  }
  void WakeForPushedLocal(WorkerContext* context);

  Runtime* const runtime_;
  const uint32_t index_;
  const PoolSettings settings_;
  // settings_.max_time and spin_time, converted once (absl's conversions are out-of-line calls).
  const std::chrono::nanoseconds max_time_;
  const int64_t spin_ns_;
  // Budget growth applies (file comment): not fair, not shuffled, and a budget small enough that
  // 2^kMaxBudgetShift times it fits.
  const bool grows_;

  troupe::Mutex mu_;
  Mailbox* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  Mailbox* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Fair mode: a min-heap of (run time, arrival) under mu_.
  struct FairEntry {
    uint64_t run_time_ns;
    uint64_t arrival;
    Mailbox* mailbox;
  };
  std::vector<FairEntry> fair_heap_ ABSL_GUARDED_BY(mu_);
  uint64_t fair_arrivals_ ABSL_GUARDED_BY(mu_) = 0;
  // Mirrors the shared queue's length for lock-free "is there work" checks (seq_cst, see the file
  // comment).
  std::atomic<int64_t> queued_{0};
  std::atomic<int32_t> sleepers_{0};
  // True while a parked worker watches the run-next slots with timed waits (file comment); always
  // where nobody may steal (steal_run_next_ false).
  std::atomic<bool> watcher_{false};
  // Run-next slots may be stolen: more than one worker, and the asymmetric barrier works.
  std::atomic<bool> steal_run_next_{true};
  std::counting_semaphore<> wake_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> stuck_reports_{0};
  // Thread lending: workers with an index at or above running_ rest (Rest). Written under
  // resize_mu_; workers read running_ relaxed between activations (a late look only delays a
  // worker's rest or start by one activation; the semaphore orders the start).
  troupe::Mutex resize_mu_;
  alignas(64) std::atomic<uint32_t> running_{0};
  std::atomic<uint32_t> threads_now_{0};
  std::atomic<bool> temporary_{false};
  std::atomic<uint64_t> borrowed_{0};
  std::atomic<uint64_t> lent_{0};
  std::atomic<uint64_t> temporaries_{0};
  // The attached IoPoller, whether a worker holds it, whether that worker waits in it, and the
  // producers inside InterruptPoller (Detach waits for them).
  std::atomic<IoPoller*> poller_{nullptr};
  std::atomic<bool> poller_busy_{false};
  std::atomic<bool> poller_waiting_{false};
  std::atomic<int32_t> interrupters_{0};
  uint64_t shuffle_state_ ABSL_GUARDED_BY(mu_);

  std::vector<std::unique_ptr<WorkerContext>> contexts_;
  std::vector<std::thread> threads_;
  // Handler times of the sampled events, 128 ns .. 17 s.
  Histogram handler_time_{7, 34};
  // The pool's and its workers' metrics in the runtime's registry (see PublishPoolMetrics and
  // PublishWorkerMetrics); after contexts_, so they go first.
  std::vector<MetricsRegistry::Registration> metrics_;
};

}  // namespace troupe::internal
