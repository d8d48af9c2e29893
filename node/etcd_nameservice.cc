// SPDX-License-Identifier: Apache-2.0
#include "node/etcd_nameservice.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"

#include "actors/log.h"
#include "node/config.h"
#include "node/internal/etcd_client.h"
#include "proto/etcd.pb.h"

namespace troupe::node {

using interconnect::NodeEndpoint;
using internal::EtcdClient;
using internal::EtcdEndpoints;
using internal::ParseEtcdJson;

namespace {

// One attempt at one endpoint: short enough that the lease, renewed every lease_ttl / 3, is
// renewed through another endpoint before it expires when this one hangs.
absl::Duration AttemptTimeout(const EtcdOptions& options) {
  return std::min(options.connect_timeout, std::max(options.lease_ttl / 3, absl::Seconds(1)));
}

internal::EtcdTlsFiles TlsFiles(const EtcdOptions& options) {
  return {.ca_file = options.tls.ca_file,
          .cert_file = options.tls.cert_file,
          .key_file = options.tls.key_file};
}

// Pause between attempts while etcd is unreachable.
constexpr absl::Duration kRetry = absl::Seconds(1);
// A watch with nothing to say for this long is ended and made again (after a fresh read).
constexpr absl::Duration kQuietWatch = absl::Seconds(30);

std::optional<NodeId> ParseId(std::string_view text) {
  NodeId id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || end != text.data() + text.size() || id == 0 ||
      id > ActorId::kMaxNode) {
    return std::nullopt;
  }
  return id;
}

std::string RecordJson(const NodeEndpoint& endpoint, bool announced) {
  proto::etcd::NodeRecord record;
  record.set_announced(announced);
  record.set_host(endpoint.host);
  record.set_port(endpoint.port);
  record.set_client(endpoint.client);
  record.set_monitoring_port(endpoint.monitoring_port);
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(record, &json);
  return json;
}

proto::etcd::Compare KeyAbsent(const std::string& key) {
  proto::etcd::Compare compare;
  compare.set_key(key);
  compare.set_target(proto::etcd::Compare::CREATE);
  compare.set_result(proto::etcd::Compare::EQUAL);
  compare.set_create_revision(0);
  return compare;
}

proto::etcd::RequestOp PutOp(const std::string& key, const std::string& value, int64_t lease) {
  proto::etcd::RequestOp op;
  proto::etcd::PutRequest& put = *op.mutable_request_put();
  put.set_key(key);
  put.set_value(value);
  put.set_lease(lease);
  return op;
}

}  // namespace

