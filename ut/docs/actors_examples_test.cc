// SPDX-License-Identifier: Apache-2.0
//
// The usage examples of the public headers of actors/ and actors/testing/, compiled and run. Each
// region between `[doc-example: <header>]` and `[end doc-example]` is the header's "Example:"
// block word for word (scripts/check-doc-examples.sh); around it is what the example leaves out
// and a test of what the header says it does.
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/config.h"
#include "actors/event.h"
#include "actors/event_queue.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/metric_table.h"
#include "actors/metrics.h"
#include "actors/node_hooks.h"
#include "actors/scoped_actor.h"
#include "actors/sync.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_events.pb.h"

namespace {

enum : troupe::EventType {
  kEvAdd = troupe::EventSpaceBegin(troupe::kUserEventSpace + 5),
  kEvQuote,
  kEvPrice,
  kEvGet,
  kEvPing,
};

struct EvAdd : troupe::EventLocal<EvAdd, kEvAdd> {
  explicit EvAdd(int v) : value(v) {}
  int value;
};
struct EvQuote : troupe::EventLocal<EvQuote, kEvQuote> {
  explicit EvQuote(std::string symbol_value) : symbol(std::move(symbol_value)) {}
  std::string symbol;
};
struct EvPrice : troupe::EventLocal<EvPrice, kEvPrice> {
  explicit EvPrice(int64_t cents_value) : cents(cents_value) {}
  int64_t cents;
};
struct EvGet : troupe::EventLocal<EvGet, kEvGet> {};
struct EvPing : troupe::EventPB<EvPing, troupe::ut::TestPayload, kEvPing> {
  EvPing() = default;
  explicit EvPing(uint64_t seq) { record.set_seq(seq); }
};
using Echo = troupe::testing::Echo<EvPing>;

// Makes a node with the default config; fails the test when it cannot.
std::unique_ptr<troupe::ActorSystem> MakeSystem() {
  absl::StatusOr<std::unique_ptr<troupe::ActorSystem>> system =
      troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  EXPECT_TRUE(system.ok()) << system.status();
  return system.ok() ? std::move(*system) : nullptr;
}

// -- actors/actor.h -------------------------------------------------------------------------------

// clang-format off
// [doc-example: actors/actor.h]
class Counter : public troupe::Actor {
 public:
  Counter() : Actor(&Counter::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvAdd, Handle);
      default:
        Unhandled(ev);   // ends the actor on EvPoison, drops anything else
    }
  }
  void Handle(troupe::EventPtr<EvAdd> ev) { total_ += ev.Get()->value; }
  int64_t total_ = 0;
};
// [end doc-example]
// clang-format on

TEST(ActorsExamplesTest, CounterHandlesAddsAndEndsOnPoison) {
  troupe::testing::TestRuntime runtime;
  troupe::ActorId counter = runtime.Register(std::make_unique<Counter>());
  troupe::ActorId client = runtime.AllocateEdgeActor();
  runtime.Send(counter, std::make_unique<EvAdd>(5), client);
  EXPECT_TRUE(runtime.Expect<EvAdd>().From(client).To(counter));
  runtime.Send(counter, std::make_unique<troupe::EvPoison>(), client);
  runtime.DispatchEvents();
  runtime.Send(counter, std::make_unique<EvAdd>(1), client, troupe::kTrackDelivery);
  auto lost = runtime.GrabEdgeEvent<troupe::EvUndelivered>(client);
  ASSERT_TRUE(lost) << "the counter ended on EvPoison";
}

// -- actors/actor_id.h ----------------------------------------------------------------------------

