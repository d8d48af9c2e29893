// SPDX-License-Identifier: Apache-2.0
//
// Shared pieces of the interconnect's session tests (ut/interconnect/) and of the integration
// tests (ut/integration/), in namespace troupe::testutil like ut/actors/test_util.h: protobuf
// events that cross nodes, the shared Echo bound to them, a sequenced sender, a receiver that
// checks per-sender order and one that counts, and cluster configs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "actors/testing/actors.h"
#include "interconnect/testing/free_ports.h"
#include "proto/config.pb.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::testutil {

enum : EventType {
  kEvIcPing = EventSpaceBegin(kUserEventSpace + 7),
  kEvIcPong,
  kEvIcData,
  kEvIcTestEnd,
};
static_assert(InEventSpace(kEvIcTestEnd - 1, kUserEventSpace + 7));

struct EvIcPing final : EventPB<EvIcPing, ut::TestPayload, kEvIcPing> {};
struct EvIcPong final : EventPB<EvIcPong, ut::TestPayload, kEvIcPong> {};
struct EvIcData final : EventPB<EvIcData, ut::TestPayload, kEvIcData> {};

inline std::unique_ptr<EvIcData> MakeData(uint64_t seq, size_t padding = 0) {
  auto ev = std::make_unique<EvIcData>();
  ev->record.set_seq(seq);
  ev->record.set_text(std::string(padding, 'x'));
  return ev;
}

// Answers every EvIcPing with an EvIcPong carrying the same payload and cookie.
using Echo = testing::Echo<EvIcPing, EvIcPong>;

// What a SequenceChecker saw, per sender: thread-safe, read by the test.
class SequenceLog {
 public:
  void Record(const ActorId& sender, uint64_t seq) {
    troupe::MutexLock lock(&mu_);
    uint64_t& last = last_[sender];
    if (seq == last + 1) {
      ++in_order_;
    } else if (seq <= last) {
      ++duplicates_or_reordered_;
    } else {
      gaps_ += seq - last - 1;
    }
    last = std::max(last, seq);
    ++total_;
  }
  uint64_t total() const {
    troupe::MutexLock lock(&mu_);
    return total_;
  }
  uint64_t in_order() const {
    troupe::MutexLock lock(&mu_);
    return in_order_;
  }
  uint64_t gaps() const {
    troupe::MutexLock lock(&mu_);
    return gaps_;
  }
  uint64_t duplicates_or_reordered() const {
    troupe::MutexLock lock(&mu_);
    return duplicates_or_reordered_;
  }
  std::string Summary() const {
    troupe::MutexLock lock(&mu_);
    return absl::StrCat("total=", total_, " in_order=", in_order_, " gaps=", gaps_,
                        " dup_or_reordered=", duplicates_or_reordered_);
  }

 private:
  mutable troupe::Mutex mu_;
  absl::flat_hash_map<ActorId, uint64_t> last_ ABSL_GUARDED_BY(mu_);
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_order_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t gaps_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicates_or_reordered_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records the sequence number of every EvIcData it receives.
class SequenceChecker final : public Actor {
 public:
  explicit SequenceChecker(SequenceLog* log) : Actor(&SequenceChecker::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcData, HandleData);
      default:
        Unhandled(ev);
    }
  }
  void HandleData(EventPtr<EvIcData> ev) { log_->Record(ev->sender(), ev.Get()->record.seq()); }

  SequenceLog* log_;
};

// Counts the EvIcData it receives into `received` (read by the test).
class DataCounter final : public Actor {
 public:
  explicit DataCounter(std::atomic<uint64_t>* received)
      : Actor(&DataCounter::StateWork), received_(received) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_CFUNC(EvIcData::kEventType, Count);
      default:
        Unhandled(ev);
    }
  }
  void Count() { received_->fetch_add(1); }
  std::atomic<uint64_t>* received_;
};

// Sends EvIcData 1..count to `target`, `batch` per wakeup (so sends interleave with the network).
class SequenceSender final : public Actor {
 public:
  SequenceSender(ActorId target, uint64_t count, uint64_t batch, size_t padding = 0)
      : Actor(&SequenceSender::StateWork),
        target_(target),
        count_(count),
        batch_(batch),
        padding_(padding) {}

 private:
  void Bootstrap() override { SendBatch(); }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_CFUNC(kEvWakeup, SendBatch);
      default:
        Unhandled(ev);
    }
  }
  void SendBatch() {
    for (uint64_t i = 0; i < batch_ && next_ <= count_; ++i) {
      Send(target_, MakeData(next_++, padding_));
    }
    if (next_ <= count_) {
      ScheduleWakeup(absl::Milliseconds(1));
    }
  }

  ActorId target_;
  uint64_t count_;
  uint64_t batch_;
  size_t padding_;
  uint64_t next_ = 1;
};

// Polls `predicate` every 2 ms (leaving the two cores to the nodes) until it holds or `timeout`
// passes; returns its last value. For state without a notification (counters, logs).
inline bool Eventually(const std::function<bool()>& predicate, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!predicate()) {
    if (absl::Now() >= deadline) {
      return predicate();
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

// A config template for a cluster of `nodes` nodes at host `host`, ports `ports[i]`.
inline proto::ActorSystemConfig ClusterConfig(const std::string& host,
                                              const std::vector<uint16_t>& ports,
                                              const std::string& cluster = "test") {
  proto::ActorSystemConfig config;
  config.mutable_scheduler()->set_resolution_us(1000);
  proto::InterconnectConfig& ic = *config.mutable_interconnect();
  ic.set_cluster_id(cluster);
  ic.set_heartbeat_interval_ms(100);
  ic.set_dead_peer_timeout_ms(1000);
  for (size_t i = 0; i < ports.size(); ++i) {
    proto::NodeAddress& node = *ic.add_nodes();
    node.set_node_id(static_cast<uint32_t>(i + 1));
    node.set_host(host);
    node.set_port(ports[i]);
  }
  return config;
}

// The listening ports of nodes 1..n on 127.0.0.1, and the port each node dials to reach each peer:
// Redirect puts something (a FaultProxy) between a node and a peer.
class LoopbackPorts {
 public:
  explicit LoopbackPorts(size_t nodes) {
    absl::StatusOr<std::vector<uint16_t>> ports = interconnect::FreeLoopbackPorts(nodes);
    EXPECT_TRUE(ports.ok()) << ports.status();
    ports_ = ports.value_or(std::vector<uint16_t>(nodes, 0));
  }

  uint16_t port(NodeId node) const { return ports_[node - 1]; }
  // From now on `node` reaches `peer` at `port` (takes effect in configs made afterwards).
  void Redirect(NodeId node, NodeId peer, uint16_t port) { redirects_[{node, peer}] = port; }

  // ClusterConfig of the cluster as `node` sees it, with its node id set.
  proto::ActorSystemConfig ConfigFor(NodeId node, const std::string& cluster) const {
    std::vector<uint16_t> ports = ports_;
    for (const auto& [pair, port] : redirects_) {
      if (pair.first == node) {
        ports[pair.second - 1] = port;
      }
    }
    proto::ActorSystemConfig config = ClusterConfig("127.0.0.1", ports, cluster);
    config.set_node_id(node);
    return config;
  }

 private:
  std::vector<uint16_t> ports_;
  std::map<std::pair<NodeId, NodeId>, uint16_t> redirects_;
};

}  // namespace troupe::testutil
