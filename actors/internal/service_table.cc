// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/service_table.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace troupe::internal {

ServiceTable::ServiceTable(uint32_t capacity)
    : capacity_(capacity), mask_(std::bit_ceil(size_t{capacity} * 2) - 1), slots_(mask_ + 1) {}

ServiceTable::~ServiceTable() = default;

absl::Status ServiceTable::Register(const ActorId& service, const ActorId& actor) {
  if (!service.IsService()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterService: ", service.ToString(), " is not a service id"));
  }
  if (actor.IsService()) {
    return absl::InvalidArgumentError(absl::StrCat("RegisterService: ", service.ToString(),
                                                   " cannot map to another service ",
                                                   actor.ToString(), " (rewrite-once rule)"));
  }
  const ActorId key = service.WithNode(0);
  troupe::MutexLock lock(&mu_);
  size_t slot = SlotOf(key);
  while (true) {
    const Entry* entry = slots_[slot].load(std::memory_order_relaxed);
    if (entry == nullptr) {
      if (used_ >= capacity_) {
        return absl::ResourceExhaustedError(absl::StrCat("RegisterService: service table is full (",
                                                         capacity_,
                                                         " services; raise max_services)"));
      }
      ++used_;
      break;
    }
    if (entry->service == key) {
      break;
    }
    slot = (slot + 1) & mask_;
  }
  entries_.push_back(std::make_unique<const Entry>(Entry{key, actor}));
  // release: pairs with the acquire in Lookup; readers see a fully built entry.
  slots_[slot].store(entries_.back().get(), std::memory_order_release);
  return absl::OkStatus();
}

ActorId ServiceTable::Lookup(const ActorId& service) const {
  const ActorId key = service.WithNode(0);
  size_t slot = SlotOf(key);
  for (size_t probes = 0; probes <= mask_; ++probes) {
    const Entry* entry = slots_[slot].load(std::memory_order_acquire);
    if (entry == nullptr) {
      return {};
    }
    if (entry->service == key) {
      return entry->actor;
    }
    slot = (slot + 1) & mask_;
  }
  return {};
}

}  // namespace troupe::internal
