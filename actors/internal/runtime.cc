// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "actors/check.h"
#include "actors/config.h"
#include "actors/internal/extras.h"
#include "actors/internal/node_metrics.h"
#include "actors/log.h"

namespace troupe::internal {

namespace {

// Returns the shuffle seed when this node should shuffle (config or TROUPE_SHUFFLE=<seed>).
std::optional<uint64_t> ShuffleSeed(const proto::ActorSystemConfig& config) {
  std::optional<uint64_t> seed;
  if (config.shuffle().enabled()) {
    seed = config.shuffle().has_seed() ? config.shuffle().seed()
                                       : static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at node start; Troupe never calls setenv.
  if (const char* env = std::getenv("TROUPE_SHUFFLE"); env != nullptr && *env != '\0') {
    uint64_t value = 0;
    if (absl::SimpleAtoi(env, &value)) {
      seed = value;
    } else {
      TROUPE_LOG(kWarn, kActors) << "TROUPE_SHUFFLE=\"" << env
                                 << "\" is not an unsigned 64-bit seed; ignored";
    }
  }
  if (!seed.has_value()) {
    return std::nullopt;
  }
#if defined(TROUPE_ENABLE_SHUFFLE)
  TROUPE_LOG(kInfo, kActors) << "node " << config.node_id() << ": shuffling ready mailboxes, seed "
                             << *seed;
  return seed;
#else
  TROUPE_LOG(kWarn, kActors)
      << "shuffle requested but this build was made without "
         "TROUPE_ENABLE_SHUFFLE (Debug and sanitizer builds have it); ignored";
  return std::nullopt;
#endif
}

// Returns the level `text` names; `text` was validated with the config.
LogLevel LevelNamed(const std::string& text) {
  LogLevel level = LogLevel::kInfo;
  const absl::Status parsed = ParseLogLevel(text, &level);
  TROUPE_CHECK(parsed.ok()) << parsed.message();
  return level;
}

// The config's enum and the public one share their numbers.
static_assert(static_cast<int>(MailboxKind::kLockFree) == proto::MAILBOX_KIND_LOCK_FREE);
static_assert(static_cast<int>(MailboxKind::kSimple) == proto::MAILBOX_KIND_SIMPLE);
static_assert(static_cast<int>(MailboxKind::kRevolving) == proto::MAILBOX_KIND_REVOLVING);
static_assert(static_cast<int>(MailboxKind::kHTSwap) == proto::MAILBOX_KIND_HTSWAP);
static_assert(static_cast<int>(MailboxKind::kPriority) == proto::MAILBOX_KIND_PRIORITY);
static_assert(kMailboxKindCount == proto::MailboxKind_ARRAYSIZE);

}  // namespace

Runtime::Runtime(ActorSystem* system, proto::ActorSystemConfig config, Driver* driver,
                 uint64_t first_local_id)
    : system_(system),
      driver_(driver),
      config_(std::move(config)),
      node_id_(config_.node_id()),
      log_context_(node_id_, LevelNamed(config_.log().level())),
      metrics_({{"node", absl::StrCat(node_id_)}}),
      mailboxes_(config_.max_mailboxes()),
      services_(config_.max_services()),
      next_local_id_(driver != nullptr ? first_local_id
                                       : static_cast<uint64_t>(absl::GetCurrentTimeNanos())) {
  // A driven node has no workers to shuffle (its driver chooses the order).
  const std::optional<uint64_t> shuffle_seed =
      driver == nullptr ? ShuffleSeed(config_) : std::nullopt;
  for (int i = 0; i < config_.pools_size(); ++i) {
    const proto::PoolConfig& pool = config_.pools(i);
    PoolSettings settings;
    settings.name = pool.name();
    settings.threads = pool.threads();
    settings.spin_time = absl::Microseconds(static_cast<int64_t>(pool.spin_time_us()));
    settings.max_events = pool.max_events_per_activation();
    settings.max_time = absl::Microseconds(static_cast<int64_t>(pool.max_activation_time_us()));
    settings.fair = pool.fair();
    settings.stuck_threshold = absl::Milliseconds(static_cast<int64_t>(pool.stuck_threshold_ms()));
    settings.nice = pool.nice();
    settings.shuffle = shuffle_seed.has_value();
    settings.shuffle_seed = shuffle_seed.value_or(0) + static_cast<uint64_t>(i) * 0x10001;
    settings.min_threads = pool.min_threads();
    settings.max_threads = pool.max_threads();
    settings.priority = pool.priority();
    settings.extra_thread_after =
        absl::Milliseconds(static_cast<int64_t>(pool.extra_thread_after_ms()));
    pools_.push_back(std::make_unique<ExecutorPool>(this, static_cast<uint32_t>(i), settings));
    pool_mailbox_.push_back(pool.default_mailbox() == proto::MAILBOX_KIND_UNSPECIFIED
                                ? MailboxKind::kLockFree
                                : static_cast<MailboxKind>(pool.default_mailbox()));
    if (pool.name() == config_.default_pool()) {
      default_pool_ = static_cast<uint32_t>(i);
    }
  }
  std::vector<LendingLimits> limits;
  for (const auto& pool : pools_) {
    const PoolSettings& settings = pool->settings();
    limits.push_back({settings.name, settings.threads, settings.min_threads, settings.max_threads,
                      settings.priority});
  }
  if (auto lending = std::make_unique<ThreadLending>(std::move(limits), config_.lending().budget());
      lending->enabled() && driver == nullptr) {
    lending_ = std::move(lending);
  }
  scheduler_ = std::make_unique<Scheduler>(
      this, absl::Microseconds(static_cast<int64_t>(config_.scheduler().resolution_us())));
  ApplyLogConfig(config_.log(), &log_context_);
  PublishNodeMetrics();
}

void Runtime::PublishNodeMetrics() {
  // The rows are in node_metrics.h.
  for (size_t reason = 1; reason < kReasons; ++reason) {
    PublishRows(metrics_, kReasonMetrics, reasons_[reason],
                {{"reason", UndeliveredReasonName(static_cast<UndeliveredReason>(reason))}},
                &node_metrics_);
  }
  PublishRows(metrics_, kNodeMetrics, *this, {}, &node_metrics_);
}

Runtime::~Runtime() { Stop(); }

void Runtime::Start() {
  if (driver_ != nullptr) {
    return;  // the driver is every thread of this node
  }
  for (auto& pool : pools_) {
    pool->Start();
  }
  scheduler_->Start();
  // The watchdog also hands a blocked worker's local queue to idle workers, which matters in any
  // pool of two or more threads, even with stuck reports off.
  const bool watched =
      lending_ != nullptr || std::any_of(pools_.begin(), pools_.end(), [](const auto& pool) {
        return pool->settings().stuck_threshold > absl::ZeroDuration() ||
               pool->settings().threads > 1 ||
               pool->settings().extra_thread_after > absl::ZeroDuration();
      });
  if (watched) {
    watchdog_ = std::thread([this] {
      const LogBinding binding(&log_context_);
      WatchdogLoop();
    });
  }
}

void Runtime::Stop() {
  if (WorkerContext* worker = CurrentWorker(); worker != nullptr) {
    // A worker cannot join itself; stopping belongs to the thread that owns the system.
    TROUPE_LOG(kError, kActors) << "ActorSystem::Stop called from an actor handler; ignored (stop "
                                   "the system from the thread that created it)";
    return;
  }
  if (stopped_.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  if (watchdog_.joinable()) {
    {
      troupe::MutexLock lock(&watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_.join();
  }
  scheduler_->Stop();
  for (auto& pool : pools_) {
    pool->Stop();
  }
  // No worker runs now: this thread owns every mailbox. Destructors may still send; those events
  // are queued and freed below with the rest.
  const uint32_t high = mailboxes_.HighWater();
  for (uint32_t hint = 1; hint < high; ++hint) {
    Mailbox* mailbox = mailboxes_.Get(hint);
    while (Actor* actor = mailbox->first_actor()) {
      mailbox->DetachActor(actor);
      classes_.Get(typeid(*actor)).AddLive(-1);
      if (actor->extras_ != nullptr) {
        actor->extras_->asks.clear();  // waiting coroutines end while their actor is whole
      }
      delete actor;
    }
  }
  FreeAllQueued();
}

void Runtime::FreeAllQueued() {
  const uint32_t high = mailboxes_.HighWater();
  for (uint32_t hint = 1; hint < high; ++hint) {
    Mailbox* mailbox = mailboxes_.Get(hint);
    while (EventHandle* ev = mailbox->Pop()) {
      delete ev;
    }
  }
}

absl::StatusOr<uint32_t> Runtime::PoolIndex(std::string_view name) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i]->settings().name == name) {
      return static_cast<uint32_t>(i);
    }
  }
  return absl::NotFoundError(
      absl::StrCat("unknown pool \"", absl::string_view(name.data(), name.size()), "\""));
}

absl::Status Runtime::AttachIoPoller(std::string_view pool, IoPoller* poller) {
  if (driver_ != nullptr) {
    return absl::FailedPreconditionError(
        "the node is run by a driver and has no workers to poll I/O");
  }
  absl::StatusOr<uint32_t> index = PoolIndex(pool);
  if (!index.ok()) {
    return index.status();
  }
  return pools_[*index]->AttachPoller(poller);
}

void Runtime::DetachIoPoller(IoPoller* poller) {
  for (const auto& pool : pools_) {
    pool->DetachPoller(poller);
  }
}

// -- delivery -----------------------------------------------------------------------------------

void Runtime::RouteThroughRouter(EventHandlePtr ev) {
  // acquire: pairs with the release in set_remote_router.
  if (RemoteRouter* router = remote_router_.load(std::memory_order_acquire); router != nullptr) {
    router->Route(std::move(ev));
    return;
  }
  Undeliverable(std::move(ev), UndeliveredReason::kNoRoute);
}

void Runtime::Deliver(EventHandlePtr ev) {
  // Reads the recipient's words one by one, not as one 16-byte copy: a handler usually wrote the
  // id just before (Forward, the EventHandle constructor) with two 8-byte stores, and a 16-byte
  // load of them cannot be forwarded from the store buffer (it stalled every local send).
  const uint32_t node_word = ev->recipient().node_word();
  const NodeId node = node_word & ActorId::kMaxNode;
  if (node != 0 && node != node_id_) {
    if (driver_ != nullptr) {
      driver_->RouteRemote(this, std::move(ev));
      return;
    }
    RouteThroughRouter(std::move(ev));
    return;
  }
  uint32_t hint = ev->recipient().hint();
  if (ev->recipient().IsService()) [[unlikely]] {
    const ActorId actor = services_.Lookup(ev->recipient());
    if (actor.IsEmpty()) {
      Undeliverable(std::move(ev), UndeliveredReason::kUnknownService);
      return;
    }
    ev->set_recipient(actor);
    hint = actor.hint();
  }
  Mailbox* mailbox = mailboxes_.Get(hint);
  if (mailbox == nullptr) {
    Undeliverable(std::move(ev), UndeliveredReason::kActorNotFound);
    return;
  }
  mailbox->PushEvent(ev.release());
  // Read between the push's two steps, which hold the mailbox's line already.
  if (mailbox->Flooded()) [[unlikely]] {
    tls_flooded_recipient = mailbox;
    tls_activation_signals |= kSentToFlooded;
  }
  if (mailbox->ActivateAfterPush()) {
    Activate(mailbox);
  }
}

void Runtime::Undeliverable(EventHandlePtr ev, UndeliveredReason reason, bool unsure) {
  if (ev->HasFlag(kForwardOnNondelivery) && !ev->forward_to().IsEmpty()) {
    // Forward once: the forwarded event keeps tracking but cannot be forwarded again.
    ev->set_recipient(ev->forward_to());
    ev->set_flags(ev->flags() & ~kForwardOnNondelivery);
    Send(std::move(ev));
    return;
  }
  static_assert(kEvChildFailed == kEvWatch + 4 && kEvDeadLetter == kEvTerminated + 1);
  if (ev->type() - kEvWatch <= 4 || ev->type() - kEvTerminated <= 1) [[unlikely]] {
    LostSystemEvent(*this, std::move(ev), reason);
    return;
  }
  const bool report =
      ev->HasFlag(kTrackDelivery) || (unsure && ev->HasFlag(kGenerateUnsureUndelivered));
  const size_t index = static_cast<size_t>(reason) < kReasons ? static_cast<size_t>(reason) : 0;
  if (report && !ev->sender().IsEmpty() && !stopped()) {
    reasons_[index].undelivered.fetch_add(1, std::memory_order_relaxed);
    TROUPE_LOG(kDebug, kActors) << "undelivered (" << UndeliveredReasonName(reason)
                                << (unsure ? ", unsure" : "") << "): " << ev->ToString();
    Send(std::make_unique<EventHandle>(
        ev->sender(), ev->recipient(),
        std::make_unique<EvUndelivered>(reason, ev->type(), ev->cookie(), unsure), kNoFlags,
        ev->cookie(), ActorId(), ev->trace_id()));
    return;
  }
  if (DeadLetters::IsNotice(ev->type(), reason)) {
    dead_letters_.CountNotice();  // the runtime's own notice to an actor that has ended
    return;
  }
  reasons_[index].dropped.fetch_add(1, std::memory_order_relaxed);
  if (stopped()) {
    return;  // the events a stopping node frees are not dead letters
  }
  for (const ActorId& listener : dead_letters_.Record(*ev, reason, Now())) {
    Send(std::make_unique<EventHandle>(listener, ActorId(),
                                       std::make_unique<EvDeadLetter>(*ev, reason), kNoFlags, 0));
  }
}

void Runtime::Dispatch(Mailbox* mailbox, Actor* actors, EventHandlePtr ev, HandlerTrace* trace) {
  Actor* actor = Mailbox::FindActorIn(actors, ev->recipient().local_id());
  if (actor == nullptr) {
    Undeliverable(std::move(ev), UndeliveredReason::kActorNotFound);
    return;
  }
  static_assert(kEvResume == kEvSuspend + 1 && kEvWatch == kEvSuspend + 2 &&
                kEvUnwatch == kEvSuspend + 3 && kEvSupervise == kEvSuspend + 4 &&
                kEvStop == kEvSuspend + 5 && kEvChildFailed == kEvSuspend + 6);
  if (ev->type() - kEvSuspend <= 6 || actor->extras_ != nullptr) [[unlikely]] {
    DispatchSlow(mailbox, actor, std::move(ev), trace);
    return;
  }
  Handle<false>(actor, ev, trace);
  if (actor->passed_away_) {
    Destroy(mailbox, actor);
  }
}

template <bool kWithExtras>
void Runtime::Handle(Actor* actor, EventHandlePtr& ev, HandlerTrace* trace) {
  const EventType type = ev->type();
  const std::type_info* actor_class = &typeid(*actor);
  if (trace != nullptr) {
    trace->Begin(actor->self_, type, actor_class);
  }
  // Lines logged and events sent from here on say which node, actor and trace they belong to.
  LogScope scope{.context = &log_context_,
                 .actor = &actor->self_,
                 .actor_class = actor_class,
                 .trace_id = ev->trace_id(),
                 .previous = tls_log_scope};
  tls_log_scope = &scope;
  try {
    if (type == kEvBootstrap && !actor->bootstrapped_) {
      actor->bootstrapped_ = true;
      actor->Bootstrap();
    } else if (kWithExtras && type == kEvChildFailed) {
      Supervise(actor, ev);
    } else if (kWithExtras && actor->extras_ != nullptr &&
               actor->extras_->Consume(*this, actor->self_, ev)) {
      // An ask's answer (its continuation ran) or a notice no longer wanted.
    } else {
      (actor->*(actor->state_))(ev);
    }
  } catch (const std::exception& e) {
    OnHandlerFailure(actor, type, e.what());
  } catch (...) {
    OnHandlerFailure(actor, type, "non-standard exception");
  }
  tls_log_scope = scope.previous;
  if (trace != nullptr) {
    trace->End();
  }
}

template void Runtime::Handle<true>(Actor* actor, EventHandlePtr& ev, HandlerTrace* trace);

void Runtime::DispatchSlow(Mailbox* mailbox, Actor* actor, EventHandlePtr ev, HandlerTrace* trace) {
  const EventType type = ev->type();
  if (actor->passed_away_) {
    // Ended, waiting for its children to end first: the last one's notice lets it go.
    if (type == kEvTerminated) {
      Destroy(mailbox, actor);
    } else {
      Undeliverable(std::move(ev), UndeliveredReason::kActorNotFound);
    }
    return;
  }
  if (type == kEvSupervise || type == kEvStop) {
    OnDirective(mailbox, actor, ev, trace);
    return;
  }
  if (type == kEvSuspend) {
    actor->Suspend();
    return;
  }
  if (type == kEvWatch || type == kEvUnwatch) {
    // Bookkeeping, done at once even while suspended.
    if (type == kEvWatch || actor->extras_ != nullptr) {
      actor->Extras().OnWatchRequest(actor->self_, *ev);
    }
    return;
  }
  ActorExtras* extras = actor->extras_;
  if (type == kEvResume) {
    if (extras == nullptr || extras->suspend_count == 0) {
      TROUPE_LOG(kWarn, kActors) << "actor " << actor->self_
                                 << " got a resume but is not suspended; ignored";
      return;
    }
    if (--extras->suspend_count > 0) {
      return;
    }
    DrainHeld(actor, trace);
  } else if (extras != nullptr && (extras->suspend_count > 0 || extras->awaiting_directive)) {
    // Answers to asks wait too: a suspended actor runs nothing, continuations included.
    extras->held.push_back(std::move(ev));
    return;
  } else {
    Handle<true>(actor, ev, trace);
  }
  if (actor->passed_away_) {
    Destroy(mailbox, actor);
  }
}

// -- actors -------------------------------------------------------------------------------------

void Runtime::Attach(Mailbox* mailbox, Actor* actor, uint32_t pool, uint32_t hint) {
  actor->system_ = system_;
  actor->self_ =
      ActorId(node_id_, pool, next_local_id_.fetch_add(1, std::memory_order_relaxed), hint);
  mailbox->AttachActor(actor);
  classes_.Get(typeid(*actor)).AddLive(1);
  // The caller owns the mailbox (kScheduled), so this push never activates it.
  mailbox->Push(new EventHandle(kEvBootstrap, actor->self_, actor->self_, kNoFlags, 0));
}

ActorId Runtime::Register(std::unique_ptr<Actor> actor, const RegisterOptions& options,
                          Actor* parent, ActorFactory* factory) {
  absl::StatusOr<ActorId> id = TryRegister(std::move(actor), options, parent, factory);
  if (!id.ok()) {
    if (!stopped()) {
      TROUPE_LOG(kError, kActors) << "Register: " << id.status().message();
    }
    return {};
  }
  return *id;
}

absl::StatusOr<ActorId> Runtime::TryRegister(std::unique_ptr<Actor> actor,
                                             const RegisterOptions& options, Actor* parent,
                                             ActorFactory* factory) {
  if (actor == nullptr) {
    return absl::InvalidArgumentError("null actor; nothing registered");
  }
  const uint32_t pool = options.pool.value_or(default_pool_);
  if (pool >= pools_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("pool index ", pool, " does not exist (",
                                                   pools_.size(), " pools); actor not registered"));
  }
  MailboxKind kind = options.mailbox;
  if (kind == MailboxKind::kPoolDefault) {
    kind = pool_mailbox_[pool];
  }
  if (static_cast<uint32_t>(kind) >= kMailboxKindCount) {
    return absl::InvalidArgumentError(absl::StrCat("mailbox kind ", static_cast<int>(kind),
                                                   " does not exist; actor not registered"));
  }
  if (stopped()) {
    return absl::FailedPreconditionError("the system is stopping; actor not registered");
  }
  auto [mailbox, hint] = mailboxes_.Allocate(kind, WorkerHints());
  if (mailbox == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mailbox table is full (", config_.max_mailboxes(),
                     " mailboxes; raise max_mailboxes); actor not registered"));
  }
  mailbox->set_pool(pool);
  // A reused mailbox forgets what its last actor earned (fair-mode run time, a flood's budget).
  mailbox->reset_run_time();
  mailbox->set_budget_shift(0);
  Actor* raw = actor.release();
  Attach(mailbox, raw, pool, hint);
  if (parent != nullptr) {
    Adopt(parent, raw, factory);
  }
  const ActorId self = raw->self_;
  Activate(mailbox);
  return self;
}

