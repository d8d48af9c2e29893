// SPDX-License-Identifier: Apache-2.0
//
// fuzz_handshake (layout in fuzz/targets.h). Checks, for any input:
//   - HandshakeReader never crashes, refuses garbage with kDataLoss, and reaches the same verdict
//     (the same handshake and the same rest, or the same refusal) whatever the split;
//   - a handshake it accepts is exactly what the prefix announced (magic, length), a second Next
//     is refused, rest() is every byte after it, and re-encoding it reads back the same message;
//   - structured mode: an intact encoded handshake comes back as encoded, and a flipped magic
//     byte is refused;
//   - CheckHandshake accepts only what the table in handshake.h allows (a one-sided check: every
//     accepted handshake meets every row of the table, and a refusal gives a reason, so new
//     refusals may be added without changing this target);
//   - MakeRefusal, whatever the reason's length, makes an answer the dialler can read back, with
//     (a prefix of) the reason.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/check.h"
#include "fuzz/input.h"
#include "fuzz/targets.h"
#include "interconnect/internal/handshake.h"
#include "interconnect/protocol.h"
#include "proto/interconnect.pb.h"

namespace troupe::fuzz {
namespace {

using interconnect::internal::AppendHandshake;
using interconnect::internal::HandshakeReader;
using interconnect::internal::kHandshakeMagic;
using interconnect::internal::kMaxHandshakeSize;

std::string ClusterId(uint8_t selector) {
  return std::string(kClusterIds[selector % kClusterIds.size()]);
}

uint32_t Get32(std::string_view bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  }
  return value;
}

struct Read {
  // Set when the reader produced a handshake (serialized, to compare).
  std::optional<std::string> handshake;
  absl::Status status;
  std::string rest;
};

// Appends each chunk and asks for the handshake after each, as the handshake actor does; keeps
// appending after it (the first frames) so rest() must hold them.
Read ReadHandshake(const std::vector<std::string_view>& chunks) {
  HandshakeReader reader;
  Read out;
  for (std::string_view chunk : chunks) {
    reader.Append(chunk);
    if (out.handshake.has_value()) {
      continue;
    }
    absl::StatusOr<std::optional<proto::Handshake>> got = reader.Next();
    if (!got.ok()) {
      TROUPE_CHECK(absl::IsDataLoss(got.status())) << got.status();
      TROUPE_CHECK(!got.status().message().empty());
      out.status = got.status();
      return out;
    }
    if (got->has_value()) {
      out.handshake = (*got)->SerializeAsString();
      TROUPE_CHECK(absl::IsFailedPrecondition(reader.Next().status()))
          << "a handshake was read twice";
    }
  }
  out.rest = std::string(reader.rest());
  return out;
}

void CheckAccepted(const proto::Handshake& peer, const interconnect::internal::LocalIdentity& self,
                   std::optional<NodeId> dialed, std::optional<NodeId> certified) {
  absl::Status status = interconnect::internal::CheckHandshake(peer, self, dialed, certified);
  if (!status.ok()) {
    TROUPE_CHECK(!status.message().empty()) << status;
    return;
  }
  const uint32_t oldest =
      peer.min_protocol_version() != 0 ? peer.min_protocol_version() : peer.protocol_version();
  TROUPE_CHECK(oldest <= peer.protocol_version() &&
               peer.protocol_version() >= self.protocol.oldest && oldest <= self.protocol.newest);
  const interconnect::internal::SessionProtocol agreed =
      interconnect::internal::AgreeProtocol(peer, self.protocol);
  TROUPE_CHECK(agreed.version >= std::max(oldest, self.protocol.oldest) &&
               agreed.version <= std::min(peer.protocol_version(), self.protocol.newest));
  TROUPE_CHECK(peer.cluster_id() == self.cluster_id);
  TROUPE_CHECK(peer.to_node() == self.node);
  if (dialed.has_value()) {
    TROUPE_CHECK(peer.from_node() == *dialed);
  } else {
    TROUPE_CHECK(peer.from_node() != self.node && self.is_member &&
                 self.is_member(peer.from_node()));
  }
  if (certified.has_value()) {
    TROUPE_CHECK(peer.from_node() == *certified);
  }
  TROUPE_CHECK(peer.incarnation() != 0);
}

// The refusal an acceptor sends must reach the dialler, however long the reason.
void CheckRefusal(const interconnect::internal::LocalIdentity& self, std::string_view reason) {
  std::string bytes;
  AppendHandshake(interconnect::internal::MakeRefusal(self, reason), &bytes);
  HandshakeReader reader;
  reader.Append(bytes);
  absl::StatusOr<std::optional<proto::Handshake>> got = reader.Next();
  TROUPE_CHECK(got.ok() && got->has_value()) << "an unreadable refusal: " << got.status();
  const std::string& refusal = (*got)->refusal();
  TROUPE_CHECK(reason.substr(0, refusal.size()) == refusal);
  TROUPE_CHECK(reason.empty() || !refusal.empty()) << "the reason was lost";
}

}  // namespace

