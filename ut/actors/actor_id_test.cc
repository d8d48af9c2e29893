// SPDX-License-Identifier: Apache-2.0
//
// ActorId: the fixed 16-byte layout, field packing, ordering, hashing, printing and ServiceId
// names.
#include "actors/actor_id.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/hash/hash_testing.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

// Reads the raw words back out of the object representation (host byte order).
struct RawWords {
  uint64_t local_id;
  uint32_t hint;
  uint32_t node_word;
};

RawWords ReadRaw(const ActorId& id) {
  RawWords raw{};
  std::memcpy(&raw.local_id, reinterpret_cast<const char*>(&id) + 0, 8);
  std::memcpy(&raw.hint, reinterpret_cast<const char*>(&id) + 8, 4);
  std::memcpy(&raw.node_word, reinterpret_cast<const char*>(&id) + 12, 4);
  return raw;
}

TEST(ActorIdTest, IsSixteenTriviallyCopyableBytes) {
  static_assert(sizeof(ActorId) == 16);
  static_assert(std::is_trivially_copyable_v<ActorId>);
  static_assert(std::is_standard_layout_v<ActorId>);
  const ActorId id(5, 3, 0x1122334455667788u, 0xA1B2C3D4u);
  const RawWords raw = ReadRaw(id);
  EXPECT_EQ(raw.local_id, 0x1122334455667788u);
  EXPECT_EQ(raw.hint, 0xA1B2C3D4u);
  EXPECT_EQ(raw.node_word, (3u << 20) | 5u);
}

TEST(ActorIdTest, PacksNodePoolAndServiceFlagIntoNodeWord) {
  const ActorId id(0xABCDE, 0x5A5, 42, 7);
  EXPECT_EQ(id.node_id(), 0xABCDEu);
  EXPECT_EQ(id.pool(), 0x5A5u);
  EXPECT_EQ(id.local_id(), 42u);
  EXPECT_EQ(id.hint(), 7u);
  EXPECT_FALSE(id.IsService());
  EXPECT_EQ(id.node_word(), (0x5A5u << 20) | 0xABCDEu);
  EXPECT_EQ(id.node_word() & ActorId::kServiceFlag, 0u);

  // Maximal values occupy exactly their bit ranges and do not bleed into the service flag.
  const ActorId max(ActorId::kMaxNode, ActorId::kMaxPool, ~uint64_t{0}, ~uint32_t{0});
  EXPECT_EQ(max.node_id(), ActorId::kMaxNode);
  EXPECT_EQ(max.pool(), ActorId::kMaxPool);
  EXPECT_FALSE(max.IsService());
  EXPECT_EQ(max.node_word(), 0x7FFFFFFFu);

  // Out-of-range values are masked, never spilled into a neighbouring field.
  const ActorId masked(ActorId::kMaxNode + 2, ActorId::kMaxPool + 3, 1, 1);
  EXPECT_EQ(masked.node_id(), 1u);
  EXPECT_EQ(masked.pool(), 2u);
  EXPECT_FALSE(masked.IsService());
}

TEST(ActorIdTest, DefaultIsEmptyAndFalse) {
  constexpr ActorId empty;
  static_assert(empty.IsEmpty());
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_TRUE(static_cast<bool>(ActorId(0, 0, 0, 1)));
  EXPECT_TRUE(static_cast<bool>(ActorId(1, 0, 0, 0)));
  EXPECT_TRUE(static_cast<bool>(ActorId(0, 0, 1, 0)));
  EXPECT_FALSE(ActorId(0, 0, 0, 1).IsEmpty());
}

TEST(ActorIdTest, FromRawAndWithNodeRoundTrip) {
  const ActorId id(9, 4, 123456789, 77);
  const ActorId copy = ActorId::FromRaw(id.local_id(), id.hint(), id.node_word());
  EXPECT_EQ(copy, id);

  const ActorId moved = id.WithNode(1000);
  EXPECT_EQ(moved.node_id(), 1000u);
  EXPECT_EQ(moved.pool(), 4u);
  EXPECT_EQ(moved.local_id(), 123456789u);
  EXPECT_EQ(moved.hint(), 77u);

  const ActorId service = ServiceId("svc", 3);
  const ActorId service_moved = service.WithNode(8);
  EXPECT_TRUE(service_moved.IsService());
  EXPECT_EQ(service_moved.node_id(), 8u);
  EXPECT_EQ(service_moved.ServiceName(), "svc");
}

