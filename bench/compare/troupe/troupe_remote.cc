// SPDX-License-Identifier: Apache-2.0
//
// Troupe side of the remote rows of the peer comparison (bench/compare/README.md): two nodes in
// two processes over loopback TCP, built against an installed Troupe. The client (node 1) picks two
// free loopback ports (FreeLoopbackPorts), starts its own binary again as the server (node 2,
// ../peer_process.h), and ends it by PID at the end. Each node is a troupe::node::Node started
// from a config written in code that holds only its node id and the static table of both nodes
// on 127.0.0.1: every other setting is the default (the four standard pools, proxies in the IC
// pool, plain TCP, the default per-peer bounds). The workloads are those of session_bench's
// BM_RemotePingPong and BM_RemoteStream:
//
//   troupe_remote rtt [ROUND_TRIPS]        an actor on node 1 sends a Blob (a sequence number) to
//                                          the "ponger" service on node 2, which Forwards the
//                                          handle back untouched; the pinger Forwards it again,
//                                          one at a time. 1,000 untimed round trips first. Prints
//                                          the mean round trip in µs.
//   troupe_remote stream [EVENTS] [BODY]   a sender on node 1 streams EVENTS Blobs of BODY bytes
//                                          (default 64) to the "sink" service on node 2, at most
//                                          a window of W = clamp(8 MiB / BODY, 64, 16384) events
//                                          ahead of the credits (the count so far) the sink sends
//                                          back every W/16 events. EVENTS is rounded up to a
//                                          multiple of W/16. events/s and GB/s over the wall time
//                                          from the sender's start to the last credit; an
//                                          untimed stream of 4 W events first.
//
// Each mode prints one line of key=value pairs that run.sh reads.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "compare.pb.h"
#include "interconnect/testing/free_ports.h"
#include "node/node.h"
#include "peer_process.h"
#include "report.h"

namespace {

using compare::Clock;

constexpr troupe::NodeId kClientNode = 1;
constexpr troupe::NodeId kServerNode = 2;
constexpr troupe::ActorId kPongerService = troupe::ServiceId("ponger");
constexpr troupe::ActorId kSinkService = troupe::ServiceId("sink");
constexpr absl::Duration kTimeout = absl::Seconds(120);

enum : troupe::EventType {
  kEvBlob = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvCredit,
  kEvEnd,
};
static_assert(troupe::InEventSpace(kEvEnd - 1, troupe::kUserEventSpace));

struct EvBlob final : troupe::EventPB<EvBlob, compare::Blob, kEvBlob> {};
struct EvCredit final : troupe::EventPB<EvCredit, compare::Credit, kEvCredit> {};

// -- node 2 ---------------------------------------------------------------------------------------

// Returns every ball to its sender, untouched (never parsed nor serialized again).
class Ponger final : public troupe::Actor {
 public:
  Ponger() : Actor(&Ponger::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBlob) {
      Forward(ev->sender(), ev);
    } else {
      Unhandled(ev);
    }
  }
};

// Counts the Blobs of every stream and sends the count so far to the sender every `credit_every`.
class Sink final : public troupe::Actor {
 public:
  explicit Sink(uint64_t credit_every) : Actor(&Sink::StateWork), credit_every_(credit_every) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlob) {
      Unhandled(ev);
      return;
    }
    if (++count_ % credit_every_ == 0) {
      auto credit = std::make_unique<EvCredit>();
      credit->record.set_count(count_);
      Send(ev->sender(), std::move(credit));
    }
  }

  const uint64_t credit_every_;
  uint64_t count_ = 0;
};

// -- node 1 ---------------------------------------------------------------------------------------

// Makes `count` round trips to the ponger one after another, then notifies.
class Pinger final : public troupe::Actor {
 public:
  Pinger(uint64_t count, troupe::Notification* done)
      : Actor(&Pinger::StateWork), left_(count), done_(done) {}

