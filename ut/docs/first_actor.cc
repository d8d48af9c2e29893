// SPDX-License-Identifier: Apache-2.0
//
// The README's "A first actor", word for word between the markers (scripts/check-doc-examples.sh);
// ctest doc_first_actor runs it: a node starts, handles an event and stops, and the program exits
// 0.
// clang-format off
// [doc-example: README.md]
#include "actors/actor.h"
#include "actors/actor_system.h"

enum : troupe::EventType { kEvAdd = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
struct EvAdd : troupe::EventLocal<EvAdd, kEvAdd> {
  explicit EvAdd(int v) : value(v) {}
  int value;
};

class Counter : public troupe::Actor {
 public:
  Counter() : Actor(&Counter::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvAdd, Handle);
      default:
        Unhandled(ev);  // EvPoison ends the actor; anything else is dropped
    }
  }
  void Handle(troupe::EventPtr<EvAdd> ev) { total_ += ev.Get()->value; }
  int64_t total_ = 0;
};

int main() {
  auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());  // defaults
  troupe::ActorId counter = (*system)->Register(std::make_unique<Counter>());
  (*system)->Send(counter, std::make_unique<EvAdd>(5));
}  // the destructor stops the node: every actor destroyed, every queued event freed
// [end doc-example]
// clang-format on
