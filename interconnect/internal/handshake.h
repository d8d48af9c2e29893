// SPDX-License-Identifier: Apache-2.0
//
// The handshake that opens every interconnect connection: who is talking, in which cluster, with
// which protocol, and whether the connection resumes a living session.
//
// On the wire a handshake is the magic "TRPH", a little-endian uint32 length (at most
// kMaxHandshakeSize) and a serialized proto::Handshake. Each side sends one and checks the
// other's with CheckHandshake before any frame:
//   | check                                             | refusal (kFailedPrecondition) names    |
//   |---------------------------------------------------|----------------------------------------|
//   | its range of protocol versions (min_protocol_     | both ranges                            |
//   | version..protocol_version) overlaps ours          |                                        |
//   | cluster_id equals ours                            | both cluster ids                       |
//   | to_node is our node id                            | the node it wanted and ours            |
//   | from_node is the node we dialed (outgoing), or    | the node it claims and what we expect  |
//   | a member other than ours (incoming; is_member)    |                                        |
//   | from_node is the node its certificate names, when | the node it claims and the one its     |
//   | the transport authenticates peers (TLS)           | certificate names                      |
// The accepting side answers a refused handshake with a refusal (MakeRefusal: a handshake whose
// `refusal` says why) before it closes, so the dialler learns the reason; each side also announces
// the largest frame payload it accepts (`max_frame_payload`), which the other never exceeds, and
// the largest event (`max_event_size`), which the other refuses at its sender with
// Undelivered{kTooLarge}.
// A session then uses the newest version both speak and the features both announce
// (AgreeProtocol; interconnect/protocol.h).
// Garbage instead of a handshake (bad magic, a length over the limit, bytes that do not parse) is
// kDataLoss. A peer whose incarnation differs from the one of our current session with it has
// restarted: the old session ends (its unacknowledged events are reported) and a new one starts.
//
// Thread-safety: thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "interconnect/protocol.h"
#include "proto/interconnect.pb.h"

namespace troupe::interconnect::internal {

inline constexpr uint32_t kHandshakeMagic = 0x48505254;  // "TRPH" read as little-endian
inline constexpr size_t kMaxHandshakeSize = 4096;

// What this node says about itself in a handshake and checks the peer's against.
struct LocalIdentity {
  std::string cluster_id;
  NodeId node = 0;
  uint64_t incarnation = 0;
  // The protocol versions and features announced (this build's unless a test says otherwise).
  ProtocolRange protocol;
  // Tells whether a node is a member of the cluster (asked of the nameservice at check time): who
  // may connect to us. Unset: nobody.
  std::function<bool(NodeId)> is_member;
};

// Appends the framed `handshake` to `out`.
void AppendHandshake(const proto::Handshake& handshake, std::string* out);

// Takes the peer's handshake from the start of a connection's bytes.
class HandshakeReader {
 public:
  // Adds received bytes.
  void Append(std::string_view bytes) { buffer_.append(bytes); }
  // Returns the handshake once all its bytes are in (nullopt before); kDataLoss when the bytes
  // are not a handshake. Bytes after it (the first frames) are kept: see rest().
  absl::StatusOr<std::optional<proto::Handshake>> Next();
  // Returns the bytes received after the handshake.
  std::string_view rest() const {
    const std::string_view all = buffer_;
    return all.substr(consumed_);
  }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
};

// Checks a peer's handshake (see the table above). `dialed` is the node we connected to for an
// outgoing connection, nullopt for an incoming one.
// `certified` is the node id the transport proved from the peer's certificate (nullopt when the
// transport does not authenticate).
absl::Status CheckHandshake(const proto::Handshake& peer, const LocalIdentity& self,
                            std::optional<NodeId> dialed,
                            std::optional<NodeId> certified = std::nullopt);

// What a session with a peer whose handshake passed CheckHandshake uses.
struct SessionProtocol {
  // The newest version both sides speak.
  uint32_t version = 0;
  // The features both announce, in our announcement's order.
  std::vector<std::string> features;
  // Whether both have kFeatureLeave.
  bool leave = false;
};
SessionProtocol AgreeProtocol(const proto::Handshake& peer, const ProtocolRange& self);

// Returns "3" or "3..4": a range as the logs and refusals name it.
std::string RangeText(uint32_t oldest, uint32_t newest);

// Returns the handshake `self` sends `peer`: `peer_incarnation` names the session it resumes (0:
// none), `received` the last frame it received in order, and the largest frame payload and event
// it accepts.
proto::Handshake MakeSessionHandshake(const LocalIdentity& self, NodeId peer,
                                      uint64_t peer_incarnation, uint64_t received,
                                      uint64_t max_frame_payload, uint64_t max_event_size);

// Returns the answer that refuses a dialler's connection for `reason`.
proto::Handshake MakeRefusal(const LocalIdentity& self, std::string_view reason);

}  // namespace troupe::interconnect::internal