TEST(ActorsExamplesTest, ActorIdIsHashableAndPrintable) {
  ::testing::internal::CaptureStdout();
  // clang-format off
  // [doc-example: actors/actor_id.h]
  const troupe::ActorId kEcho = troupe::ServiceId("echo");   // constexpr-friendly
  absl::flat_hash_map<troupe::ActorId, int> seen;             // hashable with absl::Hash
  std::cout << kEcho;                                          // prints "[svc:echo@0]"
  // [end doc-example]
  // clang-format on
  std::cout.flush();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "[svc:echo@0]");
  seen[kEcho] = 1;
  EXPECT_EQ(seen.count(troupe::ServiceId("echo")), 1u);
}

// -- actors/actor_system.h ------------------------------------------------------------------------

// The example as a program's body: 0 when the node started and took the actor.
int RunCounterNode() {
  // clang-format off
  // [doc-example: actors/actor_system.h]
  auto system = troupe::ActorSystem::Create(troupe::proto::ActorSystemConfig());
  if (!system.ok()) { std::cerr << system.status(); return 1; }
  troupe::ActorId counter = (*system)->Register(std::make_unique<Counter>());
  (*system)->Send(counter, std::make_unique<EvAdd>(5));
  // [end doc-example]
  // clang-format on
  return counter == troupe::ActorId() ? 1 : 0;
}

TEST(ActorsExamplesTest, SystemStartsAndTakesAnActor) { EXPECT_EQ(RunCounterNode(), 0); }

// -- actors/config.h ------------------------------------------------------------------------------

// The example as a program's body, run in `directory`: 0 when node.conf loaded and the node
// started, 1 when the file was refused.
int StartFromConfigFile(const std::filesystem::path& directory) {
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(directory);
  // clang-format off
  // [doc-example: actors/config.h]
  absl::StatusOr<troupe::proto::ActorSystemConfig> config =
      troupe::LoadConfigFile("node.conf");
  if (!config.ok()) { std::cerr << config.status() << "\n"; return 1; }
  auto system = troupe::ActorSystem::Create(*config);
  // [end doc-example]
  // clang-format on
  std::filesystem::current_path(previous);
  return system.ok() ? 0 : 1;
}

TEST(ActorsExamplesTest, ConfigFileLoadsOrNamesTheField) {
  std::string directory = (std::filesystem::temp_directory_path() / "troupe-doc-XXXXXX").string();
  ASSERT_NE(mkdtemp(directory.data()), nullptr);
  std::ofstream(std::filesystem::path(directory) / "node.conf") << "node_id: 3\n";
  EXPECT_EQ(StartFromConfigFile(directory), 0);
  std::ofstream(std::filesystem::path(directory) / "node.conf") << "pools { threads: 0 }\n";
  EXPECT_EQ(StartFromConfigFile(directory), 1);
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  std::filesystem::remove_all(directory);
}

// -- actors/event_queue.h -------------------------------------------------------------------------

TEST(ActorsExamplesTest, EventQueueHandsEventsToTheConsumer) {
  troupe::EventHandlePtr ev(
      new troupe::EventHandle(troupe::ActorId(), troupe::ActorId(), std::make_unique<EvAdd>(4)));
  std::vector<int> handled;
  auto Handle = [&handled](troupe::EventHandlePtr next) {
    handled.push_back(next->Get<EvAdd>()->value);
  };
  // clang-format off
  // [doc-example: actors/event_queue.h]
  troupe::EventQueue queue;
  queue.Push(std::move(ev));                  // any thread
  while (troupe::EventHandlePtr next = queue.Pop()) {
    Handle(std::move(next));                  // the consumer
  }
  // [end doc-example]
  // clang-format on
  EXPECT_EQ(handled, std::vector<int>{4});
}

// -- actors/log.h ---------------------------------------------------------------------------------

TEST(ActorsExamplesTest, CapturingLogSinkSeesTheLines) {
  // clang-format off
  // [doc-example: actors/log.h]
  troupe::CapturingLogSink sink;             // installs itself, restores the old sink on exit
  TROUPE_LOG(kWarn, kUser) << "exception in a handler";   // the code under test logs
  EXPECT_TRUE(sink.Contains("exception"));
  // [end doc-example]
  // clang-format on
}

