// SPDX-License-Identifier: Apache-2.0
//
// Test harness of the sharded-entity tests: a TestRuntime cluster whose nodes each have their own
// StaticNameservice (the test changes them, together or one by one), a region of kind "counter" on
// every node, a sender actor per node that sends tracked, numbered events and records what comes
// back, and entities that record every start, stop, Load, Save and handled event in one shared
// World, checked by the tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/nameservice.h"
#include "node/sharding.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::node::sharding_test {

enum : EventType {
  kEvWork = EventSpaceBegin(kUserEventSpace) + 0x700,
  kEvWorkDone,
  kEvSendWork,
};

// One numbered event for the entity `text` (seq: unique per test).
struct EvWork final : EventPB<EvWork, ut::TestPayload, kEvWork> {};
// The entity's answer to an EvWork (seq echoed; values[0] = the entity's count after it).
struct EvWorkDone final : EventPB<EvWorkDone, ut::TestPayload, kEvWorkDone> {};
// Tells a Sender to send one EvWork.
struct EvSendWork final : EventLocal<EvSendWork, kEvSendWork> {
  EvSendWork(std::string key_value, uint64_t seq_value)
      : key(std::move(key_value)), seq(seq_value) {}
  std::string key;
  uint64_t seq;
};

inline constexpr char kKind[] = "counter";

// What every incarnation of every entity did, and what the senders learned.
struct World {
  // Saved counts by key (the user's storage).
  std::map<std::string, int64_t> store;
  // Live incarnations by key: (node, actor).
  std::map<std::string, std::set<std::pair<NodeId, ActorId>>> live;
  // Times each seq was handled, and was reported undelivered.
  std::map<uint64_t, int> handled;
  std::map<uint64_t, int> reported;
  std::map<uint64_t, int> acked;
  // Where each seq was sent from, to which key, and when.
  struct Sent {
    NodeId node = 0;
    std::string key;
    absl::Time at;
  };
  std::map<uint64_t, Sent> sent;
  // Last seq handled per (key, sender): seqs of one sender rise.
  std::map<std::pair<std::string, ActorId>, uint64_t> last_seq;
  uint64_t order_violations = 0;
  uint64_t double_incarnations = 0;
  uint64_t loads = 0;
  uint64_t saves = 0;
  // How long a Save takes (DelayStop, then FinishStop that much later): zero saves at once.
  absl::Duration save_delay = absl::ZeroDuration();
  // Set by the test: true while every node's table is the same (checked at each start).
  std::function<bool()> views_agree = [] { return true; };
};

class TestEntity final : public ShardedEntity {
 public:
  explicit TestEntity(World* world) : ShardedEntity(&TestEntity::StateWork), world_(world) {}
  ~TestEntity() override {
    if (started_) {
      world_->live[key()].erase({SelfId().node_id(), SelfId()});
    }
  }
  TestEntity(const TestEntity&) = delete;
  TestEntity& operator=(const TestEntity&) = delete;
  TestEntity(TestEntity&&) = delete;
  TestEntity& operator=(TestEntity&&) = delete;

 private:
  void Load() override {
    started_ = true;
    ++world_->loads;
    auto& live = world_->live[key()];
    if (!live.empty() && world_->views_agree()) {
      ++world_->double_incarnations;
      ADD_FAILURE() << "key " << key() << " started on node " << SelfId().node_id()
                    << " while live on node " << live.begin()->first;
    }
    live.insert({SelfId().node_id(), SelfId()});
    count_ = world_->store[key()];
  }
  void Save() override {
    ++world_->saves;
    world_->store[key()] = count_;
    if (world_->save_delay > absl::ZeroDuration()) {
      // A store that confirms the write later: the entity ends only then.
      DelayStop();
      ScheduleWakeup(world_->save_delay);
    }
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvWork, Handle);
      case kEvWakeup:
        FinishStop();
        break;
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvWork> ev) {
    const uint64_t seq = ev.Get()->record.seq();
    ++world_->handled[seq];
    uint64_t& last = world_->last_seq[{key(), ev->sender()}];
    if (seq <= last) {
      ++world_->order_violations;
      ADD_FAILURE() << "key " << key() << ": seq " << seq << " after " << last;
    }
    last = std::max(last, seq);
    ++count_;
    auto done = std::make_unique<EvWorkDone>();
    done->record.set_seq(seq);
    done->record.add_values(static_cast<uint32_t>(count_));
    Reply(ev, std::move(done));
    if (ev.Get()->record.text() == "passivate") {
      Passivate();
    }
  }

  World* world_;
  int64_t count_ = 0;
  bool started_ = false;
};

// Sends tracked EvWork on EvSendWork; records acks (EvWorkDone) and Undelivered by seq (cookie).
class Sender final : public Actor {
 public:
  explicit Sender(World* world) : Actor(&Sender::StateWork), world_(world) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvSendWork: {
        auto* send = ev->Get<EvSendWork>();
        auto work = std::make_unique<EvWork>();
        work->record.set_seq(send->seq);
        work->record.set_text(send->key);
        world_->sent[send->seq] = {.node = SelfId().node_id(), .key = send->key, .at = Now()};
        SendToEntity(*this, kKind, send->key, std::move(work), kTrackDelivery, send->seq);
        break;
      }
      case kEvWorkDone:
        ++world_->acked[ev->Get<EvWorkDone>()->record.seq()];
        break;
      case kEvUndelivered:
        ++world_->reported[ev->Get<EvUndelivered>()->cookie];
        break;
      default:
        Unhandled(ev);
    }
  }

  World* world_;
};

