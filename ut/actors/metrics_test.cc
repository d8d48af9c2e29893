// SPDX-License-Identifier: Apache-2.0
//
// The metrics registry (actors/metrics.h) and the node hooks (actors/node_hooks.h): enumeration
// order and lookups, registrations that come and go while others enumerate, the node's own
// metrics behind the typed Counters() view, and the hooks an extension uses.
#include "actors/metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "actors/events.h"
#include "actors/node_hooks.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::TestRuntime;
using testutil::EvValue;

MetricsRegistry::Reader Constant(int64_t value) {
  return [value] { return value; };
}

TEST(MetricsRegistryTest, EnumeratesByNameThenLabelsWithTheCommonLabelsFirst) {
  MetricsRegistry registry(MetricLabels{{"node", "7"}});
  auto b = registry.Add({"b_total", MetricType::kCounter, "B.", {{"pool", "User"}}}, Constant(2));
  auto a2 = registry.Add({"a", MetricType::kGauge, "A.", {{"peer", "2"}}}, Constant(20));
  auto a1 = registry.Add({"a", MetricType::kGauge, "A.", {{"peer", "1"}}}, Constant(10));
  std::vector<std::string> seen;
  registry.ForEach([&](const MetricSample& sample) {
    ASSERT_FALSE(sample.labels.empty());
    EXPECT_EQ(sample.labels.front(), (MetricLabel{"node", "7"}));
    EXPECT_EQ(sample.label("node"), "7");
    seen.push_back(std::string(sample.name) + "/" + std::to_string(sample.value));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"a/10", "a/20", "b_total/2"}));
  EXPECT_EQ(registry.Value("a", {{"peer", "2"}}), 20);
  EXPECT_EQ(registry.Value("a", {{"peer", "3"}}), std::nullopt);
  EXPECT_EQ(registry.Value("c"), std::nullopt);
  EXPECT_EQ(registry.Sum("a"), 30);
  EXPECT_EQ(registry.Sum("a", {{"peer", "1"}}), 10);
  EXPECT_EQ(MetricTypeName(MetricType::kCounter), "counter");
}

TEST(MetricsRegistryTest, PrometheusTextHasHelpAndTypeOncePerNameAndEscapesLabels) {
  MetricsRegistry registry(MetricLabels{{"node", "3"}});
  auto a1 = registry.Add({"a_total",
                          MetricType::kCounter,
                          "Things \\ done.\nTwo lines.",
                          {{"actor", "Quote\"Back\\slash\nline"}}},
                         Constant(5));
  auto a2 = registry.Add(
      {"a_total", MetricType::kCounter, "Things \\ done.\nTwo lines.", {{"actor", "plain"}}},
      Constant(-1));
  auto b = registry.Add({"b", MetricType::kGauge, "Say \"b\".", {}}, Constant(7));
  EXPECT_EQ(PrometheusText(registry),
            "# HELP a_total Things \\\\ done.\\nTwo lines.\n"
            "# TYPE a_total counter\n"
            "a_total{node=\"3\",actor=\"Quote\\\"Back\\\\slash\\nline\"} 5\n"
            "a_total{node=\"3\",actor=\"plain\"} -1\n"
            "# HELP b Say \"b\".\n"
            "# TYPE b gauge\n"
            "b{node=\"3\"} 7\n");
  MetricsRegistry empty;
  EXPECT_EQ(PrometheusText(empty), "");
  auto bare = empty.Add({"c", MetricType::kGauge, "C.", {}}, Constant(1));
  EXPECT_EQ(PrometheusText(empty), "# HELP c C.\n# TYPE c gauge\nc 1\n");
}

