// SPDX-License-Identifier: Apache-2.0
//
// Start-up and shutdown of a node's interconnect, and its typed counters. The roles live in
// interconnect/internal/: router.cc (senders' threads → proxies), proxy.cc (one session actor per
// peer), handshake_actor.cc (one per connection), listener.cc (accepts), peer_table.cc (the
// growing table of peers).
#include "interconnect/interconnect.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/metric_table.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "interconnect/config.h"
#include "interconnect/internal/events.h"
#include "interconnect/internal/handshake_actor.h"
#include "interconnect/internal/listener.h"
#include "interconnect/internal/peer_table.h"
#include "interconnect/internal/proxy.h"
#include "interconnect/internal/refusal_log.h"
#include "interconnect/internal/router.h"
#include "interconnect/internal/session_metrics.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/tls_transport.h"

namespace troupe::interconnect {

using internal::EvCloseSession;
using internal::EvLeave;
using internal::EvMembership;
using internal::EvSubscribeSession;
using internal::HandshakeSettings;
using internal::kSessionMetrics;
using internal::LocalIdentity;
using internal::MakeListener;
using internal::MakeProxy;
using internal::PeerChannel;
using internal::PeerTable;
using internal::RefusalLog;
using internal::Router;
using internal::SessionSettings;
using internal::StreamLimits;

namespace {

uint64_t RandomIncarnation() {
  std::random_device device;
  std::mt19937_64 bits((static_cast<uint64_t>(device()) << 32) ^ device());
  uint64_t value = 0;
  while (value == 0) {
    value = bits();
  }
  return value;
}

// Whether `self` dials `peer`: a client dials every node that listens and is never dialled; of
// two nodes that listen, the lower id dials.
bool Dials(const Nameservice& nameservice, NodeId self, NodeId peer) {
  const std::optional<NodeEndpoint> own = nameservice.Local(self);
  const std::optional<NodeEndpoint> other = nameservice.Resolve(peer);
  if (other.has_value() && other->client) {
    return false;
  }
  if (own.has_value() && own->client) {
    return true;
  }
  return self < peer;
}

// What every channel's metrics share: the node-wide round-trip histogram, and whether each peer
// gets its own too (interconnect.per_peer_histograms).
struct ChannelMetrics {
  std::shared_ptr<Histogram> round_trips;
  bool per_peer_histograms = true;
};

// Registers the proxy of a new channel and its ServiceId; leaves nothing running on failure.
ActorId StartProxy(ActorSystem* system, const SessionSettings& base, const RegisterOptions& options,
                   const ChannelMetrics& metrics, const std::shared_ptr<PeerChannel>& channel) {
  // Before the proxy exists: it is the only one to record round trips.
  channel->stats.round_trips.all_peers = metrics.round_trips;
  SessionSettings settings = base;
  settings.peer = channel->node;
  settings.dials = Dials(*base.nameservice, base.identity.node, channel->node);
  const ActorId proxy = system->Register(MakeProxy(std::move(settings), channel), options);
  if (proxy.IsEmpty()) {
    return proxy;
  }
  if (absl::Status status = system->RegisterService(ProxyServiceId(channel->node), proxy);
      !status.ok()) {
    TROUPE_LOG(kWarn, kInterconnect)
        << "no proxy for node " << channel->node << ": " << status.message();
    system->Send(proxy, std::make_unique<EvPoison>());
    return {};
  }
  channel->PublishMetrics(system->metrics(), metrics.per_peer_histograms);
  return proxy;
}

// Opens a channel (and proxy) for every member of the nameservice but `self`; false when one
// cannot be registered.
bool OpenMembers(PeerTable& peers, const Nameservice& nameservice, NodeId self) {
  bool all = true;
  for (const NodeEndpoint& member : nameservice.Members()) {
    if (member.node != self && peers.GetOrCreate(member.node) == nullptr) {
      all = false;
    }
  }
  return all;
}

// After a change of the table: opens channels for new members and tells each proxy whose peer
// left, or came back, so (EvMembership).
void FollowMembers(ActorSystem& system, PeerTable& peers, const Nameservice& nameservice,
                   NodeId self) {
  (void)OpenMembers(peers, nameservice, self);
  for (const std::shared_ptr<PeerChannel>& channel : peers.Channels()) {
    const bool listed = nameservice.Resolve(channel->node).has_value();
    if (channel->listed.exchange(listed, std::memory_order_relaxed) != listed) {
      TROUPE_LOG(kInfo, kInterconnect)
          << "node " << channel->node
          << (listed ? " joined the cluster again" : " left the cluster");
      system.Send(channel->proxy, std::make_unique<EvMembership>(listed));
    }
  }
}

// The channel (and proxy) of the member `peer`: kNotFound when the nameservice does not know it,
// kFailedPrecondition once the interconnect closes (no new channels).
absl::StatusOr<PeerChannel*> MemberChannel(const Nameservice& nameservice, PeerTable& peers,
                                           NodeId peer) {
  if (!nameservice.Resolve(peer).has_value()) {
    return absl::NotFoundError(absl::StrCat("node ", peer, " is not a member (nameservice)"));
  }
  PeerChannel* channel = peers.GetOrCreate(peer);
  if (channel == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no session with node ", peer, ": the interconnect is closing"));
  }
  return channel;
}

}  // namespace

std::vector<SessionCounters> SessionCountersOf(const MetricsRegistry& registry) {
  std::map<NodeId, SessionCounters> by_peer;
  registry.ForEach([&](const MetricSample& sample) {
    if (!sample.name.starts_with("troupe_session_")) {
      return;
    }
    const std::string_view label = sample.label("peer");
    NodeId peer = 0;
    if (std::from_chars(label.data(), label.data() + label.size(), peer).ec != std::errc()) {
      return;
    }
    SessionCounters& counters = by_peer[peer];
    counters.peer = peer;
    FillFromRows(kSessionMetrics, sample, counters);
  });
  std::vector<SessionCounters> all;
  all.reserve(by_peer.size());
  for (auto& [peer, counters] : by_peer) {
    all.push_back(counters);
  }
  return all;
}

ActorId ProxyServiceId(NodeId peer) { return ServiceId(absl::StrCat("ic/", peer)); }

absl::StatusOr<std::unique_ptr<Interconnect>> Interconnect::Start(ActorSystem* system,
                                                                  InterconnectOptions options) {
  const LogBinding binding(&system->log_context());
  if (absl::Status valid = ValidateConfig(system->config().interconnect()); !valid.ok()) {
    return valid;
  }
  const proto::InterconnectConfig config = WithDefaults(system->config().interconnect());
  const NodeId self = system->node_id();
  std::shared_ptr<Nameservice> nameservice = options.nameservice != nullptr
                                                 ? std::move(options.nameservice)
                                                 : StaticNameservice::FromConfig(config);
  const std::optional<NodeEndpoint> own = nameservice->Local(self);
  if (!own.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("interconnect.nodes: no entry for this node (node_id ", self, ")"));
  }
  LocalIdentity identity;
  identity.cluster_id = config.cluster_id();
  identity.node = self;
  identity.incarnation = options.incarnation.value_or(RandomIncarnation());
  if (identity.incarnation == 0) {
    return absl::InvalidArgumentError("incarnation: must not be 0");
  }
  if (options.protocol.oldest == 0 || options.protocol.oldest > options.protocol.newest) {
    return absl::InvalidArgumentError(absl::StrCat("protocol: versions ", options.protocol.oldest,
                                                   "..", options.protocol.newest,
                                                   " are not a range of versions from 1"));
  }
  identity.protocol = options.protocol;
  // A weak reference: the nameservice may be the user's, and must not keep itself alive through
  // the identity that the interconnect's actors hold.
  identity.is_member = [names = std::weak_ptr<Nameservice>(nameservice), self](NodeId node) {
    std::shared_ptr<Nameservice> alive = names.lock();
    return node != self && alive != nullptr && alive->Resolve(node).has_value();
  };

