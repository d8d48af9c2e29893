// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/internal/trace.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "actors/events.h"
#include "actors/testing/internal/simulation.h"

namespace troupe::testing {

namespace {

uint64_t Mix(uint64_t hash, uint64_t value) {
  // splitmix64 finalizer over the running hash: cheap and stable across processes and builds.
  uint64_t z = hash ^ (value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t HashId(uint64_t hash, const ActorId& id) {
  hash = Mix(hash, id.local_id());
  hash = Mix(hash, id.hint());
  return Mix(hash, id.node_word());
}

}  // namespace

// -- trace --------------------------------------------------------------------------------------

void TraceLog::Record(const TraceEntry& entry, size_t capacity) {
  fingerprint_ = Mix(fingerprint_, static_cast<uint64_t>(entry.kind));
  fingerprint_ = Mix(fingerprint_, entry.node);
  fingerprint_ = Mix(fingerprint_, entry.type);
  fingerprint_ = Mix(fingerprint_, static_cast<uint64_t>(absl::ToInt64Nanoseconds(entry.at)));
  fingerprint_ = HashId(HashId(fingerprint_, entry.sender), entry.recipient);
  if (capacity == 0) {
    return;
  }
  if (entries_.size() == capacity) {
    entries_.pop_front();
  }
  entries_.push_back(entry);
}

void TraceLog::AppendTail(std::string* out, size_t count) const {
  const size_t first = entries_.size() > count ? entries_.size() - count : 0;
  for (size_t i = first; i < entries_.size(); ++i) {
    absl::StrAppend(out, "\n  ", entries_[i].ToString());
  }
}

// -- expectations -------------------------------------------------------------------------------

void Watch::Observe(NodeId node, const ActorSystem& system, EventHandle& ev) {
  if (ev.type() == kEvBootstrap) {
    return;  // the runtime's own first event, not something a test expects
  }
  ActorId target = recipient;
  if (target.IsService() && (target.node_id() == 0 || target.node_id() == node)) {
    target = system.LookupService(target.WithNode(0));
  }
  if (ev.recipient() != target) {
    return;
  }
  done = true;
  seen = DescribeEvent(ev.type(), ev.sender(), ev.recipient());
  if (ev.type() != type) {
    return;
  }
  if (from.has_value() && ev.sender() != *from) {
    return;
  }
  if (check != nullptr && *check && !(*check)(ev)) {
    seen += " (its contents do not match)";
    return;
  }
  matched = true;
}

}  // namespace troupe::testing
