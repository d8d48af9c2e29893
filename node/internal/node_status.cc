// SPDX-License-Identifier: Apache-2.0
#include "node/internal/node_status.h"

#include <pthread.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"

#include "actors/log.h"
#include "actors/version.h"

namespace troupe::node::internal {
namespace {

using interconnect::SessionCounters;

std::vector<SessionCounters> Sessions(ActorSystem& system, const StatusSources& sources) {
  return sources.sessions ? sources.sessions() : interconnect::SessionCountersOf(system.metrics());
}

std::string PoolKey(const std::string& pool, const char* what) {
  return absl::StrCat("pool/", pool, "/", what);
}

std::string PeerKey(NodeId peer, const char* what) {
  return absl::StrCat("peer/", peer, "/", what);
}

std::string Rfc3339(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

std::string SessionState(const SessionCounters& session) {
  if (!session.up) {
    return "down";
  }
  return session.connected ? "up" : "up, reconnecting";
}

void AddBusiestClasses(const std::vector<ActorClassCounters>& classes, proto::NodeStatus* status) {
  std::vector<const ActorClassCounters*> busiest;
  absl::Duration total;
  for (const ActorClassCounters& c : classes) {
    busiest.push_back(&c);
    total += c.sampled_handler_time;
  }
  std::sort(busiest.begin(), busiest.end(),
            [](const ActorClassCounters* a, const ActorClassCounters* b) {
              return std::tie(b->sampled_handler_time, b->name) <
                     std::tie(a->sampled_handler_time, a->name);
            });
  busiest.resize(std::min<size_t>(busiest.size(), 10));
  for (const ActorClassCounters* c : busiest) {
    proto::ClassStatus* out = status->add_busiest_classes();
    out->set_name(c->name);
    out->set_live(c->live);
    out->set_events(c->sampled_events * 64);
    out->set_handler_time_share(
        total > absl::ZeroDuration() ? absl::FDivDuration(c->sampled_handler_time, total) : 0.0);
  }
}

}  // namespace

RateSampler::RateSampler(ActorSystem* system, StatusSources sources, absl::Duration period)
    : system_(system), sources_(std::move(sources)) {
  SampleNow();
  thread_ = std::thread([this, period, context = &system->log_context()] {
    pthread_setname_np(pthread_self(), "troupe:rates");
    const LogBinding binding(context);
    while (true) {
      {
        troupe::MutexLock lock(&mu_);
        if (mu_.AwaitWithDeadline(absl::Condition(&stop_), absl::Now() + period)) {
          return;
        }
      }
      SampleNow();
    }
  });
}

RateSampler::~RateSampler() {
  {
    troupe::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void RateSampler::SampleNow() {
  Sample sample{.at = absl::Now(), .values = {}};
  int64_t events = 0;
  for (const PoolCounters& pool : system_->Counters().pools) {
    events += static_cast<int64_t>(pool.events);
    sample.values[PoolKey(pool.name, "events")] = static_cast<int64_t>(pool.events);
    sample.values[PoolKey(pool.name, "busy_ns")] = absl::ToInt64Nanoseconds(pool.busy_time);
  }
  sample.values["events"] = events;
  for (const SessionCounters& session : Sessions(*system_, sources_)) {
    sample.values[PeerKey(session.peer, "sent")] = static_cast<int64_t>(session.events_sent);
    sample.values[PeerKey(session.peer, "received")] =
        static_cast<int64_t>(session.events_received);
    sample.values[PeerKey(session.peer, "written")] = static_cast<int64_t>(session.bytes_written);
    sample.values[PeerKey(session.peer, "read")] = static_cast<int64_t>(session.bytes_read);
  }
  troupe::MutexLock lock(&mu_);
  samples_.push_back(std::move(sample));
  while (samples_.size() > kWindow) {
    samples_.pop_front();
  }
}

double RateSampler::Rate(const std::string& key) const {
  troupe::MutexLock lock(&mu_);
  if (samples_.size() < 2) {
    return 0;
  }
  const Sample& first = samples_.front();
  const Sample& last = samples_.back();
  const auto from = first.values.find(key);
  const auto to = last.values.find(key);
  const double seconds = absl::ToDoubleSeconds(last.at - first.at);
  if (from == first.values.end() || to == last.values.end() || seconds <= 0) {
    return 0;
  }
  return static_cast<double>(to->second - from->second) / seconds;
}

absl::Duration RateSampler::Window() const {
  troupe::MutexLock lock(&mu_);
  return samples_.size() < 2 ? absl::ZeroDuration() : samples_.back().at - samples_.front().at;
}

proto::NodeStatus BuildNodeStatus(ActorSystem& system, const StatusSources& sources,
                                  const RateSampler& rates, absl::Time started) {
  const absl::Time now = absl::Now();
  const ActorSystemCounters counters = system.Counters();
  const VersionInfo version = Version();
  proto::NodeStatus status;
  status.set_node_id(system.node_id());
  status.set_version(std::string{version.version});
  status.set_commit(std::string{version.commit});
  status.set_time(Rfc3339(now));
  status.set_uptime_seconds(absl::ToDoubleSeconds(now - started));
  status.set_rate_window_seconds(absl::ToDoubleSeconds(rates.Window()));

  if (sources.members) {
    std::vector<interconnect::NodeEndpoint> members = sources.members();
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.node < b.node; });
    for (const interconnect::NodeEndpoint& member : members) {
      proto::MemberStatus* out = status.add_members();
      out->set_node_id(member.node);
      out->set_client(member.client);
      const bool v6 = absl::StrContains(member.host, ':');
      const std::string host = absl::StrCat(v6 ? "[" : "", member.host, v6 ? "]" : "");
      if (!member.client) {
        out->set_address(absl::StrCat(host, ":", member.port));
      }
      out->set_self(member.node == system.node_id());
      if (out->self()) {
        out->set_status_url(sources.self_url);
        status.set_listen_address(out->address());
      } else if (!member.client && member.monitoring_port != 0) {
        out->set_status_url(absl::StrCat("http://", host, ":", member.monitoring_port, "/"));
      }
    }
  }

  proto::NodeTotals* totals = status.mutable_totals();
  totals->set_live_mailboxes(counters.live_mailboxes);
  totals->set_pending_timers(counters.pending_timers);
  totals->set_dropped_events(counters.dropped_events);
  totals->set_failed_actors(counters.failed_actors);
  uint64_t events = 0;
  std::vector<PoolCounters> pools = counters.pools;
  std::sort(pools.begin(), pools.end(),
            [](const PoolCounters& a, const PoolCounters& b) { return a.name < b.name; });
  for (const PoolCounters& pool : pools) {
    events += pool.events;
    proto::PoolStatus* out = status.add_pools();
    out->set_name(pool.name);
    out->set_threads(pool.threads);
    out->set_min_threads(pool.min_threads);
    out->set_max_threads(pool.max_threads);
    out->set_threads_borrowed(pool.threads_borrowed);
    out->set_threads_lent(pool.threads_lent);
    out->set_temporary_threads(pool.temporary_threads);
    out->set_events(pool.events);
    out->set_events_per_second(rates.Rate(PoolKey(pool.name, "events")));
    out->set_busy_threads(rates.Rate(PoolKey(pool.name, "busy_ns")) / 1e9);
    out->set_queue_length(pool.queue_length);
    out->set_activations(pool.activations);
    out->set_steals(pool.steals);
    out->set_budget_preemptions(pool.budget_preemptions);
    out->set_stuck_reports(pool.stuck_reports);
  }
  totals->set_events(events);
  totals->set_events_per_second(rates.Rate("events"));

  for (const SessionCounters& session : Sessions(system, sources)) {
    proto::SessionStatus* out = status.add_sessions();
    out->set_peer(session.peer);
    out->set_state(SessionState(session));
    if (session.changed != absl::InfinitePast()) {
      out->set_since(Rfc3339(session.changed));
      out->set_for_seconds(std::max(0.0, absl::ToDoubleSeconds(now - session.changed)));
    }
    out->set_last_failure(session.last_failure);
    out->set_protocol_version(static_cast<uint32_t>(session.protocol_version));
    out->set_round_trip_ms(absl::ToDoubleMilliseconds(session.round_trip));
    out->set_events_sent_per_second(rates.Rate(PeerKey(session.peer, "sent")));
    out->set_events_received_per_second(rates.Rate(PeerKey(session.peer, "received")));
    out->set_mb_written_per_second(rates.Rate(PeerKey(session.peer, "written")) / 1e6);
    out->set_mb_read_per_second(rates.Rate(PeerKey(session.peer, "read")) / 1e6);
    out->set_sessions(session.sessions);
    out->set_connections(session.connections);
    out->set_events_sent(session.events_sent);
    out->set_events_received(session.events_received);
    out->set_bytes_written(session.bytes_written);
    out->set_bytes_read(session.bytes_read);
    out->set_queued_events(session.queued_events);
    out->set_unacked_bytes(session.unacked_bytes);
    out->set_held_bytes(session.held_bytes);
    out->set_frames_resent(session.frames_resent);
    out->set_refusals(session.refusals);
    out->set_protocol_errors(session.protocol_errors);
    out->set_overloaded(session.overloaded);
  }
  AddBusiestClasses(counters.classes, &status);
  std::vector<std::string> warnings = RecentWarnings(20);
  std::reverse(warnings.begin(), warnings.end());  // newest first
  for (std::string& warning : warnings) {
    status.add_recent_warnings(std::move(warning));
  }
  return status;
}

std::string NodeStatusJson(const proto::NodeStatus& status) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a message of this program's own schema cannot fail.
  (void)google::protobuf::util::MessageToJsonString(status, &json, options);
  return json;
}

}  // namespace troupe::node::internal