TEST(ActorIdTest, ComparesEveryField) {
  const ActorId base(1, 2, 100, 10);
  EXPECT_EQ(base, ActorId(1, 2, 100, 10));
  EXPECT_NE(base, ActorId(2, 2, 100, 10));  // node
  EXPECT_NE(base, ActorId(1, 3, 100, 10));  // pool
  EXPECT_NE(base, ActorId(1, 2, 101, 10));  // local id
  EXPECT_NE(base, ActorId(1, 2, 100, 11));  // hint
  EXPECT_NE(base, ActorId::FromRaw(100, 10, base.node_word() | ActorId::kServiceFlag));

  // Total order: local_id first, then hint, then the node word.
  EXPECT_LT(ActorId(9, 9, 1, 9), ActorId(0, 0, 2, 0));
  EXPECT_LT(ActorId(9, 9, 1, 1), ActorId(0, 0, 1, 2));
  EXPECT_LT(ActorId(1, 0, 1, 1), ActorId(2, 0, 1, 1));
  EXPECT_GT(ActorId(1, 2, 100, 11), base);
  EXPECT_TRUE((base <=> ActorId(1, 2, 100, 10)) == 0);

  std::vector<ActorId> ids = {ActorId(0, 0, 3, 0), ActorId(0, 0, 1, 5), ActorId(0, 0, 1, 2)};
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids[0], ActorId(0, 0, 1, 2));
  EXPECT_EQ(ids[1], ActorId(0, 0, 1, 5));
  EXPECT_EQ(ids[2], ActorId(0, 0, 3, 0));
}

std::vector<ActorId> DistinctIds() {
  return {
      ActorId(),
      ActorId(0, 0, 0, 1),
      ActorId(0, 0, 1, 0),
      ActorId(1, 0, 0, 0),
      ActorId(0, 1, 0, 0),
      ActorId(1, 2, 3, 4),
      ActorId(1, 2, 3, 5),
      ActorId(1, 2, 4, 4),
      ActorId(1, 3, 3, 4),
      ActorId(2, 2, 3, 4),
      ActorId::FromRaw(3, 4, ActorId(1, 2, 0, 0).node_word() | ActorId::kServiceFlag),
      ServiceId("a"),
      ServiceId("b"),
      ServiceId("a", 1),
      ServiceId("abcdefghijkl"),
  };
}

TEST(ActorIdTest, ImplementsAbslHashCorrectly) {
  EXPECT_TRUE(absl::VerifyTypeImplementsAbslHashCorrectly(DistinctIds()));
  EXPECT_EQ(absl::Hash<ActorId>()(ActorId(1, 2, 3, 4)), absl::Hash<ActorId>()(ActorId(1, 2, 3, 4)));
  EXPECT_NE(absl::Hash<ActorId>()(ActorId(1, 2, 3, 4)), absl::Hash<ActorId>()(ActorId(1, 2, 3, 5)));
  absl::flat_hash_set<ActorId> set;
  for (const ActorId& id : DistinctIds()) {
    EXPECT_TRUE(set.insert(id).second) << id;
  }
  for (const ActorId& id : DistinctIds()) {
    EXPECT_TRUE(set.contains(id)) << id;
  }
}

TEST(ActorIdTest, StdHashSeparatesEveryField) {
  const std::hash<ActorId> hash;
  const std::vector<ActorId> ids = DistinctIds();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(hash(ids[i]), ids[i].Hash());
    EXPECT_EQ(hash(ids[i]),
              hash(ActorId::FromRaw(ids[i].local_id(), ids[i].hint(), ids[i].node_word())));
    for (size_t j = i + 1; j < ids.size(); ++j) {
      EXPECT_NE(hash(ids[i]), hash(ids[j])) << ids[i] << " vs " << ids[j];
    }
  }
  // Sequential local ids (how a node hands them out) spread over buckets of a std container.
  std::unordered_set<ActorId> set;
  std::unordered_set<size_t> hashes;
  for (uint64_t i = 0; i < 10000; ++i) {
    const ActorId id(1, 1, 1'700'000'000'000'000'000u + i, static_cast<uint32_t>(i % 64 + 1));
    set.insert(id);
    hashes.insert(hash(id));
  }
  EXPECT_EQ(set.size(), 10000u);
  EXPECT_EQ(hashes.size(), 10000u);
  EXPECT_EQ(set.count(ActorId(1, 1, 1'700'000'000'000'000'005u, 6)), 1u);
  EXPECT_EQ(set.count(ActorId(1, 1, 1'700'000'000'000'000'005u, 7)), 0u);
}

