// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/executor_pool.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

#include "actors/internal/runtime.h"
#include "actors/internal/small_alloc.h"
#include "actors/log.h"

namespace troupe::internal {
namespace {

// True once the running activation has woken another mailbox (into this worker's run-next slot or
// local queue): a reply or an acknowledgement that should run soon.
bool WokeOthers(const WorkerContext& context) {
  return context.run_next.load(std::memory_order_relaxed) != nullptr || context.pushed_local;
}

thread_local WorkerContext* tls_worker = nullptr;

// Linux's highest niceness.
constexpr int kMaxNice = 19;

inline uint64_t NonZeroSeed(uint64_t seed) { return seed == 0 ? 0x9e3779b97f4a7c15ULL : seed; }

// Returns the nanoseconds since `start`.
uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  const std::chrono::nanoseconds elapsed = std::chrono::steady_clock::now() - start;
  return static_cast<uint64_t>(elapsed.count());
}

// Min-heap order for fair mode: less run time first, then earlier arrival.
template <typename Entry>
bool FairAfter(const Entry& a, const Entry& b) {
  return a.run_time_ns != b.run_time_ns ? a.run_time_ns > b.run_time_ns : a.arrival > b.arrival;
}

}  // namespace

WorkerContext* CurrentWorker() { return tls_worker; }

ExecutorPool::ExecutorPool(Runtime* runtime, uint32_t index, PoolSettings settings)
    : runtime_(runtime),
      index_(index),
      settings_(std::move(settings)),
      max_time_(absl::ToChronoNanoseconds(settings_.max_time)),
      spin_ns_(absl::ToInt64Nanoseconds(settings_.spin_time)),
      grows_(!settings_.fair && !settings_.shuffle && settings_.max_events <= kMaxGrowableBudget),
      shuffle_state_(NonZeroSeed(settings_.shuffle_seed)) {
  PublishPoolMetrics();
}

ExecutorPool::~ExecutorPool() { Stop(); }

void ExecutorPool::Start() {
  // A single worker has nobody to steal its slot, and without the asymmetric barrier nobody may:
  // a permanent "watcher" spares Schedule the look at sleepers_ (WatchRunNext). Before the
  // threads start, which publishes both.
  // Threads for the most workers the pool may run (thread lending), the temporary one included;
  // those above the running count rest until it includes them.
  const uint32_t capacity = std::max(settings_.threads, settings_.max_threads) +
                            (settings_.extra_thread_after > absl::ZeroDuration() ? 1 : 0);
  if (capacity < 2 || !RegisterAsymmetricBarrier()) {
    steal_run_next_.store(false, std::memory_order_relaxed);
    watcher_.store(true, std::memory_order_relaxed);
  }
  threads_now_.store(settings_.threads, std::memory_order_relaxed);
  running_.store(settings_.threads, std::memory_order_relaxed);
  contexts_.reserve(capacity);
  threads_.reserve(capacity);
  const int64_t now = SteadyNanos();
  for (uint32_t i = 0; i < capacity; ++i) {
    contexts_.push_back(std::make_unique<WorkerContext>());
    WorkerContext* context = contexts_.back().get();
    context->pool = this;
    context->runtime = runtime_;
    context->index = i;
    context->random_state = NonZeroSeed(settings_.shuffle_seed + i + 1);
    context->run_next_looks.resize(capacity);
    context->start_ns = now;
    PublishWorkerMetrics(context);
  }
  for (uint32_t i = 0; i < capacity; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(contexts_[i].get()); });
  }
}

void ExecutorPool::Stop() {
  if (threads_.empty()) {
    return;
  }
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.release(static_cast<std::ptrdiff_t>(threads_.size()));
  for (const auto& context : contexts_) {
    context->resume.release();
  }
  InterruptPoller();
  for (auto& thread : threads_) {
    thread.join();
  }
  threads_.clear();
  // Mailboxes left queued, in local queues or in run-next slots need nothing here: the runtime
  // frees their events by walking the mailbox table.
}

