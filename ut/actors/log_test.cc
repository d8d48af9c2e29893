// SPDX-License-Identifier: Apache-2.0
//
// Log lines that say who wrote them (date, node, thread, actor, class, trace), levels per node
// and per component (built-in and user-named) from the config, a default level under components'
// own levels, component names a config may use (built-in, named already, or declared; anything
// else refused with the field and a suggestion), and trace ids that flow from a plain thread's
// TraceScope through handlers' sends, schedules and Undelivered notices.
#include "actors/log.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/config.h"
#include "actors/events.h"
#include "ut/actors/log_test_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;
using testutil::Inbox;
using testutil::LogField;
using testutil::MakeSystem;
using testutil::ParseLogLine;
using testutil::Recorder;
using testutil::SmallConfig;
using testutil::WaitUntil;

// Named before main runs, as user code names its components: a config may set its level.
const LogComponent kPayments = LogComponentNamed("payments");

// Logs "<word> <value>" at debug level for the user component and for `named` (when set), then
// passes the value on to `next` (when set) by Send and by a 1 ms Schedule.
class Talker final : public Actor {
 public:
  Talker(std::string word, ActorId next, LogComponent named = LogComponent::kUser)
      : Actor(&Talker::StateWork), word_(std::move(word)), next_(next), named_(named) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvValue, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvValue> ev) {
    const uint64_t value = ev.Get()->value;
    TROUPE_LOG(kDebug, kUser) << word_ << " " << value;
    TROUPE_LOG_TO(kDebug, named_) << word_ << " named " << value;
    if (!next_.IsEmpty()) {
      Send(next_, std::make_unique<EvValue>(value));
      Schedule(absl::Milliseconds(1), next_, std::make_unique<EvValue>(value + 1000));
    }
  }

  std::string word_;
  ActorId next_;
  LogComponent named_;
};

proto::ActorSystemConfig NodeConfig(uint32_t node, const std::string& level) {
  proto::ActorSystemConfig config = SmallConfig();
  config.set_node_id(node);
  config.mutable_log()->set_level(level);
  return config;
}

TEST(LogTest, AHandlersLineSaysWhenWhereWhoAndWhichTrace) {
  CapturingLogSink sink;
  std::unique_ptr<ActorSystem> system = MakeSystem(NodeConfig(7, "debug"));
  ASSERT_NE(system, nullptr);
  const ActorId talker = system->Register(std::make_unique<Talker>("hello", ActorId()));
  const uint64_t trace = 0x4d2;
  system->Send(std::make_unique<EventHandle>(talker, ActorId(), std::make_unique<EvValue>(5),
                                             kNoFlags, 0, ActorId(), trace));
  ASSERT_TRUE(WaitUntil([&] { return !sink.LinesWith("hello 5").empty(); }));
  const std::string line = sink.LinesWith("hello 5").front();
  // 2026-11-24T05:19:37.123456Z: a UTC date and time to the microsecond.
  ASSERT_GE(line.size(), 28u) << line;
  for (const size_t digit :
       {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23, 24, 25}) {
    EXPECT_TRUE(line[digit] >= '0' && line[digit] <= '9') << digit << " in " << line;
  }
  EXPECT_EQ(line.substr(4, 1) + line.substr(7, 1) + line.substr(10, 1) + line.substr(26, 1), "--TZ")
      << line;
  EXPECT_TRUE(absl::StrContains(line, " debug node=7 thread=User:")) << line;
  EXPECT_TRUE(absl::StrContains(line, " actor=" + talker.ToString() + " class=")) << line;
  EXPECT_TRUE(absl::StrContains(line, "Talker")) << line;
  EXPECT_TRUE(absl::StrContains(line, " trace=00000000000004d2 user log_test.cc:")) << line;

  // Outside a handler, on a thread no node runs: no node, actor or trace.
  TROUPE_LOG(kWarn, kUser) << "from the test's thread";
  const std::string plain = sink.LinesWith("from the test's thread").front();
  EXPECT_FALSE(absl::StrContains(plain, "node=")) << plain;
  EXPECT_FALSE(absl::StrContains(plain, "actor=")) << plain;
  EXPECT_FALSE(absl::StrContains(plain, "trace=")) << plain;
  EXPECT_TRUE(absl::StrContains(plain, " warn thread=")) << plain;
}

