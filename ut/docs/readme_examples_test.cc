// SPDX-License-Identifier: Apache-2.0
//
// The README's code examples, compiled and run. Each region between `[doc-example: README.md]`
// and `[end doc-example]` is a README block word for word (scripts/check-doc-examples.sh, ctest
// `doc_examples_match`); around it is what the README leaves out (the events, the class a member
// function belongs to) and a test of what the README says the code does.
#include <stdio.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/config.h"
#include "actors/coroutine.h"
#include "actors/events.h"
#include "actors/scoped_actor.h"
#include "actors/supervision.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "interconnect/interconnect.h"
#include "interconnect/nameservice.h"
#include "interconnect/tcp_transport.h"
#include "node/node.h"
#include "ut/actors/test_events.pb.h"

namespace {

enum : troupe::EventType {
  kEvCheck = troupe::EventSpaceBegin(troupe::kUserEventSpace + 7),
  kEvQuote,
  kEvPrice,
  kEvPing,
  kEvOrder,
  kEvMembersChanged,
};

struct EvCheck : troupe::EventLocal<EvCheck, kEvCheck> {
  explicit EvCheck(std::string symbol_value) : symbol(std::move(symbol_value)) {}
  std::string symbol;
};
struct EvQuote : troupe::EventLocal<EvQuote, kEvQuote> {
  explicit EvQuote(std::string symbol_value) : symbol(std::move(symbol_value)) {}
  std::string symbol;
};
struct EvPrice : troupe::EventLocal<EvPrice, kEvPrice> {
  explicit EvPrice(int64_t cents_value) : cents(cents_value) {}
  int64_t cents;
};
// Protobuf events: they cross nodes.
struct EvPing : troupe::EventPB<EvPing, troupe::ut::TestPayload, kEvPing> {};
struct EvOrder : troupe::EventPB<EvOrder, troupe::ut::TestPayload, kEvOrder> {};
struct EvMembersChanged : troupe::EventLocal<EvMembersChanged, kEvMembersChanged> {};

using Echo = troupe::testing::Echo<EvPing>;

// -- Requests and replies -------------------------------------------------------------------------

// Asks `quotes_` for a price on every EvCheck (the README's first handler) and answers every
// EvQuote with 4099 (its "Quotes" handler), so one class plays both parts.
class Shop final : public troupe::Actor {
 public:
  explicit Shop(troupe::ActorId quotes = {}) : Actor(&Shop::StateWork), quotes_(quotes) {}
  int64_t last() const { return last_; }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCheck, Handle);
      TROUPE_HFUNC(EvQuote, Handle);
      default:
        Unhandled(ev);
    }
  }

  // clang-format off
  // [doc-example: README.md]
  void Handle(troupe::EventPtr<EvCheck> ev) {
    Ask<EvPrice>(quotes_, std::make_unique<EvQuote>("ACME"), absl::Milliseconds(50),
                 [this](troupe::AskResult<EvPrice> price) {
                   if (price.ok()) { last_ = (*price)->cents; }   // else DEADLINE_EXCEEDED...
                 });
  }
  // ...and in Quotes:
  void Handle(troupe::EventPtr<EvQuote> ev) { Reply(ev, std::make_unique<EvPrice>(4099)); }
  // [end doc-example]
  // clang-format on

  troupe::ActorId quotes_;
  int64_t last_ = -1;
};

TEST(ReadmeExamplesTest, AskRunsTheContinuationWithTheReply) {
  troupe::testing::TestRuntime runtime;
  troupe::ActorId quotes = runtime.Register(std::make_unique<Shop>());
  auto shop = std::make_unique<Shop>(quotes);
  const Shop* shop_view = shop.get();
  troupe::ActorId shop_id = runtime.Register(std::move(shop));
  runtime.Send(shop_id, std::make_unique<EvCheck>("ACME"));
  runtime.DispatchEvents();
  EXPECT_EQ(shop_view->last(), 4099);
}

