// SPDX-License-Identifier: Apache-2.0
#include "node/internal/etcd_client.h"

#include <httplib.h>
#include <openssl/err.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <ctime>
#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

#include "actors/log.h"

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

// -- endpoints ---------------------------------------------------------------------------------

size_t EtcdEndpoints::MoveOn(size_t failed, const absl::Status& why) {
  size_t expected = failed;
  const size_t next = (failed + 1) % urls_.size();
  // Several clients may see the same endpoint fail: only the first moves the choice on.
  if (!current_.compare_exchange_strong(expected, next, std::memory_order_acq_rel)) {
    return expected;
  }
  if (urls_.size() > 1 && !outage_.exchange(true, std::memory_order_relaxed)) {
    TROUPE_LOG(kWarn, kInterconnect)
        << "membership: etcd at " << urls_[failed] << " did not answer (" << why.message()
        << "); moving to " << urls_[next];
  }
  return next;
}

std::string EtcdEndpoints::Describe() const { return absl::StrJoin(urls_, ", "); }

// -- the client --------------------------------------------------------------------------------

namespace {

// Whether a request that failed with `error` cannot have reached etcd: there was no connection,
// or no TLS session, to send it on.
bool Unsent(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::BindIPAddress:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return true;
    default:
      return false;
  }
}

// OpenSSL's reasons for the last failure on this thread (a refused certificate, say), or "".
std::string TlsReasons() {
  std::string reasons;
  for (unsigned long code = ERR_get_error(); code != 0; code = ERR_get_error()) {
    std::array<char, 256> text{};
    ERR_error_string_n(code, text.data(), text.size());
    absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", text.data());
  }
  return reasons;
}

bool Readable(const std::string& path) { return std::ifstream(path).good(); }

// Keeps SIGPIPE off the calling thread while it lives. OpenSSL writes to its sockets with
// write(2), which raises SIGPIPE when etcd has closed the connection, and SIGPIPE's default action
// ends the process; the library must not decide that for the program. A SIGPIPE raised meanwhile
// is taken before the thread's mask is restored (the signal is per thread: a write raises it in
// the thread that wrote).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    if (!was_pending_) {
      const timespec zero{};
      (void)sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;
  NoSigpipe(NoSigpipe&&) = delete;
  NoSigpipe& operator=(NoSigpipe&&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace

EtcdClient::EtcdClient(std::shared_ptr<EtcdEndpoints> endpoints, absl::Duration timeout,
                       const EtcdTlsFiles& tls, absl::Duration quiet)
    : endpoints_(std::move(endpoints)), client_cert_(!tls.cert_file.empty()) {
  for (const auto& [field, path] :
       {std::pair{"ca_file", &tls.ca_file}, std::pair{"cert_file", &tls.cert_file},
        std::pair{"key_file", &tls.key_file}}) {
    if (!path->empty() && !Readable(*path) && status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("interconnect.etcd.tls.", field, ": cannot read \"", *path, "\""));
    }
  }
  for (const std::string& url : endpoints_->urls()) {
    std::unique_ptr<httplib::Client> http;
    if (absl::StartsWith(url, "https://") && !tls.cert_file.empty()) {
      http = std::make_unique<httplib::Client>(url, tls.cert_file, tls.key_file);
    } else {
      http = std::make_unique<httplib::Client>(url);
    }
    if (!http->is_valid() && status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("interconnect.etcd.tls: cannot use the client certificate \"", tls.cert_file,
                       "\" with the key \"", tls.key_file, "\" (", TlsReasons(), ")"));
    }
    if (absl::StartsWith(url, "https://")) {
      if (!tls.ca_file.empty()) {
        http->set_ca_cert_path(tls.ca_file);
      }
      http->enable_server_certificate_verification(true);
    }
    http->set_connection_timeout(ToChrono(timeout));
    http->set_read_timeout(ToChrono(std::max(timeout, quiet)));
    http->set_write_timeout(ToChrono(timeout));
    http->set_keep_alive(true);
    http_.push_back(std::move(http));
  }
}

EtcdClient::EtcdClient(const std::string& endpoint, absl::Duration timeout)
    : EtcdClient(std::make_shared<EtcdEndpoints>(std::vector<std::string>{endpoint}), timeout) {}

EtcdClient::~EtcdClient() {
  const NoSigpipe quiet;  // closing a TLS connection writes to it
  http_.clear();
}

void EtcdClient::Stop() {
  const NoSigpipe quiet;
  stopped_.store(true, std::memory_order_relaxed);
  for (const std::unique_ptr<httplib::Client>& http : http_) {
    http->stop();
  }
}

void EtcdClient::EndWatchOffCurrent() {
  const size_t at = watching_.load(std::memory_order_relaxed);
  if (at != kNone && at != endpoints_->current()) {
    const NoSigpipe quiet;
    http_[at]->stop();
  }
}

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

