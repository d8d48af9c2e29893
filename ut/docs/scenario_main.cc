// SPDX-License-Identifier: Apache-2.0
//
// The README's campaign binary of your own (`ScenarioMain` with a workload), word for word between
// the markers (scripts/check-doc-examples.sh). MyOrdersWorkload is the "yours" of the example: an
// order book service on every node, orders sent to random nodes, and one invariant, no order
// handled twice. ctest doc_scenario_main runs one seed of it next to nothing else.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/testing/scenario.h"
#include "ut/actors/test_events.pb.h"

namespace {

enum : troupe::EventType { kEvOrder = troupe::EventSpaceBegin(troupe::kUserEventSpace + 9) };
struct EvOrder : troupe::EventPB<EvOrder, troupe::ut::TestPayload, kEvOrder> {};

// Counts every order it handles by number, in the workload's map.
class OrderBook final : public troupe::Actor {
 public:
  explicit OrderBook(std::map<uint64_t, int>* handled)
      : Actor(&OrderBook::StateWork), handled_(handled) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvOrder, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvOrder> ev) { ++(*handled_)[ev.Get()->record.seq()]; }

  std::map<uint64_t, int>* handled_;
};

// An order book service "orders" on every node; each tick, an order (numbered) from node 1 to a
// random node's book, untracked. Invariant: no order is handled twice (orders may be lost to
// faults: they are untracked).
class MyOrdersWorkload final : public troupe::testing::Workload {
 public:
  std::string name() const override { return "my_orders"; }

  void OnNodeStart(troupe::testing::ScenarioContext& context, troupe::NodeId node) override {
    troupe::ActorSystem& system = context.rt().node(node);
    books_[node] = system.Register(std::make_unique<OrderBook>(&handled_));
    ASSERT_TRUE(system.RegisterService(troupe::ServiceId("orders"), books_[node]).ok());
  }

  void Tick(troupe::testing::ScenarioContext& context) override {
    if (!context.IsAlive(1)) {
      return;
    }
    auto order = std::make_unique<EvOrder>();
    order->record.set_seq(++sent_);
    context.rt().Send(troupe::ServiceId("orders", context.RandomNode()), std::move(order));
  }

  void Finish(troupe::testing::ScenarioContext& context) override {
    for (const auto& [node, book] : books_) {
      if (context.IsAlive(node)) {
        context.rt().Send(book, std::make_unique<troupe::EvPoison>());
      }
    }
  }

  void Check(troupe::testing::ScenarioContext& /*context*/,
             std::vector<std::string>* violations) override {
    for (const auto& [order, times] : handled_) {
      if (times > 1) {
        violations->push_back(absl::StrCat("order ", order, " handled ", times, " times"));
      }
    }
  }

  std::string Summary() const override {
    return absl::StrCat("orders sent=", sent_, " handled=", handled_.size());
  }

 private:
  std::map<troupe::NodeId, troupe::ActorId> books_;
  std::map<uint64_t, int> handled_;
  uint64_t sent_ = 0;
};

}  // namespace

// clang-format off
// [doc-example: README.md]
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return troupe::testing::ScenarioMain(argc, argv, [] {
    std::vector<std::unique_ptr<troupe::testing::Workload>> workloads;
    workloads.push_back(std::make_unique<MyOrdersWorkload>());   // yours, with its invariants
    return workloads;
  });
}
// [end doc-example]
// clang-format on
