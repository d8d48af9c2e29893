// SPDX-License-Identifier: Apache-2.0
//
// wire_bench: cost of the interconnect's wire format (interconnect/internal/wire.h), no sockets.
//
// What is measured, on one thread:
//   - BM_EncodeFrames/body:B   events per second into frames of up to 64 KiB of payload: the
//                              record header, the body copy, the header and the two XXH3 sums.
//   - BM_DecodeFrames/body:B   events per second out of such a stream, fed in 64 KiB reads as a
//                              socket would: frame split, both checksums, record checks and one
//                              EventHandle (with its body bytes) per event.
// B = 64 is the "64-byte events" target's size; B = 65536 measures bytes per second
// (SetBytesProcessed counts bodies only). Why: every cross-node event pays both; this bounds what
// one session thread can carry before any syscall. Excluded: protobuf serialization of the body
// (done once by EventHandle::Serialize, before the encoder) and the socket.
//
//   build/release/bench/interconnect/wire_bench
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

#include "actors/event.h"
#include "interconnect/internal/wire.h"

namespace troupe::interconnect::internal {
namespace {

constexpr size_t kFramePayload = 64 << 10;
constexpr size_t kReadSize = 64 << 10;

EventHandle MakeHandle(size_t body) {
  return EventHandle(0x01000001, ActorId(2, 1, 100, 7), ActorId(1, 1, 200, 9),
                     std::string(body, 'p'), kTrackDelivery, 42);
}

// Encodes `events` events into `out`, cutting frames at kFramePayload.
void Encode(const EventHandle& ev, int64_t events, std::string* out) {
  FrameEncoder encoder;
  uint64_t sequence = 0;
  for (int64_t i = 0; i < events; ++i) {
    (void)encoder.Add(ev);
    if (encoder.payload_size() >= kFramePayload) {
      ++sequence;
      encoder.Finish(sequence, /*ack=*/0, out);
    }
  }
  if (encoder.event_count() > 0) {
    ++sequence;
    encoder.Finish(sequence, /*ack=*/0, out);
  }
}

void BM_EncodeFrames(benchmark::State& state) {
  const auto body = static_cast<size_t>(state.range(0));
  const EventHandle ev = MakeHandle(body);
  const int64_t batch = std::max<int64_t>(1, (16 << 20) / static_cast<int64_t>(body + 76));
  std::string out;
  for (auto _ : state) {
    out.clear();
    Encode(ev, batch, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * static_cast<int64_t>(body));
}
BENCHMARK(BM_EncodeFrames)->ArgName("body")->Arg(64)->Arg(65536);

void BM_DecodeFrames(benchmark::State& state) {
  const auto body = static_cast<size_t>(state.range(0));
  const int64_t batch = std::max<int64_t>(1, (16 << 20) / static_cast<int64_t>(body + 76));
  std::string stream;
  Encode(MakeHandle(body), batch, &stream);
  for (auto _ : state) {
    FrameDecoder decoder;
    int64_t decoded = 0;
    for (size_t at = 0; at < stream.size(); at += kReadSize) {
      decoder.Append(std::string_view(stream).substr(at, kReadSize));
      Frame frame;
      while (true) {
        absl::StatusOr<bool> got = decoder.Next(&frame);
        if (!got.ok() || !*got) {
          break;
        }
        (void)DecodeEvents(frame, [&decoded](EventHandlePtr ev) {
          benchmark::DoNotOptimize(ev.get());
          ++decoded;
        });
      }
    }
    if (decoded != batch) {
      state.SkipWithError("decoded a different number of events than encoded");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * static_cast<int64_t>(body));
}
BENCHMARK(BM_DecodeFrames)->ArgName("body")->Arg(64)->Arg(65536);

}  // namespace
}  // namespace troupe::interconnect::internal
