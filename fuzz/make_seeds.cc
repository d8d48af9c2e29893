// SPDX-License-Identifier: Apache-2.0
//
// fuzz_make_seeds: writes the committed seed corpora, fuzz/corpus/<target>/<name>, in the input
// layouts of fuzz/targets.h: valid frames, handshakes, event records and configs as Troupe
// produces them, each also cut in a few splits, and a few malformed ones. Run it after changing a
// layout or the wire format, from the repository root:
//
//   build/release/fuzz/fuzz_make_seeds fuzz
//
// It overwrites the files it writes and leaves others alone.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "fuzz/input.h"
#include "fuzz/targets.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/internal/wire.h"
#include "interconnect/protocol.h"
#include "proto/events.pb.h"
#include "proto/interconnect.pb.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::fuzz {
namespace {

using interconnect::internal::AppendControlFrame;
using interconnect::internal::AppendRawFrame;
using interconnect::internal::FrameEncoder;
using interconnect::internal::FrameKind;

// The type fuzz_event_records parses as ut::TestPayload (event_records_target.cc).
constexpr EventType kEvFuzzPayload = EventSpaceBegin(kUserEventSpace + 0x200);

std::filesystem::path root;
int written = 0;

void Write(std::string_view target, std::string_view name, std::string_view bytes) {
  const std::filesystem::path dir = root / "corpus" / target;
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ++written;
}

// -- event records ------------------------------------------------------------------------------

std::string PayloadBody(uint64_t seq, std::string text, std::vector<uint32_t> values) {
  ut::TestPayload payload;
  payload.set_seq(seq);
  payload.set_text(std::move(text));
  for (uint32_t value : values) {
    payload.add_values(value);
  }
  return payload.SerializeAsString();
}

std::string UndeliveredBody(UndeliveredReason reason, bool unsure) {
  std::string bytes;
  EvUndelivered(reason, kEvFuzzPayload, /*cookie=*/42, unsure).SerializeToString(&bytes);
  return bytes;
}

// Adds an event of `type` with serialized `body`, from node 1 to node 2, to `encoder`.
void AddEvent(FrameEncoder& encoder, EventType type, std::string body, uint64_t cookie) {
  const EventHandle ev(type, ActorId(2, 1, 100 + cookie, 7), ActorId(1, 3, 200 + cookie, 9),
                       std::move(body), kTrackDelivery, cookie, ActorId(2, 0, 5, 6),
                       /*trace_id=*/cookie + 1000);
  (void)encoder.Add(ev);
}

// Returns the records of a frame payload (header stripped) holding the given events.
std::string Records(FrameEncoder& encoder) {
  std::string frame;
  encoder.Finish(1, 0, &frame);
  return frame.substr(interconnect::internal::kFrameHeaderSize);
}

void WriteEventRecordSeeds() {
  constexpr std::string_view kTarget = "fuzz_event_records";
  auto seed = [&](std::string_view name, uint16_t count, std::string_view payload) {
    std::string input;
    PutU16(count, &input);
    input += payload;
    Write(kTarget, name, input);
  };
  FrameEncoder encoder;
  AddEvent(encoder, kEvPoison, proto::Poison().SerializeAsString(), 1);
  AddEvent(encoder, kEvUndelivered, UndeliveredBody(UndeliveredReason::kTooLarge, true), 2);
  AddEvent(encoder, kEvFuzzPayload, PayloadBody(7, "hello", {1, 2, 300}), 3);
  const std::string three = Records(encoder);
  seed("three_events", 3, three);
  seed("count_too_high", 4, three);
  seed("count_too_low", 2, three);
  seed("truncated", 3, std::string_view(three).substr(0, three.size() - 3));

  AddEvent(encoder, kEvFuzzPayload, PayloadBody(1, std::string(200, 'x'), {}), 1);
  seed("payload_long_text", 1, Records(encoder));
  AddEvent(encoder, kEvUndelivered, UndeliveredBody(UndeliveredReason::kDisconnected, false), 1);
  seed("undelivered", 1, Records(encoder));
  AddEvent(encoder, kEvFuzzPayload, "\xff\xff\xff", 1);
  seed("payload_does_not_parse", 1, Records(encoder));
  AddEvent(encoder, kEvUndelivered, "\x08", 1);
  seed("undelivered_truncated_varint", 1, Records(encoder));
  AddEvent(encoder, kEvPoison,
           "\x12\x03"
           "abc",
           1);
  seed("poison_unknown_field", 1, Records(encoder));
  AddEvent(encoder, kEvBootstrap, "", 1);
  seed("bodyless", 1, Records(encoder));
  // A chunked event whole in one frame, a small event between its chunks, and chunks out of turn.
  const EventHandle chunked(kEvFuzzPayload, ActorId(2, 1, 100, 7), ActorId(1, 3, 200, 9),
                            PayloadBody(5, std::string(40, 'c'), {7}), kTrackDelivery, 5);
  const std::string_view body = chunked.bytes();
  encoder.AddFirstChunk(chunked, 10);
  AddEvent(encoder, kEvPoison, proto::Poison().SerializeAsString(), 6);
  encoder.AddNextChunk(body.substr(10, 20));
  encoder.AddNextChunk(body.substr(30));
  seed("chunked", 4, Records(encoder));
  encoder.AddNextChunk(body.substr(10));
  seed("next_chunk_alone", 1, Records(encoder));
  encoder.AddFirstChunk(chunked, 10);
  encoder.AddFirstChunk(chunked, 10);
  seed("first_chunk_twice", 2, Records(encoder));
  seed("empty", 0, "");
}

// -- frames -------------------------------------------------------------------------------------

// A session's traffic: two data frames of real events, a control frame acknowledging 2, and the
// frames of a node's leaving.
std::string SessionBytes() {
  std::string stream;
  FrameEncoder encoder;
  AddEvent(encoder, kEvPoison, "", 1);
  AddEvent(encoder, kEvFuzzPayload, PayloadBody(2, "two", {2}), 2);
  encoder.Finish(/*sequence=*/1, /*ack=*/0, &stream);
  AddEvent(encoder, kEvUndelivered, UndeliveredBody(UndeliveredReason::kShutdown, false), 3);
  encoder.Finish(/*sequence=*/2, /*ack=*/1, &stream);
  AppendControlFrame(/*ack=*/2, &stream);
  AppendControlFrame(/*ack=*/2, &stream, FrameKind::kLeaving);
  AppendControlFrame(/*ack=*/2, &stream, FrameKind::kStopped);
  AppendControlFrame(/*ack=*/2, &stream, FrameKind::kGoodbye);
  return stream;
}

// Options byte: mode, limit selector (0..3), frames sent by the session (0..7), corruption.
uint8_t FrameOptions(bool structured, uint8_t limit, uint8_t sent, bool corrupt = false) {
  return static_cast<uint8_t>((structured ? kStructured : 0) | (limit << kFrameLimitShift) |
                              (sent << kFrameSentShift) | (corrupt ? kFrameCorrupt : 0));
}

struct FrameSpec {
  uint8_t head;  // bits 0-1 kind selector, bit 2 explicit sequence
  uint8_t raw_kind = 0;
  uint8_t sequence = 0;
  uint8_t event_count = 0;
  uint8_t ack = 0;
  std::string payload = {};
};

void PutFrameSpec(const FrameSpec& spec, std::string* out) {
  PutByte(spec.head, out);
  if ((spec.head & 3) == 3) {
    PutByte(spec.raw_kind, out);
  }
  if ((spec.head & 4) != 0) {
    PutByte(spec.sequence, out);
  }
  PutByte(spec.event_count, out);
  PutByte(spec.ack, out);
  PutU16(static_cast<uint16_t>(spec.payload.size()), out);
  *out += spec.payload;
}

void WriteFrameSeeds() {
  constexpr std::string_view kTarget = "fuzz_frame_decoder";
  const std::string session = SessionBytes();
  auto raw = [&](std::string_view name, uint8_t options, const std::vector<uint8_t>& splits,
                 std::string_view stream) {
    std::string input;
    PutByte(options, &input);
    PutSplitPlan(splits, &input);
    input += stream;
    Write(kTarget, name, input);
  };
  raw("raw_session_whole", FrameOptions(false, 2, 2), {}, session);
  raw("raw_session_bytewise", FrameOptions(false, 2, 2), {1}, session);
  raw("raw_session_odd_splits", FrameOptions(false, 2, 3), {7, 0, 48, 13}, session);
  raw("raw_garbage_http", FrameOptions(false, 1, 0), {3}, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string flipped = session;
  flipped[interconnect::internal::kFrameHeaderSize + 10] ^= 0x20;
  raw("raw_payload_flipped", FrameOptions(false, 2, 2), {5}, flipped);
  raw("raw_truncated", FrameOptions(false, 2, 2), {}, session.substr(0, session.size() - 30));
  std::string over_limit = session;
  {
    FrameEncoder big;
    AddEvent(big, kEvFuzzPayload, PayloadBody(4, std::string(300, 'x'), {}), 4);
    big.Finish(/*sequence=*/3, /*ack=*/2, &over_limit);
  }
  raw("raw_over_limit", FrameOptions(false, 0, 1), {}, over_limit);
  std::string bad_version = session;
  bad_version[4] = 2;
  raw("raw_bad_version", FrameOptions(false, 2, 1), {}, bad_version);

  FrameEncoder encoder;
  AddEvent(encoder, kEvFuzzPayload, PayloadBody(1, "a", {1}), 1);
  AddEvent(encoder, kEvPoison, "", 2);
  const std::string two_events = Records(encoder);
  AddEvent(encoder, kEvUndelivered, UndeliveredBody(UndeliveredReason::kNoRoute, true), 3);
  const std::string one_event = Records(encoder);
  auto structured = [&](std::string_view name, uint8_t options, const std::vector<uint8_t>& splits,
                        std::string_view corruption, const std::vector<FrameSpec>& specs) {
    std::string input;
    PutByte(options, &input);
    PutSplitPlan(splits, &input);
    input += corruption;
    for (const FrameSpec& spec : specs) {
      PutFrameSpec(spec, &input);
    }
    Write(kTarget, name, input);
  };
  const FrameSpec data2{.head = 0, .event_count = 2, .ack = 0, .payload = two_events};
  const FrameSpec data1{.head = 0, .event_count = 1, .ack = 1, .payload = one_event};
  const FrameSpec control{.head = 1, .ack = 2};
  structured("struct_in_order", FrameOptions(true, 2, 2), {}, "", {data2, data1, control});
  structured("struct_in_order_split", FrameOptions(true, 1, 3), {9, 60}, "",
             {data2, data1, control, data1});
  structured("struct_duplicate_then_gap", FrameOptions(true, 2, 2), {}, "",
             {{.head = 4, .sequence = 1, .event_count = 2, .payload = two_events},
              {.head = 4, .sequence = 1, .event_count = 2, .payload = two_events},
              {.head = 4, .sequence = 3, .event_count = 1, .payload = one_event}});
  structured("struct_sequence_zero", FrameOptions(true, 2, 0), {}, "",
             {{.head = 4, .sequence = 0, .event_count = 1, .payload = one_event}});
  std::string corruption;
  PutU16(100, &corruption);
  PutByte(0x40, &corruption);
  structured("struct_corrupt_byte", FrameOptions(true, 2, 2, true), {17}, corruption,
             {data2, data1, control});
  structured("struct_unknown_kind", FrameOptions(true, 2, 0), {}, "",
             {data2, {.head = 3, .raw_kind = 7}});
  structured("struct_control_with_payload", FrameOptions(true, 2, 0), {}, "",
             {{.head = 1, .event_count = 0, .payload = "xy"}});
  structured("struct_count_exceeds_payload", FrameOptions(true, 2, 0), {}, "",
             {{.head = 0, .event_count = 9, .payload = one_event}});
  structured("struct_records_overrun", FrameOptions(true, 2, 0), {}, "",
             {{.head = 0, .event_count = 1, .payload = two_events}});
  structured("struct_ack_beyond_sent", FrameOptions(true, 2, 1), {}, "",
             {data2, {.head = 1, .ack = 5}});
}

// -- handshakes ---------------------------------------------------------------------------------

struct Identity {
  uint8_t node = 1;
  uint8_t dialed = 2;
  uint8_t certified = 2;
  uint8_t members = 0b110;  // nodes 1 and 2
  uint8_t cluster = 1;      // kClusterIds[1]: "shop"
};

struct PeerHandshake {
  uint8_t version = 0;  // ours
  uint8_t cluster = 1;
  uint8_t from = 2;
  uint8_t to = 1;
  uint8_t incarnation = 5;
  uint8_t peer_incarnation = 0;
  uint8_t received = 0;
};

void WriteHandshakeSeeds() {
  constexpr std::string_view kTarget = "fuzz_handshake";
  auto prefix = [](uint8_t options, const std::vector<uint8_t>& splits, const Identity& self) {
    std::string input;
    PutByte(options, &input);
    PutSplitPlan(splits, &input);
    PutByte(self.node, &input);
    PutByte(self.dialed, &input);
    PutByte(self.certified, &input);
    PutByte(self.members, &input);
    PutByte(self.cluster, &input);
    return input;
  };
  auto structured = [&](std::string_view name, uint8_t options, const std::vector<uint8_t>& splits,
                        std::string_view corruption, const PeerHandshake& peer,
                        std::string_view trailing) {
    std::string input = prefix(kStructured | options, splits, Identity());
    input += corruption;
    for (uint8_t field : {peer.version, peer.cluster, peer.from, peer.to, peer.incarnation,
                          peer.peer_incarnation, peer.received}) {
      PutByte(field, &input);
    }
    input += trailing;
    Write(kTarget, name, input);
  };
  std::string first_frame;
  AppendControlFrame(0, &first_frame);
  structured("struct_incoming", 0, {}, "", {}, first_frame);
  structured("struct_incoming_bytewise", 0, {1}, "", {}, first_frame);
  structured("struct_outgoing", kHandshakeDialed, {5, 0, 11}, "", {}, "");
  structured("struct_certified", kHandshakeCertified, {}, "", {}, first_frame);
  structured("struct_certified_outgoing", kHandshakeDialed | kHandshakeCertified, {}, "",
             {.from = 2, .to = 1}, "");
  structured("struct_resuming", kHandshakeDialed, {}, "", {.peer_incarnation = 9, .received = 17},
             first_frame);
  structured("struct_other_cluster", 0, {}, "", {.cluster = 2}, "");
  structured("struct_other_version", 0, {}, "", {.version = 7}, "");
  structured("struct_wrong_to_node", 0, {}, "", {.to = 3}, "");
  structured("struct_incarnation_zero", 0, {}, "", {.incarnation = 0}, "");
  structured("struct_not_member", 0, {}, "", {.from = 6}, "");
  std::string corrupt_magic;
  PutU16(2, &corrupt_magic);
  PutByte(0x10, &corrupt_magic);
  structured("struct_corrupt_magic", kHandshakeCorrupt, {}, corrupt_magic, {}, "");
  std::string corrupt_body;
  PutU16(12, &corrupt_body);
  PutByte(0x80, &corrupt_body);
  structured("struct_corrupt_body", kHandshakeCorrupt, {3}, corrupt_body, {}, first_frame);

  auto raw = [&](std::string_view name, const std::vector<uint8_t>& splits,
                 std::string_view stream) {
    Write(kTarget, name, prefix(0, splits, Identity()) + std::string(stream));
  };
  proto::Handshake valid;
  valid.set_protocol_version(interconnect::kNewestProtocolVersion);
  valid.set_min_protocol_version(interconnect::kOldestProtocolVersion);
  valid.add_features(interconnect::kFeatureLeave);
  valid.set_cluster_id("shop");
  valid.set_from_node(2);
  valid.set_to_node(1);
  valid.set_incarnation(123456789);
  std::string stream;
  interconnect::internal::AppendHandshake(valid, &stream);
  raw("raw_valid", {2}, stream + first_frame);
  raw("raw_ssh_banner", {}, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
  raw("raw_tls_client_hello", {}, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
  std::string too_long;
  PutU32(interconnect::internal::kHandshakeMagic, &too_long);
  PutU32(1u << 20, &too_long);
  raw("raw_length_over_limit", {}, too_long);
  std::string unparsable;
  PutU32(interconnect::internal::kHandshakeMagic, &unparsable);
  PutU32(3, &unparsable);
  unparsable += "\xff\xff\xff";
  raw("raw_body_does_not_parse", {}, unparsable);
  raw("raw_truncated", {4}, std::string_view(stream).substr(0, stream.size() - 2));
}

// -- configs ------------------------------------------------------------------------------------

void WriteConfigSeeds() {
  constexpr std::string_view kTarget = "fuzz_config";
  // README.md, "Configuration".
  Write(kTarget, "readme_pools.conf",
        "node_id: 1\n"
        "default_pool: \"User\"\n"
        "pools { name: \"System\" threads: 1 }\n"
        "pools { name: \"User\" threads: 2 spin_time_us: 20 max_events_per_activation: 100 "
        "max_activation_time_us: 10000 }\n"
        "pools { name: \"Batch\" threads: 1 fair: true stuck_threshold_ms: 5000 }\n"
        "scheduler { resolution_us: 1000 }\n"
        "log { level: \"info\" }\n");
  // README.md, "Several nodes".
  Write(kTarget, "readme_nodes.conf",
        "node_id: 1\n"
        "interconnect {\n"
        "  cluster_id: \"shop\"\n"
        "  nodes { node_id: 1 host: \"10.0.0.1\" port: 19001 }\n"
        "  nodes { node_id: 2 host: \"10.0.0.2\" port: 19001 }\n"
        "  dead_peer_timeout_ms: 3000\n"
        "}\n");
  // examples/troupe_cluster.cc, ClusterConfig.
  Write(kTarget, "troupe_cluster.conf",
        "# Written by troupe_cluster.\n"
        "node_id: 1\n"
        "default_pool: \"User\"\n"
        "pools { name: \"System\" threads: 1 spin_time_us: 20 }\n"
        "pools { name: \"User\" threads: 1 spin_time_us: 20 }\n"
        "pools { name: \"IC\" threads: 1 spin_time_us: 20 }\n"
        "scheduler { resolution_us: 1000 }\n"
        "log { level: \"info\" }\n"
        "interconnect {\n"
        "  cluster_id: \"local\"\n"
        "  dead_peer_timeout_ms: 10000\n"
        "  nodes { node_id: 1 host: \"127.0.0.1\" port: 40001 }\n"
        "  nodes { node_id: 2 host: \"127.0.0.1\" port: 40002 }\n"
        "  nodes { node_id: 3 host: \"127.0.0.1\" port: 40003 }\n"
        "}\n");
  Write(kTarget, "limits.conf",
        "max_mailboxes: 65536 max_services: 1024\n"
        "pools { name: \"P\" default_mailbox: MAILBOX_KIND_PRIORITY }\n"
        "interconnect { heartbeat_interval_ms: 100 dead_peer_timeout_ms: 1000 "
        "max_unacked_bytes: 1048576 max_event_size: 65536 max_queued_bytes: 4194304 "
        "max_redial_delay_ms: 5000 }\n");
  Write(kTarget, "empty.conf", "");
  Write(kTarget, "bad_threads.conf", "pools { name: \"A\" threads: 0 }\n");
  Write(kTarget, "bad_default_pool.conf", "default_pool: \"Nope\"\npools { name: \"A\" }\n");
  Write(kTarget, "bad_duplicate_node.conf",
        "interconnect { nodes { node_id: 2 host: \"a\" port: 1 } "
        "nodes { node_id: 2 host: \"b\" port: 2 } }\n");
  Write(kTarget, "bad_unknown_field.conf", "node_id: 1\nthreads: 4\n");
  Write(kTarget, "bad_unterminated.conf", "pools { name: \"A\" threads: 1\n");
  Write(kTarget, "bad_log_level.conf", "log { level: \"loud\" }\n");
}

}  // namespace
}  // namespace troupe::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <fuzz directory>  (writes <dir>/corpus/<target>/...)\n",
                 argv[0]);
    return 2;
  }
  troupe::fuzz::root = argv[1];
  troupe::fuzz::WriteFrameSeeds();
  troupe::fuzz::WriteHandshakeSeeds();
  troupe::fuzz::WriteEventRecordSeeds();
  troupe::fuzz::WriteConfigSeeds();
  std::printf("fuzz_make_seeds: wrote %d seeds under %s/corpus\n", troupe::fuzz::written, argv[1]);
  return 0;
}
