// SPDX-License-Identifier: Apache-2.0
//
// Sharded entities over loopback TCP with membership in a real etcd: three troupe::node::Nodes
// host a kind, events go to many keys, a fourth node joins, one leaves gracefully
// (ShardRegionLeave, then Node::Shutdown), and every acknowledged event is found in the state the
// entities saved at the end. Every wait is bounded.
#include "node/sharding.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "node/node.h"
#include "ut/actors/test_events.pb.h"
#include "ut/integration/etcd_server.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe::node {
namespace {

using testutil::EtcdServer;
using testutil::Eventually;
using testutil::kEtcdBinary;

enum : EventType {
  kEvTcpWork = EventSpaceBegin(kUserEventSpace) + 0x710,
  kEvTcpWorkDone,
};
struct EvTcpWork final : EventPB<EvTcpWork, ut::TestPayload, kEvTcpWork> {};
struct EvTcpWorkDone final : EventPB<EvTcpWorkDone, ut::TestPayload, kEvTcpWorkDone> {};

constexpr char kTcpKind[] = "tcp-counter";

// The user's storage: what entities saved, by key (seqs handled), and how often a seq was saved
// by two incarnations.
struct SavedState {
  Mutex mu;
  std::map<std::string, std::vector<uint64_t>> saved ABSL_GUARDED_BY(mu);
};

class TcpEntity final : public ShardedEntity {
 public:
  explicit TcpEntity(SavedState* state) : ShardedEntity(&TcpEntity::StateWork), state_(state) {}

 private:
  void Load() override {
    MutexLock lock(&state_->mu);
    seqs_ = state_->saved[key()];
  }
  void Save() override {
    MutexLock lock(&state_->mu);
    state_->saved[key()] = seqs_;
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvTcpWork, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvTcpWork> ev) {
    seqs_.push_back(ev.Get()->record.seq());
    auto done = std::make_unique<EvTcpWorkDone>();
    done->record.set_seq(ev.Get()->record.seq());
    Reply(ev, std::move(done));
  }

  SavedState* state_;
  std::vector<uint64_t> seqs_;
};

// Counts acknowledgements and Undelivered reports by seq.
struct Outcomes {
  Mutex mu;
  std::set<uint64_t> acked ABSL_GUARDED_BY(mu);
  std::set<uint64_t> reported ABSL_GUARDED_BY(mu);
};

class Collector final : public Actor {
 public:
  explicit Collector(Outcomes* outcomes) : Actor(&Collector::StateWork), outcomes_(outcomes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvTcpWorkDone: {
        MutexLock lock(&outcomes_->mu);
        outcomes_->acked.insert(ev->Get<EvTcpWorkDone>()->record.seq());
        break;
      }
      case kEvUndelivered: {
        MutexLock lock(&outcomes_->mu);
        outcomes_->reported.insert(ev->Get<EvUndelivered>()->cookie);
        break;
      }
      default:
        Unhandled(ev);
    }
  }
  Outcomes* outcomes_;
};

class ShardingTcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(std::string(kEtcdBinary).c_str(), X_OK) != 0) {
      GTEST_FAIL() << "no etcd: install Debian's etcd-server (scripts/setup.sh does)";
    }
    etcd_ = std::make_unique<EtcdServer>();
    ASSERT_TRUE(etcd_->Start());
  }

  proto::ActorSystemConfig Config() const {
    proto::ActorSystemConfig config;
    config.mutable_scheduler()->set_resolution_us(1000);
    proto::InterconnectConfig& ic = *config.mutable_interconnect();
    ic.set_cluster_id("sharding");
    ic.set_heartbeat_interval_ms(100);
    ic.mutable_etcd()->set_endpoint(etcd_->endpoint());
    ic.mutable_etcd()->set_lease_ttl_s(2);
    return config;
  }

  // Starts a node hosting kTcpKind; null (and a failure) when it cannot.
  std::unique_ptr<Node> StartHost() {
    absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(Config());
    EXPECT_TRUE(node.ok()) << node.status();
    if (!node.ok()) {
      return nullptr;
    }
    ShardingOptions options;
    options.passivate_after = absl::ZeroDuration();
    options.unanswered_member_timeout = absl::Seconds(10);
    absl::StatusOr<ActorId> region = StartShardRegion(
        (*node)->system(), kTcpKind, (*node)->interconnect()->nameservice(),
        [this](std::string_view) { return std::make_unique<TcpEntity>(&state_); }, options);
    EXPECT_TRUE(region.ok()) << region.status();
    return std::move(*node);
  }

  // Waits until every node's table lists exactly `ids` and each has a session with the others.
  static bool Converged(const std::vector<Node*>& nodes, const std::set<NodeId>& ids) {
    return Eventually(
        [&] {
          for (Node* node : nodes) {
            std::set<NodeId> listed;
            for (const interconnect::NodeEndpoint& member :
                 node->interconnect()->nameservice()->Members()) {
              listed.insert(member.node);
            }
            if (listed != ids) {
              return false;
            }
          }
          return true;
        },
        absl::Seconds(15));
  }

  void SendRound(Node& from, const ActorId& collector, uint64_t first, uint64_t count) {
    for (uint64_t seq = first; seq < first + count; ++seq) {
      auto work = std::make_unique<EvTcpWork>();
      work->record.set_seq(seq);
      SendToEntity(from.system(), kTcpKind, absl::StrCat("key-", seq % 97), std::move(work),
                   collector, kTrackDelivery, seq);
    }
  }

  std::unique_ptr<EtcdServer> etcd_;
  SavedState state_;
  Outcomes outcomes_;
};

TEST_F(ShardingTcpTest, JoinAndGracefulLeaveKeepEveryAcknowledgedEvent) {
  std::unique_ptr<Node> a = StartHost();
  std::unique_ptr<Node> b = StartHost();
  std::unique_ptr<Node> c = StartHost();
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(Converged({a.get(), b.get(), c.get()}, {a->id(), b->id(), c->id()}));
  ASSERT_TRUE(a->WaitForPeers(absl::Seconds(10)).ok());
  const ActorId collector = a->system().Register(std::make_unique<Collector>(&outcomes_));
  SendRound(*a, collector, 1, 300);

  // A fourth host joins while events are under way.
  std::unique_ptr<Node> d = StartHost();
  ASSERT_TRUE(d);
  SendRound(*a, collector, 301, 300);
  ASSERT_TRUE(
      Converged({a.get(), b.get(), c.get(), d.get()}, {a->id(), b->id(), c->id(), d->id()}));
  SendRound(*a, collector, 601, 300);

  // b leaves gracefully: hand-off first, then the node stops.
  absl::StatusOr<uint64_t> stopped = ShardRegionLeave(b->system(), kTcpKind, absl::Seconds(15));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_GT(*stopped, 0u);
  b->Shutdown(absl::Seconds(5));
  b.reset();
  SendRound(*a, collector, 901, 300);
  ASSERT_TRUE(Eventually(
      [&] {
        MutexLock lock(&outcomes_.mu);
        return outcomes_.acked.size() + outcomes_.reported.size() >= 1200;
      },
      absl::Seconds(30)));

  // Everything is saved: each remaining host leaves in turn.
  for (Node* node : {a.get(), c.get(), d.get()}) {
    absl::StatusOr<uint64_t> left = ShardRegionLeave(node->system(), kTcpKind, absl::Seconds(15));
    ASSERT_TRUE(left.ok()) << "node " << node->id() << ": " << left.status();
  }
  std::map<uint64_t, int> saved;
  {
    MutexLock lock(&state_.mu);
    for (const auto& [key, seqs] : state_.saved) {
      for (uint64_t seq : seqs) {
        ++saved[seq];
      }
    }
  }
  MutexLock lock(&outcomes_.mu);
  for (uint64_t seq : outcomes_.acked) {
    EXPECT_EQ(saved[seq], 1) << "seq " << seq << " acknowledged";
  }
  EXPECT_EQ(outcomes_.reported.size(), 0u) << "graceful changes lose nothing";
  std::printf("acked %zu, reported %zu, saved %zu\n", outcomes_.acked.size(),
              outcomes_.reported.size(), saved.size());
  for (Node* node : {a.get(), c.get(), d.get()}) {
    node->Shutdown(absl::Seconds(5));
  }
}

}  // namespace
}  // namespace troupe::node