EtcdOptions EtcdNameservice::OptionsFromConfig(const proto::InterconnectConfig& config) {
  const proto::EtcdConfig& etcd = config.etcd();
  const proto::NodeAddress& listen = config.listen();
  std::vector<std::string> endpoints(etcd.endpoints().begin(), etcd.endpoints().end());
  if (!etcd.endpoint().empty()) {
    endpoints.insert(endpoints.begin(), etcd.endpoint());
  }
  return {.endpoints = std::move(endpoints),
          .tls = {.ca_file = etcd.tls().ca_file(),
                  .cert_file = etcd.tls().cert_file(),
                  .key_file = etcd.tls().key_file()},
          .cluster_id = config.cluster_id().empty() ? "troupe" : config.cluster_id(),
          .lease_ttl = absl::Seconds(etcd.has_lease_ttl_s() ? etcd.lease_ttl_s() : 5),
          .connect_timeout = absl::Milliseconds(
              etcd.has_connect_timeout_ms() ? etcd.connect_timeout_ms() : 10'000),
          .local = {.node = 0,
                    .host = listen.host().empty() ? "127.0.0.1" : listen.host(),
                    .port = static_cast<uint16_t>(listen.port()),
                    .client = listen.client()},
          .advertise_host = config.advertise().host(),
          .advertise_port = static_cast<uint16_t>(config.advertise().port())};
}

EtcdNameservice::EtcdNameservice(EtcdOptions options)
    : options_(std::move(options)),
      prefix_(absl::StrCat("/troupe/", options_.cluster_id, "/")),
      endpoints_(std::make_shared<EtcdEndpoints>(options_.endpoints)),
      calls_(
          std::make_unique<EtcdClient>(endpoints_, AttemptTimeout(options_), TlsFiles(options_))),
      // A member that accepts no connection is left as soon as by the calls; a quiet watch is
      // normal, so only the wait for news is long.
      stream_(std::make_unique<EtcdClient>(endpoints_, AttemptTimeout(options_), TlsFiles(options_),
                                           std::max(options_.connect_timeout, kQuietWatch))) {}

absl::StatusOr<std::shared_ptr<EtcdNameservice>> EtcdNameservice::Connect(EtcdOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("interconnect.etcd.endpoints: at least one endpoint");
  }
  const bool tls = !options.tls.ca_file.empty() || !options.tls.cert_file.empty() ||
                   !options.tls.key_file.empty();
  for (const std::string& endpoint : options.endpoints) {
    const bool https = absl::StartsWith(endpoint, "https://");
    if (!https && !absl::StartsWith(endpoint, "http://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          R"(interconnect.etcd.endpoints: must be "http://host:port" or "https://host:port", got ")",
          endpoint, "\""));
    }
    if (tls && !https) {
      return absl::InvalidArgumentError(absl::StrCat("interconnect.etcd.tls: set, but endpoint \"",
                                                     endpoint, "\" is not https://"));
    }
  }
  if (options.lease_ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError("interconnect.etcd.lease_ttl_s: at least 2 seconds");
  }
  if (!options.local.client && options.advertise_host.empty() &&
      IsWildcardAddress(options.local.host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("interconnect.advertise.host: required when the node listens on the wildcard "
                     "address \"",
                     options.local.host, "\" (interconnect.listen.host), which names no machine"));
  }
  auto names = std::make_shared<EtcdNameservice>(std::move(options));
  const absl::Time deadline = absl::Now() + names->options_.connect_timeout;
  {
    troupe::MutexLock lock(&names->call_mu_);
    if (absl::Status usable = names->calls_->status(); !usable.ok()) {
      return usable;  // a TLS file that cannot be used
    }
    absl::StatusOr<int64_t> lease = names->calls_->Grant(names->options_.lease_ttl);
    while (!lease.ok() && absl::IsUnavailable(lease.status()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(100));
      lease = names->calls_->Grant(names->options_.lease_ttl);
    }
    if (!lease.ok()) {
      const std::string what =
          absl::IsUnavailable(lease.status())
              ? absl::StrCat("cannot reach etcd at ", names->endpoints_->Describe(), " within ",
                             absl::FormatDuration(names->options_.connect_timeout))
          : absl::IsUnauthenticated(lease.status())
              ? absl::StrCat("no TLS session with etcd at ", names->endpoints_->Describe())
              : absl::StrCat("etcd at ", names->endpoints_->Describe(), " refused a lease");
      return absl::Status(lease.status().code(),
                          absl::StrCat("membership: ", what, ": ", lease.status().message()));
    }
    names->lease_ = *lease;
  }
  names->table_thread_ = std::thread([raw = names.get()] { raw->FollowTable(); });
  names->lease_thread_ = std::thread([raw = names.get()] { raw->KeepLease(); });
  troupe::MutexLock lock(&names->read_mu_);
  if (!names->read_mu_.AwaitWithDeadline(absl::Condition(&names->table_read_), deadline)) {
    return absl::UnavailableError(absl::StrCat(
        "membership: etcd at ", names->endpoints_->Describe(), " did not give the table in time"));
  }
  return names;
}

EtcdNameservice::~EtcdNameservice() {
  Leave();
  stopping_.store(true);
  stream_->Stop();
  {
    troupe::MutexLock lock(&wake_mu_);
    wake_ = true;
  }
  if (table_thread_.joinable()) {
    table_thread_.join();
  }
  if (lease_thread_.joinable()) {
    lease_thread_.join();
  }
}

std::string EtcdNameservice::NodeKey(NodeId node) const {
  return absl::StrCat(prefix_, "nodes/", node);
}

// -- joining and leaving ----------------------------------------------------------------------

