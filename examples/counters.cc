// SPDX-License-Identifier: Apache-2.0
#include "counters.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

#include "actors/events.h"

namespace troupe::examples {

// -- the store ----------------------------------------------------------------------------------

std::string CounterStore::PathOf(std::string_view key) const {
  // Hex keeps any key a valid file name.
  return absl::StrCat(dir_, "/", absl::BytesToHexString(std::string(key)), ".state");
}

absl::StatusOr<CounterState> CounterStore::Load(std::string_view key) const {
  CounterState state;
  const std::string path = PathOf(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    state.set_key(std::string(key));
    return state;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!state.ParseFromString(bytes.str()) || state.key() != key) {
    return absl::DataLossError(
        absl::StrCat(path, ": not the saved state of counter ", std::string(key)));
  }
  return state;
}

absl::Status CounterStore::Save(const CounterState& state) const {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::InternalError(absl::StrCat(dir_, ": ", error.message()));
  }
  const std::string path = PathOf(state.key());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out || !state.SerializeToOstream(&out) || !out.flush()) {
      return absl::InternalError(absl::StrCat(temporary, ": cannot be written"));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat(path, ": ", error.message()));
  }
  return absl::OkStatus();
}

// -- the state ----------------------------------------------------------------------------------

namespace {

WriterUpdates* FindWriter(CounterState& state, uint64_t writer) {
  for (WriterUpdates& updates : *state.mutable_writers()) {
    if (updates.writer() == writer) {
      return &updates;
    }
  }
  WriterUpdates* updates = state.add_writers();
  updates->set_writer(writer);
  return updates;
}

}  // namespace

bool HoldsUpdate(const CounterState& state, uint64_t writer, uint64_t seq) {
  for (const WriterUpdates& updates : state.writers()) {
    if (updates.writer() == writer) {
      return seq <= updates.applied() || std::find(updates.extra().begin(), updates.extra().end(),
                                                   seq) != updates.extra().end();
    }
  }
  return false;
}

bool ApplyUpdate(CounterState& state, uint64_t writer, uint64_t seq, bool* out_of_order) {
  *out_of_order = false;
  if (HoldsUpdate(state, writer, seq)) {
    return false;
  }
  WriterUpdates* updates = FindWriter(state, writer);
  if (seq != updates->applied() + 1) {
    *out_of_order = true;
    updates->add_extra(seq);
    return true;
  }
  updates->set_applied(seq);
  // Numbers that waited past a gap join 1..applied once the gap is filled.
  auto* extra = updates->mutable_extra();
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < extra->size(); ++i) {
      if (extra->Get(i) == updates->applied() + 1) {
        updates->set_applied(updates->applied() + 1);
        extra->SwapElements(i, extra->size() - 1);
        extra->RemoveLast();
        moved = true;
        break;
      }
    }
  }
  return true;
}

// -- the entity ---------------------------------------------------------------------------------

namespace {

class Counter : public node::ShardedEntity {
 public:
  explicit Counter(std::shared_ptr<const CounterStore> store)
      : ShardedEntity(&Counter::StateWork), store_(std::move(store)) {}

 private:
  void Load() override {
    absl::StatusOr<CounterState> loaded = store_->Load(key());
    if (!loaded.ok()) {
      // A state that cannot be read is not silently replaced: the counter starts empty and says so.
      std::fprintf(stderr, "counter %s: %s; starting empty\n", key().c_str(),
                   std::string(loaded.status().message()).c_str());
      state_.set_key(key());
    } else {
      state_ = *std::move(loaded);
    }
    state_.set_incarnations(state_.incarnations() + 1);
  }