  std::string pool_name = options.pool;
  if (pool_name.empty()) {
    pool_name = system->PoolIndex("IC").ok() ? "IC" : "";
  }
  RegisterOptions register_options;
  if (!pool_name.empty()) {
    absl::StatusOr<uint32_t> pool = system->PoolIndex(pool_name);
    if (!pool.ok()) {
      return pool.status();
    }
    register_options.pool = *pool;
  }

  auto ic = std::unique_ptr<Interconnect>(new Interconnect());
  ic->lease_ = LeaseSystem(*system, absl::StrCat("the Interconnect of node ", self));
  ic->system_ = system;
  ic->nameservice_ = nameservice;
  ic->incarnation_ = identity.incarnation;
  if (options.transport != nullptr) {
    ic->transport_ = std::move(options.transport);
  } else {
    // TCP and TLS alike run their I/O on the interconnect's pool unless told to keep a thread.
    TcpTransportOptions tcp;
    if (!config.io_thread()) {
      tcp.io_pool = pool_name.empty() ? system->config().default_pool() : pool_name;
    }
    if (config.has_tls()) {
      absl::StatusOr<std::unique_ptr<Transport>> tls =
          MakeTlsTransport(system, {.ca_file = config.tls().ca_file(),
                                    .cert_file = config.tls().cert_file(),
                                    .key_file = config.tls().key_file(),
                                    .node = self,
                                    .tcp = std::move(tcp)});
      if (!tls.ok()) {
        return absl::Status(tls.status().code(),
                            absl::StrCat("interconnect.tls.", tls.status().message()));
      }
      ic->transport_ = std::move(*tls);
    } else {
      absl::StatusOr<std::unique_ptr<Transport>> plain = MakeTcpTransport(system, std::move(tcp));
      if (!plain.ok()) {
        return plain.status();
      }
      ic->transport_ = std::move(*plain);
    }
  }

