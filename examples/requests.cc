// SPDX-License-Identifier: Apache-2.0
//
// requests: asking actors for answers, three ways, on one node (the README's "Requests and
// replies"; the same calls work across nodes):
//   - a plain thread asks and waits on a future (troupe::AskFuture, actors/scoped_actor.h);
//   - an actor asks another and gets the reply in a continuation (Actor::Ask, actors/actor.h),
//     with a timeout that fires when nobody answers;
//   - a plain thread owns an inbox (troupe::ScopedActor) and receives events;
//   - an actor's coroutine co_awaits two replies in turn (co_await Actor::Ask,
//     actors/coroutine.h).
// All three yield a troupe::AskResult: the reply, owned by the asker, or why there is none.
// Exits 0 when every answer came as expected, 1 otherwise (statuses as in cli.h).
//
//   requests
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/coroutine.h"
#include "actors/event.h"
#include "actors/scoped_actor.h"
#include "cli.h"
#include "proto/config.pb.h"

namespace {

enum : troupe::EventType {
  kEvQuote = troupe::EventSpaceBegin(troupe::kUserEventSpace),
  kEvPrice,
  kEvCheck,
};

// A request for the price of `symbol`, and its answer.
struct EvQuote : troupe::EventLocal<EvQuote, kEvQuote> {
  explicit EvQuote(std::string symbol_value) : symbol(std::move(symbol_value)) {}
  std::string symbol;
};
struct EvPrice : troupe::EventLocal<EvPrice, kEvPrice> {
  explicit EvPrice(int64_t cents_value) : cents(cents_value) {}
  int64_t cents;
};
// Tells a Checker to ask; it answers with the outcome as an EvPrice (-1: the ask failed).
struct EvCheck : troupe::EventLocal<EvCheck, kEvCheck> {
  explicit EvCheck(std::string symbol_value) : symbol(std::move(symbol_value)) {}
  std::string symbol;
};

// Quotes every symbol but "SLOW", which it never answers.
class Quotes final : public troupe::Actor {
 public:
  Quotes() : Actor(&Quotes::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvQuote, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvQuote> ev) {
    const std::string& symbol = ev.Get()->symbol;
    if (symbol != "SLOW") {
      Reply(ev, std::make_unique<EvPrice>(static_cast<int64_t>(symbol.size()) * 1000 + 99));
    }
  }
};

// On EvCheck: asks Quotes with a 50 ms timeout, and reports the outcome to whoever asked it.
class Checker final : public troupe::Actor {
 public:
  explicit Checker(troupe::ActorId quotes) : Actor(&Checker::StateWork), quotes_(quotes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCheck, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvCheck> ev) {
    Ask<EvPrice>(
        quotes_, std::make_unique<EvQuote>(ev.Get()->symbol), absl::Milliseconds(50),
        [this, asker = ev->sender(), cookie = ev->cookie()](troupe::AskResult<EvPrice> price) {
          std::printf("requests: the checker's ask: %s\n",
                      price.ok() ? std::to_string((*price)->cents).c_str()
                                 : price.status().ToString().c_str());
          Send(asker, std::make_unique<EvPrice>(price.ok() ? (*price)->cents : -1),
               troupe::kNoFlags, cookie);
        });
  }

  troupe::ActorId quotes_;
};

// On EvCheck: a coroutine asks Quotes for "AB", then for "ABC", and answers the sum (-1 when an
// ask fails). Other EvChecks are handled while it waits.
class SumChecker final : public troupe::Actor {
 public:
  explicit SumChecker(troupe::ActorId quotes) : Actor(&SumChecker::StateWork), quotes_(quotes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvCheck:
        Sum(std::move(ev));  // runs up to its first co_await
        break;
      default:
        Unhandled(ev);
    }
  }
  troupe::Task Sum(troupe::EventHandlePtr request) {  // parameters by value: the frame outlives
    troupe::AskResult<EvPrice> first =
        co_await Ask<EvPrice>(quotes_, std::make_unique<EvQuote>("AB"), absl::Milliseconds(50));
    troupe::AskResult<EvPrice> second =
        co_await Ask<EvPrice>(quotes_, std::make_unique<EvQuote>("ABC"), absl::Milliseconds(50));
    const int64_t sum =
        first.ok() && second.ok() ? (*first)->cents + (*second)->cents : int64_t{-1};
    Reply(request, std::make_unique<EvPrice>(sum));
  }

  troupe::ActorId quotes_;
};

}  // namespace

int main(int argc, char** argv) {
  troupe::examples::ParseFlagsOrExit(argc, argv,
                                     "Asks actors for answers: from a thread, from an actor, "
                                     "through a thread's own inbox and from a coroutine.");
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> created =
      troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!created.ok()) {
    std::fprintf(stderr, "requests: %s\n", created.status().ToString().c_str());
    return troupe::examples::kExitConfig;
  }
  troupe::ActorSystem& system = **created;
  const troupe::ActorId quotes = system.Register(std::make_unique<Quotes>());
  bool ok = true;

  // 1. A thread asks and waits.
  troupe::AskResult<EvPrice> price =
      troupe::AskFuture<EvPrice>(system, quotes, std::make_unique<EvQuote>("ACME"),
                                 absl::Seconds(5))
          .get();
  std::printf("requests: ACME from a thread: %s\n", price.ok()
                                                        ? std::to_string((*price)->cents).c_str()
                                                        : price.status().ToString().c_str());
  ok = ok && price.ok() && (*price)->cents == 4099;

  // 2. An actor asks; a thread with an inbox hears what happened (a price, then a timeout).
  const troupe::ActorId checker = system.Register(std::make_unique<Checker>(quotes));
  troupe::ScopedActor me(system);
  me.Send(checker, std::make_unique<EvCheck>("TROUPE"), troupe::kNoFlags, 1);
  me.Send(checker, std::make_unique<EvCheck>("SLOW"), troupe::kNoFlags, 2);
  for (uint64_t expected = 1; expected <= 2; ++expected) {
    troupe::EventHandlePtr outcome = me.Receive(absl::Seconds(5));
    const EvPrice* got = outcome != nullptr ? outcome->Get<EvPrice>() : nullptr;
    if (got == nullptr) {
      std::printf("requests: no outcome %llu from the checker\n",
                  static_cast<unsigned long long>(expected));
      ok = false;
      continue;
    }
    std::printf("requests: outcome %llu from the checker: %lld\n",
                static_cast<unsigned long long>(outcome->cookie()),
                static_cast<long long>(got->cents));
    ok = ok && outcome->cookie() == expected && got->cents == (expected == 1 ? 6099 : -1);
  }

  // 3. A coroutine awaits two replies in turn.
  const troupe::ActorId summer = system.Register(std::make_unique<SumChecker>(quotes));
  me.Send(summer, std::make_unique<EvCheck>("AB+ABC"), troupe::kNoFlags, 3);
  troupe::EventHandlePtr sum = me.Receive(absl::Seconds(5));
  const EvPrice* total = sum != nullptr ? sum->Get<EvPrice>() : nullptr;
  std::printf("requests: the coroutine's sum: %lld\n",
              total != nullptr ? static_cast<long long>(total->cents) : -2LL);
  ok = ok && total != nullptr && total->cents == 2099 + 3099;
  std::printf("requests: %s\n", ok ? "OK" : "FAILED");
  return ok ? troupe::examples::kExitOk : troupe::examples::kExitFailed;
}