absl::Status EtcdClient::NoAnswer(size_t at, const std::string& what, int error) const {
  const std::string& url = endpoints_->urls()[at];
  const bool https = absl::StartsWith(url, "https://");
  std::string reason;
  switch (static_cast<httplib::Error>(error)) {
    case httplib::Error::Connection:
      reason = "no connection (refused or unreachable)";
      break;
    case httplib::Error::ConnectionTimeout:
      reason = "no connection within the timeout";
      break;
    case httplib::Error::Read:
      reason = "the connection broke, or the answer did not come within the timeout";
      break;
    case httplib::Error::Write:
      reason = "the connection broke while the request was sent";
      break;
    case httplib::Error::SSLConnection:
      reason = "the TLS handshake failed";
      break;
    case httplib::Error::SSLServerVerification:
      reason =
          "etcd's certificate was refused: it is not signed by the CA of "
          "interconnect.etcd.tls.ca_file, or does not name the endpoint's host";
      break;
    case httplib::Error::SSLLoadingCerts:
      reason = "the certificates of interconnect.etcd.tls could not be loaded";
      break;
    default:
      reason = httplib::to_string(static_cast<httplib::Error>(error));
      break;
  }
  const std::string tls = TlsReasons();
  if (absl::StrContains(tls, " alert ")) {
    reason = absl::StrCat(
        "etcd refused the TLS session, most likely this node's client certificate ",
        client_cert_ ? "(interconnect.etcd.tls.cert_file: not signed by a CA that etcd trusts, "
                       "or not for clientAuth)"
                     : "(none is set: interconnect.etcd.tls.cert_file and key_file)",
        " (TLS: ", tls, ")");
  } else if (!tls.empty()) {
    absl::StrAppend(&reason, " (TLS: ", tls, ")");
  }
  // A TLS refusal, by either side, happens before etcd reads the request.
  const bool refused =
      !tls.empty() || static_cast<httplib::Error>(error) == httplib::Error::SSLServerVerification;
  if (https && !refused && !client_cert_ &&
      (static_cast<httplib::Error>(error) == httplib::Error::Read ||
       static_cast<httplib::Error>(error) == httplib::Error::Write)) {
    absl::StrAppend(&reason,
                    "; this node presents no client certificate, and an etcd started with "
                    "--client-cert-auth closes such connections (interconnect.etcd.tls.cert_file "
                    "and key_file)");
  }
  const std::string message = absl::StrCat("etcd at ", url, " did not answer ", what, ": ", reason);
  return refused ? absl::UnauthenticatedError(message) : absl::UnavailableError(message);
}

absl::StatusOr<std::string> EtcdClient::Post(const std::string& path,
                                             const google::protobuf::Message& request) {
  if (!status_.ok()) {
    return status_;
  }
  const std::string body = ToJson(request);
  absl::Status failed;
  for (size_t tried = 0; tried < http_.size(); ++tried) {
    if (stopped_.load(std::memory_order_relaxed)) {
      return absl::CancelledError("the etcd client stopped");
    }
    const size_t at = endpoints_->current();
    httplib::Result result = [&] {
      const NoSigpipe quiet;
      return http_[at]->Post(path, body, "application/json");
    }();
    if (result) {
      endpoints_->Answered();
      if (result->status != 200) {
        return absl::InternalError(absl::StrCat("etcd at ", endpoints_->urls()[at], " answered ",
                                                path, " with ", result->status, ": ",
                                                result->body.substr(0, 200)));
      }
      return std::move(result->body);
    }
    failed = NoAnswer(at, path, static_cast<int>(result.error()));
    if (stopped_.load(std::memory_order_relaxed)) {
      return absl::CancelledError("the etcd client stopped");
    }
    endpoints_->MoveOn(at, failed);
    if (!Unsent(result.error()) && !absl::IsUnauthenticated(failed)) {
      break;  // it may have reached etcd: sent again, it could apply twice
    }
  }
  return failed;
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
    endpoints_->Answered();
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
  if (!status_.ok()) {
    return status_;
  }
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::CancelledError("the etcd client stopped");
  }
  const size_t at = endpoints_->current();
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  watching_.store(at, std::memory_order_relaxed);
  const bool sent = [&] {
    const NoSigpipe quiet;
    return http_[at]->send(http, response, error);
  }();
  watching_.store(kNone, std::memory_order_relaxed);
  if (!failed.ok()) {
    return failed;
  }
  if (!sent && error != httplib::Error::Canceled) {
    if (stopped_.load(std::memory_order_relaxed)) {
      return absl::CancelledError("the etcd client stopped");
    }
    // Not a reason to move on: a watch also ends when nothing happened for the timeout. The read
    // that follows it tells whether the endpoint is still there.
    return NoAnswer(at, "/v3/watch (the watch ended)", static_cast<int>(error));
  }
  if (sent && response.status != 200) {
    return absl::InternalError(absl::StrCat("etcd at ", endpoints_->urls()[at],
                                            " answered /v3/watch with ", response.status, ": ",
                                            response.body.substr(0, 200)));
  }
  return absl::OkStatus();
}

}  // namespace troupe::node::internal
