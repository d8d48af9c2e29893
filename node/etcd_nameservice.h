// SPDX-License-Identifier: Apache-2.0
//
// EtcdNameservice: cluster membership kept in etcd (v3 API through its JSON gateway), for
// clusters whose nodes come and go. troupe::node::Node uses it when the config has
// `interconnect.etcd` (proto/config.proto); a program may also make one and pass it in
// InterconnectOptions.
//
// In etcd, under /troupe/<cluster_id>/ (so clusters with different ids share one etcd):
//   | key          | value                                    | written                         |
//   |--------------|------------------------------------------|---------------------------------|
//   | next_id      | the next node id to hand out (decimal)   | by Join, in the transaction     |
//   |              |                                          | that reserves the id            |
//   | nodes/<id>   | NodeRecord as JSON (proto/etcd.proto):   | by Join (reserved), Announce    |
//   |              | host, port, client, announced            | (listening), under the lease    |
// A node's keys live under one lease, which a thread renews every lease_ttl / 3. A node that stops
// cleanly (Leave, or the destructor) revokes it and is gone at once; one that dies is gone when
// the lease expires, lease_ttl after its last renewal. Ids handed out are never handed out again.
//
// The record says where the others dial the node: advertise_host and advertise_port where they
// are set, else where it listens (local.host, and the port it bound). A node that listens on a
// wildcard address ("0.0.0.0", "::") must set advertise_host: Connect refuses it otherwise.
//
// The table: another thread reads nodes/ and then watches it from that revision; every change
// of an announced record (a node listens, or dials as a client) reaches the watchers. When etcd
// cannot be reached, the node keeps the last table it saw and logs it once; the thread retries
// every second, and when etcd answers again, reads the table afresh (members that left
// meanwhile are gone then) and renews its lease, or (expired) takes a new one and writes its
// record again.
//
// Endpoints: `endpoints` are members of one etcd cluster. Every call (the lease's keep-alive, the
// table's reads and watch, Join's and Announce's writes) goes to the current endpoint, the first
// one at the start. When it does not answer (refused, a timeout, a TLS refusal), the choice moves
// to the next one in the list (round again after the last) for every call, and the switch is
// logged once; a call whose request cannot have reached etcd is tried on the next endpoint at
// once, one that may have (a broken connection while waiting for the answer) fails and is
// retried as above. One attempt at one endpoint gives up after min(connect_timeout,
// max(lease_ttl / 3, 1 s)), and a keep-alive that moved on is sent again at once, so the lease is
// renewed through another member before it expires. The watch follows: when the lease's calls
// move away from its endpoint, or its stream breaks, it is made again where the calls go. A lease
// belongs to the etcd cluster, not to a member: it survives the switch.
//
// TLS: "https://" endpoints with `tls` (ca_file: the CA that signed etcd's certificate, which must
// name the endpoint's host; cert_file and key_file: the client certificate of an etcd started with
// --client-cert-auth). A refused certificate, by either side, fails Connect at once with
// kUnauthenticated and OpenSSL's reason; a file that cannot be used fails it with
// kInvalidArgument naming the field.
//
// Thread-safety: thread-safe. Watchers run on the watching thread, one at a time.
//
// Example (what Node::Start does; Interconnect::Start listens, then calls Announce):
//
//   auto names = EtcdNameservice::Connect({.endpoints = {"http://10.0.0.9:2379",
//                                                        "http://10.0.0.10:2379"},
//                                          .cluster_id = "shop",
//                                          .local = {.host = "0.0.0.0", .port = 0},
//                                          .advertise_host = "10.0.0.7"});
//   if (!names.ok()) return names.status();
//   absl::StatusOr<NodeId> id = (*names)->Join(0);  // a fresh id
//   if (!id.ok()) return id.status();
//   config.set_node_id(*id);
//   auto system = ActorSystem::Create(config);
//   if (!system.ok()) return system.status();
//   auto ic = interconnect::Interconnect::Start(system->get(), {.nameservice = *names});
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/sync.h"
#include "interconnect/nameservice.h"
#include "proto/config.pb.h"

namespace troupe::node {

namespace internal {
class EtcdClient;
class EtcdEndpoints;
}  // namespace internal

// TLS towards etcd, for https:// endpoints (see EtcdTlsConfig in proto/config.proto).
struct EtcdTlsOptions {
  // The CA that signed etcd's certificates (empty: the system's certificate authorities).
  std::string ca_file;
  // This node's client certificate and its key, for an etcd with --client-cert-auth (empty:
  // none).
  std::string cert_file;
  std::string key_file;
};

struct EtcdOptions {
  // The client URLs of the etcd cluster's members, "http://host:port" or "https://host:port"
  // (at least one, one scheme), tried in this order (see the header comment).
  std::vector<std::string> endpoints;
  // TLS for https:// endpoints.
  EtcdTlsOptions tls = {};
  // The key prefix is /troupe/<cluster_id>/.
  std::string cluster_id = "troupe";
  // A node that dies is gone this long after its last renewal (whole seconds, at least 2).
  absl::Duration lease_ttl = absl::Seconds(5);
  // How long Connect waits for etcd. One attempt at one endpoint gives up after
  // min(connect_timeout, max(lease_ttl / 3, 1 s)).
  absl::Duration connect_timeout = absl::Seconds(10);
  // Where this node listens (node unused; port 0: any free port), or that it is a client.
  interconnect::NodeEndpoint local = {};
  // Where the others dial this node, published in its record: host (empty: local.host, which
  // must then not be a wildcard address such as "0.0.0.0") and port (0: the port it bound).
  std::string advertise_host = {};
  uint16_t advertise_port = 0;
};

class EtcdNameservice final : public interconnect::Nameservice {
 public:
  // The options of `config` (interconnect.etcd, .listen, .advertise, .cluster_id; defaults filled
  // as WithDefaults does).
  static EtcdOptions OptionsFromConfig(const proto::InterconnectConfig& config);
  // Takes a lease in etcd, reads the table and starts following it. kUnavailable when no
  // endpoint answers within connect_timeout (the message says why: refused, a timeout, a TLS
  // handshake etcd or this node refused); kInvalidArgument naming the config field for a bad
  // endpoint, TTL, TLS file or a wildcard local host with no advertise_host.
  static absl::StatusOr<std::shared_ptr<EtcdNameservice>> Connect(EtcdOptions options);
  // Leaves (see Leave) and stops the threads.
  ~EtcdNameservice() override;
  EtcdNameservice(const EtcdNameservice&) = delete;
  EtcdNameservice& operator=(const EtcdNameservice&) = delete;
  EtcdNameservice(EtcdNameservice&&) = delete;
  EtcdNameservice& operator=(EtcdNameservice&&) = delete;