void ExecutorPool::Schedule(Mailbox* mailbox) {
  if (settings_.shuffle || settings_.fair) [[unlikely]] {
    Enqueue(mailbox);
    WakeOne();
    return;
  }
  WorkerContext* context = tls_worker;
  if (context != nullptr && context->pool == this &&
      (context->current != nullptr || context->polling) &&
      !stopping_.load(std::memory_order_relaxed)) {
    // Only this worker makes the slot non-null, so an empty one stays empty until our store (a
    // thief only empties a full one). release: a thief whose CAS takes the mailbox sees it as the
    // handler left it (executor_pool.h, run-next stealing).
    if (context->run_next.load(std::memory_order_relaxed) == nullptr) {
      context->run_next.store(mailbox, std::memory_order_release);
      WatchRunNext();
      return;
    }
    // Full: a thief may empty it meanwhile, so exchange (release, as above).
    if (Mailbox* displaced = context->run_next.exchange(mailbox, std::memory_order_release);
        displaced != nullptr) {
      PushLocal(context, displaced);
    } else {
      WatchRunNext();
    }
    return;
  }
  Enqueue(mailbox);
  WakeOne();
}

void ExecutorPool::PushLocal(WorkerContext* context, Mailbox* mailbox) {
  context->pushed_local = true;
  if (context->local.Push(mailbox)) [[likely]] {
    // A parked worker is woken to steal it when the activation ends (one wake-up per activation,
    // not per mailbox), or by the watchdog if the handler blocks before that.
    return;
  }
  // Full: half of the ring and `mailbox` go to the shared queue in one batch (oldest first).
  Mailbox* first = nullptr;
  Mailbox* last = nullptr;
  uint32_t count = 0;
  for (; count < LocalRunQueue::kCapacity / 2; ++count) {
    Mailbox* oldest = context->local.Pop();
    if (oldest == nullptr) {
      break;
    }
    if (last == nullptr) {
      first = oldest;
    } else {
      last->next_ready = oldest;
    }
    last = oldest;
  }
  if (last == nullptr) {
    first = mailbox;
  } else {
    last->next_ready = mailbox;
  }
  EnqueueList(first, mailbox, count + 1);
  WakeOne();
}

void ExecutorPool::EnqueueList(Mailbox* first, Mailbox* last, uint32_t count) {
  last->next_ready = nullptr;
  {
    troupe::MutexLock lock(&mu_);
    if (tail_ == nullptr) {
      head_ = first;
    } else {
      tail_->next_ready = first;
    }
    tail_ = last;
  }
  // seq_cst: published before WakeOne reads sleepers_ (pairs with the worker's park sequence).
  queued_.fetch_add(count, std::memory_order_seq_cst);
}

void ExecutorPool::EnqueueFair(Mailbox* mailbox) {
  {
    troupe::MutexLock lock(&mu_);
    fair_heap_.push_back(FairEntry{mailbox->run_time_ns(), fair_arrivals_++, mailbox});
    std::push_heap(fair_heap_.begin(), fair_heap_.end(), FairAfter<FairEntry>);
  }
  // seq_cst: as in EnqueueList.
  queued_.fetch_add(1, std::memory_order_seq_cst);
}

void ExecutorPool::EnqueueShuffled(Mailbox* mailbox) {
  {
    troupe::MutexLock lock(&mu_);
    uint32_t window = 0;
    for (Mailbox* m = head_; m != nullptr && window < kShuffleWindow; m = m->next_ready) {
      ++window;
    }
    const uint64_t place = NextRandom(shuffle_state_) % (window + 1);
    if (place == window) {
      mailbox->next_ready = nullptr;
      if (tail_ == nullptr) {
        head_ = mailbox;
      } else {
        tail_->next_ready = mailbox;
      }
      tail_ = mailbox;
    } else if (place == 0) {
      mailbox->next_ready = head_;
      head_ = mailbox;
    } else {
      Mailbox* before = head_;
      for (uint64_t i = 1; i < place; ++i) {
        before = before->next_ready;
      }
      mailbox->next_ready = before->next_ready;
      before->next_ready = mailbox;
    }
  }
  // seq_cst: as in EnqueueList.
  queued_.fetch_add(1, std::memory_order_seq_cst);
}