 private:
  void Bootstrap() override {
    auto ball = std::make_unique<EvBlob>();
    ball->record.set_seq(left_);
    Send(kPongerService.WithNode(kServerNode), std::move(ball));
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlob) {
      Unhandled(ev);
      return;
    }
    if (--left_ == 0) {
      done_->Notify();
      PassAway();
    } else {
      Forward(kPongerService.WithNode(kServerNode), ev);
    }
  }

  uint64_t left_;
  troupe::Notification* done_;
};

// Streams `count` Blobs of `body` bytes to the sink, at most `window` ahead of its credits; the
// sink has counted `base` Blobs of earlier streams. Notifies once the last one is credited.
class StreamSender final : public troupe::Actor {
 public:
  StreamSender(uint64_t count, size_t body, uint64_t window, uint64_t base,
               troupe::Notification* done)
      : Actor(&StreamSender::StateWork),
        count_(count),
        payload_(body, 'p'),
        window_(window),
        base_(base),
        done_(done) {}

 private:
  void Bootstrap() override { Fill(); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvCredit) {
      Unhandled(ev);
      return;
    }
    credited_ = ev->Get<EvCredit>()->record.count() - base_;
    if (credited_ >= count_) {
      done_->Notify();
      PassAway();
      return;
    }
    Fill();
  }
  void Fill() {
    while (sent_ < count_ && sent_ - credited_ < window_) {
      auto blob = std::make_unique<EvBlob>();
      blob->record.set_seq(++sent_);
      blob->record.set_data(payload_);
      Send(kSinkService.WithNode(kServerNode), std::move(blob));
    }
  }

  const uint64_t count_;
  const std::string payload_;
  const uint64_t window_;
  const uint64_t base_;
  troupe::Notification* done_;
  uint64_t sent_ = 0;
  uint64_t credited_ = 0;
};

// -- both -----------------------------------------------------------------------------------------

// The stream's window in events for `body`-byte events, and the sink's credit step (window / 16).
uint64_t Window(size_t body) { return std::clamp<uint64_t>((uint64_t{8} << 20) / body, 64, 16384); }

// The config of node `self` in code: its id and the table of both nodes; the rest is default.
troupe::proto::ActorSystemConfig MakeConfig(troupe::NodeId self, uint16_t client_port,
                                            uint16_t server_port) {
  troupe::proto::ActorSystemConfig config;
  config.set_node_id(self);
  for (const auto& [node, port] :
       {std::pair{kClientNode, client_port}, std::pair{kServerNode, server_port}}) {
    troupe::proto::NodeAddress* address = config.mutable_interconnect()->add_nodes();
    address->set_node_id(node);
    address->set_host("127.0.0.1");
    address->set_port(port);
  }
  return config;
}

[[noreturn]] void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "troupe_remote: %s: %s\n", what, status.ToString().c_str());
  std::_Exit(1);
}

// Registers `actor` as `service` on `system`.
absl::Status RegisterService(troupe::ActorSystem& system, troupe::ActorId service,
                             std::unique_ptr<troupe::Actor> actor) {
  absl::StatusOr<troupe::ActorId> id = system.TryRegister(std::move(actor));
  if (!id.ok()) {
    return id.status();
  }
  return system.RegisterService(service, *id);
}

// Node 2: registers the ponger and the sink (credit step for `body`-byte streams), says "ready"
// once it listens, and runs until the client ends this process.
int Serve(uint16_t client_port, uint16_t server_port, size_t body) {
  troupe::node::NodeOptions options;
  options.on_system_start = [body](troupe::ActorSystem& system) {
    if (absl::Status ponger = RegisterService(system, kPongerService, std::make_unique<Ponger>());
        !ponger.ok()) {
      return ponger;
    }
    return RegisterService(system, kSinkService, std::make_unique<Sink>(Window(body) / 16));
  };
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> node = troupe::node::Node::Start(
      MakeConfig(kServerNode, client_port, server_port), std::move(options));
  if (!node.ok()) {
    Fail("server node", node.status());
  }
  compare::AnnounceReady("ready");
  // Until SIGTERM (default action: exit) from the client.
  troupe::Notification never;
  never.WaitForNotification();
  return 0;
}

