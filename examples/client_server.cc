// SPDX-License-Identifier: Apache-2.0
//
// client_server: a two-node service in one process, built entirely in code — no config file, no
// retry loop, no counter polling. The shape to copy when embedding Troupe in a service:
//
//   | step                 | API                                                             |
//   |----------------------|-----------------------------------------------------------------|
//   | a config in code     | proto::ActorSystemConfig: pools and the node table              |
//   | start a node         | troupe::node::Node::Start(config, {.on_system_start = register ...}) |
//   | wait for the server  | Node::WaitForPeer(server, timeout), a status                    |
//   | ask                  | an actor sends requests kTrackDelivery | kSubscribeOnSession;   |
//   |                      | each ends as a reply, an EvUndelivered or the session's end     |
//   | hand the result out  | a std::promise the actor fulfils once; main waits on the future |
//   | stop                 | Node::Shutdown(deadline): flushed, or what was reported         |
//
// Node 1 (the server) registers the service "upper", which answers every UpperRequest with the
// text in upper case. Node 2 (the client) waits for the session to node 1 and registers a Client
// actor that sends --requests requests at once and gathers the replies, with its own deadline
// (--timeout_s). Here both nodes live in this process; as two processes, each would build the
// same table and start its own Node. An actor, rather than a plain thread, waits for a peer with
// Interconnect::SubscribeSession (interconnect/interconnect.h).
//
// Exits 0 when every request was answered and both nodes stopped with nothing left undelivered,
// 1 otherwise, 2 on a bad flag (cli.h).
//
//   client_server --requests=1000
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/session_events.h"
#include "cli.h"
#include "client_server.pb.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/testing/free_ports.h"
#include "node/node.h"

ABSL_FLAG(int, requests, 1000, "requests the client sends (1 to 1000000)");
ABSL_FLAG(int, timeout_s, 30, "how long the client waits for the server and for the replies");

namespace {

using troupe::examples::UpperReply;
using troupe::examples::UpperRequest;

constexpr troupe::NodeId kServerNode = 1;
constexpr troupe::NodeId kClientNode = 2;

enum : troupe::EventType {
  kEvUpperRequest = troupe::EventSpaceBegin(troupe::kUserEventSpace + 1),
  kEvUpperReply,
  kEvClientServerEnd,
};
static_assert(troupe::InEventSpace(kEvClientServerEnd - 1, troupe::kUserEventSpace + 1));

// Protobuf events cross nodes; the receiver parses the body when the handler asks for it.
struct EvUpperRequest final : troupe::EventPB<EvUpperRequest, UpperRequest, kEvUpperRequest> {};
struct EvUpperReply final : troupe::EventPB<EvUpperReply, UpperReply, kEvUpperReply> {};

// The service's name; ServiceId("upper", node) addresses it on one node.
constexpr troupe::ActorId kUpperService = troupe::ServiceId("upper");

// The server: answers each request to its sender, with the request's cookie, so the client can
// match the reply to its request.
class UpperServer : public troupe::Actor {
 public:
  UpperServer() : Actor(&UpperServer::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvUpperRequest, HandleRequest);
      default:
        Unhandled(ev);
    }
  }

  void HandleRequest(troupe::EventPtr<EvUpperRequest> ev) {
    auto reply = std::make_unique<EvUpperReply>();
    reply->record.set_text(absl::AsciiStrToUpper(ev.Get()->record.text()));
    reply->record.set_served_by(system()->node_id());
    Send(ev->sender(), std::move(reply), troupe::kNoFlags, ev->cookie());
  }
};

// What the client saw, handed to main once.
struct ClientResult {
  uint64_t answered = 0;
  uint64_t wrong = 0;        // replies whose text was not the request's in upper case
  uint64_t undelivered = 0;  // requests the interconnect reported lost
  uint64_t unanswered = 0;   // neither answered nor reported when the client gave up
  std::string ended_by;      // "all answered", "deadline", "session ended"
  absl::Duration elapsed;
};