  // Reserves node id `node` for this process, or, with 0, the next id etcd hands out. Once.
  // kAlreadyExists when another member has `node`; kFailedPrecondition on a second call;
  // kUnavailable when etcd does not answer.
  absl::StatusOr<NodeId> Join(NodeId node);
  // The id Join reserved (0 before).
  NodeId self() const { return self_.load(std::memory_order_acquire); }
  // Revokes the lease: this node's record goes at once and the others see it leave. The table
  // stays as it was. Idempotent.
  void Leave();
  // Whether etcd answered the last call (false while it is unreachable).
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }

  std::optional<interconnect::NodeEndpoint> Resolve(NodeId node) const override {
    return table_.Resolve(node);
  }
  std::vector<interconnect::NodeEndpoint> Members() const override { return table_.Members(); }
  interconnect::NameserviceWatch Watch(std::function<void()> on_change) override {
    return table_.Watch(std::move(on_change));
  }
  // The configured local endpoint.
  std::optional<interconnect::NodeEndpoint> Local(NodeId self) const override;
  // Writes this node's record under the lease: it listens at `self`, and the record says
  // advertise_host and advertise_port where they are set. kFailedPrecondition before Join or for
  // another node.
  absl::Status Announce(const interconnect::NodeEndpoint& self) override;
  // The port of this node's monitoring server, published in its record from the next write
  // (Announce) on, so the others' status pages link to this node's. Call before Announce.
  void SetMonitoringPort(uint16_t port);

  explicit EtcdNameservice(EtcdOptions options);  // for Connect

 private:
  std::string NodeKey(NodeId node) const;
  // The lease thread: renews, and takes a new lease (writing the record again) when it expired.
  void KeepLease();
  // The table thread: reads the table, then watches it; again from the start after a failure.
  void FollowTable();
  // Reads the whole table; returns the revision to watch from.
  absl::StatusOr<int64_t> ReadTable(internal::EtcdClient& client);
  // Applies one PUT (record) or DELETE (nullopt) of `key` to the table, which tells the watchers
  // when it changed.
  void Apply(const std::string& key, const std::optional<std::string>& value);
  // Writes this node's record under the current lease; kAlreadyExists when `create_only` and the
  // key exists.
  absl::Status WriteRecord(internal::EtcdClient& client, bool create_only)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Notes whether etcd answered, logging each change once.
  void NoteReachable(const absl::Status& status);
  // `listening` with the advertised host and port and the monitoring port put in.
  interconnect::NodeEndpoint Advertised(const interconnect::NodeEndpoint& listening) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);

  const EtcdOptions options_;
  const std::string prefix_;
  // The endpoints and the current one, shared by calls_ and stream_.
  const std::shared_ptr<internal::EtcdEndpoints> endpoints_;
  std::atomic<NodeId> self_{0};
  std::atomic<bool> reachable_{true};
  std::atomic<bool> stopping_{false};

  // Calls made by the caller's threads (Join, Announce, Leave) and by the lease thread.
  troupe::Mutex call_mu_;
  std::unique_ptr<internal::EtcdClient> calls_ ABSL_GUARDED_BY(call_mu_);
  int64_t lease_ ABSL_GUARDED_BY(call_mu_) = 0;
  bool announced_ ABSL_GUARDED_BY(call_mu_) = false;
  bool left_ ABSL_GUARDED_BY(call_mu_) = false;
  interconnect::NodeEndpoint record_ ABSL_GUARDED_BY(call_mu_);
  uint16_t monitoring_port_ ABSL_GUARDED_BY(call_mu_) = 0;

  // The announced members, as last read from etcd; its watchers are this nameservice's.
  interconnect::StaticNameservice table_;
  troupe::Mutex read_mu_;
  // The table has been read once (Connect waits for it).
  bool table_read_ ABSL_GUARDED_BY(read_mu_) = false;

  // The watch stream's client, stopped from the destructor.
  std::unique_ptr<internal::EtcdClient> stream_;
  // Wakes the lease thread early (stopping).
  troupe::Mutex wake_mu_;
  bool wake_ ABSL_GUARDED_BY(wake_mu_) = false;
  std::thread lease_thread_;
  std::thread table_thread_;
};

}  // namespace troupe::node
