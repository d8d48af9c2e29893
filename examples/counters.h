// SPDX-License-Identifier: Apache-2.0
//
// The sharded counters service (counters_node, counters_load): counters addressed by key, each a
// sharded entity (node/sharding.h) of kind "counter" that lives on whichever node owns its key.
//
//   | piece          | does                                                                     |
//   |----------------|--------------------------------------------------------------------------|
//   | Counter        | the entity: applies CounterAdd updates, answers each with CounterAdded    |
//   |                | and CounterGet with its whole state; Load reads the state from the store  |
//   |                | when it starts, Save writes it when it is passivated, handed off or its   |
//   |                | node leaves                                                               |
//   | CounterStore   | where state lives between incarnations: one file per key in a directory   |
//   |                | every node can read (here, on this machine: the cluster's work directory) |
//   | CounterWriter  | the load: updates to random keys, at most `window` unanswered, each       |
//   |                | tracked; remembers every update acknowledged                              |
//   | CounterChecker | at the end, reads every counter back and checks that each acknowledged    |
//   |                | update is in it, once                                                     |
//
// A counter's state is, per writer, which of its update numbers it holds: 1..applied, plus the
// numbers past a gap. An update is acknowledged only once the entity applied it; the check then
// proves that no acknowledged update was lost across passivations, hand-offs and nodes leaving.
//
// Thread-safety: the actors are actor-confined; CounterStore is thread-safe (one file per key,
// written through a rename).
//
// Example:
//
//   auto store = std::make_shared<troupe::examples::CounterStore>("/tmp/counters");
//   troupe::node::StartShardRegion(system, troupe::examples::kCounterKind, names,
//                                  troupe::examples::CounterFactory(store), options);
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/event.h"
#include "counters.pb.h"
#include "node/sharding.h"

namespace troupe::examples {

inline constexpr std::string_view kCounterKind = "counter";

enum : EventType {
  kEvCounterAdd = EventSpaceBegin(kUserEventSpace + 0x102),
  kEvCounterAdded,
  kEvCounterGet,
  kEvCounterState,
  kEvCountersEnd,
};
static_assert(InEventSpace(kEvCountersEnd - 1, kUserEventSpace + 0x102), "events overflow");

struct EvCounterAdd final : EventPB<EvCounterAdd, CounterAdd, kEvCounterAdd> {};
struct EvCounterAdded final : EventPB<EvCounterAdded, CounterAdded, kEvCounterAdded> {};
struct EvCounterGet final : EventPB<EvCounterGet, CounterGet, kEvCounterGet> {};
struct EvCounterState final : EventPB<EvCounterState, CounterState, kEvCounterState> {};

// One file per key under `dir` (made with its parents on first use).
class CounterStore {
 public:
  explicit CounterStore(std::string dir) : dir_(std::move(dir)) {}

  // The saved state of `key`: an empty state (the key set) when none was saved.
  // kDataLoss names the file when it does not parse.
  absl::StatusOr<CounterState> Load(std::string_view key) const;
  // Writes `state` (a temporary file renamed over the old one: a reader never sees half).
  absl::Status Save(const CounterState& state) const;

 private:
  std::string PathOf(std::string_view key) const;

  std::string dir_;
};

// Applies `seq` of `writer` to `state`: returns false (and changes nothing) when `state` holds it
// already; sets `*out_of_order` when it is not the writer's next number.
bool ApplyUpdate(CounterState& state, uint64_t writer, uint64_t seq, bool* out_of_order);
// Returns whether `state` holds update `seq` of `writer`.
bool HoldsUpdate(const CounterState& state, uint64_t writer, uint64_t seq);

// The factory of counter entities over `store` (StartShardRegion's `factory`).
node::EntityFactory CounterFactory(std::shared_ptr<const CounterStore> store);

// What one writer did.
struct WriterResult {
  uint64_t writer = 0;
  uint64_t sent = 0;
  uint64_t acknowledged = 0;
  uint64_t undelivered = 0;   // reported Undelivered: not applied, or unsure
  uint64_t unanswered = 0;    // neither answered nor reported when the writer gave up
  uint64_t duplicates = 0;    // answers that said the update was there already
  uint64_t out_of_order = 0;  // answers that said an earlier update of the key was missing
  // Every acknowledged update: key → its update numbers.
  absl::flat_hash_map<std::string, std::vector<uint64_t>> acked;
};

struct WriterOptions {
  uint64_t writer = 1;
  uint32_t keys = 1000;
  uint32_t window = 16;
  absl::Time end;
  // How long after `end` the writer waits for its last answers.
  absl::Duration drain = absl::Seconds(10);
  // Counts every acknowledged update as it comes (the progress lines), when not null.
  std::atomic<uint64_t>* progress = nullptr;
};

// The writer: sends CounterAdd updates to random keys until `end`, each tracked, at most
// `window` unanswered; then waits for the rest (at most `drain`) and fulfils `result`.
std::unique_ptr<Actor> MakeCounterWriter(const WriterOptions& options,
                                         std::promise<WriterResult> result);

// What the final read found.
struct CheckResult {
  uint64_t counters = 0;      // counters read back
  uint64_t unread = 0;        // counters that did not answer in time or were reported
  uint64_t missing = 0;       // acknowledged updates not in the final state
  uint64_t applied = 0;       // updates in the final states, all writers
  uint64_t incarnations = 0;  // summed over the counters: starts after a Load
  absl::flat_hash_map<uint32_t, uint64_t> served_by;  // node → counters it answered for
};

// The checker: reads every key in `acked` (merged over the writers) with CounterGet, at most
// `window` at a time, each within `timeout`, and fulfils `result`.
std::unique_ptr<Actor> MakeCounterChecker(std::vector<WriterResult> writers, uint32_t window,
                                          absl::Duration timeout, std::promise<CheckResult> result);

}  // namespace troupe::examples