TEST(LogTest, AJsonLineHasTheTextLinesFieldsAndParsesBack) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = NodeConfig(7, "debug");
  config.mutable_log()->set_format("json");
  std::unique_ptr<ActorSystem> system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  EXPECT_EQ(system->log_context().format(), LogFormat::kJson);
  const ActorId talker = system->Register(std::make_unique<Talker>("quote", ActorId()));
  system->Send(std::make_unique<EventHandle>(talker, ActorId(), std::make_unique<EvValue>(5),
                                             kNoFlags, 0, ActorId(), 0x4d2));
  ASSERT_TRUE(WaitUntil([&] { return !sink.LinesWith("quote 5").empty(); }));
  const std::string line = sink.LinesWith("quote 5").front();
  EXPECT_TRUE(absl::StartsWith(line, "{\"time\":\"")) << line;
  const google::protobuf::Struct record = ParseLogLine(line);

  absl::Time time;
  std::string error;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, LogField(record, "time"), &time, &error))
      << error << " in " << line;
  EXPECT_TRUE(absl::EndsWith(LogField(record, "time"), "Z")) << line;
  EXPECT_EQ(LogField(record, "time").size(), 27u) << "microseconds: " << line;
  EXPECT_LT(absl::AbsDuration(absl::Now() - time), absl::Hours(1)) << line;
  EXPECT_EQ(LogField(record, "level"), "debug");
  EXPECT_EQ(record.fields().at("node").number_value(), 7);
  EXPECT_TRUE(absl::StartsWith(LogField(record, "thread"), "User:")) << line;
  EXPECT_EQ(LogField(record, "actor"), talker.ToString());
  EXPECT_TRUE(absl::StrContains(LogField(record, "class"), "Talker")) << line;
  EXPECT_EQ(LogField(record, "trace"), "00000000000004d2");
  EXPECT_EQ(LogField(record, "component"), "user");
  EXPECT_TRUE(absl::StartsWith(LogField(record, "source"), "log_test.cc:")) << line;
  EXPECT_EQ(LogField(record, "message"), "quote 5");
  EXPECT_EQ(record.fields().size(), 10u) << line;

  // The node's lines outside a handler leave the actor, class and trace out, as text lines do.
  {
    const LogBinding binding(&system->log_context());
    TROUPE_LOG(kWarn, kActors) << "bound, no actor";
  }
  const google::protobuf::Struct bound = ParseLogLine(sink.LinesWith("bound, no actor").front());
  EXPECT_EQ(bound.fields().at("node").number_value(), 7);
  EXPECT_EQ(
      bound.fields().count("actor") + bound.fields().count("class") + bound.fields().count("trace"),
      0u);
  EXPECT_EQ(LogField(bound, "component"), "actors");
}

