// SPDX-License-Identifier: Apache-2.0
//
// A user's own protobuf event between two actors of the installed package: the caller sends a
// live EvGreeting; the greeter answers with one that it serializes and re-wraps as bytes, as the
// interconnect delivers an event from another node, so the answer is parsed when handled. Exits 0
// when the answer carries what was sent.
#include <cstdio>
#include <memory>
#include <string>

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "greeting/greeting.pb.h"

namespace {

enum : troupe::EventType { kEvGreeting = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
struct EvGreeting : troupe::EventPB<EvGreeting, greeting::Greeting, kEvGreeting> {};

// Answers each greeting with hops + 1, as serialized bytes.
class Greeter : public troupe::Actor {
 public:
  Greeter() : Actor(&Greeter::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvGreeting, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvGreeting> ev) {
    auto answer = std::make_unique<EvGreeting>();
    answer->record = ev.Get()->record;
    answer->record.set_hops(answer->record.hops() + 1);
    troupe::EventHandle live(ev->sender(), SelfId(), std::move(answer));
    if (const absl::Status status = live.Serialize(); !status.ok()) {
      std::fprintf(stderr, "proto_events: %s\n", status.ToString().c_str());
      return;
    }
    Send(std::make_unique<troupe::EventHandle>(kEvGreeting, ev->sender(), SelfId(),
                                               std::string(live.bytes())));
  }
};

// Greets `greeter` once and checks the answer.
class Caller : public troupe::Actor {
 public:
  Caller(troupe::ActorId greeter, troupe::Notification* done, bool* ok)
      : Actor(&Caller::StateWork), greeter_(greeter), done_(done), ok_(ok) {}

 private:
  void Bootstrap() override {
    auto hello = std::make_unique<EvGreeting>();
    hello->record.set_text("hello");
    hello->record.set_hops(1);
    hello->record.mutable_last_loss()->set_reason(7);
    Send(greeter_, std::move(hello));
  }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvGreeting, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvGreeting> ev) {
    const greeting::Greeting& answer = ev.Get()->record;
    std::printf("proto_events: \"%s\" after %u hops\n", answer.text().c_str(), answer.hops());
    *ok_ = answer.text() == "hello" && answer.hops() == 2 && answer.last_loss().reason() == 7;
    done_->Notify();
  }

  troupe::ActorId greeter_;
  troupe::Notification* done_;
  bool* ok_;
};

}  // namespace

int main() {
  auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  troupe::Notification done;
  bool ok = false;
  const troupe::ActorId greeter = (*system)->Register(std::make_unique<Greeter>());
  (*system)->Register(std::make_unique<Caller>(greeter, &done, &ok));
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    std::fprintf(stderr, "proto_events: no answer within 30 s\n");
    return 1;
  }
  (*system)->Stop();
  return ok ? 0 : 1;
}