absl::StatusOr<NodeId> EtcdNameservice::Join(NodeId node) {
  troupe::MutexLock lock(&call_mu_);
  if (self() != 0 || left_) {
    return absl::FailedPreconditionError("membership: this nameservice joined already");
  }
  if (node > ActorId::kMaxNode) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id ", node, " is over ", ActorId::kMaxNode));
  }
  record_ = Advertised(options_.local);
  if (node != 0) {
    self_.store(node, std::memory_order_release);
    absl::Status written = WriteRecord(*calls_, /*create_only=*/true);
    if (!written.ok()) {
      self_.store(0, std::memory_order_release);
      return written;
    }
    return node;
  }
  // The counter and the reservation change in one transaction; an id taken by a node that chose
  // it itself is stepped over.
  const std::string counter = absl::StrCat(prefix_, "next_id");
  for (int attempt = 0; attempt < 1000; ++attempt) {
    absl::StatusOr<proto::etcd::RangeResponse> read = calls_->Range(counter);
    if (!read.ok()) {
      return read.status();
    }
    NodeId candidate = 1;
    int64_t version = 0;
    if (read->kvs_size() > 0) {
      candidate = ParseId(read->kvs(0).value()).value_or(1);
      version = read->kvs(0).mod_revision();
    }
    if (candidate > ActorId::kMaxNode) {
      return absl::ResourceExhaustedError("membership: etcd handed out every node id");
    }
    proto::etcd::TxnRequest txn;
    proto::etcd::Compare& same = *txn.add_compare();
    same.set_key(counter);
    same.set_target(proto::etcd::Compare::MOD);
    same.set_result(proto::etcd::Compare::EQUAL);
    same.set_mod_revision(version);
    *txn.add_compare() = KeyAbsent(NodeKey(candidate));
    *txn.add_success() = PutOp(counter, absl::StrCat(candidate + 1), 0);
    *txn.add_success() = PutOp(NodeKey(candidate), RecordJson(record_, false), lease_);
    absl::StatusOr<bool> done = calls_->Txn(txn);
    if (!done.ok()) {
      return done.status();
    }
    if (*done) {
      self_.store(candidate, std::memory_order_release);
      TROUPE_LOG(kInfo, kInterconnect)
          << "membership: etcd at " << calls_->endpoint() << " gave this process node id "
          << candidate << " (cluster \"" << options_.cluster_id << "\")";
      return candidate;
    }
    // Another node took the counter's value first, or the id is taken: step the counter over it.
    proto::etcd::TxnRequest step;
    *step.add_compare() = same;
    proto::etcd::Compare& taken = *step.add_compare();
    taken = KeyAbsent(NodeKey(candidate));
    taken.set_result(proto::etcd::Compare::GREATER);
    *step.add_success() = PutOp(counter, absl::StrCat(candidate + 1), 0);
    if (absl::StatusOr<bool> stepped = calls_->Txn(step); !stepped.ok()) {
      return stepped.status();
    }
  }
  return absl::AbortedError("membership: could not take a node id from etcd in 1000 attempts");
}

absl::Status EtcdNameservice::WriteRecord(EtcdClient& client, bool create_only) {
  const NodeId node = self();
  proto::etcd::TxnRequest txn;
  if (create_only) {
    *txn.add_compare() = KeyAbsent(NodeKey(node));
  }
  *txn.add_success() = PutOp(NodeKey(node), RecordJson(record_, announced_), lease_);
  absl::StatusOr<bool> done = client.Txn(txn);
  if (!done.ok()) {
    return done.status();
  }
  if (!*done) {
    return absl::AlreadyExistsError(
        absl::StrCat("membership: node ", node, " is already a member of cluster \"",
                     options_.cluster_id, "\" in etcd (a node that died leaves after ",
                     absl::FormatDuration(options_.lease_ttl), ")"));
  }
  return absl::OkStatus();
}

absl::Status EtcdNameservice::Announce(const NodeEndpoint& self) {
  troupe::MutexLock lock(&call_mu_);
  if (self.node == 0 || self.node != this->self() || left_) {
    return absl::FailedPreconditionError(
        absl::StrCat("membership: node ", self.node, " did not join through this nameservice"));
  }
  record_ = Advertised(self);
  announced_ = true;
  return WriteRecord(*calls_, /*create_only=*/false);
}

