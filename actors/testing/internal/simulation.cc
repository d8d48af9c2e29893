// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/internal/simulation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::testing {

std::string Simulation::SeedText() const {
  return absl::StrCat("troupe::testing seed ", seed,
                      options.seed.has_value()
                          ? " (fixed by the test)"
                          : absl::StrCat(" (replay: TROUPE_TEST_SEED=", seed, ")"));
}

std::string DescribeEvent(EventType type, const ActorId& sender, const ActorId& recipient) {
  return absl::StrFormat("event 0x%08x from %s to %s", type, sender.ToString(),
                         recipient.ToString());
}

}  // namespace troupe::testing
