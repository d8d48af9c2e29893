// SPDX-License-Identifier: Apache-2.0
//
// Registers an actor through the installed headers and library, exchanges one event with it and
// exits 0 when the reply arrives and the installed actors/version.h names the version and commit
// troupe::Version() reports.
#include <cstdio>
#include <memory>
#include <string>

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "actors/version.h"

namespace {

enum : troupe::EventType { kEvHello = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
struct EvHello : troupe::EventLocal<EvHello, kEvHello> {};

class Greeter : public troupe::Actor {
 public:
  explicit Greeter(troupe::Notification* done) : Actor(&Greeter::StateWork), done_(done) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvHello, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvHello> /*ev*/) { done_->Notify(); }

  troupe::Notification* done_;
};

}  // namespace

int main() {
  const troupe::VersionInfo version = troupe::Version();
  if (version.version != TROUPE_VERSION_STRING || version.commit != TROUPE_GIT_COMMIT ||
      version.major != TROUPE_VERSION_MAJOR || version.minor != TROUPE_VERSION_MINOR ||
      version.patch != TROUPE_VERSION_PATCH) {
    std::fprintf(stderr, "consumer: the library is %s (commit %s), the headers %s (commit %s)\n",
                 std::string(version.version).c_str(), std::string(version.commit).c_str(),
                 TROUPE_VERSION_STRING, TROUPE_GIT_COMMIT);
    return 1;
  }
  auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  troupe::Notification done;
  const troupe::ActorId greeter = (*system)->Register(std::make_unique<Greeter>(&done));
  (*system)->Send(greeter, std::make_unique<EvHello>());
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    std::fprintf(stderr, "consumer: no reply within 30 s\n");
    return 1;
  }
  std::printf("consumer: Troupe %s (commit %s): hello delivered to %s\n",
              std::string(version.version).c_str(), std::string(version.commit).c_str(),
              greeter.ToString().c_str());
  return 0;
}