  void Save() override {
    if (absl::Status saved = store_->Save(state_); !saved.ok()) {
      std::fprintf(stderr, "counter %s: %s\n", key().c_str(), std::string(saved.message()).c_str());
    }
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCounterAdd, HandleAdd);
      TROUPE_HFUNC(EvCounterGet, HandleGet);
      default:
        Unhandled(ev);
    }
  }

  void HandleAdd(EventPtr<EvCounterAdd> ev) {
    const CounterAdd& add = ev.Get()->record;
    bool out_of_order = false;
    const bool applied = ApplyUpdate(state_, add.writer(), add.seq(), &out_of_order);
    auto added = std::make_unique<EvCounterAdded>();
    added->record.set_key(add.key());
    added->record.set_writer(add.writer());
    added->record.set_seq(add.seq());
    added->record.set_duplicate(!applied);
    added->record.set_out_of_order(out_of_order);
    added->record.set_served_by(system()->node_id());
    Reply(ev, std::move(added));
  }

  void HandleGet(EventPtr<EvCounterGet> ev) {
    auto state = std::make_unique<EvCounterState>();
    state->record = state_;
    state->record.set_served_by(system()->node_id());
    Reply(ev, std::move(state));
  }

  std::shared_ptr<const CounterStore> store_;
  CounterState state_;
};

}  // namespace

node::EntityFactory CounterFactory(std::shared_ptr<const CounterStore> store) {
  return [store = std::move(store)](std::string_view) -> std::unique_ptr<node::ShardedEntity> {
    return std::make_unique<Counter>(store);
  };
}

// -- the writer ---------------------------------------------------------------------------------

namespace {

std::string KeyName(uint32_t index) { return absl::StrCat("counter-", index); }

class CounterWriter : public Actor {
 public:
  CounterWriter(const WriterOptions& options, std::promise<WriterResult> result)
      : Actor(&CounterWriter::StateWork),
        options_(options),
        promise_(std::move(result)),
        rng_(options.writer * 0x9e3779b97f4a7c15ULL) {
    result_.writer = options.writer;
  }

  void Bootstrap() override {
    for (uint32_t i = 0; i < options_.window && Now() < options_.end; ++i) {
      SendOne();
    }
    ScheduleWakeup(std::max(options_.end - Now(), absl::ZeroDuration()));
  }

 private:
  struct Pending {
    std::string key;
    uint64_t seq = 0;
  };

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCounterAdded, HandleAdded);
      case kEvUndelivered:
        HandleUndelivered(*ev->Get<EvUndelivered>());
        break;
      case kEvWakeup:
        HandleWakeup();
        break;
      default:
        Unhandled(ev);
    }
  }

  void SendOne() {
    const std::string key = KeyName(static_cast<uint32_t>(rng_() % options_.keys));
    const uint64_t seq = ++next_seq_[key];
    auto add = std::make_unique<EvCounterAdd>();
    add->record.set_key(key);
    add->record.set_writer(options_.writer);
    add->record.set_seq(seq);
    const uint64_t cookie = ++next_cookie_;
    pending_.emplace(cookie, Pending{.key = key, .seq = seq});
    ++result_.sent;
    node::SendToEntity(*this, kCounterKind, key, std::move(add), kTrackDelivery, cookie);
  }

  // One update answered or reported: its slot goes to the next while the load runs.
  void Settle(uint64_t cookie) {
    if (pending_.erase(cookie) == 0) {
      return;
    }
    if (!draining_ && Now() < options_.end) {
      SendOne();
    }
    MaybeFinish();
  }

  void HandleAdded(EventPtr<EvCounterAdded> ev) {
    const CounterAdded& added = ev.Get()->record;
    if (pending_.contains(ev->cookie())) {
      ++result_.acknowledged;
      result_.duplicates += added.duplicate() ? 1 : 0;
      result_.out_of_order += added.out_of_order() ? 1 : 0;
      result_.acked[added.key()].push_back(added.seq());
      if (options_.progress != nullptr) {
        options_.progress->fetch_add(1, std::memory_order_relaxed);
      }
    }
    Settle(ev->cookie());
  }

  void HandleUndelivered(const EvUndelivered& undelivered) {
    if (pending_.contains(undelivered.cookie)) {
      ++result_.undelivered;
    }
    Settle(undelivered.cookie);
  }

  void HandleWakeup() {
    if (!draining_) {
      draining_ = true;
      ScheduleWakeup(options_.drain);
      MaybeFinish();
      return;
    }
    result_.unanswered = pending_.size();
    pending_.clear();
    MaybeFinish();
  }

  void MaybeFinish() {
    if (!draining_ || !pending_.empty() || done_) {
      return;
    }
    done_ = true;
    promise_.set_value(std::move(result_));
    PassAway();
  }

  WriterOptions options_;
  std::promise<WriterResult> promise_;
  std::mt19937_64 rng_;
  WriterResult result_;
  absl::flat_hash_map<std::string, uint64_t> next_seq_;
  absl::flat_hash_map<uint64_t, Pending> pending_;
  uint64_t next_cookie_ = 0;
  bool draining_ = false;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Actor> MakeCounterWriter(const WriterOptions& options,
                                         std::promise<WriterResult> result) {
  return std::make_unique<CounterWriter>(options, std::move(result));
}