void FuzzHandshake(std::string_view data) {
  InputReader in(data);
  const uint8_t options = in.Byte();
  const SplitPlan plan = ReadSplitPlan(in);
  interconnect::internal::LocalIdentity self;
  self.node = in.Byte();
  const NodeId dialed_node = in.Byte();
  const NodeId certified_node = in.Byte();
  const uint8_t members = in.Byte();
  self.cluster_id = ClusterId(in.Byte());
  self.incarnation = 1;
  if (members != 0) {
    // Nodes 0..7 may be members; an identity without the function admits nobody.
    self.is_member = [members](NodeId node) { return node < 8 && ((members >> node) & 1) != 0; };
  }
  const std::optional<NodeId> dialed =
      (options & kHandshakeDialed) != 0 ? std::optional<NodeId>(dialed_node) : std::nullopt;
  const std::optional<NodeId> certified =
      (options & kHandshakeCertified) != 0 ? std::optional<NodeId>(certified_node) : std::nullopt;

  std::string built;
  std::string_view stream;
  std::optional<std::string> encoded;  // structured, intact: what must come back
  std::string trailing;
  bool magic_corrupted = false;
  if ((options & kStructured) != 0) {
    std::optional<size_t> corrupt_at;
    uint8_t mask = 0;
    if ((options & kHandshakeCorrupt) != 0) {
      corrupt_at = in.U16();
      mask = in.Byte();
      mask = mask == 0 ? 1 : mask;
    }
    proto::Handshake handshake;
    const uint8_t version = in.Byte();
    // 0: this build's range; else a range ending at `version` that starts at half of it (0:
    // a peer that announces one version).
    handshake.set_protocol_version(version == 0 ? interconnect::kNewestProtocolVersion : version);
    handshake.set_min_protocol_version(version == 0 ? interconnect::kOldestProtocolVersion
                                                    : version >> 1);
    handshake.set_cluster_id(ClusterId(in.Byte()));
    handshake.set_from_node(in.Byte());
    handshake.set_to_node(in.Byte());
    handshake.set_incarnation(in.Byte());
    handshake.set_peer_incarnation(in.Byte());
    handshake.set_received(in.Byte());
    AppendHandshake(handshake, &built);
    trailing = std::string(in.Rest());
    built += trailing;
    if (corrupt_at.has_value()) {
      *corrupt_at %= built.size();
      built[*corrupt_at] = static_cast<char>(built[*corrupt_at] ^ mask);
      magic_corrupted = *corrupt_at < 4;
    } else {
      encoded = handshake.SerializeAsString();
    }
    stream = built;
  } else {
    stream = in.Rest();
  }

  const Read split = ReadHandshake(Split(stream, plan));
  const Read whole = ReadHandshake({stream});
  TROUPE_CHECK(split.handshake == whole.handshake) << "the split changed the handshake";
  TROUPE_CHECK(split.status == whole.status)
      << "the split changed the verdict: " << split.status << " vs " << whole.status;
  TROUPE_CHECK(split.rest == whole.rest);

  if (encoded.has_value()) {
    TROUPE_CHECK(whole.handshake == encoded) << whole.status;
    TROUPE_CHECK(whole.rest == trailing);
  }
  if (magic_corrupted) {
    TROUPE_CHECK(!whole.status.ok()) << "a handshake with a corrupt magic was read";
  }
  CheckRefusal(self, stream);
  if (!whole.handshake.has_value()) {
    return;
  }
  // Accepted: the prefix announced it, and the rest is what follows.
  TROUPE_CHECK(stream.size() >= 8 && Get32(stream) == kHandshakeMagic);
  const uint32_t length = Get32(stream.substr(4));
  TROUPE_CHECK(length <= kMaxHandshakeSize && 8 + length <= stream.size());
  TROUPE_CHECK(whole.rest == stream.substr(8 + length));

  proto::Handshake peer;
  TROUPE_CHECK(peer.ParseFromString(*whole.handshake));
  // Re-encoding what was read reads back the same message.
  std::string again;
  AppendHandshake(peer, &again);
  HandshakeReader reader;
  reader.Append(again);
  absl::StatusOr<std::optional<proto::Handshake>> reread = reader.Next();
  if (again.size() - 8 <= kMaxHandshakeSize) {
    TROUPE_CHECK(reread.ok() && reread->has_value()) << reread.status();
    TROUPE_CHECK((*reread)->SerializeAsString() == *whole.handshake);
    TROUPE_CHECK(reader.rest().empty());
  }
  CheckAccepted(peer, self, dialed, certified);
}

}  // namespace troupe::fuzz