TEST(LogTest, EachNodeKeepsItsOwnLevels) {
  CapturingLogSink sink;
  std::unique_ptr<ActorSystem> chatty = MakeSystem(NodeConfig(1, "debug"));
  std::unique_ptr<ActorSystem> quiet = MakeSystem(NodeConfig(2, "warn"));
  ASSERT_NE(chatty, nullptr);
  ASSERT_NE(quiet, nullptr);
  // Created after the chatty node: its config must not lower the chatty node's level (it did,
  // when the level was process-wide).
  const ActorId loud = chatty->Register(std::make_unique<Talker>("chatty", ActorId()));
  const ActorId hushed = quiet->Register(std::make_unique<Talker>("quiet", ActorId()));
  quiet->Send(hushed, std::make_unique<EvValue>(1));
  chatty->Send(loud, std::make_unique<EvValue>(1));
  ASSERT_TRUE(WaitUntil([&] { return !sink.LinesWith("chatty 1").empty(); }));
  EXPECT_TRUE(sink.LinesWith("quiet 1").empty());
  EXPECT_TRUE(chatty->log_context().Enabled(LogLevel::kDebug, LogComponent::kActors));
  EXPECT_FALSE(quiet->log_context().Enabled(LogLevel::kInfo, LogComponent::kActors));

  // A node's level changes at run time through its context, and only there.
  quiet->log_context().SetLevel(LogLevel::kDebug, LogComponent::kUser);
  EXPECT_FALSE(quiet->log_context().Enabled(LogLevel::kDebug, LogComponent::kActors));
  quiet->Send(hushed, std::make_unique<EvValue>(2));
  EXPECT_TRUE(WaitUntil([&] { return !sink.LinesWith("quiet 2").empty(); }));

  // SetLogLevel is process-wide: the default for plain threads and every node that exists.
  SetLogLevel(LogLevel::kError, LogComponent::kUser);
  EXPECT_FALSE(chatty->log_context().Enabled(LogLevel::kWarn, LogComponent::kUser));
  EXPECT_FALSE(quiet->log_context().Enabled(LogLevel::kWarn, LogComponent::kUser));
  EXPECT_FALSE(LogEnabled(LogLevel::kWarn, LogComponent::kUser));
  SetLogLevel(LogLevel::kInfo);
  EXPECT_TRUE(chatty->log_context().Enabled(LogLevel::kInfo, LogComponent::kUser));
}

TEST(LogTest, ComponentLevelsComeFromTheConfigIncludingUserNamedOnes) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = NodeConfig(3, "warn");
  // The code names "billing" only later, so the config declares it.
  config.mutable_log()->add_user_components("billing");
  proto::LogComponentLevel* billing = config.mutable_log()->add_components();
  billing->set_name("billing");
  billing->set_level("debug");
  proto::LogComponentLevel* actors = config.mutable_log()->add_components();
  actors->set_name("actors");
  actors->set_level("error");
  std::unique_ptr<ActorSystem> system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  // The config declared "billing" first; the code gets the same component.
  const LogComponent named = LogComponentNamed("billing");
  EXPECT_GT(static_cast<int>(named), static_cast<int>(LogComponent::kCount));
  EXPECT_EQ(LogComponentName(named), "billing");
  EXPECT_EQ(LogComponentNamed("billing"), named);
  EXPECT_EQ(LogComponentNamed("interconnect"), LogComponent::kInterconnect);
  EXPECT_TRUE(system->log_context().Enabled(LogLevel::kDebug, named));
  EXPECT_FALSE(system->log_context().Enabled(LogLevel::kWarn, LogComponent::kActors));
  EXPECT_TRUE(system->log_context().Enabled(LogLevel::kWarn, LogComponent::kUser));

  const ActorId talker = system->Register(std::make_unique<Talker>("bill", ActorId(), named));
  system->Send(talker, std::make_unique<EvValue>(9));
  ASSERT_TRUE(WaitUntil([&] { return !sink.LinesWith("bill named 9").empty(); }));
  EXPECT_TRUE(absl::StrContains(sink.LinesWith("bill named 9").front(), " billing log_test.cc:"));
  EXPECT_TRUE(sink.LinesWith("bill 9").empty()) << "user is at warn, the line was debug";
}

TEST(LogTest, BadComponentsInTheConfigNameTheField) {
  proto::ActorSystemConfig config = SmallConfig();
  proto::LogComponentLevel* bad_name = config.mutable_log()->add_components();
  bad_name->set_name("Billing!");
  bad_name->set_level("debug");
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = ActorSystem::Create(config);
  ASSERT_FALSE(system.ok());
  EXPECT_TRUE(absl::StrContains(system.status().message(), "log.components[0].name"))
      << system.status();

  bad_name->set_name("actors");
  bad_name->set_level("loud");
  system = ActorSystem::Create(config);
  ASSERT_FALSE(system.ok());
  EXPECT_TRUE(absl::StrContains(system.status().message(), "log.components[0].level"))
      << system.status();
  EXPECT_FALSE(CheckLogComponentName("").ok());
  EXPECT_FALSE(CheckLogComponentName(std::string(33, 'a')).ok());
  EXPECT_TRUE(CheckLogComponentName("my-service.db_1").ok());
}