// The client: sends every request at once, each tracked (a lost one comes back as EvUndelivered
// with its cookie) and subscribed to the session (its end comes back as EvNodeDisconnected), then
// counts what comes back. It fulfils `result` exactly once and passes away.
class Client : public troupe::Actor {
 public:
  Client(int requests, absl::Duration timeout, std::promise<ClientResult> result)
      : Actor(&Client::StateWork),
        requests_(requests),
        timeout_(timeout),
        promise_(std::move(result)),
        open_(static_cast<size_t>(requests), true) {}

  void Bootstrap() override {
    started_ = Now();
    const troupe::ActorId server = kUpperService.WithNode(kServerNode);
    for (int i = 0; i < requests_; ++i) {
      auto request = std::make_unique<EvUpperRequest>();
      request->record.set_text(Text(i));
      Send(server, std::move(request), troupe::kTrackDelivery | troupe::kSubscribeOnSession,
           /*cookie=*/static_cast<uint64_t>(i));
    }
    ScheduleWakeup(timeout_);
  }

 private:
  static std::string Text(uint64_t i) { return absl::StrCat("request number ", i); }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvUpperReply, HandleReply);
      TROUPE_HFUNC(troupe::EvUndelivered, HandleUndelivered);
      TROUPE_HFUNC(troupe::EvNodeDisconnected, HandleDisconnected);
      TROUPE_HFUNC(troupe::EvWakeup, HandleDeadline);
      TROUPE_IGNORE(troupe::kEvNodeConnected);
      default:
        Unhandled(ev);
    }
  }

  void HandleReply(troupe::EventPtr<EvUpperReply> ev) {
    if (!Close(ev->cookie())) {
      return;
    }
    ++seen_.answered;
    const UpperReply& reply = ev.Get()->record;
    if (reply.text() != absl::AsciiStrToUpper(Text(ev->cookie())) ||
        reply.served_by() != kServerNode) {
      ++seen_.wrong;
    }
    MaybeFinish();
  }

  void HandleUndelivered(troupe::EventPtr<troupe::EvUndelivered> ev) {
    if (Close(ev.Get()->cookie)) {
      ++seen_.undelivered;
      MaybeFinish();
    }
  }

  // Tracked requests of a dead session come back as EvUndelivered too; what is still open then
  // was delivered to node 1 and its reply died with the session.
  void HandleDisconnected(troupe::EventPtr<troupe::EvNodeDisconnected> /*ev*/) {
    Finish("session ended");
  }

  void HandleDeadline(troupe::EventPtr<troupe::EvWakeup> /*ev*/) { Finish("deadline"); }

  // Marks request `cookie` resolved; false for a cookie already resolved or out of range.
  bool Close(uint64_t cookie) {
    if (cookie >= open_.size() || !open_[cookie]) {
      return false;
    }
    open_[cookie] = false;
    ++resolved_;
    return true;
  }

  void MaybeFinish() {
    if (resolved_ == open_.size()) {
      Finish("all answered");
    }
  }

  void Finish(const char* why) {
    if (finished_) {
      return;
    }
    finished_ = true;
    seen_.unanswered = open_.size() - resolved_;
    seen_.ended_by = why;
    seen_.elapsed = Now() - started_;
    promise_.set_value(std::move(seen_));
    PassAway();
  }

  const int requests_;
  const absl::Duration timeout_;
  std::promise<ClientResult> promise_;
  std::vector<bool> open_;
  uint64_t resolved_ = 0;
  bool finished_ = false;
  absl::Time started_;
  ClientResult seen_;
};

