// SPDX-License-Identifier: Apache-2.0
//
// fuzz_event_records (layout in fuzz/targets.h): what a peer's event records become on this node,
// past the frame checks (no checksum stands in the fuzzer's way here). Checks, for any payload:
//   - ParseRecords never crashes and is all or nothing: on success exactly event_count records,
//     which encode back to the payload byte for byte; on kDataLoss, none; DecodeEvents then
//     yields its whole events and a RecordDecoder (chunks in turn) the events it completes;
//   - the lazy parse a handler triggers (EventHandle::Get) never crashes, whatever the body: for
//     the project's cross-node events (EvPoison over proto::Poison, EvUndelivered with its own
//     Load over proto::Undelivered) and an EventPB over the tests' ut::TestPayload (a string and a
//     repeated field); a body that parses becomes the event (bytes dropped) and serializes back to
//     bytes that parse to the same message; one that does not keeps its bytes untouched, and the
//     handle still logs (ToString).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "actors/check.h"
#include "actors/event.h"
#include "actors/events.h"
#include "fuzz/input.h"
#include "fuzz/targets.h"
#include "interconnect/internal/wire.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::fuzz {
namespace {

using interconnect::internal::FrameKind;

// The test payload's event; its type is what fuzz_make_seeds writes into the seeds.
enum : EventType { kEvFuzzPayload = EventSpaceBegin(kUserEventSpace + 0x200) };
struct EvFuzzPayload final : EventPB<EvFuzzPayload, ut::TestPayload, kEvFuzzPayload> {};

// Asks for the body as `E` as a handler would, and checks what the handle holds after.
template <typename E>
void Parse(EventHandle& ev) {
  const std::string bytes(ev.bytes());
  const bool had_bytes = ev.HasBytes();
  E* parsed = ev.Get<E>();
  if (ev.type() != E::kEventType) {
    TROUPE_CHECK(parsed == nullptr && ev.HasBytes() == had_bytes && ev.bytes() == bytes);
    return;
  }
  if (parsed == nullptr) {
    // Not a valid message: the bytes stay for the kParseError report.
    TROUPE_CHECK(!ev.HasEvent() && ev.bytes() == bytes);
    return;
  }
  TROUPE_CHECK(ev.HasEvent() && !ev.HasBytes() && ev.GetBase() == parsed);
  TROUPE_CHECK(ev.Get<E>() == parsed) << "a second Get parsed again";
  (void)parsed->ToString();
  // What the node would send on: serializes, and parses back to the same message.
  std::string wire;
  TROUPE_CHECK(parsed->SerializeToString(&wire));
  std::unique_ptr<E> reparsed = E::Load(wire);
  TROUPE_CHECK(reparsed != nullptr);
  std::string rewire;
  TROUPE_CHECK(reparsed->SerializeToString(&rewire));
  TROUPE_CHECK(rewire == wire) << "serialize/parse is not a fixpoint";
}

}  // namespace

void FuzzEventRecords(std::string_view data) {
  InputReader in(data);
  interconnect::internal::Frame frame;
  frame.kind = FrameKind::kData;
  frame.event_count = in.U16();
  frame.sequence = 1;
  frame.payload = in.Rest();

  uint32_t whole = 0;
  if (!CheckRecordsRoundTrip(frame, &whole)) {
    return;
  }

  std::vector<EventHandlePtr> events;
  TROUPE_CHECK(interconnect::internal::DecodeEvents(frame, [&](EventHandlePtr ev) {
                 TROUPE_CHECK(ev != nullptr && !ev->HasEvent());
                 events.push_back(std::move(ev));
               }).ok());
  TROUPE_CHECK(events.size() == whole);
  // The receiver's view: chunks must start, continue and complete in turn within this frame.
  interconnect::internal::RecordDecoder records(/*max_event_size=*/1u << 20);
  size_t completed = 0;
  absl::Status assembled = records.Decode(frame, [&](EventHandlePtr ev) {
    TROUPE_CHECK(ev != nullptr && !ev->HasEvent());
    ++completed;
  });
  if (assembled.ok()) {
    TROUPE_CHECK(completed >= whole);
  } else {
    TROUPE_CHECK(absl::IsDataLoss(assembled) && completed == 0) << assembled;
  }

  for (EventHandlePtr& ev : events) {
    (void)ev->ToString();
    Parse<EvPoison>(*ev);
    Parse<EvUndelivered>(*ev);
    Parse<EvFuzzPayload>(*ev);
  }
}

}  // namespace troupe::fuzz