proto::ActorSystemConfig WithComponent(const std::string& name,
                                       const std::string& level = "debug") {
  proto::ActorSystemConfig config = SmallConfig();
  proto::LogComponentLevel* component = config.mutable_log()->add_components();
  component->set_name(name);
  component->set_level(level);
  return config;
}

TEST(LogTest, AMisspeltComponentIsRefusedWithTheFieldAndASuggestion) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> system =
      ActorSystem::Create(WithComponent("interconect"));
  ASSERT_FALSE(system.ok());
  EXPECT_EQ(system.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(system.status().message(),
                               "log.components[0].name: unknown component \"interconect\" (did "
                               "you mean \"interconnect\"?)"))
      << system.status();
  EXPECT_FALSE(ParseConfig("log { components { name: \"schedular\" level: \"debug\" } }").ok());

  // No close name: the message lists the known ones and says how to declare one.
  const absl::Status unknown = ValidateConfig(WithComponent("never-named-anywhere"));
  EXPECT_TRUE(absl::StrContains(unknown.message(), "unknown component \"never-named-anywhere\""))
      << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.message(), "actors, scheduler, config, interconnect, user"))
      << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.message(), "log.user_components")) << unknown;
  // Refusing it named nothing.
  EXPECT_FALSE(FindLogComponent("never-named-anywhere").ok());
  for (const std::string& name : LogComponentNames()) {
    EXPECT_NE(name, "never-named-anywhere");
  }

  // Each component at most once.
  proto::ActorSystemConfig twice = WithComponent("actors");
  *twice.mutable_log()->add_components() = twice.log().components(0);
  EXPECT_EQ(ValidateConfig(twice).message(), "log.components[1].name: \"actors\" is set twice");
}

TEST(LogTest, UserNamedComponentsAreConfiguredWhenNamedAlreadyOrDeclared) {
  // Named by the code before the config is read (kPayments, above).
  proto::ActorSystemConfig config = WithComponent("payments", "debug");
  // Declared, named by the code only later.
  config.mutable_log()->add_user_components("late-ledger");
  proto::LogComponentLevel* late = config.mutable_log()->add_components();
  late->set_name("late-ledger");
  late->set_level("error");
  std::unique_ptr<ActorSystem> system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  EXPECT_TRUE(system->log_context().Enabled(LogLevel::kDebug, kPayments));
  const absl::StatusOr<LogComponent> found = FindLogComponent("late-ledger");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(LogComponentNamed("late-ledger"), *found);
  EXPECT_FALSE(system->log_context().Enabled(LogLevel::kWarn, *found));
  EXPECT_TRUE(system->log_context().HasOwnLevel(*found));

  // A declaration is a user name: not a built-in one, not twice, well-formed.
  proto::ActorSystemConfig bad = SmallConfig();
  bad.mutable_log()->add_user_components("user");
  EXPECT_EQ(ValidateConfig(bad).message(),
            "log.user_components[0]: \"user\" is a built-in component");
  bad.mutable_log()->set_user_components(0, "ledger");
  bad.mutable_log()->add_user_components("ledger");
  EXPECT_EQ(ValidateConfig(bad).message(), "log.user_components[1]: \"ledger\" is listed twice");
  bad.mutable_log()->set_user_components(1, "Ledger");
  EXPECT_TRUE(absl::StartsWith(ValidateConfig(bad).message(), "log.user_components[1]: "));
  // More than the process can name: refused, not an abort when the node starts.
  proto::ActorSystemConfig many = SmallConfig();
  for (int i = 0; i < kMaxLogComponents; ++i) {
    many.mutable_log()->add_user_components(absl::StrCat("too-many-", i));
  }
  EXPECT_TRUE(absl::StartsWith(ValidateConfig(many).message(), "log.user_components: "))
      << ValidateConfig(many);
  EXPECT_FALSE(FindLogComponent("too-many-0").ok());
}