// -- actors/metrics.h -----------------------------------------------------------------------------

TEST(ActorsExamplesTest, OwnMetricIsWalkedWithTheNodes) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  ASSERT_NE(system, nullptr);
  ::testing::internal::CaptureStdout();
  // clang-format off
  // [doc-example: actors/metrics.h]
  std::atomic<uint64_t> sent{0};
  troupe::MetricsRegistry::Registration r = system->metrics().Add(
      {.name = "myapp_orders_sent_total", .type = troupe::MetricType::kCounter,
       .help = "Orders sent to the exchange.", .labels = {{"venue", "X"}}},
      [&sent] { return static_cast<int64_t>(sent.load(std::memory_order_relaxed)); });
  system->metrics().ForEach([](const troupe::MetricSample& s) {
    std::cout << s.name << " " << s.value << "\n";
  });
  // [end doc-example]
  // clang-format on
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("myapp_orders_sent_total 0\n"),
            std::string::npos);
}

// -- actors/node_hooks.h --------------------------------------------------------------------------

TEST(ActorsExamplesTest, RemoteRouterRefusesRemoteEvents) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  ASSERT_NE(system, nullptr);
  // clang-format off
  // [doc-example: actors/node_hooks.h]
  class Refuser final : public troupe::RemoteRouter {
   public:
    explicit Refuser(troupe::ActorSystem* system) : system_(system) {}
    void Route(troupe::EventHandlePtr ev) override {
      troupe::ReportUndelivered(*system_, std::move(ev), troupe::UndeliveredReason::kNoRoute);
    }
   private:
    troupe::ActorSystem* system_;
  };
  troupe::SetRemoteRouter(*system, std::make_shared<Refuser>(system.get()));
  // [end doc-example]
  // clang-format on
  troupe::ScopedActor me(*system);
  me.Send(troupe::ServiceId("elsewhere", /*node=*/2), std::make_unique<EvGet>(),
          troupe::kTrackDelivery);
  troupe::EventHandlePtr reply = me.Receive(absl::Seconds(10));
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(reply->type(), troupe::kEvUndelivered);
  EXPECT_EQ(reply->Get<troupe::EvUndelivered>()->reason, troupe::UndeliveredReason::kNoRoute);
}

// -- actors/scoped_actor.h ------------------------------------------------------------------------

// Answers EvQuote with a price and EvGet with a price of 0.
class Quotes final : public troupe::Actor {
 public:
  Quotes() : Actor(&Quotes::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvQuote:
        Reply(ev, std::make_unique<EvPrice>(4099));
        break;
      case kEvGet:
        Reply(ev, std::make_unique<EvPrice>(0));
        break;
      default:
        Unhandled(ev);
    }
  }
};

TEST(ActorsExamplesTest, ThreadAsksAndReceives) {
  std::unique_ptr<troupe::ActorSystem> system = MakeSystem();
  ASSERT_NE(system, nullptr);
  troupe::ActorId quotes = system->Register(std::make_unique<Quotes>());
  troupe::ActorId counter = system->Register(std::make_unique<Quotes>());
  // clang-format off
  // [doc-example: actors/scoped_actor.h]
  troupe::AskResult<EvPrice> price =
      troupe::AskFuture<EvPrice>(*system, quotes, std::make_unique<EvQuote>("ACME"),
                                 absl::Seconds(1)).get();

  troupe::ScopedActor me(*system);
  me.Send(counter, std::make_unique<EvGet>());
  troupe::EventHandlePtr reply = me.Receive(absl::Seconds(1));   // null on timeout
  // [end doc-example]
  // clang-format on
  ASSERT_TRUE(price.ok()) << price.status();
  EXPECT_EQ((*price)->cents, 4099);
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->type(), kEvPrice);
}

// -- actors/sync.h --------------------------------------------------------------------------------