TEST(MetricsRegistryTest, AHistogramIsExposedAsCumulativeBucketsSumAndCount) {
  Histogram histogram(10, 12);  // bounds 1024, 2048, 4096 ns
  histogram.Record(1);          // under the first bound: counted there
  histogram.Record(1024);       // exactly on a bound: in that bucket
  histogram.Record(1025);
  histogram.Record(3000);
  histogram.Record(1'000'000);  // past the last bound: only in +Inf
  histogram.Record(-5);         // counts as 0
  EXPECT_EQ(histogram.count(), 6u);
  const HistogramSnapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.upper_bounds.size(), 3u);
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ(snapshot.count, 6u);
  EXPECT_NEAR(snapshot.sum_seconds, 1'005'050e-9, 1e-15);

  MetricsRegistry registry(MetricLabels{{"node", "1"}});
  auto r = registry.AddHistogram({.name = "h_seconds", .help = "H.", .labels = {{"peer", "2"}}},
                                 &histogram);
  EXPECT_EQ(registry.Value("h_seconds", {{"peer", "2"}}), 6) << "Value reads the count";
  EXPECT_EQ(PrometheusText(registry),
            "# HELP h_seconds H.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{node=\"1\",peer=\"2\",le=\"1.024e-06\"} 3\n"
            "h_seconds_bucket{node=\"1\",peer=\"2\",le=\"2.048e-06\"} 4\n"
            "h_seconds_bucket{node=\"1\",peer=\"2\",le=\"4.096e-06\"} 5\n"
            "h_seconds_bucket{node=\"1\",peer=\"2\",le=\"+Inf\"} 6\n"
            "h_seconds_sum{node=\"1\",peer=\"2\"} 0.001005050\n"
            "h_seconds_count{node=\"1\",peer=\"2\"} 6\n");
  MetricsRegistry bare;
  auto b = bare.AddHistogram({.name = "b_seconds", .help = "B.", .labels = {}}, &histogram);
  EXPECT_NE(
      PrometheusText(bare).find("b_seconds_bucket{le=\"+Inf\"} 6\nb_seconds_sum 0.001005050\n"),
      std::string::npos)
      << PrometheusText(bare);
}

