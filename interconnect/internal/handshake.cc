// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/handshake.h"

#include <algorithm>
#include <array>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "interconnect/internal/little_endian.h"

namespace troupe::interconnect::internal {

void AppendHandshake(const proto::Handshake& handshake, std::string* out) {
  const std::string body = handshake.SerializeAsString();
  std::array<char, 8> prefix = {};
  Put32(prefix.data(), kHandshakeMagic);
  Put32(prefix.data() + 4, static_cast<uint32_t>(body.size()));
  out->append(prefix.data(), prefix.size());
  out->append(body);
}

absl::StatusOr<std::optional<proto::Handshake>> HandshakeReader::Next() {
  if (consumed_ > 0) {
    return absl::FailedPreconditionError("the handshake was already read");
  }
  // A wrong magic is refused as soon as its bytes are in.
  if (!internal::CouldStartWith(buffer_, kHandshakeMagic)) {
    return absl::DataLossError("the peer did not start with a Troupe handshake");
  }
  if (buffer_.size() < 8) {
    return std::nullopt;
  }
  const uint32_t length = Get32(buffer_.data() + 4);
  if (length > kMaxHandshakeSize) {
    return absl::DataLossError(absl::StrFormat("handshake of %u bytes exceeds the limit of %u",
                                               length, kMaxHandshakeSize));
  }
  if (buffer_.size() < 8 + length) {
    return std::nullopt;
  }
  proto::Handshake handshake;
  if (!handshake.ParseFromArray(buffer_.data() + 8, static_cast<int>(length))) {
    return absl::DataLossError("the handshake does not parse");
  }
  consumed_ = 8 + length;
  return handshake;
}

namespace {

// A handshake without min_protocol_version comes from a node that speaks one version.
uint32_t PeerOldest(const proto::Handshake& peer) {
  return peer.min_protocol_version() != 0 ? peer.min_protocol_version() : peer.protocol_version();
}

void Announce(const ProtocolRange& range, proto::Handshake* hs) {
  hs->set_protocol_version(range.newest);
  hs->set_min_protocol_version(range.oldest);
  for (const std::string& feature : range.features) {
    hs->add_features(feature);
  }
}

}  // namespace

std::string RangeText(uint32_t oldest, uint32_t newest) {
  return oldest == newest ? absl::StrCat(newest) : absl::StrCat(oldest, "..", newest);
}

SessionProtocol AgreeProtocol(const proto::Handshake& peer, const ProtocolRange& self) {
  SessionProtocol agreed;
  agreed.version = std::min(peer.protocol_version(), self.newest);
  for (const std::string& feature : self.features) {
    if (absl::c_linear_search(peer.features(), feature) &&
        !absl::c_linear_search(agreed.features, feature)) {
      agreed.features.push_back(feature);
      agreed.leave = agreed.leave || feature == kFeatureLeave;
    }
  }
  return agreed;
}

absl::Status CheckHandshake(const proto::Handshake& peer, const LocalIdentity& self,
                            std::optional<NodeId> dialed, std::optional<NodeId> certified) {
  const uint32_t peer_newest = peer.protocol_version();
  const uint32_t peer_oldest = PeerOldest(peer);
  if (peer_oldest > peer_newest) {
    return absl::FailedPreconditionError(
        absl::StrFormat("node %u announces protocol versions %u..%u, an empty range",
                        peer.from_node(), peer_oldest, peer_newest));
  }
  if (peer_newest < self.protocol.oldest || peer_oldest > self.protocol.newest) {
    return absl::FailedPreconditionError(
        absl::StrFormat("node %u speaks protocol version %s; this node speaks %s", peer.from_node(),
                        RangeText(peer_oldest, peer_newest),
                        RangeText(self.protocol.oldest, self.protocol.newest)));
  }
  if (peer.cluster_id() != self.cluster_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", peer.from_node(), " belongs to cluster \"", peer.cluster_id(),
                     "\"; this node belongs to \"", self.cluster_id, "\""));
  }
  if (peer.to_node() != self.node) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "node %u wanted node %u; this is node %u", peer.from_node(), peer.to_node(), self.node));
  }
  if (dialed.has_value()) {
    if (peer.from_node() != *dialed) {
      return absl::FailedPreconditionError(
          absl::StrFormat("dialed node %u but node %u answered", *dialed, peer.from_node()));
    }
  } else if (peer.from_node() == self.node || !self.is_member ||
             !self.is_member(peer.from_node())) {
    return absl::FailedPreconditionError(
        absl::StrFormat("node %u is not another node of this cluster's table", peer.from_node()));
  }
  if (certified.has_value() && peer.from_node() != *certified) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "node %u presented a certificate for node %u", peer.from_node(), *certified));
  }
  if (peer.incarnation() == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("node %u sent incarnation 0", peer.from_node()));
  }
  return absl::OkStatus();
}

proto::Handshake MakeSessionHandshake(const LocalIdentity& self, NodeId peer,
                                      uint64_t peer_incarnation, uint64_t received,
                                      uint64_t max_frame_payload, uint64_t max_event_size) {
  proto::Handshake hs;
  Announce(self.protocol, &hs);
  hs.set_cluster_id(self.cluster_id);
  hs.set_from_node(self.node);
  hs.set_to_node(peer);
  hs.set_incarnation(self.incarnation);
  hs.set_peer_incarnation(peer_incarnation);
  hs.set_received(received);
  hs.set_max_frame_payload(max_frame_payload);
  hs.set_max_event_size(max_event_size);
  return hs;
}

proto::Handshake MakeRefusal(const LocalIdentity& self, std::string_view reason) {
  proto::Handshake refusal;
  Announce(self.protocol, &refusal);
  refusal.set_cluster_id(self.cluster_id);
  refusal.set_from_node(self.node);
  refusal.set_incarnation(self.incarnation);
  // A refusal longer than the handshake limit would itself be refused as garbage.
  refusal.set_refusal(std::string(reason.substr(0, kMaxHandshakeSize / 2)));
  return refusal;
}

}  // namespace troupe::interconnect::internal
