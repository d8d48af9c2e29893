// SPDX-License-Identifier: Apache-2.0
//
// The node's ServiceId → ActorId table.
//
// Lookups are lock-free (they sit on the send path): open addressing over atomic pointers to
// immutable entries. Writers are serialized by a mutex; re-registering a service publishes a new
// entry and retires the old one, which is freed only when the table is destroyed (registrations are
// rare, so the retired list stays small).
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

#include "actors/actor_id.h"
#include "actors/sync.h"

namespace troupe::internal {

class ServiceTable {
 public:
  explicit ServiceTable(uint32_t capacity);
  ~ServiceTable();
  ServiceTable(const ServiceTable&) = delete;
  ServiceTable& operator=(const ServiceTable&) = delete;
  ServiceTable(ServiceTable&&) = delete;
  ServiceTable& operator=(ServiceTable&&) = delete;

  // Maps `service` (node id ignored) to `actor`, replacing any earlier mapping; an empty `actor`
  // removes it. kInvalidArgument when `service` is not a service id or `actor` is one (a service
  // is rewritten once, never to another service); kResourceExhausted when the table is full.
  absl::Status Register(const ActorId& service, const ActorId& actor);

  // Returns the actor registered for `service` (node id ignored), or an empty id.
  ActorId Lookup(const ActorId& service) const;

 private:
  struct Entry {
    ActorId service;
    ActorId actor;
  };

  size_t SlotOf(const ActorId& key) const { return key.Hash() & mask_; }

  const uint32_t capacity_;
  const size_t mask_;
  // Value-initialized (null) slots; the vector itself never resizes.
  std::vector<std::atomic<const Entry*>> slots_;
  troupe::Mutex mu_;
  uint32_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<const Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::internal
