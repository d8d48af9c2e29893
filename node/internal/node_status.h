// SPDX-License-Identifier: Apache-2.0
//
// What a node's monitoring server says about the node and its view of the cluster, as one
// proto::NodeStatus (proto/status.proto): /status.json is its JSON, the status page at / is its
// HTML (status_page.h), so both always say the same.
//
//   | part       | from                                                                        |
//   |------------|-----------------------------------------------------------------------------|
//   | identity   | node id, version and commit (actors/version.h), uptime, its own address     |
//   | members    | StatusSources::members: the nameservice's table (static or etcd)            |
//   | totals     | ActorSystem::Counters(); events per second from RateSampler                 |
//   | pools      | per pool: threads and their moves, events, busy threads and events per      |
//   |            | second over the sampler's window, ready queue, steals, preemptions, stuck   |
//   | sessions   | StatusSources::sessions (Interconnect::Counters()): state, since when, the  |
//   |            | last failure, round trip, per-second events and MB each way, totals         |
//   | classes    | the ten busiest actor classes by sampled handler time                       |
//   | warnings   | RecentWarnings (actors/log.h), newest first                                 |
//
// RateSampler reads the counters the rates need once a second on a thread of its own and keeps
// the last kWindow seconds; a rate is the difference between its oldest and newest sample.
//
// Thread-safety: BuildNodeStatus is thread-safe given thread-safe sources; RateSampler is
// thread-safe (its thread writes, any thread reads).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include "actors/actor_system.h"
#include "actors/sync.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "proto/status.pb.h"

namespace troupe::node::internal {

// What the status needs beyond the ActorSystem; each may be null (a node without interconnect).
struct StatusSources {
  // The cluster's members, this node included.
  std::function<std::vector<interconnect::NodeEndpoint>()> members = nullptr;
  // The sessions with their last failures; null: read from the metrics registry, without them.
  std::function<std::vector<interconnect::SessionCounters>()> sessions = nullptr;
  // This node's own status page URL ("http://host:port/").
  std::string self_url;
};

class RateSampler {
 public:
  // Samples kept: the window is up to kWindow - 1 seconds.
  static constexpr size_t kWindow = 11;

  // Counter values at one moment, by key ("events", "pool/User/events", "peer/2/sent", ...).
  struct Sample {
    absl::Time at;
    std::map<std::string, int64_t> values;
  };

  // Takes a first sample now and one each `period` from then on, until destroyed.
  RateSampler(ActorSystem* system, StatusSources sources, absl::Duration period = absl::Seconds(1));
  ~RateSampler();
  RateSampler(const RateSampler&) = delete;
  RateSampler& operator=(const RateSampler&) = delete;
  RateSampler(RateSampler&&) = delete;
  RateSampler& operator=(RateSampler&&) = delete;

  // Returns the per-second rate of `key` over the window, 0 with fewer than two samples or
  // when the key is missing from either end (a peer that appeared meanwhile).
  double Rate(const std::string& key) const;
  // The window's span (0 with fewer than two samples).
  absl::Duration Window() const;

  // Takes a sample now (the thread's step; tests call it to sample without waiting).
  void SampleNow();

 private:
  ActorSystem* const system_;
  const StatusSources sources_;
  mutable troupe::Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Returns the node's status now, with the rates of `rates`.
proto::NodeStatus BuildNodeStatus(ActorSystem& system, const StatusSources& sources,
                                  const RateSampler& rates, absl::Time started);

// Returns `status` in protobuf's JSON mapping: proto field names, every field printed, indented.
std::string NodeStatusJson(const proto::NodeStatus& status);

}  // namespace troupe::node::internal