TEST(MetricsRegistryTest, ATimeInNanosecondsIsExposedInSecondsExactly) {
  MetricsRegistry registry;
  auto busy = registry.Add({.name = "busy_seconds_total",
                            .type = MetricType::kCounter,
                            .help = "Busy.",
                            .labels = {},
                            .unit = MetricUnit::kNanoseconds},
                           Constant(12'345'678'901));
  auto small = registry.Add({.name = "rtt_seconds",
                             .type = MetricType::kGauge,
                             .help = "RTT.",
                             .labels = {{"peer", "2"}},
                             .unit = MetricUnit::kNanoseconds},
                            Constant(-1'500));
  EXPECT_EQ(PrometheusText(registry),
            "# HELP busy_seconds_total Busy.\n"
            "# TYPE busy_seconds_total counter\n"
            "busy_seconds_total 12.345678901\n"
            "# HELP rtt_seconds RTT.\n"
            "# TYPE rtt_seconds gauge\n"
            "rtt_seconds{peer=\"2\"} -0.000001500\n");
  EXPECT_EQ(registry.Value("busy_seconds_total"), 12'345'678'901) << "readers keep nanoseconds";
}

TEST(MetricsRegistryTest, AMetricLivesAsLongAsItsRegistration) {
  MetricsRegistry registry;
  std::atomic<uint64_t> value{5};
  {
    MetricsRegistry::Registration r =
        registry.Add({"x_total", MetricType::kCounter, "X.", {}},
                     [&value] { return static_cast<int64_t>(value.load()); });
    value = 6;
    EXPECT_EQ(registry.Value("x_total"), 6) << "read when asked, not copied at Add";
    MetricsRegistry::Registration moved = std::move(r);
    r.Reset();  // a moved-from registration owns nothing
    EXPECT_EQ(registry.size(), 1u);
  }
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.Value("x_total"), std::nullopt);
}

TEST(MetricsRegistryTest, RegistrationsComeAndGoWhileOthersEnumerate) {
  MetricsRegistry registry;
  auto stable = registry.Add({"stable", MetricType::kGauge, "", {}}, Constant(1));
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (int i = 0; i < 20000 && !stop.load(); ++i) {
      auto r = registry.Add({"churn", MetricType::kGauge, "", {{"i", std::to_string(i % 7)}}},
                            Constant(i));
    }
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (int i = 0; i < 2000 && absl::Now() < deadline; ++i) {
    int64_t stable_seen = 0;
    registry.ForEach([&](const MetricSample& sample) {
      if (sample.name == "stable") {
        stable_seen += sample.value;
      }
    });
    ASSERT_EQ(stable_seen, 1);
  }
  stop = true;
  churn.join();
  EXPECT_EQ(registry.size(), 1u);
}

TEST(NodeMetricsTest, CountersAreAViewOfTheRegistry) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  MetricsRegistry& registry = system->metrics();
  // Something for the pools to count: events to an actor that does not exist are dropped.
  for (int i = 0; i < 10; ++i) {
    system->Send(ActorId(0, 1, 0xDEAD, 0x7FFFFFF0u), std::make_unique<EvValue>(i));
  }
  ASSERT_TRUE(testutil::WaitUntil([&] { return system->Counters().dropped_events == 10; }));
  const ActorSystemCounters counters = system->Counters();
  EXPECT_EQ(registry.Sum("troupe_dropped_events_total"), 10);
  EXPECT_EQ(registry.Value("troupe_dropped_events_total", {{"reason", "actor-not-found"}}), 10);
  EXPECT_EQ(registry.Sum("troupe_undelivered_events_total"), 0);
  // Tracked: reported to the sender, counted by reason.
  system->Send(ActorId(0, 1, 0xDEAD, 0x7FFFFFF0u), std::make_unique<EvValue>(1), kTrackDelivery, 0,
               ActorId(0, 1, 0xBEEF, 0x7FFFFFF1u));
  ASSERT_TRUE(testutil::WaitUntil([&] {
    return registry.Value("troupe_undelivered_events_total", {{"reason", "actor-not-found"}}) == 1;
  }));
  EXPECT_EQ(registry.Value("troupe_live_mailboxes"), static_cast<int64_t>(counters.live_mailboxes));
  ASSERT_EQ(counters.pools.size(), 4u);
  for (const PoolCounters& pool : counters.pools) {
    EXPECT_EQ(registry.Value("troupe_pool_threads", {{"pool", pool.name}}), pool.threads);
    EXPECT_EQ(pool.workers.size(), pool.threads) << pool.name;
  }
  // Every pool metric carries the node and pool labels, and the worker ones a worker label.
  registry.ForEach([&](const MetricSample& sample) {
    EXPECT_EQ(sample.label("node"), std::to_string(system->node_id()));
    if (sample.name.starts_with("troupe_pool_")) {
      EXPECT_FALSE(sample.label("pool").empty()) << sample.name;
    }
    if (sample.name == "troupe_pool_events_total") {
      EXPECT_FALSE(sample.label("worker").empty());
    }
  });
}

// Throws from its handler: the node counts a failed actor.
class Failing final : public Actor {
 public:
  Failing() : Actor(&Failing::StateWork) {}

 private:
  TROUPE_STATE(StateWork) { throw std::runtime_error("fails on purpose"); }
};

// Each node-wide field of ActorSystemCounters against the registry's series of its metric, named
// here as a dashboard names them: every field is made non-zero first, so a field filled from
// another metric, or from none, differs from its metric's sum.
TEST(NodeMetricsTest, EachNodeFieldReadsItsMetricFromTheRegistry) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  MetricsRegistry& registry = system->metrics();
  testing::Inbox inbox;
  const ActorId sender = system->Register(std::make_unique<testing::Recorder<>>(&inbox));
  const ActorId nobody(system->node_id(), 1, 0xDEAD, 0x7FFFFFF0u);
  for (int i = 0; i < 3; ++i) {
    system->Send(nobody, std::make_unique<EvValue>(i));  // dropped
  }
  for (int i = 0; i < 2; ++i) {
    system->Send(nobody, std::make_unique<EvValue>(i), kTrackDelivery, 0, sender);  // reported
  }
  system->Send(system->Register(std::make_unique<Failing>()), std::make_unique<EvValue>(0));
  system->Schedule(absl::Hours(1),
                   std::make_unique<EventHandle>(sender, ActorId(), std::make_unique<EvValue>(0)));
  ASSERT_TRUE(inbox.WaitForType(kEvUndelivered, 2, absl::Seconds(10)));
  // The failed actor's mailbox goes a moment after the failure is counted: wait until only the
  // recorder's is left, so that the counters hold still while they are compared.
  ASSERT_TRUE(testutil::WaitUntil([&] {
    const ActorSystemCounters counters = system->Counters();
    return counters.dropped_events == 3 && counters.failed_actors == 1 &&
           counters.live_mailboxes == 1;
  })) << system->Counters().live_mailboxes;

  const ActorSystemCounters counters = system->Counters();
  const std::vector<std::pair<std::string_view, uint64_t>> fields = {
      {"troupe_dropped_events_total", counters.dropped_events},
      {"troupe_undelivered_events_total", counters.undelivered_events},
      {"troupe_failed_actors_total", counters.failed_actors},
      {"troupe_live_mailboxes", counters.live_mailboxes},
      {"troupe_pending_timers", counters.pending_timers},
  };
  for (const auto& [metric, value] : fields) {
    EXPECT_GT(value, 0u) << metric;
    EXPECT_EQ(registry.Sum(metric), static_cast<int64_t>(value)) << metric;
  }
  EXPECT_EQ(counters.dropped_events, 3u);
  EXPECT_EQ(counters.undelivered_events, 2u);
}

// Counts nothing; ends on EvPoison (Unhandled).
class Idler final : public Actor {
 public:
  Idler() : Actor(&Idler::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != EvValue::kEventType) {
      Unhandled(ev);
    }
  }
};

TEST(NodeMetricsTest, ActorClassesAreCountedAliveAndSampledWhileHandling) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  MetricsRegistry& registry = system->metrics();
  const MetricLabels idler = {{"class", "Idler"}};
  std::vector<ActorId> actors;
  for (int i = 0; i < 5; ++i) {
    actors.push_back(system->Register(std::make_unique<Idler>()));
  }
  EXPECT_EQ(registry.Value("troupe_actor_class_live", idler), 5);
  // Enough events that every worker samples some (one in 64 each).
  constexpr int kEvents = 20'000;
  for (int i = 0; i < kEvents; ++i) {
    system->Send(actors[static_cast<size_t>(i) % actors.size()], std::make_unique<EvValue>(i));
  }
  ASSERT_TRUE(testutil::WaitUntil([&] {
    return registry.Value("troupe_actor_class_sampled_events_total", idler).value_or(0) >=
           kEvents / 64 / 2;
  })) << registry.Value("troupe_actor_class_sampled_events_total", idler).value_or(-1);
  EXPECT_LE(registry.Value("troupe_actor_class_sampled_events_total", idler).value_or(0),
            kEvents / 64 + 2);
  EXPECT_GT(registry.Value("troupe_actor_class_sampled_handler_seconds_total", idler), 0);
  EXPECT_GE(registry.Sum("troupe_pool_handler_seconds", {{"pool", "User"}}), kEvents / 64 / 2)
      << "the pool's handler-time histogram counts the same samples";
  // The typed view reads the same series: each field between its metric's value read just before
  // and just after the view (the workers may still be handling events).
  const int64_t events_before =
      registry.Value("troupe_actor_class_sampled_events_total", idler).value_or(-1);
  const int64_t ns_before =
      registry.Value("troupe_actor_class_sampled_handler_seconds_total", idler).value_or(-1);
  const ActorSystemCounters counters = system->Counters();
  const int64_t events_after =
      registry.Value("troupe_actor_class_sampled_events_total", idler).value_or(-1);
  const int64_t ns_after =
      registry.Value("troupe_actor_class_sampled_handler_seconds_total", idler).value_or(-1);
  const auto view = std::find_if(counters.classes.begin(), counters.classes.end(),
                                 [](const ActorClassCounters& c) { return c.name == "Idler"; });
  ASSERT_NE(view, counters.classes.end());
  EXPECT_EQ(view->live, 5);
  EXPECT_GE(static_cast<int64_t>(view->sampled_events), events_before);
  EXPECT_LE(static_cast<int64_t>(view->sampled_events), events_after);
  EXPECT_GE(absl::ToInt64Nanoseconds(view->sampled_handler_time), ns_before);
  EXPECT_LE(absl::ToInt64Nanoseconds(view->sampled_handler_time), ns_after);
  for (const ActorId& actor : actors) {
    system->Send(actor, std::make_unique<EvPoison>());
  }
  EXPECT_TRUE(
      testutil::WaitUntil([&] { return registry.Value("troupe_actor_class_live", idler) == 0; }));
}

}  // namespace