  StreamLimits limits;
  limits.max_unacked_bytes = config.max_unacked_bytes();
  limits.max_event_size = config.max_event_size();
  const absl::Duration heartbeat = absl::Milliseconds(config.heartbeat_interval_ms());
  const absl::Duration dead_timeout = absl::Milliseconds(config.dead_peer_timeout_ms());
  auto refusals = std::make_shared<RefusalLog>();
  ic->refusals_ = refusals;
  ic->metrics_ = refusals->PublishMetrics(system->metrics());
  ic->round_trips_ = std::make_shared<Histogram>(10, 34);  // 1 us .. 17 s, as each peer's
  ic->metrics_.push_back(system->metrics().AddHistogram(
      {.name = "troupe_interconnect_round_trip_seconds",
       .help = "Round trips of data frames to every peer: from the write to the first "
               "acknowledgement covering it (one frame per session timed at a time).",
       .labels = {}},
      ic->round_trips_.get()));
  const ChannelMetrics channel_metrics{.round_trips = ic->round_trips_,
                                       .per_peer_histograms = config.per_peer_histograms()};
  const SessionSettings base{.identity = identity,
                             .heartbeat = heartbeat,
                             .dead_timeout = dead_timeout,
                             .limits = limits,
                             .nameservice = nameservice,
                             .transport = ic->transport_,
                             .handshakes = register_options,
                             .refusals = refusals,
                             .max_redial_delay = absl::Milliseconds(config.max_redial_delay_ms())};
  ic->peers_ = std::make_shared<PeerTable>([system, base, register_options, channel_metrics](
                                               const std::shared_ptr<PeerChannel>& channel) {
    return StartProxy(system, base, register_options, channel_metrics, channel);
  });
  // The router goes in before any session can come up (members are dialled next, the port opened
  // after): an actor that answers an event from a new session must find a route back. On a failed
  // start the destructor closes it.
  ic->router_ = std::make_shared<Router>(system, ic->peers_, nameservice, limits.max_event_size,
                                         config.max_queued_bytes() - config.max_unacked_bytes());
  SetRemoteRouter(*system, ic->router_);
  if (!OpenMembers(*ic->peers_, *nameservice, self)) {
    return absl::ResourceExhaustedError("could not register the interconnect's proxies");
  }
  ic->listener_ = system->Register(MakeListener(HandshakeSettings{.identity = identity,
                                                                  .transport = ic->transport_,
                                                                  .timeout = dead_timeout,
                                                                  .refusals = refusals},
                                                ic->peers_, register_options),
                                   register_options);
  if (ic->listener_.IsEmpty()) {
    return absl::ResourceExhaustedError("could not register the interconnect's listener");
  }
  if (!own->client) {
    absl::StatusOr<uint16_t> port = ic->transport_->Listen(own->host, own->port, ic->listener_);
    if (!port.ok()) {
      return absl::UnavailableError(absl::StrCat("interconnect: cannot listen on ", own->host, ":",
                                                 own->port, ": ", port.status().message()));
    }
    ic->port_ = *port;
  }
  // A member that joins later is dialled (or awaited) from the moment the nameservice says so; one
  // that leaves is gone.
  ic->watch_ = nameservice->Watch(
      [system, peers = std::weak_ptr<PeerTable>(ic->peers_), names = nameservice.get(), self] {
        if (std::shared_ptr<PeerTable> alive = peers.lock(); alive != nullptr) {
          FollowMembers(*system, *alive, *names, self);
        }
      });
  NodeEndpoint announced = *own;
  announced.node = self;
  announced.port = ic->port_;
  if (absl::Status status = nameservice->Announce(announced); !status.ok()) {
    return status;
  }
  // A change between the first OpenMembers and the watch is caught up here.
  FollowMembers(*system, *ic->peers_, *nameservice, self);
  TROUPE_LOG(kInfo, kInterconnect)
      << "node " << self
      << (own->client ? std::string(" dials only (a client)")
                      : absl::StrCat(" listening on ", own->host, ":", ic->port_))
      << " (cluster \"" << identity.cluster_id << "\", " << ic->peers_->Channels().size()
      << " peers)";
  return ic;
}