void EtcdNameservice::SetMonitoringPort(uint16_t port) {
  troupe::MutexLock lock(&call_mu_);
  monitoring_port_ = port;
}

void EtcdNameservice::Leave() {
  troupe::MutexLock lock(&call_mu_);
  if (left_) {
    return;
  }
  left_ = true;
  if (lease_ == 0) {
    return;  // Connect failed: there is nothing to revoke
  }
  if (absl::Status revoked = calls_->Revoke(lease_); !revoked.ok()) {
    TROUPE_LOG(kWarn, kInterconnect) << "membership: could not leave cleanly (" << revoked.message()
                                     << "); the others see this node leave when its lease expires";
  }
}

// -- the lease ----------------------------------------------------------------------------------

void EtcdNameservice::KeepLease() {
  absl::Duration pause = options_.lease_ttl / 3;
  size_t moves = 0;  // renewals tried at once on the next endpoint, in a row
  while (true) {
    {
      troupe::MutexLock lock(&wake_mu_);
      if (wake_mu_.AwaitWithDeadline(absl::Condition(&wake_), absl::Now() + pause)) {
        return;
      }
    }
    troupe::MutexLock lock(&call_mu_);
    if (left_) {
      return;
    }
    const size_t endpoint = endpoints_->current();
    absl::StatusOr<int64_t> ttl = calls_->KeepAlive(lease_);
    absl::Status status = ttl.status();
    if (ttl.ok() && *ttl <= 0) {
      // Expired (etcd was away longer than the TTL, or this process was): a new lease, and the
      // record again, so the others see this node back.
      TROUPE_LOG(kWarn, kInterconnect)
          << "membership: this node's lease in etcd expired; taking a new one";
      absl::StatusOr<int64_t> lease = calls_->Grant(options_.lease_ttl);
      status = lease.status();
      if (lease.ok()) {
        lease_ = *lease;
        if (self() != 0) {
          status = WriteRecord(*calls_, /*create_only=*/true);
        }
      }
    }
    if (!status.ok() && endpoints_->current() != endpoint) {
      // The call moved on to another endpoint: a watch still on the old one is ended (it is made
      // again on the new one), and the lease is renewed there now, not a pause later, since the
      // failed attempt may have used up most of what was left of the TTL.
      stream_->EndWatchOffCurrent();
      if (++moves < options_.endpoints.size()) {
        pause = absl::ZeroDuration();
        continue;
      }
    }
    moves = 0;
    NoteReachable(status);
    pause = status.ok() ? options_.lease_ttl / 3 : std::min(kRetry, options_.lease_ttl / 3);
  }
}

void EtcdNameservice::NoteReachable(const absl::Status& status) {
  const bool now = status.ok();
  if (reachable_.exchange(now, std::memory_order_relaxed) == now) {
    return;
  }
  if (now) {
    TROUPE_LOG(kInfo, kInterconnect)
        << "membership: etcd at " << endpoints_->urls()[endpoints_->current()]
        << " answers again; following the table again";
  } else {
    TROUPE_LOG(kWarn, kInterconnect)
        << "membership: etcd at " << endpoints_->Describe() << " unreachable (" << status.message()
        << "); keeping the last table (" << Members().size() << " members) until it is back";
  }
}

// -- the table ----------------------------------------------------------------------------------

void EtcdNameservice::FollowTable() {
  const std::string nodes = absl::StrCat(prefix_, "nodes/");
  const std::string end = EtcdClient::PrefixEnd(nodes);
  while (!stopping_.load()) {
    absl::StatusOr<int64_t> revision = ReadTable(*stream_);
    if (stopping_.load()) {
      return;  // the read was cut short by the destructor, not by etcd
    }
    NoteReachable(revision.status());
    absl::Status status = revision.status();
    const absl::Time watched = absl::Now();
    if (revision.ok()) {
      // A watch that ends (etcd went away, or nothing came for the client's timeout) is followed
      // by a fresh read, which tells whether etcd is still there.
      status =
          stream_->Watch(nodes, end, *revision + 1, [&](const proto::etcd::WatchResponse& answer) {
            if (answer.canceled() || answer.compact_revision() != 0) {
              return false;  // compacted past us: read the table again
            }
            for (const proto::etcd::Event& event : answer.events()) {
              Apply(event.kv().key(), event.type() == proto::etcd::Event::DELETE
                                          ? std::nullopt
                                          : std::optional(event.kv().value()));
            }
            return !stopping_.load();
          });
      if (!status.ok() && !absl::IsUnavailable(status) && !absl::IsCancelled(status)) {
        TROUPE_LOG(kWarn, kInterconnect) << "membership: " << status.message();
      }
    }
    if (stopping_.load()) {
      return;
    }
    // No loop: a read that failed, or a watch that failed at once, waits before the next try.
    if (!revision.ok() || (!status.ok() && absl::Now() - watched < kRetry)) {
      troupe::MutexLock lock(&wake_mu_);
      (void)wake_mu_.AwaitWithDeadline(absl::Condition(&wake_), absl::Now() + kRetry);
    }
  }
}