Mailbox* ExecutorPool::Dequeue() {
  if (queued_.load(std::memory_order_relaxed) <= 0) {
    return nullptr;
  }
  troupe::MutexLock lock(&mu_);
  Mailbox* mailbox = nullptr;
  // Shuffle, a debug aid, overrides fair mode (Enqueue shuffles into the list).
  if (settings_.fair && !settings_.shuffle) [[unlikely]] {
    if (fair_heap_.empty()) {
      return nullptr;
    }
    std::pop_heap(fair_heap_.begin(), fair_heap_.end(), FairAfter<FairEntry>);
    mailbox = fair_heap_.back().mailbox;
    fair_heap_.pop_back();
  } else {
    mailbox = head_;
    if (mailbox == nullptr) {
      return nullptr;
    }
    head_ = mailbox->next_ready;
    if (head_ == nullptr) {
      tail_ = nullptr;
    }
  }
  queued_.fetch_sub(1, std::memory_order_relaxed);
  return mailbox;
}

int64_t ExecutorPool::QueueLength() const {
  int64_t length = queued_.load(std::memory_order_relaxed);
  for (const auto& context : contexts_) {
    length += context->local.Size();
  }
  return length;
}

int64_t ExecutorPool::LiveMailboxesInCaches() const {
  int64_t live = 0;
  for (const auto& context : contexts_) {
    // acquire: pairs with the release in MailboxTable's Free.
    live += context->hints.live.load(std::memory_order_acquire);
  }
  return live;
}

Mailbox* ExecutorPool::Next(WorkerContext* context) {
  ++context->tick;
  if (Mailbox* mailbox = TakeRunNext(context); mailbox != nullptr) {
    if (context->streak < kMaxRunNextStreak ||
        (queued_.load(std::memory_order_relaxed) <= 0 && context->local.Size() == 0)) {
      ++context->streak;
      return mailbox;
    }
    // The streak ran out while other work waits: the slot's occupant queues behind it, and the
    // shared queue goes first (the local queue may hold nothing but that occupant).
    PushLocal(context, mailbox);
    context->tick = 0;
  }
  context->streak = 0;
  Mailbox* mailbox = nullptr;
  // Now and then the shared queue goes first, so that busy local queues cannot starve it.
  if (context->tick % kSharedCheckInterval == 0) {
    mailbox = Dequeue();
  }
  if (mailbox == nullptr) {
    mailbox = context->local.Pop();
    if (mailbox != nullptr) {
      return mailbox;
    }
    mailbox = Dequeue();
  }
  if (mailbox != nullptr) {
    // From the shared queue. A batch publish wakes one worker; each worker that finds more
    // behind what it took wakes the next, so a burst reaches every parked worker without a
    // wake-up per mailbox.
    if (queued_.load(std::memory_order_relaxed) > 0) {
      WakeOne();
    }
    return mailbox;
  }
  return Steal(context);
}

void ExecutorPool::LowerThreadPriority(uint32_t nice) const {
  // Linux keeps a niceness per thread; PRIO_PROCESS with a thread id sets that one thread's.
  const pid_t tid = ::gettid();
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (current == -1 && errno != 0) {
    const std::error_code error(errno, std::system_category());
    TROUPE_LOG(kWarn, kActors) << "pool " << settings_.name
                               << ": cannot read a worker's niceness: " << error.message();
    return;
  }
  const int wanted = std::min(current + static_cast<int>(nice), kMaxNice);
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), wanted) != 0) {
    const std::error_code error(errno, std::system_category());
    TROUPE_LOG(kWarn, kActors) << "pool " << settings_.name
                               << ": cannot set a worker's niceness to " << wanted << ": "
                               << error.message();
  }
}

void ExecutorPool::WorkerLoop(WorkerContext* context) {
  tls_worker = context;
  const LogBinding binding(&runtime_->log_context());
  if (clockid_t clock = 0; pthread_getcpuclockid(pthread_self(), &clock) == 0) {
    context->cpu_clock.store(clock, std::memory_order_relaxed);
    context->cpu_clock_set.store(true, std::memory_order_release);
  }
  const std::string thread_name = absl::StrCat(settings_.name.substr(0, 9), ":", context->index);
  pthread_setname_np(pthread_self(), thread_name.c_str());
  if (settings_.nice > 0) {
    LowerThreadPriority(settings_.nice);
  }
  while (true) {
    // Checked before taking work: with actors that keep each other busy the queue never empties,
    // and Stop must still return after one activation per worker.
    if (stopping_.load(std::memory_order_acquire)) {
      break;
    }
    if (context->index >= running_.load(std::memory_order_relaxed)) [[unlikely]] {
      Rest(context);
      continue;
    }
    if (Mailbox* mailbox = Next(context); mailbox != nullptr) {
      Run(context, mailbox);
      if (++context->since_poll >= kPollInterval &&
          poller_.load(std::memory_order_relaxed) != nullptr) {
        PollIo(context);
      }
      continue;
    }
    Idle(context);
  }
  context->exit_cpu_ns.store(ThreadCpuNanos(CLOCK_THREAD_CPUTIME_ID), std::memory_order_release);
  tls_worker = nullptr;
}