Interconnect::~Interconnect() {
  watch_.Cancel();
  if (router_ != nullptr) {
    router_->Close();
  }
  if (transport_ != nullptr) {
    transport_->Shutdown();
  }
  if (peers_ != nullptr) {
    const bool drained = drained_.exchange(true);
    for (const std::shared_ptr<PeerChannel>& channel : peers_->Close()) {
      channel->metrics.clear();  // a later interconnect on this node publishes its own
      (void)system_->RegisterService(ProxyServiceId(channel->node), ActorId());
      if (!drained) {
        // Reported if the node runs it before it stops; Drain is the way to be sure.
        system_->Send(channel->proxy, std::make_unique<EvCloseSession>(nullptr));
      }
      system_->Send(channel->proxy, std::make_unique<EvPoison>());
    }
  }
  if (!listener_.IsEmpty()) {
    system_->Send(listener_, std::make_unique<EvPoison>());
  }
}

std::vector<SessionCounters> Interconnect::Counters() const {
  return SessionCountersOf(system_->metrics());
}

// -- waiting for peers ----------------------------------------------------------------------------

absl::Status Interconnect::WaitForPeer(NodeId peer, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const NodeId self = system_->node_id();
  if (peer == self) {
    return absl::OkStatus();
  }
  if (drained_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no session with node ", peer, ": the interconnect was drained"));
  }
  absl::StatusOr<PeerChannel*> channel = MemberChannel(*nameservice_, *peers_, peer);
  if (!channel.ok()) {
    return channel.status();
  }
  std::string why;
  if ((*channel)->WaitUntilUp(deadline, &why)) {
    return absl::OkStatus();
  }
  if (why.empty()) {
    why = self < peer ? "never connected (dialling it)"
                      : absl::StrCat("never connected (node ", peer,
                                     " dials this node, which has the higher id; it has not)");
  }
  return absl::DeadlineExceededError(absl::StrCat("no session with node ", peer, " after ",
                                                  absl::FormatDuration(timeout), ": ", why));
}

