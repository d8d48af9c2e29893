// SPDX-License-Identifier: Apache-2.0
//
// EtcdClient: calls to etcd's v3 JSON gateway (/v3/kv/*, /v3/lease/*, /v3/watch) over one HTTP
// connection (cpp-httplib), with the request and answer messages of proto/etcd.proto turned to and
// from JSON by protobuf. What EtcdNameservice (etcd_nameservice.h) needs, no more.
//
// Errors: kUnavailable when etcd does not answer (connection refused, timeout, a broken stream),
// kInternal when it answers with an error or something that is not its JSON.
//
// Thread-safety: one call at a time (each thread of the nameservice has its own client); Stop may
// be called from any thread to end the call in progress (a watch stream, say).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

#include "proto/etcd.pb.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace troupe::node::internal {

class EtcdClient {
 public:
  // `endpoint` is "http://host:port"; each call gives up after `timeout` (a watch: after that long
  // with no answer).
  EtcdClient(const std::string& endpoint, absl::Duration timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;
  EtcdClient(EtcdClient&&) = delete;
  EtcdClient& operator=(EtcdClient&&) = delete;

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
  // Watches [key, range_end) from `start_revision`, calling `on_answer` for each answer of the
  // stream until it returns false, the stream ends (an error: etcd went away, or nothing came for
  // the timeout) or Stop is called.
  absl::Status Watch(std::string_view key, std::string_view range_end, int64_t start_revision,
                     const std::function<bool(const proto::etcd::WatchResponse&)>& on_answer);
  // Ends the call in progress (from another thread) and every later one.
  void Stop();

  // The end of the range of every key that starts with `prefix`.
  static std::string PrefixEnd(std::string_view prefix);

 private:
  absl::StatusOr<std::string> Post(const std::string& path,
                                   const google::protobuf::Message& request);
  // Post, with the answer parsed as an `Answer`.
  template <typename Answer>
  absl::StatusOr<Answer> Call(const std::string& path, const google::protobuf::Message& request);

  const std::string endpoint_;
  std::unique_ptr<httplib::Client> http_;
};

// Fills `message` from the JSON `text`, ignoring fields it does not know.
absl::Status ParseEtcdJson(std::string_view text, google::protobuf::Message* message);

}  // namespace troupe::node::internal
