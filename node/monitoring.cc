// SPDX-License-Identifier: Apache-2.0
#include "node/monitoring.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/log.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "node/internal/log_levels_http.h"
#include "node/internal/node_status.h"
#include "node/internal/process_metrics.h"
#include "node/internal/status_page.h"

namespace troupe::node {
namespace {

// How long a connection may take to send its request; a slow or silent client holds the one
// answering thread no longer than this.
constexpr time_t kReadTimeoutSeconds = 2;
// A GET has no body worth reading.
constexpr size_t kMaxRequestBody = 4096;
// Start waits at most this long for the accepting thread to run.
constexpr absl::Duration kStartTimeout = absl::Seconds(10);

}  // namespace

struct MonitoringServer::Impl {
  httplib::Server server;
  std::thread thread;
  // Set by the thread once listen_after_bind returned.
  std::atomic<bool> done{false};
  std::string host;
  uint16_t port = 0;
  SystemLease lease;
  // process_* and troupe_build_info in the node's registry (internal/process_metrics.h).
  std::vector<MetricsRegistry::Registration> metrics;
  internal::StatusSources sources;
  std::unique_ptr<internal::RateSampler> rates;
  absl::Time started;
};

absl::StatusOr<std::unique_ptr<MonitoringServer>> MonitoringServer::Start(
    ActorSystem* system, const proto::MonitoringConfig& config, MonitoringOptions options) {
  if (system == nullptr) {
    return absl::InvalidArgumentError("MonitoringServer::Start: null system");
  }
  if (config.port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("monitoring.port: must be between 0 and 65535, got ", config.port()));
  }
  auto impl = std::make_unique<Impl>();
  impl->host = config.host().empty() ? "127.0.0.1" : config.host();
  httplib::Server& server = impl->server;
  // One answering thread: scrapes are rare and cheap. A connection answers one request, so a
  // client that keeps its connection open cannot hold that thread.
  server.new_task_queue = [] { return new httplib::ThreadPool(1); };
  server.set_keep_alive_max_count(1);
  server.set_read_timeout(kReadTimeoutSeconds, 0);
  server.set_payload_max_length(kMaxRequestBody);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second node configured
  // with the same port would bind it too and receive half of the scrapes.
  server.set_socket_options([](int socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  impl->sources.members = std::move(options.members);
  impl->sources.sessions = std::move(options.sessions);
  impl->started = absl::Now();
  Impl* state = impl.get();
  server.Get("/",
             [system, state](const httplib::Request& /*request*/, httplib::Response& response) {
               response.set_content(internal::StatusPage(internal::BuildNodeStatus(
                                        *system, state->sources, *state->rates, state->started)),
                                    "text/html; charset=utf-8");
             });
  server.Get("/status.json",
             [system, state](const httplib::Request& /*request*/, httplib::Response& response) {
               response.set_content(internal::NodeStatusJson(internal::BuildNodeStatus(
                                        *system, state->sources, *state->rates, state->started)),
                                    "application/json");
             });
  server.Get("/metrics",
             [system](const httplib::Request& /*request*/, httplib::Response& response) {
               response.set_content(PrometheusText(system->metrics()),
                                    "text/plain; version=0.0.4; charset=utf-8");
             });
  server.Get("/healthz", [](const httplib::Request& /*request*/, httplib::Response& response) {
    response.set_content("ok\n", "text/plain; charset=utf-8");
  });
  server.Get("/readyz", [readiness = std::move(options.readiness)](
                            const httplib::Request& /*request*/, httplib::Response& response) {
    const absl::Status ready = readiness ? readiness() : absl::OkStatus();
    if (!ready.ok()) {
      response.status = 503;
    }
    response.set_content(
        ready.ok() ? std::string("ready\n") : absl::StrCat("not ready: ", ready.message(), "\n"),
        "text/plain; charset=utf-8");
  });

  internal::AddLogLevelRoutes(server, &system->log_context());

  const NodeId node = system->node_id();
  if (config.port() == 0) {
    const int port = server.bind_to_any_port(impl->host);
    if (port <= 0) {
      return absl::UnavailableError(
          absl::StrCat("monitoring: cannot listen on ", impl->host, " (any port)"));
    }
    impl->port = static_cast<uint16_t>(port);
  } else {
    impl->port = static_cast<uint16_t>(config.port());
    if (!server.bind_to_port(impl->host, impl->port)) {
      return absl::UnavailableError(absl::StrCat("monitoring: cannot listen on ", impl->host, ":",
                                                 impl->port, " (in use, or no such address)"));
    }
  }
  impl->lease = LeaseSystem(*system, absl::StrCat("the monitoring server of node ", node));
  impl->metrics = internal::PublishProcessMetrics(system->metrics());
  impl->sources.self_url = absl::StrCat(MonitoringServer::Url(impl->host, impl->port), "/");
  impl->rates = std::make_unique<internal::RateSampler>(system, impl->sources);
  impl->thread = std::thread([&server, done = &impl->done, context = &system->log_context()] {
    pthread_setname_np(pthread_self(), "troupe:http");
    const LogBinding binding(context);
    server.listen_after_bind();
    done->store(true, std::memory_order_release);
  });
  // stop() only ends a server that runs: wait until it does, so the destructor never misses it.
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (!server.is_running() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto monitoring = std::unique_ptr<MonitoringServer>(new MonitoringServer(std::move(impl)));
  if (!monitoring->impl_->server.is_running()) {
    return absl::InternalError(absl::StrCat("monitoring: the server of node ", node,
                                            " did not start within ",
                                            absl::FormatDuration(kStartTimeout)));
  }
  TROUPE_LOG(kInfo, kInterconnect)
      << "node " << node << " serves its status page at " << monitoring->url()
      << "/ and its metrics at " << monitoring->url() << "/metrics";
  return monitoring;
}

MonitoringServer::MonitoringServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MonitoringServer::~MonitoringServer() {
  // stop() ends a running server only; repeat it until the thread is out, in case it had not
  // started running yet (Start gave up waiting for it).
  while (!impl_->done.load(std::memory_order_acquire)) {
    impl_->server.stop();
    absl::SleepFor(absl::Milliseconds(1));
  }
  impl_->thread.join();
}

uint16_t MonitoringServer::port() const { return impl_->port; }

std::string MonitoringServer::url() const { return Url(impl_->host, impl_->port); }

std::string MonitoringServer::Url(const std::string& host, uint16_t port) {
  const bool v6 = absl::StrContains(host, ':');
  return absl::StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

}  // namespace troupe::node