absl::Status Interconnect::WaitForPeers(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (const NodeEndpoint& member : nameservice_->Members()) {
    if (absl::Status status = WaitForPeer(member.node, deadline - absl::Now()); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Interconnect::SubscribeSession(NodeId peer, const ActorId& subscriber) {
  if (subscriber.IsEmpty() || peer == system_->node_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SubscribeSession: ", subscriber.IsEmpty() ? "empty subscriber" : "node is this node"));
  }
  absl::StatusOr<PeerChannel*> channel = MemberChannel(*nameservice_, *peers_, peer);
  if (!channel.ok()) {
    return channel.status();
  }
  system_->Send((*channel)->proxy, std::make_unique<EvSubscribeSession>(), kNoFlags, 0, subscriber);
  return absl::OkStatus();
}

// -- stopping -------------------------------------------------------------------------------------

Interconnect::DrainReport Interconnect::Drain(absl::Duration timeout) {
  if (drained_.exchange(true, std::memory_order_acq_rel)) {
    return {.flushed = true, .quiet = true, .reported = 0};
  }
  const LogBinding binding(&system_->log_context());
  const absl::Time deadline = absl::Now() + timeout;
  const std::vector<std::shared_ptr<PeerChannel>> leaving = peers_->Channels();
  for (const std::shared_ptr<PeerChannel>& channel : leaving) {
    system_->Send(channel->proxy, std::make_unique<EvLeave>());
  }
  auto held = [this] {
    uint64_t bytes = 0;
    for (const std::shared_ptr<PeerChannel>& channel : peers_->Channels()) {
      bytes += channel->held_bytes.load(std::memory_order_relaxed);
    }
    return bytes;
  };
  // Settled: every peer has sent all it will (it answered the leaving notice, or has no
  // session), every event held for a peer is acknowledged, and no actor of this node has work
  // (no ready mailbox, no handler running), so the replies to what arrived went out.
  auto settled = [&] {
    for (const std::shared_ptr<PeerChannel>& channel : leaving) {
      if (!channel->inbound_done.load(std::memory_order_acquire)) {
        return false;
      }
    }
    if (held() != 0) {
      return false;
    }
    for (const PoolCounters& pool : system_->Counters().pools) {
      if (pool.queue_length != 0 || pool.handlers_running != 0) {
        return false;
      }
    }
    return true;
  };
  // Acknowledgements and answers come from sockets and workers, not from anything this thread
  // could wait on cheaply; a shutdown polls, starting fine and backing off. Settled must hold for
  // kDrainLinger in a row: a reply an actor sends from a timer that soon is waited for too.
  absl::Duration pause = absl::Microseconds(100);
  absl::Time settled_since = absl::InfiniteFuture();
  bool quiet = false;
  for (absl::Time now = absl::Now(); now < deadline; now = absl::Now()) {
    if (!settled()) {
      settled_since = absl::InfiniteFuture();
    } else if (settled_since == absl::InfiniteFuture()) {
      settled_since = now;
    } else if (now - settled_since >= kDrainLinger) {
      quiet = true;
      break;
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(2 * pause, absl::Milliseconds(1));
  }
  DrainReport report;
  report.flushed = held() == 0;
  report.quiet = quiet;
  report.reported = router_->Close();

  struct Closing {
    bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; }
    mutable troupe::Mutex mu;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    uint64_t reported ABSL_GUARDED_BY(mu) = 0;
  };
  auto closing = std::make_shared<Closing>();
  const std::vector<std::shared_ptr<PeerChannel>> channels = peers_->Channels();
  {
    troupe::MutexLock lock(&closing->mu);
    closing->pending = channels.size();
  }
  for (const std::shared_ptr<PeerChannel>& channel : channels) {
    system_->Send(channel->proxy, std::make_unique<EvCloseSession>([closing](uint64_t reported) {
                    troupe::MutexLock lock(&closing->mu);
                    --closing->pending;
                    closing->reported += reported;
                  }));
  }
  // Proxies answer within an activation; a node whose IC pool is stuck gets a bounded wait.
  constexpr absl::Duration kCloseWait = absl::Seconds(5);
  troupe::MutexLock lock(&closing->mu);
  const bool closed = closing->mu.AwaitWithDeadline(absl::Condition(closing.get(), &Closing::Done),
                                                    absl::Now() + kCloseWait);
  if (!closed) {
    TROUPE_LOG(kWarn, kInterconnect)
        << "drain: " << closing->pending << " proxies did not close within " << kCloseWait
        << " (is the interconnect's pool stuck?); their events are freed unreported";
  }
  report.reported += closing->reported;
  TROUPE_LOG(kInfo, kInterconnect)
      << "node " << system_->node_id() << " left: "
      << (report.quiet     ? "every peer done sending, every event acknowledged and answered"
          : report.flushed ? "the timeout passed before every answer went out"
                           : "the timeout passed")
      << ", " << report.reported << " events reported undelivered";
  return report;
}

}  // namespace troupe::interconnect