// A cluster of `nodes` TestRuntime nodes; node n's table is names[n]. Nodes listed in `members`
// start in every table; the others start with the same table (they are not members, their
// regions forward only).
class ShardCluster {
 public:
  ShardCluster(uint32_t nodes, const std::vector<NodeId>& members, uint64_t seed,
               ShardingOptions options = Defaults())
      : options_(std::move(options)) {
    names_.resize(nodes + 1);
    senders_.resize(nodes + 1);
    for (NodeId node = 1; node <= nodes; ++node) {
      names_[node] = std::make_shared<interconnect::StaticNameservice>();
      for (NodeId member : members) {
        names_[node]->Set(Endpoint(member));
      }
    }
    world_.views_agree = [this] { return ViewsAgree(); };
    runtime_ = std::make_unique<testing::TestRuntime>(testing::TestRuntimeOptions{
        .nodes = nodes,
        .seed = seed,
        .config = {},
        .tune_node = nullptr,
        .latency = absl::Milliseconds(1),
        .jitter = absl::Milliseconds(2),
        .on_node_start = [this](testing::TestRuntime& runtime,
                                NodeId node) { StartNode(runtime, node); },
        .trace_capacity = 200,
        .simulated_interconnect = true,
    });
  }

  static ShardingOptions Defaults() {
    ShardingOptions options;
    options.passivate_after = absl::ZeroDuration();
    options.unanswered_member_timeout = absl::Seconds(30);
    options.resend_interval = absl::Milliseconds(100);
    return options;
  }
  static interconnect::NodeEndpoint Endpoint(NodeId node) {
    return {.node = node,
            .host = "sim",
            .port = static_cast<uint16_t>(node),
            .client = false,
            .monitoring_port = 0};
  }

  testing::TestRuntime& runtime() { return *runtime_; }
  World& world() { return world_; }
  interconnect::StaticNameservice& names(NodeId node) { return *names_[node]; }
  const ActorId& sender(NodeId node) const { return senders_[node]; }

  // Adds `node` to the table of every live node (at once: the views agree after).
  void Join(NodeId node) {
    for (NodeId n = 1; n < names_.size(); ++n) {
      names_[n]->Set(Endpoint(node));
    }
  }
  // Removes `node` from the table of every node.
  void Remove(NodeId node) {
    for (NodeId n = 1; n < names_.size(); ++n) {
      names_[n]->Remove(node);
    }
  }
  // True when every live node's table is the same.
  bool ViewsAgree() const {
    std::vector<interconnect::NodeEndpoint> first;
    bool have_first = false;
    for (NodeId n = 1; n < names_.size(); ++n) {
      if (runtime_ != nullptr && !runtime_->IsAlive(n)) {
        continue;
      }
      std::vector<interconnect::NodeEndpoint> members = names_[n]->Members();
      if (!have_first) {
        first = std::move(members);
        have_first = true;
      } else if (members != first) {
        return false;
      }
    }
    return true;
  }

  // Has node `from`'s sender send event `seq` to `key`.
  void SendWork(NodeId from, const std::string& key, uint64_t seq) {
    runtime_->Send(std::make_unique<EventHandle>(senders_[from], ActorId(),
                                                 std::make_unique<EvSendWork>(key, seq)),
                   from);
  }

  // Returns the live incarnations of `key`.
  size_t LiveCount(const std::string& key) { return world_.live[key].size(); }
  // Returns the node `key` is live on (0: none, or more than one).
  NodeId LiveNode(const std::string& key) {
    const auto& live = world_.live[key];
    return live.size() == 1 ? live.begin()->first : 0;
  }
  // Returns how many entities are live on `node`.
  size_t LiveOn(NodeId node) {
    size_t count = 0;
    for (const auto& [key, live] : world_.live) {
      for (const auto& [n, actor] : live) {
        count += n == node ? 1 : 0;
      }
    }
    return count;
  }

  // Asks node `node`'s region to leave and dispatches until it answers; returns its answer.
  bool Leave(NodeId node) {
    const ActorId edge = runtime_->AllocateEdgeActor(node);
    runtime_->Send(ShardRegionId(kKind, node), std::make_unique<EvShardLeave>(), edge);
    return static_cast<bool>(runtime_->GrabEdgeEvent<EvShardLeft>(
        edge, testing::DispatchOptions{
                  .max_events = 2'000'000, .max_time = absl::Seconds(60), .jump_timers = true}));
  }
  // Asks node `node`'s region for its figures.
  proto::ShardStats Stats(NodeId node, bool with_keys = false) {
    const ActorId edge = runtime_->AllocateEdgeActor(node);
    auto request = std::make_unique<EvShardStatsRequest>();
    request->record.set_with_keys(with_keys);
    runtime_->Send(ShardRegionId(kKind, node), std::move(request), edge);
    testing::Grabbed<EvShardStats> stats = runtime_->GrabEdgeEvent<EvShardStats>(edge);
    return stats ? stats->record : proto::ShardStats();
  }

 private:
  void StartNode(testing::TestRuntime& runtime, NodeId node) {
    absl::StatusOr<ActorId> region = StartShardRegion(
        runtime.node(node), kKind, names_[node],
        [this](std::string_view) { return std::make_unique<TestEntity>(&world_); }, options_);
    EXPECT_TRUE(region.ok()) << region.status();
    senders_[node] = runtime.Register(std::make_unique<Sender>(&world_), node);
  }

  ShardingOptions options_;
  World world_;
  std::vector<std::shared_ptr<interconnect::StaticNameservice>> names_;
  std::vector<ActorId> senders_;
  std::unique_ptr<testing::TestRuntime> runtime_;
};

}  // namespace troupe::node::sharding_test
