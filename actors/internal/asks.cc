// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/asks.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/events.h"
#include "actors/log.h"

namespace troupe::internal {

std::string EventTypeName(EventType type) { return absl::StrFormat("0x%08x", type); }

bool ActorExtras::TryComplete(const ActorId& self, EventHandlePtr& ev) {
  const uint64_t id = ev->cookie();
  if ((id & kAskCookieBit) == 0) {
    return false;
  }
  const auto it = asks.find(id);
  if (it == asks.end()) {
    if (ev->type() != kEvAskTimeout) {
      TROUPE_LOG(kDebug, kActors) << "actor " << self << " dropped " << ev->ToString()
                                  << ": the ask it answers has ended (timed out or answered)";
    }
    return true;
  }
  PendingAsk pending = std::move(it->second);
  asks.erase(it);
  const std::string request =
      absl::StrCat("request ", EventTypeName(pending.request_type), " to ", pending.to.ToString());
  if (ev->type() == kEvAskTimeout) {
    pending.done(ev, absl::DeadlineExceededError(absl::StrCat(request, ": no reply in time")));
    return true;
  }
  pending.timeout.Cancel();
  if (ev->type() == kEvUndelivered) {
    const EvUndelivered* undelivered = ev->Get<EvUndelivered>();
    if (undelivered != nullptr && undelivered->source_type == pending.request_type) {
      pending.done(ev, absl::UnavailableError(absl::StrCat(
                           request, " undelivered: ", UndeliveredReasonName(undelivered->reason),
                           undelivered->unsure ? " (unsure: it was sent)" : "")));
      return true;
    }
  }
  pending.done(ev, absl::OkStatus());
  return true;
}

}  // namespace troupe::internal