ActorId Runtime::RegisterWithSameMailbox(Actor* owner, std::unique_ptr<Actor> actor) {
  if (actor == nullptr) {
    TROUPE_LOG(kError, kActors) << "RegisterWithSameMailbox: null actor; nothing registered";
    return {};
  }
  Mailbox* mailbox = mailboxes_.Get(owner->self_.hint());
  Actor* raw = actor.release();
  Attach(mailbox, raw, mailbox->pool(), owner->self_.hint());
  return raw->self_;
}

void Runtime::Destroy(Mailbox* mailbox, Actor* actor) {
  if (WaitForChildren(actor)) {
    return;  // post-order: it ends once its children have
  }
  const uint32_t hint = actor->self_.hint();
  const ActorId self = actor->self_;
  if (actor->extras_ != nullptr) {
    // Held events are reported as if they had still been queued; pending asks end unanswered
    // (their timers would only reach a dead actor).
    std::deque<EventHandlePtr> held = std::move(actor->extras_->held);
    for (EventHandlePtr& ev : held) {
      Undeliverable(std::move(ev), UndeliveredReason::kActorNotFound);
    }
    // Continuations die here, not in ~Actor: a waiting coroutine's frame is destroyed while its
    // actor is whole.
    actor->extras_->EndAsks();
    actor->extras_->Farewell(*this, actor->self_);
  }
  const ActorId parent_to_wake = Unlink(actor);
  mailbox->DetachActor(actor);
  classes_.Get(typeid(*actor)).AddLive(-1);
  delete actor;
  if (!parent_to_wake.IsEmpty()) {
    WakeParent(parent_to_wake, self);
  }
  if (!mailbox->HasActors()) {
    // Events still queued reach Dispatch, find no actor and are reported undelivered; the mailbox
    // stays kScheduled until this worker lets it go, so Allocate cannot reuse it before that.
    mailboxes_.Free(hint, WorkerHints());
  }
}

}  // namespace troupe::internal
