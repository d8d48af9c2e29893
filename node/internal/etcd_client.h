// SPDX-License-Identifier: Apache-2.0
//
// EtcdClient: calls to etcd's v3 JSON gateway (/v3/kv/*, /v3/lease/*, /v3/watch) over HTTP or
// HTTPS (cpp-httplib), with the request and answer messages of proto/etcd.proto turned to and
// from JSON by protobuf. What EtcdNameservice (etcd_nameservice.h) needs, no more.
//
// Endpoints and failover: the clients of one nameservice share one EtcdEndpoints, the members'
// URLs and which of them is current. A call goes to the current endpoint; when that one does not
// answer, the client moves the shared choice on to the next endpoint (once, however many clients
// saw it fail; the switch is logged once) and, when the request cannot have reached etcd (no
// connection, no TLS session), tries the next endpoint at once, each endpoint at most once per
// call. A request that may have reached etcd (the connection broke while waiting for the answer)
// is not sent again: the call fails with kUnavailable and its caller decides, and its next call
// goes to the next endpoint.
//
// Errors: kUnavailable when etcd does not answer (connection refused, timeout, a broken stream);
// kUnauthenticated when the TLS handshake fails because either side refused the other's
// certificate (the message carries OpenSSL's reason); kInternal when etcd answers with an error or
// something that is not its JSON; kInvalidArgument when the TLS files cannot be used; kCancelled
// after Stop. A TLS refusal, like a refused connection, moves on to the next endpoint at once.
//
// Thread-safety: one call at a time per client (each thread of the nameservice has its own
// client); Stop may be called from any thread to end the call in progress (a watch stream, say).
// EtcdEndpoints is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

#include "proto/etcd.pb.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace troupe::node::internal {

// TLS towards etcd (https:// endpoints); empty fields are unused. Without ca_file the system's
// certificate authorities are trusted.
struct EtcdTlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// The client URLs of one etcd cluster's members and the one calls go to now.
class EtcdEndpoints {
 public:
  // `urls` is not empty.
  explicit EtcdEndpoints(std::vector<std::string> urls) : urls_(std::move(urls)) {}

  const std::vector<std::string>& urls() const { return urls_; }
  // The index of the endpoint calls go to now.
  size_t current() const { return current_.load(std::memory_order_acquire); }
  // Notes that endpoint `failed` did not answer (`why`): when it is still the current one, the
  // next one becomes current and the switch is logged, once per outage (a later switch is logged
  // again after some call was answered). Returns the current endpoint.
  size_t MoveOn(size_t failed, const absl::Status& why);
  // Notes that the current endpoint answered.
  void Answered() { outage_.store(false, std::memory_order_relaxed); }
  // The URLs joined by ", " (for messages).
  std::string Describe() const;

 private:
  const std::vector<std::string> urls_;
  // Release/acquire: MoveOn's store pairs with current()'s load (an index, nothing else
  // published with it).
  std::atomic<size_t> current_{0};
  std::atomic<bool> outage_{false};
};

class EtcdClient {
 public:
  // Calls go to `endpoints` (shared with the nameservice's other clients), over TLS with `tls`
  // for https:// URLs; one attempt at one endpoint gives up after `timeout` without a connection
  // or without progress sending, and after the longer of `timeout` and `quiet` without an answer
  // (a watch: without news).
  EtcdClient(std::shared_ptr<EtcdEndpoints> endpoints, absl::Duration timeout,
             const EtcdTlsFiles& tls = {}, absl::Duration quiet = absl::ZeroDuration());
  // A client of the one endpoint `endpoint`, "http://host:port".
  EtcdClient(const std::string& endpoint, absl::Duration timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;
  EtcdClient(EtcdClient&&) = delete;
  EtcdClient& operator=(EtcdClient&&) = delete;

  // kInvalidArgument naming the file when a TLS file cannot be loaded (the client then fails
  // every call with it).
  absl::Status status() const { return status_; }
  // The URL calls go to now.
  std::string endpoint() const { return endpoints_->urls()[endpoints_->current()]; }

  // A new lease of `ttl` (whole seconds); returns its id.
  absl::StatusOr<int64_t> Grant(absl::Duration ttl);
  // Renews `lease`; returns its TTL in seconds, 0 when the lease is gone (expired or revoked).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  // Ends `lease` and deletes its keys.
  absl::Status Revoke(int64_t lease);
  // Every key in [key, range_end) (range_end empty: `key` alone), with the store's revision.
  absl::StatusOr<proto::etcd::RangeResponse> Range(std::string_view key,
                                                   std::string_view range_end = {});
  absl::Status Put(std::string_view key, std::string_view value, int64_t lease);
  // Runs a transaction; returns whether its compares held (the success branch ran).
  absl::StatusOr<bool> Txn(const proto::etcd::TxnRequest& request);
  // Watches [key, range_end) from `start_revision` on the current endpoint, calling `on_answer`
  // for each answer of the stream until it returns false, the stream ends (an error: etcd went
  // away, or nothing came for the timeout), EndWatchOffCurrent ends it or Stop is called. Its end
  // does not move the choice of endpoint (a quiet watch ends too): the next call finds out.
  absl::Status Watch(std::string_view key, std::string_view range_end, int64_t start_revision,
                     const std::function<bool(const proto::etcd::WatchResponse&)>& on_answer);
  // Ends the call in progress (from another thread) and every later one.
  void Stop();
  // Ends the watch in progress (from another thread) when it is on another endpoint than the
  // current one, so that it is made again where the other calls go.
  void EndWatchOffCurrent();

  // The end of the range of every key that starts with `prefix`.
  static std::string PrefixEnd(std::string_view prefix);

 private:
  // Sends `request` to the current endpoint, moving on as the header says; returns the answer's
  // body (status 200).
  absl::StatusOr<std::string> Post(const std::string& path,
                                   const google::protobuf::Message& request);
  // Post, with the answer parsed as an `Answer`.
  template <typename Answer>
  absl::StatusOr<Answer> Call(const std::string& path, const google::protobuf::Message& request);
  // The status of a request to endpoint `at` that got no answer (`error`, an httplib::Error).
  absl::Status NoAnswer(size_t at, const std::string& what, int error) const;

  const std::shared_ptr<EtcdEndpoints> endpoints_;
  // One HTTP client per endpoint, in the order of endpoints_->urls().
  std::vector<std::unique_ptr<httplib::Client>> http_;
  // Whether this client presents a certificate (for the hint of a connection etcd closes).
  const bool client_cert_;
  absl::Status status_;
  std::atomic<bool> stopped_{false};
  // The endpoint of the watch in progress, or kNone. Relaxed: EndWatchOffCurrent may read a stale
  // value, and then ends nothing or a watch that is ending anyway (stop() is harmless on an idle
  // client).
  static constexpr size_t kNone = ~size_t{0};
  std::atomic<size_t> watching_{kNone};
};

// Fills `message` from the JSON `text`, ignoring fields it does not know.
absl::Status ParseEtcdJson(std::string_view text, google::protobuf::Message* message);

}  // namespace troupe::node::internal
