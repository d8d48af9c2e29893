// SPDX-License-Identifier: Apache-2.0
//
// Two nodes in one process joined by the installed interconnect over loopback TCP: node 1 sends a
// tracked event to an actor that does not exist on node 2 and exits 0 when node 2's
// Undelivered{actor-not-found} comes back across the wire. The reason's name goes through
// absl::StrCat, which with Debian's abseil (own absl::string_view) takes no std::string_view.
#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "interconnect/interconnect.h"

namespace {

class Sender : public troupe::Actor {
 public:
  Sender(troupe::ActorId target, troupe::Notification* done)
      : Actor(&Sender::StateWork), target_(target), done_(done) {}

 private:
  void Bootstrap() override {
    Send(target_, std::make_unique<troupe::EvPoison>(), troupe::kTrackDelivery);
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(troupe::EvUndelivered, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<troupe::EvUndelivered> ev) {
    const std::string line =
        absl::StrCat("consumer_cluster: node ", ev->sender().node_id(), " says ",
                     troupe::UndeliveredReasonName(ev.Get()->reason));
    std::printf("%s\n", line.c_str());
    if (ev.Get()->reason == troupe::UndeliveredReason::kActorNotFound) {
      done_->Notify();
    }
  }

  troupe::ActorId target_;
  troupe::Notification* done_;
};

}  // namespace

int main() {
  troupe::proto::ActorSystemConfig config;
  troupe::proto::InterconnectConfig& ic = *config.mutable_interconnect();
  // Port 0 for node 2 is not possible (node 1 must know it): two fixed loopback ports.
  for (uint32_t node = 1; node <= 2; ++node) {
    troupe::proto::NodeAddress& address = *ic.add_nodes();
    address.set_node_id(node);
    address.set_host("127.0.0.1");
    address.set_port(47310 + node);
  }
  std::array<std::unique_ptr<troupe::ActorSystem>, 2> systems;
  std::array<std::unique_ptr<troupe::interconnect::Interconnect>, 2> ics;
  for (uint32_t node = 1; node <= 2; ++node) {
    config.set_node_id(node);
    auto system = troupe::ActorSystem::Create(config);
    if (!system.ok()) {
      std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
      return 1;
    }
    systems[node - 1] = std::move(*system);
    auto started = troupe::interconnect::Interconnect::Start(systems[node - 1].get());
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    ics[node - 1] = std::move(*started);
  }
  troupe::Notification done;
  systems[0]->Register(std::make_unique<Sender>(troupe::ActorId(2, 1, 12345, 0), &done));
  const bool ok = done.WaitForNotificationWithTimeout(absl::Seconds(30));
  for (int i = 0; i < 2; ++i) {
    ics[i].reset();
    systems[i]->Stop();
  }
  if (!ok) {
    std::fprintf(stderr, "consumer_cluster: no answer from node 2 within 30 s\n");
    return 1;
  }
  return 0;
}