absl::StatusOr<int64_t> EtcdNameservice::ReadTable(EtcdClient& client) {
  const std::string nodes = absl::StrCat(prefix_, "nodes/");
  absl::StatusOr<proto::etcd::RangeResponse> read =
      client.Range(nodes, EtcdClient::PrefixEnd(nodes));
  if (!read.ok()) {
    return read.status();
  }
  std::map<NodeId, std::string> seen;
  for (const proto::etcd::KeyValue& kv : read->kvs()) {
    if (std::optional<NodeId> id = ParseId(std::string_view{kv.key()}.substr(nodes.size()))) {
      seen[*id] = kv.value();
    }
  }
  for (const NodeEndpoint& member : table_.Members()) {
    if (!seen.contains(member.node)) {
      Apply(NodeKey(member.node), std::nullopt);
    }
  }
  for (const auto& [node, value] : seen) {
    Apply(NodeKey(node), value);
  }
  {
    troupe::MutexLock lock(&read_mu_);
    table_read_ = true;
  }
  return read->header().revision();
}

void EtcdNameservice::Apply(const std::string& key, const std::optional<std::string>& value) {
  const std::string nodes = absl::StrCat(prefix_, "nodes/");
  std::optional<NodeId> node =
      key.starts_with(nodes) ? ParseId(std::string_view{key}.substr(nodes.size())) : std::nullopt;
  if (!node.has_value()) {
    return;
  }
  std::optional<NodeEndpoint> endpoint;
  if (value.has_value()) {
    proto::etcd::NodeRecord record;
    if (absl::Status parsed = ParseEtcdJson(*value, &record); !parsed.ok()) {
      TROUPE_LOG(kWarn, kInterconnect)
          << "membership: ignoring the record of node " << *node << ": " << parsed.message();
    } else if (record.announced()) {
      endpoint = NodeEndpoint{.node = *node,
                              .host = record.host(),
                              .port = static_cast<uint16_t>(record.port()),
                              .client = record.client(),
                              .monitoring_port = static_cast<uint16_t>(record.monitoring_port())};
    }
  }
  const std::optional<NodeEndpoint> known = table_.Resolve(*node);
  if (!endpoint.has_value()) {
    if (known.has_value()) {
      TROUPE_LOG(kInfo, kInterconnect) << "membership: node " << *node << " left";
      table_.Remove(*node);
    }
    return;
  }
  if (known != endpoint) {
    TROUPE_LOG(kInfo, kInterconnect)
        << "membership: node " << *node
        << (endpoint->client ? std::string(" joined (a client)")
                             : absl::StrCat(" joined at ", endpoint->host, ":", endpoint->port));
    table_.Set(*endpoint);
  }
}

// -- Nameservice ----------------------------------------------------------------------------

NodeEndpoint EtcdNameservice::Advertised(const NodeEndpoint& listening) const {
  NodeEndpoint advertised = listening;
  advertised.monitoring_port = monitoring_port_;
  if (!listening.client) {
    if (!options_.advertise_host.empty()) {
      advertised.host = options_.advertise_host;
    }
    if (options_.advertise_port != 0) {
      advertised.port = options_.advertise_port;
    }
  }
  return advertised;
}

std::optional<NodeEndpoint> EtcdNameservice::Local(NodeId self) const {
  NodeEndpoint local = options_.local;
  local.node = self;
  return local;
}

}  // namespace troupe::node