TEST(ActorsExamplesTest, MutexAndNotification) {
  // clang-format off
  // [doc-example: actors/sync.h]
  struct Tally {
    troupe::Mutex mu;
    int value ABSL_GUARDED_BY(mu) = 0;
  } tally;
  { troupe::MutexLock lock(&tally.mu); ++tally.value; }

  troupe::Notification done;
  std::thread worker([&] { /* the work */ done.Notify(); });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) { /* timed out */ }
  worker.join();
  // [end doc-example]
  // clang-format on
  EXPECT_TRUE(done.HasBeenNotified());
  troupe::MutexLock lock(&tally.mu);
  EXPECT_EQ(tally.value, 1);
}

// -- actors/testing/actors.h ----------------------------------------------------------------------

TEST(ActorsExamplesTest, RecorderSeesTheEchoesAnswer) {
  using MyPayload = troupe::ut::TestPayload;
  // clang-format off
  // [doc-example: actors/testing/actors.h]
  enum : troupe::EventType { kEvPing = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
  struct EvPing : troupe::EventPB<EvPing, MyPayload, kEvPing> {};

  troupe::testing::TestRuntime runtime({.nodes = 2});
  troupe::ActorId echo =
      runtime.Register(std::make_unique<troupe::testing::Echo<EvPing>>(), /*node=*/2);
  troupe::testing::Inbox inbox;
  troupe::ActorId client =
      runtime.Register(std::make_unique<troupe::testing::Recorder<>>(&inbox), /*node=*/1);
  runtime.Send(echo, std::make_unique<EvPing>(), client);
  runtime.DispatchEvents();
  EXPECT_EQ(inbox.OfType(kEvPing).size(), 1u);
  // [end doc-example]
  // clang-format on
}

// -- actors/testing/test_runtime.h ----------------------------------------------------------------

TEST(ActorsExamplesTest, TestRuntimeEchoAcrossNodes) {
  // clang-format off
  // [doc-example: actors/testing/test_runtime.h]
  troupe::testing::TestRuntime runtime({.nodes = 2});
  troupe::ActorId echo = runtime.Register(std::make_unique<Echo>(), /*node=*/2);
  troupe::ActorId edge = runtime.AllocateEdgeActor(/*node=*/1);
  runtime.Send(echo, std::make_unique<EvPing>(7), edge);
  runtime.Expect<EvPing>().From(edge).To(echo);
  auto pong = runtime.GrabEdgeEvent<EvPing>(edge);
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->record.seq(), 7u);
  // [end doc-example]
  // clang-format on
}

// actors/metric_table.h: a row publishes the counter and fills the typed view from the registry.
TEST(ActorsExamplesTest, MetricRowPublishesAndFillsTheView) {
  troupe::MetricsRegistry registry(troupe::MetricLabels{{"node", "1"}});
  // clang-format off
  // [doc-example: actors/metric_table.h]
  struct Stats { std::atomic<uint64_t> sent{0}; };
  struct View { uint64_t sent = 0; };
  Stats stats;
  constexpr std::array<troupe::MetricRow<Stats, View>, 1> kRows = {{
      {"myapp_sent_total", troupe::MetricType::kCounter, "Orders sent.",
       troupe::LoadRelaxed<&Stats::sent>, troupe::SetField<&View::sent>},
  }};
  std::vector<troupe::MetricsRegistry::Registration> registrations;
  troupe::PublishRows(registry, kRows, stats, {{"venue", "X"}}, &registrations);
  View view;
  registry.ForEach([&](const troupe::MetricSample& s) { troupe::FillFromRows(kRows, s, view); });
  // [end doc-example]
  // clang-format on
  EXPECT_EQ(view.sent, 0u);
  stats.sent.store(3, std::memory_order_relaxed);
  View later;
  registry.ForEach([&](const troupe::MetricSample& s) { troupe::FillFromRows(kRows, s, later); });
  EXPECT_EQ(later.sent, 3u);
}

}  // namespace
