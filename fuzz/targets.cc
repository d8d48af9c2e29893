// SPDX-License-Identifier: Apache-2.0
#include "fuzz/targets.h"

#include <array>
#include <string>

#include "absl/status/status.h"

#include "actors/check.h"
#include "interconnect/internal/wire.h"

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

bool CheckRecordsRoundTrip(const interconnect::internal::Frame& frame, uint32_t* whole) {
  interconnect::internal::FrameEncoder encoder;
  uint32_t parsed = 0;
  uint32_t events = 0;
  const absl::Status status = interconnect::internal::ParseRecords(
      frame, [&](const interconnect::internal::Record& record) {
        encoder.Add(record);
        ++parsed;
        events += record.kind == interconnect::internal::RecordKind::kEvent ? 1 : 0;
      });
  if (!status.ok()) {
    TROUPE_CHECK(absl::IsDataLoss(status)) << status;
    TROUPE_CHECK(parsed == 0) << "a malformed frame showed " << parsed << " records";
    return false;
  }
  TROUPE_CHECK(parsed == frame.event_count);
  std::string reencoded;
  encoder.Finish(frame.sequence, frame.ack, &reencoded);
  TROUPE_CHECK(std::string_view(reencoded).substr(interconnect::internal::kFrameHeaderSize) ==
               frame.payload)
      << "the decoded records do not encode back to their payload";
  if (whole != nullptr) {
    *whole = events;
  }
  return true;
}

}  // namespace troupe::fuzz
