// SPDX-License-Identifier: Apache-2.0
//
// ActorId: the 16-byte address of an actor or a service, valid across nodes.
//
// Layout (fixed by docs/design.md, also the wire layout):
//
//   | field     | bits | meaning                                                              |
//   |-----------|------|----------------------------------------------------------------------|
//   | local_id  | 64   | unique within one node incarnation, never reused                     |
//   | hint      | 32   | index of the mailbox in the node's mailbox table (reused)            |
//   | node word | 32   | bit 31 service flag, bits 20-30 executor pool, bits 0-19 node id     |
//
// A ServiceId is an ActorId with the service flag set whose local_id and hint bytes hold a name of
// at most 12 bytes; a node maps it to a real ActorId through its service table. A default-made
// ActorId is "empty" (all zero) and addresses nobody.
//
// Thread-safety: a value type; thread-compatible.
//
// Example:
//
//   const troupe::ActorId kEcho = troupe::ServiceId("echo");   // constexpr-friendly
//   absl::flat_hash_map<troupe::ActorId, int> seen;             // hashable with absl::Hash
//   std::cout << kEcho;                                          // prints "[svc:echo@0]"
#pragma once

#include <compare>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace troupe {

// Node id 0 means "the node this id is used on".
using NodeId = uint32_t;

class ActorId {
 public:
  static constexpr uint32_t kServiceFlag = 1u << 31;
  static constexpr uint32_t kPoolShift = 20;
  static constexpr uint32_t kMaxPool = (1u << 11) - 1;
  static constexpr uint32_t kMaxNode = (1u << 20) - 1;
  static constexpr size_t kMaxServiceNameSize = 12;

  // Makes the empty id.
  constexpr ActorId() = default;

  // Makes an actor id; `node` must be at most kMaxNode and `pool` at most kMaxPool (masked).
  constexpr ActorId(NodeId node, uint32_t pool, uint64_t local_id, uint32_t hint)
      : local_id_(local_id),
        hint_(hint),
        node_word_((node & kMaxNode) | ((pool & kMaxPool) << kPoolShift)) {}

  // Rebuilds an id from its three raw words (as read from the wire).
  static constexpr ActorId FromRaw(uint64_t local_id, uint32_t hint, uint32_t node_word) {
    ActorId id;
    id.local_id_ = local_id;
    id.hint_ = hint;
    id.node_word_ = node_word;
    return id;
  }

  // -- accessors -------------------------------------------------------------------------------

  constexpr uint64_t local_id() const { return local_id_; }
  constexpr uint32_t hint() const { return hint_; }
  constexpr uint32_t node_word() const { return node_word_; }
  constexpr NodeId node_id() const { return node_word_ & kMaxNode; }
  constexpr uint32_t pool() const { return (node_word_ >> kPoolShift) & kMaxPool; }
  constexpr bool IsService() const { return (node_word_ & kServiceFlag) != 0; }
  constexpr bool IsEmpty() const { return local_id_ == 0 && hint_ == 0 && node_word_ == 0; }
  explicit constexpr operator bool() const { return !IsEmpty(); }

  // Returns a copy with the node id replaced (other fields unchanged).
  constexpr ActorId WithNode(NodeId node) const {
    return FromRaw(local_id_, hint_, (node_word_ & ~kMaxNode) | (node & kMaxNode));
  }

  // Returns the service name (a service id only; trailing zero bytes dropped).
  std::string ServiceName() const;

  // Returns "[node:pool:local_id:hint]" for actors and "[svc:name@node]" for services.
  std::string ToString() const;

  // -- comparison and hashing ------------------------------------------------------------------

  friend constexpr bool operator==(const ActorId&, const ActorId&) = default;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads the defaulted <=> (sorting ids).
  friend constexpr auto operator<=>(const ActorId&, const ActorId&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const ActorId& id) {
    return H::combine(std::move(h), id.local_id_, id.hint_, id.node_word_);
  }

  // Returns a 64-bit mix of all fields, for std::hash and sharding.
  constexpr uint64_t Hash() const {
    uint64_t x =
        local_id_ ^ (static_cast<uint64_t>(hint_) << 32 | node_word_) * 0x9E3779B97F4A7C15u;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDu;
    x ^= x >> 33;
    return x;
  }

 private:
  friend constexpr ActorId ServiceId(std::string_view name, NodeId node);

  uint64_t local_id_ = 0;
  uint32_t hint_ = 0;
  uint32_t node_word_ = 0;
};

static_assert(sizeof(ActorId) == 16, "ActorId layout is fixed at 16 bytes");

namespace internal {
// Deliberately not constexpr; see ServiceId.
inline void ServiceNameTooLong() {}
}  // namespace internal

// Makes a ServiceId from `name` (at most 12 bytes; longer names fail to compile in constant
// expressions and are truncated at run time — use IsValidServiceName to check user input) for
// `node` (0: whichever node resolves it).
constexpr ActorId ServiceId(std::string_view name, NodeId node = 0) {
  if (name.size() > ActorId::kMaxServiceNameSize) {
    internal::ServiceNameTooLong();  // not constexpr: a long literal name fails to compile
    name = name.substr(0, ActorId::kMaxServiceNameSize);
  }
  uint64_t low = 0;
  uint32_t high = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto byte = static_cast<uint8_t>(name[i]);
    if (i < 8) {
      low |= static_cast<uint64_t>(byte) << (8 * i);
    } else {
      high |= static_cast<uint32_t>(byte) << (8 * (i - 8));
    }
  }
  ActorId id;
  id.local_id_ = low;
  id.hint_ = high;
  id.node_word_ = ActorId::kServiceFlag | (node & ActorId::kMaxNode);
  return id;
}

// Returns true when `name` is a usable service name: 1 to 12 bytes, no NUL byte.
constexpr bool IsValidServiceName(std::string_view name) {
  return !name.empty() && name.size() <= ActorId::kMaxServiceNameSize &&
         // NOLINTNEXTLINE(abseil-string-find-str-contains): absl::StrContains is not constexpr.
         name.find('\0') == std::string_view::npos;
}

std::ostream& operator<<(std::ostream& out, const ActorId& id);

}  // namespace troupe

template <>
struct std::hash<troupe::ActorId> {
  size_t operator()(const troupe::ActorId& id) const noexcept { return id.Hash(); }
};