namespace shop::detail {

struct Item {};

// Counts nothing, like Idler, under a qualified, templated name.
template <typename T>
class Cart final : public Actor {
 public:
  Cart() : Actor(&Cart::StateWork) {}

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
};

class AClassWhoseNameIsMuchLongerThanAnyLabelShouldEverBeInAMetricsScrapeOfANode final
    : public Actor {
 public:
  AClassWhoseNameIsMuchLongerThanAnyLabelShouldEverBeInAMetricsScrapeOfANode()
      : Actor(&AClassWhoseNameIsMuchLongerThanAnyLabelShouldEverBeInAMetricsScrapeOfANode::
                  StateWork) {}

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
};

// Registers a Cart of each class Cart<integral_constant<kFirst + n>>, n in kN (at most 256: a
// compiler's fold limit).
template <size_t kFirst, size_t... kN>
void RegisterCarts(ActorSystem& system, std::index_sequence<kN...> /*numbers*/) {
  (system.Register(std::make_unique<Cart<std::integral_constant<size_t, kFirst + kN>>>()), ...);
}

}  // namespace shop::detail

namespace {

TEST(NodeMetricsTest, ClassLabelsAreShortAndBounded) {
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  MetricsRegistry& registry = system->metrics();
  system->Register(std::make_unique<shop::detail::Cart<shop::detail::Item>>());
  EXPECT_EQ(registry.Value("troupe_actor_class_live", {{"class", "Cart<Item>"}}), 1)
      << PrometheusText(registry);
  system->Register(
      std::make_unique<
          shop::detail::
              AClassWhoseNameIsMuchLongerThanAnyLabelShouldEverBeInAMetricsScrapeOfANode>());
  const std::string cut =
      std::string("AClassWhoseNameIsMuchLongerThanAnyLabelShouldEverBeInAMetricsScrapeOfANode")
          .substr(0, 61) +
      "...";
  EXPECT_EQ(registry.Value("troupe_actor_class_live", {{"class", cut}}), 1)
      << PrometheusText(registry);

  // 300 more classes: labels stop at 256; the rest share "other", and no actor goes uncounted.
  constexpr size_t kMore = 300;
  shop::detail::RegisterCarts<0>(*system, std::make_index_sequence<kMore / 2>());
  shop::detail::RegisterCarts<kMore / 2>(*system, std::make_index_sequence<kMore / 2>());
  std::set<std::string> labels;
  int64_t live = 0;
  registry.ForEach([&](const MetricSample& sample) {
    if (sample.name == "troupe_actor_class_live") {
      labels.emplace(sample.label("class"));
      live += sample.value;
    }
  });
  EXPECT_EQ(labels.size(), 256u);
  EXPECT_TRUE(labels.contains("other"));
  EXPECT_TRUE(labels.contains("Cart<integral_constant<unsigned long,0ul>>"))
      << absl::StrJoin(labels, " ");
  EXPECT_GE(registry.Value("troupe_actor_class_live", {{"class", "other"}}).value_or(0),
            static_cast<int64_t>(kMore + 2 - 255));
  EXPECT_GE(live, static_cast<int64_t>(kMore + 2));
}

TEST(NodeHooksTest, ReportUndeliveredAppliesRuleThree) {
  TestRuntime runtime({.config = testutil::SmallConfig()});
  const ActorId sender = runtime.AllocateEdgeActor();
  auto tracked = std::make_unique<EventHandle>(ActorId(0, 9, 1, 1), sender,
                                               std::make_unique<EvValue>(1), kTrackDelivery, 42);
  ReportUndelivered(runtime.node(), std::move(tracked), UndeliveredReason::kDisconnected,
                    /*unsure=*/true);
  auto undelivered = runtime.GrabEdgeEvent<EvUndelivered>(sender);
  ASSERT_TRUE(undelivered);
  EXPECT_EQ(undelivered->reason, UndeliveredReason::kDisconnected);
  EXPECT_TRUE(undelivered->unsure);
  EXPECT_EQ(undelivered.handle().cookie(), 42u);

  const uint64_t dropped = runtime.node().Counters().dropped_events;
  ReportUndelivered(
      runtime.node(),
      std::make_unique<EventHandle>(ActorId(0, 9, 1, 1), sender, std::make_unique<EvValue>(2)),
      UndeliveredReason::kNoRoute);
  EXPECT_EQ(runtime.node().Counters().dropped_events, dropped + 1) << "untracked: counted";
}

TEST(NodeHooksTest, AServiceMapsOnlyToALocalActor) {
  TestRuntime runtime({.config = testutil::SmallConfig()});
  ActorSystem& system = runtime.node();
  const ActorId remote(system.node_id() + 1, 3, 1234, 5);
  const absl::Status status = system.RegisterService(ServiceId("svc"), remote);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("lives on node"), std::string_view::npos) << status;
  EXPECT_TRUE(system.LookupService(ServiceId("svc")).IsEmpty());
  const ActorId local = runtime.AllocateEdgeActor();
  EXPECT_TRUE(system.RegisterService(ServiceId("svc"), local).ok());
}

}  // namespace
}  // namespace troupe
