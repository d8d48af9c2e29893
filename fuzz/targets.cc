// SPDX-License-Identifier: Apache-2.0
#include "fuzz/targets.h"

#include <array>

namespace troupe::fuzz {

std::span<const Target> Targets() {
  static constexpr std::array<Target, 4> kTargets = {{
      {"fuzz_frame_decoder", &FuzzFrameDecoder},
      {"fuzz_handshake", &FuzzHandshake},
      {"fuzz_event_records", &FuzzEventRecords},
      {"fuzz_config", &FuzzConfig},
  }};
  return kTargets;
}

}  // namespace troupe::fuzz