// The config of node `self`, in code: two small pools and the table of both nodes on loopback.
troupe::proto::ActorSystemConfig MakeConfig(troupe::NodeId self,
                                            const std::vector<uint16_t>& ports) {
  troupe::proto::ActorSystemConfig config;
  config.set_node_id(self);
  for (const char* pool : {"User", "IC"}) {
    troupe::proto::PoolConfig* entry = config.add_pools();
    entry->set_name(pool);
    entry->set_threads(1);
  }
  troupe::proto::InterconnectConfig* ic = config.mutable_interconnect();
  ic->set_cluster_id("client-server");
  for (troupe::NodeId node : {kServerNode, kClientNode}) {
    troupe::proto::NodeAddress* address = ic->add_nodes();
    address->set_node_id(node);
    address->set_host("127.0.0.1");
    address->set_port(ports[node - 1]);
  }
  return config;
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "client_server: %s: %s\n", what, status.ToString().c_str());
  return troupe::examples::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(
      argc, argv,
      "A client node and a server node in one process, configured in code: request/reply. "
      "Exits 1 unless every request was answered and both nodes stopped flushed.");
  const int requests = absl::GetFlag(FLAGS_requests);
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (requests < 1 || requests > 1000000 || timeout_s < 1) {
    std::fprintf(stderr,
                 "client_server: --requests must be 1 to 1000000, --timeout_s at least 1\n");
    return troupe::examples::kExitUsage;
  }
  const absl::Duration timeout = absl::Seconds(timeout_s);

  absl::StatusOr<std::vector<uint16_t>> ports = troupe::interconnect::FreeLoopbackPorts(2);
  if (!ports.ok()) {
    return Fail("no free loopback ports", ports.status());
  }

  // The server registers its service before the interconnect starts: no request finds it missing.
  troupe::node::NodeOptions server_options;
  server_options.on_system_start = [](troupe::ActorSystem& system) {
    absl::StatusOr<troupe::ActorId> server = system.TryRegister(std::make_unique<UpperServer>());
    if (!server.ok()) {
      return server.status();
    }
    return system.RegisterService(kUpperService, *server);
  };
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> server =
      troupe::node::Node::Start(MakeConfig(kServerNode, *ports), std::move(server_options));
  if (!server.ok()) {
    return Fail("server node", server.status());
  }
  absl::StatusOr<std::unique_ptr<troupe::node::Node>> client =
      troupe::node::Node::Start(MakeConfig(kClientNode, *ports));
  if (!client.ok()) {
    return Fail("client node", client.status());
  }

  const absl::Time dial_start = absl::Now();
  if (absl::Status up = (*client)->WaitForPeer(kServerNode, timeout); !up.ok()) {
    return Fail("waiting for the server", up);
  }
  std::printf("client_server: session with node %u up after %.1f ms\n", kServerNode,
              absl::ToDoubleMilliseconds(absl::Now() - dial_start));

  std::promise<ClientResult> promise;
  std::future<ClientResult> future = promise.get_future();
  absl::StatusOr<troupe::ActorId> client_actor = (*client)->system().TryRegister(
      std::make_unique<Client>(requests, timeout, std::move(promise)));
  if (!client_actor.ok()) {
    return Fail("client actor", client_actor.status());
  }
  // The client's own deadline ends it; the margin covers a node too loaded to run its timer.
  if (future.wait_for(absl::ToChronoSeconds(timeout + absl::Seconds(10))) !=
      std::future_status::ready) {
    std::fprintf(stderr, "client_server: the client never reported\n");
    return troupe::examples::kExitFailed;
  }
  const ClientResult result = future.get();
  std::printf(
      "client_server: %d requests: %llu answered (%llu wrong), %llu undelivered, %llu "
      "unanswered; ended by %s after %.1f ms (%.0f requests/s)\n",
      requests, static_cast<unsigned long long>(result.answered),
      static_cast<unsigned long long>(result.wrong),
      static_cast<unsigned long long>(result.undelivered),
      static_cast<unsigned long long>(result.unanswered), result.ended_by.c_str(),
      absl::ToDoubleMilliseconds(result.elapsed),
      static_cast<double>(result.answered) / std::max(absl::ToDoubleSeconds(result.elapsed), 1e-9));

  // The client goes first: what it still holds for the server is flushed while the server runs.
  const troupe::node::Node::ShutdownReport client_stop = (*client)->Shutdown(absl::Seconds(5));
  const troupe::node::Node::ShutdownReport server_stop = (*server)->Shutdown(absl::Seconds(5));
  std::printf("client_server: shutdown: client %s (%llu reported), server %s (%llu reported)\n",
              client_stop.flushed ? "flushed" : "not flushed",
              static_cast<unsigned long long>(client_stop.reported),
              server_stop.flushed ? "flushed" : "not flushed",
              static_cast<unsigned long long>(server_stop.reported));
  const bool ok = result.answered == static_cast<uint64_t>(requests) && result.wrong == 0 &&
                  client_stop.flushed && server_stop.flushed;
  return ok ? troupe::examples::kExitOk : troupe::examples::kExitFailed;
}