// Answers every EvCheck with a price of 1 to its sender.
class Checker final : public troupe::Actor {
 public:
  Checker() : Actor(&Checker::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvCheck, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(troupe::EventPtr<EvCheck> ev) { Reply(ev, std::make_unique<EvPrice>(1)); }
};

TEST(ReadmeExamplesTest, AThreadAsksAndReceives) {
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> created =
      troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  ASSERT_TRUE(created.ok()) << created.status();
  troupe::ActorSystem& system = **created;
  troupe::ActorId quotes = system.Register(std::make_unique<Shop>());
  troupe::ActorId checker = system.Register(std::make_unique<Checker>());

  // clang-format off
  // [doc-example: README.md]
  troupe::AskResult<EvPrice> price =
      troupe::AskFuture<EvPrice>(system, quotes, std::make_unique<EvQuote>("ACME"), absl::Seconds(5))
          .get();

  troupe::ScopedActor me(system);
  me.Send(checker, std::make_unique<EvCheck>("SLOW"));
  troupe::EventHandlePtr outcome = me.Receive(absl::Seconds(5));   // null on timeout
  // [end doc-example]
  // clang-format on

  ASSERT_TRUE(price.ok()) << price.status();
  EXPECT_EQ((*price)->cents, 4099);
  ASSERT_NE(outcome, nullptr);
  EXPECT_EQ(outcome->type(), kEvPrice);
}

// Sums two quotes in a coroutine on every EvCheck and replies the sum.
class Adder final : public troupe::Actor {
 public:
  explicit Adder(troupe::ActorId quotes) : Actor(&Adder::StateWork), quotes_(quotes) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvCheck:
        Sum(std::move(ev));
        break;
      default:
        Unhandled(ev);
    }
  }

  // clang-format off
  // [doc-example: README.md]
  troupe::Task Sum(troupe::EventHandlePtr request) {   // parameters by value: the frame outlives
    troupe::AskResult<EvPrice> first =
        co_await Ask<EvPrice>(quotes_, std::make_unique<EvQuote>("AB"), absl::Milliseconds(50));
    troupe::AskResult<EvPrice> second =
        co_await Ask<EvPrice>(quotes_, std::make_unique<EvQuote>("ABC"), absl::Milliseconds(50));
    Reply(request, std::make_unique<EvPrice>(first.ok() && second.ok()
                                                 ? (*first)->cents + (*second)->cents : -1));
  }
  // [end doc-example]
  // clang-format on

  troupe::ActorId quotes_;
};

TEST(ReadmeExamplesTest, CoroutineAwaitsTwoAsksAndReplies) {
  troupe::testing::TestRuntime runtime;
  troupe::ActorId quotes = runtime.Register(std::make_unique<Shop>());
  troupe::ActorId adder = runtime.Register(std::make_unique<Adder>(quotes));
  troupe::ActorId client = runtime.AllocateEdgeActor();
  runtime.Send(adder, std::make_unique<EvCheck>("AB+ABC"), client);
  auto sum = runtime.GrabEdgeEvent<EvPrice>(client);
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->cents, 2 * 4099);
}

// -- Actors that fail well ------------------------------------------------------------------------

// What the workers count, across instances.
struct Tally {
  int starts = 0;
};

// Worker starts seen by the test (the supervisor's Tally is its own).
int worker_starts = 0;

// Throws from its first Bootstrap; the instances after it start normally.
class Worker final : public troupe::Actor {
 public:
  explicit Worker(Tally* tally) : Actor(&Worker::StateWork), tally_(tally) {}

 private:
  void Bootstrap() override {
    ++worker_starts;
    if (tally_->starts++ == 0) {
      throw std::runtime_error("the first instance fails to start");
    }
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  Tally* tally_;
};

// clang-format off
// [doc-example: README.md]
class Supervisor final : public troupe::Actor {
 public:
  Supervisor() : Actor(&Supervisor::StateWork) {}

 private:
  troupe::SupervisorStrategy supervisor_strategy() const override {
    troupe::SupervisorStrategy strategy;   // one-for-one
    strategy.decide = [](const troupe::ChildFailure&) { return troupe::SupervisorDirective::kRestart; };
    strategy.max_restarts = 20;
    strategy.within = absl::Seconds(1);
    strategy.min_backoff = absl::Milliseconds(5);
    return strategy;
  }
  void Bootstrap() override {
    worker_ = RegisterRestartable([this] { return std::make_unique<Worker>(&tally_); });
  }
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  Tally tally_;              // outlives every instance of the worker
  troupe::ActorId worker_;   // the same id across restarts
};
// [end doc-example]
// clang-format on

TEST(ReadmeExamplesTest, SupervisorRestartsAWorkerThatFailed) {
  worker_starts = 0;
  troupe::testing::TestRuntime runtime;
  runtime.Register(std::make_unique<Supervisor>());
  runtime.DispatchEvents();  // the restart's 5 ms backoff passes in simulated time
  EXPECT_EQ(worker_starts, 2) << "the first instance failed and a second one was started";
}

// Watches `worker_` and prints how it ended.
class Monitor final : public troupe::Actor {
 public:
  explicit Monitor(troupe::ActorId worker) : Actor(&Monitor::StateWork), worker_(worker) {}

 private:
  // clang-format off
  // [doc-example: README.md]
  void Bootstrap() override { Watch(worker_); }
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case troupe::kEvTerminated: {
        const auto* ended = ev->Get<troupe::EvTerminated>();
        std::printf("%s ended (%s)\n", ended->target().ToString().c_str(),
                    troupe::TerminationReasonName(ended->reason()));
        break;
      }
      default:
        Unhandled(ev);
    }
  }
  // [end doc-example]
  // clang-format on

  troupe::ActorId worker_;
};

TEST(ReadmeExamplesTest, WatcherHearsHowTheWorkerEnded) {
  troupe::testing::TestRuntime runtime;
  troupe::ActorId worker = runtime.Register(std::make_unique<Echo>());
  runtime.Register(std::make_unique<Monitor>(worker));
  runtime.DispatchEvents();
  ::testing::internal::CaptureStdout();
  runtime.Send(worker, std::make_unique<troupe::EvPoison>());
  runtime.DispatchEvents();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            absl::StrCat(worker.ToString(), " ended (stopped)\n"));
}

}  // namespace