// Node 1 with node 2 in its own process, the session between them up.
struct Cluster {
  std::unique_ptr<compare::ServerProcess> server;
  std::unique_ptr<troupe::node::Node> client;
};

Cluster StartCluster(size_t body) {
  absl::StatusOr<std::vector<uint16_t>> ports = troupe::interconnect::FreeLoopbackPorts(2);
  if (!ports.ok()) {
    Fail("no free loopback ports", ports.status());
  }
  const std::string client_port = std::to_string((*ports)[0]);
  const std::string server_port = std::to_string((*ports)[1]);
  Cluster cluster;
  cluster.server = std::make_unique<compare::ServerProcess>(
      std::vector<std::string>{"serve", client_port, server_port, std::to_string(body)});
  if (!cluster.server->ok()) {
    std::fprintf(stderr, "troupe_remote: %s\n", cluster.server->error().c_str());
    std::_Exit(1);
  }
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> client =
      troupe::node::Node::Start(MakeConfig(kClientNode, (*ports)[0], (*ports)[1]));
  if (!client.ok()) {
    Fail("client node", client.status());
  }
  if (absl::Status up = (*client)->WaitForPeer(kServerNode, absl::Seconds(30)); !up.ok()) {
    Fail("waiting for node 2", up);
  }
  cluster.client = *std::move(client);
  return cluster;
}

// Registers `actor` on the client node and waits for `done`; exits on timeout.
void RunOnClient(Cluster& cluster, std::unique_ptr<troupe::Actor> actor, troupe::Notification& done,
                 const char* what) {
  cluster.client->system().Register(std::move(actor));
  if (!done.WaitForNotificationWithTimeout(kTimeout)) {
    std::fprintf(stderr, "troupe_remote: %s did not finish within %s\n", what,
                 absl::FormatDuration(kTimeout).c_str());
    std::_Exit(1);
  }
}

int RunRtt(uint64_t round_trips) {
  Cluster cluster = StartCluster(64);
  troupe::Notification warm;
  RunOnClient(cluster, std::make_unique<Pinger>(1000, &warm), warm, "the warm-up");
  troupe::Notification done;
  const auto start = Clock::now();
  RunOnClient(cluster, std::make_unique<Pinger>(round_trips, &done), done, "the round trips");
  compare::PrintRtt(round_trips, compare::SecondsSince(start));
  cluster.client->Shutdown(absl::Seconds(5));
  return 0;
}

int RunStream(uint64_t events, size_t body) {
  Cluster cluster = StartCluster(body);
  const uint64_t window = Window(body);
  const uint64_t step = window / 16;
  events = (events + step - 1) / step * step;
  troupe::Notification warm;
  RunOnClient(cluster, std::make_unique<StreamSender>(4 * window, body, window, 0, &warm), warm,
              "the warm-up stream");
  troupe::Notification done;
  const auto start = Clock::now();
  RunOnClient(cluster, std::make_unique<StreamSender>(events, body, window, 4 * window, &done),
              done, "the stream");
  compare::PrintStream(events, body, compare::SecondsSince(start));
  cluster.client->Shutdown(absl::Seconds(5));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto number = [&](int index, uint64_t fallback, const char* name) {
    return compare::CountArg(argc, argv, index, fallback, name);
  };
  if (mode == "serve" && argc == 5) {
    return Serve(static_cast<uint16_t>(number(2, 0, "CLIENT_PORT")),
                 static_cast<uint16_t>(number(3, 0, "SERVER_PORT")), number(4, 64, "BODY"));
  }
  if (mode == "rtt") {
    return RunRtt(number(2, 20'000, "ROUND_TRIPS"));
  }
  if (mode == "stream") {
    return RunStream(number(2, 1'000'000, "EVENTS"), number(3, 64, "BODY"));
  }
  std::fprintf(stderr, "usage: %s rtt [ROUND_TRIPS] | stream [EVENTS] [BODY]\n", argv[0]);
  return 2;
}
