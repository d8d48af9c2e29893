// SPDX-License-Identifier: Apache-2.0
//
// The example of node/sharding.h, compiled and run on the deterministic runtime: the region
// between `[doc-example: node/sharding.h]` and `[end doc-example]` is the header's "Example:" block
// word for word (scripts/check-doc-examples.sh).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

#include "actors/testing/test_runtime.h"
#include "interconnect/nameservice.h"
#include "node/sharding.h"
#include "ut/node/sharding_test.pb.h"

namespace troupe::node::sharding_doc {
namespace {

enum : EventType {
  kEvAdd = EventSpaceBegin(kUserEventSpace) + 0x720,
};
struct EvAdd final : EventPB<EvAdd, ut::ShardAdd, kEvAdd> {
  EvAdd() = default;
  explicit EvAdd(int64_t value) { record.set_value(value); }
};

// The user's storage of the example.
struct Store {
  int64_t Get(const std::string& key) { return saved[key]; }
  void Put(const std::string& key, int64_t value) { saved[key] = value; }
  std::map<std::string, int64_t> saved;
};

TEST(ShardingDocExampleTest, HeaderExampleCountsAndSaves) {
  testing::TestRuntime runtime({.nodes = 1, .seed = 1});
  ActorSystem& system = runtime.node(1);
  auto names =
      std::make_shared<interconnect::StaticNameservice>(std::vector<interconnect::NodeEndpoint>{
          {.node = 1, .host = "sim", .port = 1, .client = false, .monitoring_port = 0}});
  Store store;
  // clang-format off
  // [doc-example: node/sharding.h]
  class Counter : public troupe::node::ShardedEntity {
   public:
    explicit Counter(Store* store) : ShardedEntity(&Counter::StateWork), store_(store) {}

   private:
    void Load() override { total_ = store_->Get(key()); }
    void Save() override { store_->Put(key(), total_); }
    TROUPE_STATE(StateWork) {
      switch (ev->type()) {
        TROUPE_HFUNC(EvAdd, Handle);
        default:
          Unhandled(ev);
      }
    }
    void Handle(troupe::EventPtr<EvAdd> ev) { total_ += ev.Get()->record.value(); }
    Store* store_;
    int64_t total_ = 0;
  };

  // On every hosting node, right after Node::Start (node->interconnect()->nameservice() is
  // the membership):
  absl::StatusOr<troupe::ActorId> region = troupe::node::StartShardRegion(
      system, "counter", names,
      [&store](std::string_view) { return std::make_unique<Counter>(&store); });
  // Anywhere:
  troupe::node::SendToEntity(system, "counter", "user-42", std::make_unique<EvAdd>(5));
  // [end doc-example]
  // clang-format on
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE(runtime.AdvanceTime(absl::Seconds(1)));
  EXPECT_EQ(store.saved["user-42"], 0) << "live, not saved yet";
  // Leaving stops the entity, which saves its count.
  const ActorId edge = runtime.AllocateEdgeActor(1);
  runtime.Send(ShardRegionId("counter"), std::make_unique<EvShardLeave>(), edge);
  testing::Grabbed<EvShardLeft> left = runtime.GrabEdgeEvent<EvShardLeft>(edge);
  ASSERT_TRUE(left);
  EXPECT_EQ(left->record.stopped(), 1u);
  EXPECT_EQ(store.saved["user-42"], 5);
}

}  // namespace
}  // namespace troupe::node::sharding_doc