template <bool kTimed>
void ExecutorPool::RunTimed(WorkerContext* context, Mailbox* mailbox) {
  context->current = mailbox;
  AddOwned<uint64_t>(context->activations, 1);
  // Outside fair mode the clock is first read when a second event comes: activations of one
  // event (a ping-pong hop) never pay for it, and the first event's own time goes unmeasured.
  std::chrono::steady_clock::time_point start;
  if constexpr (kTimed) {
    start = std::chrono::steady_clock::now();
  }
  uint32_t handled = 0;
  uint32_t base_events = settings_.max_events;
  if (settings_.shuffle) [[unlikely]] {
    base_events = 1 + static_cast<uint32_t>(NextRandom(context->random_state) % base_events);
  }
  // The budgets are looked at only once `handled` reaches `next_check`: the clock after the 2nd,
  // 4th, 8th and every 16th event (every event in fair mode), the event budget at base_events and
  // after every event past it. An activation of one event decides nothing but that its queue is
  // empty. The grown budget (executor_pool.h; fair and shuffled pools keep theirs fixed) is read
  // at the first check: 0 until then.
  uint32_t next_check = kTimed ? 1 : std::min(base_events, 2U);
  uint32_t max_events = 0;
  bool retried = false;
  // Cleared: a send outside an activation (an I/O callback's) is no handler's to pay for, and the
  // actor list is read here.
  tls_activation_signals = 0;
  MailboxNode* cursor = mailbox->cursor();
  // Read once per activation, not per event: both share the line the mailbox's writers exchange
  // on, and every read by this (the reader's) core would pull that line over from theirs.
  const bool lock_free = mailbox->kind() == MailboxKind::kLockFree;
  Actor* actors = mailbox->first_actor();
  while (true) {
    EventHandle* ev = lock_free ? mailbox->PopLockFree(cursor) : mailbox->Pop(cursor);
    if (ev == nullptr) {
      // Caught up: half the budget for the next turn, so a receiver that keeps being flooded keeps
      // most of it (and its senders their penalty) instead of starting over from one.
      mailbox->ShrinkBudget();
      mailbox->set_cursor(cursor);
      if constexpr (kTimed) {
        // Charged before the mailbox may pass to another worker.
        mailbox->add_run_time_ns(NanosSince(start));
      }
      if (lock_free ? mailbox->TryIdleLockFree() : mailbox->TryIdle()) {
        break;
      }
      if constexpr (kTimed) {
        start = std::chrono::steady_clock::now();
      }
      // We own the mailbox again, but between our kIdle store and our CAS another worker may have
      // run it and moved the cursor (it wrote the cursor back before its own kIdle store, which
      // our CAS read): ours is stale, and so may be its actor list.
      cursor = mailbox->cursor();
      actors = mailbox->first_actor();
      tls_activation_signals &= ~kActorsChanged;
      if (retried) {
        // A writer is mid-push (exchanged, not yet linked). Yield the thread rather than spin;
        // this worker comes back to it, so nobody needs waking.
        Enqueue(mailbox);
        break;
      }
      retried = true;
      continue;
    }
    retried = false;
    if (!kTimed && handled == 1) {
      start = std::chrono::steady_clock::now();
    }
    if (--context->sample_countdown == 0) [[unlikely]] {
      SampledDispatch(context, mailbox, actors, ev);
    } else {
      runtime_->Dispatch(mailbox, actors, EventHandlePtr(ev), &context->trace);
    }
    ++handled;
    bool yields = false;
    if (const uint8_t signals = tls_activation_signals; signals != 0) [[unlikely]] {
      tls_activation_signals = 0;
      if ((signals & kActorsChanged) != 0) {
        actors = mailbox->first_actor();
      }
      // A handler that sent to a flooded mailbox (another one) ends its activation here: its
      // senders take turns with it instead of running their full budget (executor_pool.h).
      yields = (signals & kSentToFlooded) != 0 && grows_ && tls_flooded_recipient != mailbox;
    }
    if (handled < next_check && !yields) [[likely]] {
      continue;
    }
    if (max_events == 0) {
      max_events = grows_ ? base_events << mailbox->budget_shift() : base_events;
    }
    // Early checks catch slow handlers; fast ones pay a clock read per 16 events (a vDSO clock
    // read costs as much as handling a small event here).
    const bool check_time =
        kTimed || handled == 2 || handled == 4 || handled == 8 || (handled & 15) == 0;
    const bool over_time = check_time && std::chrono::steady_clock::now() - start >= max_time_;
    // Past the configured budget only a grown one goes on, and only while it wakes nobody: a
    // mailbox that woke others this turn (replies, acknowledgements to senders on credit) lets
    // them run as soon as it would have without growth.
    if ((handled >= base_events && (handled >= max_events || WokeOthers(*context))) || over_time ||
        yields) {
      if (grows_ && !over_time) {
        if (WokeOthers(*context)) {
          mailbox->ShrinkBudget();
        } else if (const uint32_t shift = mailbox->budget_shift();
                   handled >= max_events && shift < kMaxBudgetShift &&
                   mailbox->HasBacklog(cursor, std::min(max_events, kBacklogProbe))) {
          mailbox->set_budget_shift(shift + 1);
        }
      }
      AddOwned<uint64_t>(context->budget_preemptions, 1);
      mailbox->set_cursor(cursor);
      if constexpr (kTimed) {
        mailbox->add_run_time_ns(NanosSince(start));
      }
      // To the back of the shared queue, behind everything that waited there. No wake-up: this
      // worker dequeues again soon, and waking a parked one only to hand it this mailbox would
      // move a lone busy actor between cores (a worker that dequeues and still sees work queued
      // wakes the next one, so a backlog does spread).
      Enqueue(mailbox);
      break;
    }
    // The next time check (2, 4, 8, then every 16th event), or the event budget, whichever comes
    // first; past the budget (growth) and in fair mode, after every event.
    if (kTimed || handled >= base_events) {
      next_check = handled + 1;
    } else {
      next_check = std::min(base_events, handled < 8 ? handled * 2 : (handled + 16) & ~15U);
    }
  }
  AddOwned<uint64_t>(context->events, handled);
  context->current = nullptr;
  WakeForLocal(context);
}

