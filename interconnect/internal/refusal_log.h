// SPDX-License-Identifier: Apache-2.0
//
// What a node remembers of refused connections, shared by all its handshake actors and proxies:
// a count per direction (published as troupe_interconnect_refusals_total{direction}) and, per
// remote end, the last reason logged, so that a peer refused twice a second for the same reason
// is logged once at warning level (and again only when the reason changes), the repeats at debug
// level.
//
//   | direction | counted when                                                             |
//   |-----------|--------------------------------------------------------------------------|
//   | incoming  | this node refuses a connection: garbage instead of a handshake, another  |
//   |           | cluster, a non-member, a certificate that does not match, a TLS failure  |
//   | outgoing  | a peer refuses this node's connection, or this node refuses the peer's   |
//   |           | answer                                                                   |
//
// Thread-safety: thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

#include "actors/metrics.h"
#include "actors/sync.h"

namespace troupe::interconnect::internal {

class RefusalLog {
 public:
  enum class Direction : uint8_t { kIncoming, kOutgoing };

  // Counts one refusal of `direction` with the remote end `remote` (an address, or "node N") and
  // returns true when it should be logged at warning level: the first refusal of `remote`, or
  // one whose reason differs from the last.
  bool Report(Direction direction, std::string_view remote, std::string_view reason);
  // Forgets `remote`'s last reason (its connection succeeded): its next refusal is logged again.
  void Clear(std::string_view remote);

  uint64_t count(Direction direction) const {
    return counts_[static_cast<int>(direction)].load(std::memory_order_relaxed);
  }

  // Publishes the counts as troupe_interconnect_refusals_total{direction}; drop the
  // registrations before this log or the registry goes away.
  std::vector<MetricsRegistry::Registration> PublishMetrics(MetricsRegistry& registry) const;

 private:
  // Remote ends remembered at most; when full, the memory starts over (a peer then logs once more).
  static constexpr size_t kMaxRemembered = 4096;

  std::array<std::atomic<uint64_t>, 2> counts_{};
  troupe::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::interconnect::internal