// -- the checker --------------------------------------------------------------------------------

namespace {

class CounterChecker : public Actor {
 public:
  CounterChecker(std::vector<WriterResult> writers, uint32_t window, absl::Duration timeout,
                 std::promise<CheckResult> result)
      : Actor(&CounterChecker::StateWork),
        writers_(std::move(writers)),
        window_(std::max<uint32_t>(window, 1)),
        timeout_(timeout),
        promise_(std::move(result)) {
    for (const WriterResult& writer : writers_) {
      for (const auto& [key, seqs] : writer.acked) {
        keys_.push_back(key);
      }
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
  }

  void Bootstrap() override {
    ScheduleWakeup(timeout_);
    while (in_flight_ < window_ && next_ < keys_.size()) {
      AskNext();
    }
    MaybeFinish();
  }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCounterState, HandleState);
      case kEvUndelivered:
        Answered(ev->Get<EvUndelivered>()->cookie, nullptr);
        break;
      case kEvWakeup:
        result_.unread += keys_.size() - answered_;
        answered_ = keys_.size();
        next_ = keys_.size();
        in_flight_ = 0;
        MaybeFinish();
        break;
      default:
        Unhandled(ev);
    }
  }

  void AskNext() {
    auto get = std::make_unique<EvCounterGet>();
    get->record.set_key(keys_[next_]);
    node::SendToEntity(*this, kCounterKind, keys_[next_], std::move(get), kTrackDelivery,
                       /*cookie=*/next_ + 1);
    ++next_;
    ++in_flight_;
  }

  void HandleState(EventPtr<EvCounterState> ev) { Answered(ev->cookie(), &ev.Get()->record); }

  void Answered(uint64_t cookie, const CounterState* state) {
    if (cookie == 0 || cookie > keys_.size() || done_ || seen_.contains(cookie)) {
      return;
    }
    seen_.insert(cookie);
    --in_flight_;
    ++answered_;
    if (state == nullptr) {
      ++result_.unread;
    } else {
      Check(*state);
    }
    while (in_flight_ < window_ && next_ < keys_.size()) {
      AskNext();
    }
    MaybeFinish();
  }

  void Check(const CounterState& state) {
    ++result_.counters;
    ++result_.served_by[state.served_by()];
    result_.incarnations += state.incarnations();
    for (const WriterUpdates& updates : state.writers()) {
      result_.applied += updates.applied() + static_cast<uint64_t>(updates.extra_size());
    }
    for (const WriterResult& writer : writers_) {
      auto it = writer.acked.find(state.key());
      if (it == writer.acked.end()) {
        continue;
      }
      for (uint64_t seq : it->second) {
        if (!HoldsUpdate(state, writer.writer, seq)) {
          ++result_.missing;
        }
      }
    }
  }

  void MaybeFinish() {
    if (done_ || answered_ < keys_.size()) {
      return;
    }
    done_ = true;
    promise_.set_value(std::move(result_));
    PassAway();
  }

  std::vector<WriterResult> writers_;
  uint32_t window_;
  absl::Duration timeout_;
  std::promise<CheckResult> promise_;
  std::vector<std::string> keys_;
  size_t next_ = 0;
  size_t answered_ = 0;
  uint32_t in_flight_ = 0;
  absl::flat_hash_set<uint64_t> seen_;
  CheckResult result_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Actor> MakeCounterChecker(std::vector<WriterResult> writers, uint32_t window,
                                          absl::Duration timeout,
                                          std::promise<CheckResult> result) {
  return std::make_unique<CounterChecker>(std::move(writers), window, timeout, std::move(result));
}

}  // namespace troupe::examples
