// SPDX-License-Identifier: Apache-2.0
//
// The fuzz targets: one function per decoder that takes untrusted bytes. Each drives the code under
// test with arbitrary input and checks invariants with TROUPE_CHECK, so a violated contract aborts
// like a crash. libFuzzer calls them through fuzz/fuzz_main.cc (build tree build/fuzz, clang,
// TROUPE_FUZZ=ON); fuzz_replay_ut runs every committed corpus and regression input through the
// same functions in every normal build, so each crash found stays a regression test.
//
// Input layouts (InputReader, fuzz/input.h: bytes past the end read as zero):
//
//   fuzz_frame_decoder   options byte, split plan, [u16 position, u8 mask if kCorrupt], body.
//     Raw mode: the body is the byte stream. Structured mode (kStructured): the body is a list of
//     frame specs, each signed with AppendRawFrame so the fuzzer gets past the checksums:
//       u8 head (bits 0-1: 0 data, 1 control, 2 data, 3 raw kind byte follows; bit 2: an explicit
//       u8 sequence follows, else data frames count 1, 2, ...), [u8 kind], [u8 sequence],
//       u8 event_count, u8 ack, u16 payload length, payload.
//     kCorrupt xors one byte of the built stream. Options bits 1-2 pick the decoder's limit
//     (256, 4096, 65536, kDefaultMaxPayload), bits 4-6 how many frames the session has sent (what
//     the peer may acknowledge).
//   fuzz_handshake       options byte, split plan, identity (u8 node, u8 dialed node, u8 node the
//     certificate names, u8 member mask, u8 cluster id), [u16 position, u8 mask if kCorrupt],
//     body.
//     Raw mode: the body is the byte stream. Structured mode: u8 protocol version (0: ours),
//     u8 cluster id, u8 from_node, u8 to_node, u8 incarnation, u8 peer_incarnation, u8 received,
//     then the bytes that follow the handshake.
//   fuzz_event_records   u16 event_count, then the payload of one data frame.
//   fuzz_config          the config text.
//
// Thread-safety: thread-compatible (each call is independent).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace troupe::interconnect::internal {
struct Frame;
}  // namespace troupe::interconnect::internal

namespace troupe::fuzz {

// Option bits of fuzz_frame_decoder and fuzz_handshake.
inline constexpr uint8_t kStructured = 1u << 0;
inline constexpr uint8_t kFrameLimitShift = 1;           // 2 bits
inline constexpr uint8_t kFrameCorrupt = 1u << 3;        // frame decoder
inline constexpr uint8_t kFrameSentShift = 4;            // 3 bits
inline constexpr uint8_t kHandshakeCorrupt = 1u << 1;    // handshake
inline constexpr uint8_t kHandshakeDialed = 1u << 2;     // handshake: an outgoing connection
inline constexpr uint8_t kHandshakeCertified = 1u << 3;  // handshake: the peer has a certificate

// The cluster ids a fuzz input picks from by index (modulo the size).
inline constexpr std::array<std::string_view, 3> kClusterIds = {"", "shop", "local"};

// The frame decoder (FrameDecoder) fed a byte stream in any split, its frames checked against the
// split-free decode and, in structured mode, against what was encoded; then the frames go through
// InboundStream, ParseRecords, RecordDecoder and OutboundStream::Acknowledge as a session's would.
void FuzzFrameDecoder(std::string_view data);

// HandshakeReader fed bytes in any split, then CheckHandshake on what it read.
void FuzzHandshake(std::string_view data);

// ParseRecords, DecodeEvents and a RecordDecoder on one frame's payload, then the lazy protobuf
// parse of every event's body.
void FuzzEventRecords(std::string_view data);

// ParseConfig (with ValidateConfig), then round trips of what it accepts.
void FuzzConfig(std::string_view data);

// The check both record-reading targets make: ParseRecords on `frame` is all or nothing (a
// malformed frame shows no record and fails with kDataLoss) and a valid frame's event_count
// records encode back to its payload byte for byte. Returns whether the frame was valid; sets
// `*whole` (when given) to the number of its whole-event records.
bool CheckRecordsRoundTrip(const interconnect::internal::Frame& frame, uint32_t* whole = nullptr);

struct Target {
  // The executable's name, also its folder under fuzz/corpus/ and fuzz/regressions/.
  std::string_view name;
  void (*run)(std::string_view data);
};

// Returns the four targets.
std::span<const Target> Targets();

}  // namespace troupe::fuzz