TEST(ActorIdTest, ToStringPrintsActorsAndServices) {
  EXPECT_EQ(ActorId(1, 2, 3, 4).ToString(), "[1:2:3:4]");
  EXPECT_EQ(ActorId().ToString(), "[0:0:0:0]");
  EXPECT_EQ(
      ActorId(ActorId::kMaxNode, ActorId::kMaxPool, 18446744073709551615u, 4294967295u).ToString(),
      "[1048575:2047:18446744073709551615:4294967295]");
  EXPECT_EQ(ServiceId("echo").ToString(), "[svc:echo@0]");
  EXPECT_EQ(ServiceId("echo", 7).ToString(), "[svc:echo@7]");
  std::ostringstream out;
  out << ActorId(1, 2, 3, 4) << " " << ServiceId("x", 2);
  EXPECT_EQ(out.str(), "[1:2:3:4] [svc:x@2]");
}

TEST(ActorIdTest, ServiceIdRoundTripsNames) {
  static_assert(ServiceId("echo").IsService());
  static_assert(ServiceId("echo", 5).node_id() == 5);
  static_assert(ServiceId("echo") != ServiceId("ecHo"));
  for (const std::string name :
       {"a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijk", "abcdefghijkl", "x.y-z_0"}) {
    const ActorId id = ServiceId(name, 12);
    EXPECT_TRUE(id.IsService()) << name;
    EXPECT_EQ(id.ServiceName(), name);
    EXPECT_EQ(id.node_id(), 12u);
    EXPECT_EQ(id.pool(), 0u);
    EXPECT_EQ(id.node_word(), ActorId::kServiceFlag | 12u);
    EXPECT_FALSE(id.IsEmpty());
    EXPECT_EQ(ActorId::FromRaw(id.local_id(), id.hint(), id.node_word()).ServiceName(), name);
  }
  // The name bytes live in local_id (bytes 0-7) and hint (bytes 8-11), first byte lowest.
  const ActorId id = ServiceId("ABCDEFGHIJKL");
  EXPECT_EQ(id.local_id(), 0x4847464544434241u);
  EXPECT_EQ(id.hint(), 0x4C4B4A49u);
  // Names that share a prefix stay distinct.
  EXPECT_NE(ServiceId("abcdefgh"), ServiceId("abcdefghi"));
  EXPECT_NE(ServiceId("abc"), ServiceId("abcd"));
}

TEST(ActorIdTest, ServiceIdTruncatesLongRuntimeNames) {
  const std::string long_name = "abcdefghijklmnop";
  const ActorId id = ServiceId(long_name);
  EXPECT_TRUE(id.IsService());
  EXPECT_EQ(id.ServiceName(), "abcdefghijkl");
  EXPECT_EQ(id, ServiceId("abcdefghijkl"));
}

TEST(ActorIdTest, IsValidServiceNameChecksLengthAndNul) {
  static_assert(IsValidServiceName("echo"));
  static_assert(!IsValidServiceName(""));
  EXPECT_FALSE(IsValidServiceName(""));
  EXPECT_TRUE(IsValidServiceName("a"));
  EXPECT_TRUE(IsValidServiceName("abcdefghijkl"));
  EXPECT_FALSE(IsValidServiceName("abcdefghijklm"));
  EXPECT_FALSE(IsValidServiceName(std::string("ab\0cd", 5)));
  EXPECT_FALSE(IsValidServiceName(std::string("\0", 1)));
}

}  // namespace
}  // namespace troupe