template void ExecutorPool::RunTimed<true>(WorkerContext* context, Mailbox* mailbox);
template void ExecutorPool::RunTimed<false>(WorkerContext* context, Mailbox* mailbox);

void ExecutorPool::SampledDispatch(WorkerContext* context, Mailbox* mailbox, Actor* actors,
                                   EventHandle* ev) {
  context->sample_countdown = ClassTable::kSampleEvery;
  // Looked up before the handler runs: it may end the actor.
  const Actor* actor = Mailbox::FindActorIn(actors, ev->recipient().local_id());
  ClassStats* stats = actor != nullptr ? &runtime_->classes().Get(typeid(*actor)) : nullptr;
  const int64_t start = SteadyNanos();
  runtime_->Dispatch(mailbox, actors, EventHandlePtr(ev), &context->trace);
  const int64_t took = SteadyNanos() - start;
  handler_time_.Record(took);
  if (stats != nullptr) {
    // Relaxed: independent counts, read by the metrics.
    stats->sampled_events.fetch_add(1, std::memory_order_relaxed);
    stats->sampled_handler_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took)),
                                        std::memory_order_relaxed);
  }
}

void ExecutorPool::WakeForPushedLocal(WorkerContext* context) {
  context->pushed_local = false;
  // Pairs with the seq_cst sleeper registration in Idle: either we see the sleeper or it sees our
  // local queue.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (context->local.Size() > 0) {
    WakeOne();
  }
}

}  // namespace troupe::internal
