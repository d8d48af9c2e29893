// SPDX-License-Identifier: Apache-2.0
#include "node/internal/etcd_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace troupe::node::internal {
namespace {

std::chrono::microseconds ToChrono(absl::Duration duration) {
  return std::chrono::microseconds(absl::ToInt64Microseconds(duration));
}

// The request as the gateway reads it: etcd's own field names.
std::string ToJson(const google::protobuf::Message& request) {
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(request, &json, print);
  return json;
}

}  // namespace

absl::Status ParseEtcdJson(std::string_view text, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), message, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("etcd answered something that is not its JSON (", status.ToString(),
                     "): ", absl::string_view(text.data(), std::min<size_t>(text.size(), 200))));
  }
  return absl::OkStatus();
}

EtcdClient::EtcdClient(const std::string& endpoint, absl::Duration timeout)
    : endpoint_(endpoint), http_(std::make_unique<httplib::Client>(endpoint)) {
  http_->set_connection_timeout(ToChrono(timeout));
  http_->set_read_timeout(ToChrono(timeout));
  http_->set_write_timeout(ToChrono(timeout));
  http_->set_keep_alive(true);
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::Stop() { http_->stop(); }

std::string EtcdClient::PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return {'\0'};  // every key
}

absl::StatusOr<std::string> EtcdClient::Post(const std::string& path,
                                             const google::protobuf::Message& request) {
  httplib::Result result = http_->Post(path, ToJson(request), "application/json");
  if (!result) {
    return absl::UnavailableError(absl::StrCat("etcd at ", endpoint_, " did not answer ", path,
                                               ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::InternalError(absl::StrCat("etcd at ", endpoint_, " answered ", path, " with ",
                                            result->status, ": ", result->body.substr(0, 200)));
  }
  return std::move(result->body);
}

template <typename Answer>
absl::StatusOr<Answer> EtcdClient::Call(const std::string& path,
                                        const google::protobuf::Message& request) {
  absl::StatusOr<std::string> body = Post(path, request);
  if (!body.ok()) {
    return body.status();
  }
  Answer answer;
  if (absl::Status status = ParseEtcdJson(*body, &answer); !status.ok()) {
    return status;
  }
  return answer;
}

absl::StatusOr<int64_t> EtcdClient::Grant(absl::Duration ttl) {
  proto::etcd::LeaseGrantRequest request;
  request.set_ttl(absl::ToInt64Seconds(ttl));
  absl::StatusOr<proto::etcd::LeaseGrantResponse> answer =
      Call<proto::etcd::LeaseGrantResponse>("/v3/lease/grant", request);
  if (!answer.ok()) {
    return answer.status();
  }
  if (!answer->error().empty() || answer->id() == 0) {
    return absl::InternalError(absl::StrCat("etcd granted no lease: ", answer->error()));
  }
  return answer->id();
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  proto::etcd::LeaseKeepAliveRequest request;
  request.set_id(lease);
  absl::StatusOr<proto::etcd::KeepAliveStreamMessage> answer =
      Call<proto::etcd::KeepAliveStreamMessage>("/v3/lease/keepalive", request);
  if (!answer.ok()) {
    return answer.status();
  }
  if (answer->has_error()) {
    return absl::InternalError(absl::StrCat("etcd keep-alive: ", answer->error().message()));
  }
  return answer->result().ttl();
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  proto::etcd::LeaseKeepAliveRequest request;
  request.set_id(lease);
  return Post("/v3/lease/revoke", request).status();
}

absl::StatusOr<proto::etcd::RangeResponse> EtcdClient::Range(std::string_view key,
                                                             std::string_view range_end) {
  proto::etcd::RangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(std::string(range_end));
  return Call<proto::etcd::RangeResponse>("/v3/kv/range", request);
}

absl::Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  proto::etcd::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  request.set_lease(lease);
  return Post("/v3/kv/put", request).status();
}

absl::StatusOr<bool> EtcdClient::Txn(const proto::etcd::TxnRequest& request) {
  absl::StatusOr<proto::etcd::TxnResponse> answer =
      Call<proto::etcd::TxnResponse>("/v3/kv/txn", request);
  if (!answer.ok()) {
    return answer.status();
  }
  return answer->succeeded();
}

absl::Status EtcdClient::Watch(
    std::string_view key, std::string_view range_end, int64_t start_revision,
    const std::function<bool(const proto::etcd::WatchResponse&)>& on_answer) {
  proto::etcd::WatchRequest request;
  proto::etcd::WatchCreateRequest& create = *request.mutable_create_request();
  create.set_key(std::string(key));
  create.set_range_end(std::string(range_end));
  create.set_start_revision(start_revision);
  httplib::Request http;
  http.method = "POST";
  http.path = "/v3/watch";
  http.body = ToJson(request);
  http.set_header("Content-Type", "application/json");
  // The gateway streams one JSON object per line; chunks split them anywhere.
  std::string pending;
  absl::Status failed;
  http.content_receiver = [&](const char* data, size_t size, uint64_t /*offset*/,
                              uint64_t /*total*/) {
    pending.append(data, size);
    for (size_t end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (line.empty()) {
        continue;
      }
      proto::etcd::WatchStreamMessage message;
      failed = ParseEtcdJson(line, &message);
      if (failed.ok() && message.has_error()) {
        failed = absl::InternalError(absl::StrCat("etcd watch: ", message.error().message()));
      }
      if (!failed.ok() || !on_answer(message.result())) {
        return false;
      }
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = http_->send(http, response, error);
  if (!failed.ok()) {
    return failed;
  }
  if (!sent && error != httplib::Error::Canceled) {
    return absl::UnavailableError(
        absl::StrCat("etcd at ", endpoint_, ": the watch ended: ", httplib::to_string(error)));
  }
  if (sent && response.status != 200) {
    return absl::InternalError(absl::StrCat("etcd at ", endpoint_, " answered /v3/watch with ",
                                            response.status, ": ", response.body.substr(0, 200)));
  }
  return absl::OkStatus();
}

}  // namespace troupe::node::internal