TEST(LogTest, ComponentsKeepTheirOwnLevelsUnderTheDefaultLevel) {
  LogContext context(5, LogLevel::kInfo);
  context.SetLevel(LogLevel::kDebug, LogComponent::kInterconnect);
  EXPECT_TRUE(context.HasOwnLevel(LogComponent::kInterconnect));
  EXPECT_FALSE(context.HasOwnLevel(LogComponent::kActors));

  context.SetDefaultLevel(LogLevel::kError);
  EXPECT_EQ(context.default_level(), LogLevel::kError);
  EXPECT_EQ(context.level(LogComponent::kActors), LogLevel::kError);
  EXPECT_EQ(context.level(LogComponent::kInterconnect), LogLevel::kDebug);
  EXPECT_EQ(context.level(kPayments), LogLevel::kError);

  context.ClearLevel(LogComponent::kInterconnect);
  EXPECT_FALSE(context.HasOwnLevel(LogComponent::kInterconnect));
  EXPECT_EQ(context.level(LogComponent::kInterconnect), LogLevel::kError);

  // SetLevel for every component: one level, no component keeps its own.
  context.SetLevel(LogLevel::kTrace, LogComponent::kUser);
  context.SetLevel(LogLevel::kWarn);
  EXPECT_FALSE(context.HasOwnLevel(LogComponent::kUser));
  EXPECT_EQ(context.level(LogComponent::kUser), LogLevel::kWarn);
  EXPECT_EQ(context.default_level(), LogLevel::kWarn);

  // From a config: the default level, then the components' own.
  proto::LogConfig log;
  log.set_level("warn");
  proto::LogComponentLevel* actors = log.add_components();
  actors->set_name("actors");
  actors->set_level("trace");
  ApplyLogConfig(log, &context);
  EXPECT_EQ(context.default_level(), LogLevel::kWarn);
  EXPECT_TRUE(context.HasOwnLevel(LogComponent::kActors));
  EXPECT_TRUE(context.Enabled(LogLevel::kTrace, LogComponent::kActors));
  EXPECT_EQ(context.format(), LogFormat::kText);
}

TEST(LogTest, TraceIdsFlowThroughSendsSchedulesAndUndeliveredNotices) {
  std::unique_ptr<ActorSystem> system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  const ActorId middle = system->Register(std::make_unique<Talker>("middle", recorder));
  const uint64_t trace = NewTraceId();
  EXPECT_NE(trace, 0u);
  EXPECT_NE(NewTraceId(), trace);
  EXPECT_EQ(CurrentTraceId(), 0u);
  {
    // A plain thread's sends carry its TraceScope's id; handlers pass it on.
    const TraceScope scope(trace);
    EXPECT_EQ(CurrentTraceId(), trace);
    system->Send(middle, std::make_unique<EvValue>(1));
    // A handle that has its own trace keeps it.
    system->Send(std::make_unique<EventHandle>(recorder, ActorId(), std::make_unique<EvValue>(2),
                                               kNoFlags, 0, ActorId(), trace + 1));
    // Tracked, to an actor that does not exist: the notice carries the trace back.
    system->Send(ActorId(system->node_id(), 0, 123456789, 0), std::make_unique<EvValue>(3),
                 kTrackDelivery, 0, recorder);
  }
  EXPECT_EQ(CurrentTraceId(), 0u);
  // Outside the scope: no trace, and a handler that got none passes none on.
  system->Send(middle, std::make_unique<EvValue>(4));
  ASSERT_TRUE(inbox.WaitFor([](const std::vector<testing::Received>& events) {
    return events.size() >= 6;
  })) << inbox.Snapshot().size();
  for (const testing::Received& r : inbox.Snapshot()) {
    uint64_t want = r.value == 2 ? trace + 1 : trace;
    if (r.value == 4 || r.value == 1004) {
      want = 0;
    }
    EXPECT_EQ(r.trace_id, want) << "value " << r.value << " type " << r.type;
  }
}

}  // namespace
}  // namespace troupe
