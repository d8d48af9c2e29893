// SPDX-License-Identifier: Apache-2.0
//
// Configuration of the actor system's sections: parse/validate errors name the offending field
// (kInvalidArgument), files that cannot be read are kNotFound, defaults give a working four-pool
// node, and ActorSystem::Create / PoolIndex / Register report bad input as values instead of
// aborting.
#include "actors/config.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::Recorder;
using testutil::WaitTimeout;

// Expects `status` to be kInvalidArgument and its message to contain `field`.
void ExpectFieldError(const absl::Status& status, absl::string_view field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), field))
      << "message \"" << status.message() << "\" does not name " << field;
}

void ExpectParseFieldError(const std::string& text, absl::string_view field) {
  const absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(text);
  ASSERT_FALSE(config.ok()) << "accepted: " << text;
  ExpectFieldError(config.status(), field);
}

TEST(ConfigTest, RejectsZeroThreadsNamingPoolIndex) {
  ExpectParseFieldError(R"(pools { name: "A" threads: 1 } pools { name: "B" threads: 0 })",
                        "pools[1].threads");
  ExpectParseFieldError(R"(pools { name: "A" threads: 0 })", "pools[0].threads");
  ExpectParseFieldError(R"(pools { name: "A" threads: 100000 })", "pools[0].threads");
}

TEST(ConfigTest, RejectsEmptyPoolName) {
  ExpectParseFieldError(R"(pools { name: "A" } pools { threads: 2 })", "pools[1].name");
  ExpectParseFieldError(R"(pools { name: "" })", "pools[0].name");
}

TEST(ConfigTest, RejectsDuplicatePoolName) {
  const absl::StatusOr<proto::ActorSystemConfig> config =
      ParseConfig(R"(pools { name: "A" } pools { name: "B" } pools { name: "A" })");
  ASSERT_FALSE(config.ok());
  ExpectFieldError(config.status(), "pools[2].name");
  EXPECT_TRUE(absl::StrContains(config.status().message(), "\"A\"")) << config.status();
}

TEST(ConfigTest, RejectsOtherPoolFieldsOutOfRange) {
  ExpectParseFieldError(R"(pools { name: "A" max_events_per_activation: 0 })",
                        "pools[0].max_events_per_activation");
  ExpectParseFieldError(R"(pools { name: "A" } pools { name: "B" max_activation_time_us: 0 })",
                        "pools[1].max_activation_time_us");
  ExpectParseFieldError(R"(pools { name: "A" spin_time_us: 5000000 })", "pools[0].spin_time_us");
  ExpectParseFieldError(R"(pools { name: "A" nice: 20 })", "pools[0].nice");
}

TEST(ConfigTest, RejectsLendingFieldsOutOfRangeNamingTheField) {
  ExpectParseFieldError(R"(pools { name: "A" threads: 2 min_threads: 3 })", "pools[0].min_threads");
  ExpectParseFieldError(R"(pools { name: "A" } pools { name: "B" threads: 2 max_threads: 1 })",
                        "pools[1].max_threads");
  ExpectParseFieldError(R"(pools { name: "A" max_threads: 257 })", "pools[0].max_threads");
  ExpectParseFieldError(R"(pools { name: "A" priority: 101 })", "pools[0].priority");
  ExpectParseFieldError(R"(pools { name: "A" extra_thread_after_ms: 3600001 })",
                        "pools[0].extra_thread_after_ms");
  ExpectParseFieldError(R"(lending { budget: 0 })", "lending.budget");
  ExpectParseFieldError(R"(lending { period_ms: 0 })", "lending.period_ms");
  ExpectParseFieldError(R"(lending { period_ms: 10001 })", "lending.period_ms");
  EXPECT_TRUE(ParseConfig(R"(lending { budget: 4 period_ms: 5 }
                             pools { name: "A" threads: 2 min_threads: 0 max_threads: 4
                                     priority: 7 extra_thread_after_ms: 100 })")
                  .ok());
}

TEST(ConfigTest, ReadsFairModeAndStuckThreshold) {
  const absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(
      R"(pools { name: "A" fair: true stuck_threshold_ms: 250 }
         pools { name: "B" stuck_threshold_ms: 0 }
         pools { name: "C" stuck_threshold_ms: 3600000 }
         pools { name: "D" })");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->pools(0).fair());
  EXPECT_EQ(config->pools(0).stuck_threshold_ms(), 250u);
  EXPECT_FALSE(config->pools(1).fair());
  EXPECT_TRUE(config->pools(1).has_stuck_threshold_ms());
  EXPECT_EQ(config->pools(1).stuck_threshold_ms(), 0u);
  EXPECT_EQ(config->pools(2).stuck_threshold_ms(), 3'600'000u);
  // Unset: fair mode off, a one-second threshold.
  const proto::ActorSystemConfig full = WithDefaults(*config);
  EXPECT_TRUE(full.pools(0).fair());
  EXPECT_EQ(full.pools(1).stuck_threshold_ms(), 0u);
  ASSERT_TRUE(full.pools(3).has_fair());
  EXPECT_FALSE(full.pools(3).fair());
  EXPECT_EQ(full.pools(3).stuck_threshold_ms(), 1000u);
  // A system starts with them and reports them back.
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = ActorSystem::Create(*config);
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_TRUE((*system)->config().pools(0).fair());
  EXPECT_EQ((*system)->config().pools(0).stuck_threshold_ms(), 250u);
}

TEST(ConfigTest, RejectsStuckThresholdAboveOneHourNamingPoolIndex) {
  ExpectParseFieldError(R"(pools { name: "A" stuck_threshold_ms: 3600001 })",
                        "pools[0].stuck_threshold_ms");
  ExpectParseFieldError(
      R"(pools { name: "A" } pools { name: "B" fair: true stuck_threshold_ms: 18446744073709551615 })",
      "pools[1].stuck_threshold_ms");
  proto::ActorSystemConfig config;
  config.add_pools()->set_name("A");
  config.add_pools()->set_name("B");
  config.mutable_pools(1)->set_stuck_threshold_ms(3'600'001);
  ExpectFieldError(ValidateConfig(config), "pools[1].stuck_threshold_ms");
  ExpectFieldError(ActorSystem::Create(config).status(), "pools[1].stuck_threshold_ms");
}

TEST(ConfigTest, ReadsEveryMailboxKindAndRejectsUnknownOnesNamingTheField) {
  for (const char* kind :
       {"MAILBOX_KIND_LOCK_FREE", "MAILBOX_KIND_SIMPLE", "MAILBOX_KIND_REVOLVING",
        "MAILBOX_KIND_HTSWAP", "MAILBOX_KIND_PRIORITY"}) {
    const absl::StatusOr<proto::ActorSystemConfig> config =
        ParseConfig(absl::StrCat(R"(pools { name: "A" default_mailbox: )", kind, " }"));
    ASSERT_TRUE(config.ok()) << kind << ": " << config.status();
  }
  // The text parser refuses a name it does not know, naming the field.
  ExpectParseFieldError(R"(pools { name: "A" default_mailbox: MAILBOX_KIND_FANCY })",
                        "default_mailbox");
  // A number outside the enum (proto3 keeps it) is caught by validation, naming the pool.
  ExpectParseFieldError(R"(pools { name: "A" } pools { name: "B" default_mailbox: 9 })",
                        "pools[1].default_mailbox");
}

TEST(ConfigTest, RejectsUnknownDefaultPool) {
  ExpectParseFieldError(R"(pools { name: "A" } default_pool: "B")", "default_pool");
  // Without pools the standard four are the known names.
  ExpectParseFieldError(R"(default_pool: "Nope")", "default_pool");
  EXPECT_TRUE(ParseConfig(R"(default_pool: "Batch")").ok());
  EXPECT_TRUE(ParseConfig(R"(pools { name: "A" } pools { name: "B" } default_pool: "B")").ok());
}

TEST(ConfigTest, RejectsBadSchedulerResolution) {
  ExpectParseFieldError("scheduler { resolution_us: 0 }", "scheduler.resolution_us");
  ExpectParseFieldError("scheduler { resolution_us: 10 }", "scheduler.resolution_us");
  ExpectParseFieldError("scheduler { resolution_us: 5000000 }", "scheduler.resolution_us");
  EXPECT_TRUE(ParseConfig("scheduler { resolution_us: 50 }").ok());
}

TEST(ConfigTest, RejectsBadLogLevel) {
  ExpectParseFieldError(R"(log { level: "loud" })", "log.level");
  ExpectParseFieldError(R"(log { level: "verbose" })", "log.level");
  for (const char* level : {"trace", "debug", "info", "warn", "error"}) {
    EXPECT_TRUE(ParseConfig(absl::StrCat("log { level: \"", level, "\" }")).ok()) << level;
  }
}

TEST(ConfigTest, RejectsOtherTopLevelFieldsOutOfRange) {
  ExpectParseFieldError("node_id: 0", "node_id");
  ExpectParseFieldError("node_id: 2000000", "node_id");
  ExpectParseFieldError("max_mailboxes: 10", "max_mailboxes");
  ExpectParseFieldError("max_services: 1", "max_services");
}

// The interconnect's and the node's sections are their layers' to check and fill
// (ut/interconnect/config_test.cc, ut/node/config_test.cc): a program that runs only an
// ActorSystem is not refused for settings it never uses.
TEST(ConfigTest, LeavesOtherLayersSectionsToThem) {
  const absl::StatusOr<proto::ActorSystemConfig> config =
      ParseConfig("interconnect { heartbeat_interval_ms: 1 } monitoring { port: 70000 }");
  ASSERT_TRUE(config.ok()) << config.status();
  const proto::ActorSystemConfig full = WithDefaults(*config);
  EXPECT_EQ(full.interconnect().heartbeat_interval_ms(), 1u);
  EXPECT_FALSE(full.interconnect().has_dead_peer_timeout_ms());
  EXPECT_TRUE(full.interconnect().cluster_id().empty());
  EXPECT_TRUE(ActorSystem::Create(*config).ok());
}

TEST(ConfigTest, MalformedTextNamesLine) {
  const absl::StatusOr<proto::ActorSystemConfig> config =
      ParseConfig("node_id: 1\npools { name: \"A\" }\npools { name: \"B\" threads: }\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), "line 3")) << config.status();

  const absl::StatusOr<proto::ActorSystemConfig> unknown = ParseConfig("\n\nbogus_field: 1\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "line 3")) << unknown.status();

  const absl::StatusOr<proto::ActorSystemConfig> unterminated = ParseConfig("pools {");
  ASSERT_FALSE(unterminated.ok());
  EXPECT_EQ(unterminated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unterminated.status().message(), "line")) << unterminated.status();
}

TEST(ConfigTest, MissingFileIsNotFound) {
  const std::string path = ::testing::TempDir() + "/troupe_config_test_does_not_exist.conf";
  std::remove(path.c_str());
  const absl::StatusOr<proto::ActorSystemConfig> config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), path)) << config.status();
}

// An ifstream reads a directory as an empty file: without the check, a node would run on defaults.
TEST(ConfigTest, DirectoryIsNotAConfigFile) {
  const std::string dir = ::testing::TempDir();
  const absl::StatusOr<proto::ActorSystemConfig> config = LoadConfigFile(dir);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), "is a directory")) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), dir)) << config.status();
}

TEST(ConfigTest, LoadsFileAndPrefixesErrorsWithPath) {
  const std::string good = ::testing::TempDir() + "/troupe_config_test_good.conf";
  const std::string bad = ::testing::TempDir() + "/troupe_config_test_bad.conf";
  {
    std::ofstream out(good);
    out << "node_id: 7\npools { name: \"Only\" threads: 2 }\n";
  }
  {
    std::ofstream out(bad);
    out << "pools { name: \"Only\" threads: 0 }\n";
  }
  const absl::StatusOr<proto::ActorSystemConfig> loaded = LoadConfigFile(good);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->node_id(), 7u);
  ASSERT_EQ(loaded->pools_size(), 1);
  EXPECT_EQ(loaded->pools(0).threads(), 2u);

  const absl::StatusOr<proto::ActorSystemConfig> failed = LoadConfigFile(bad);
  ASSERT_FALSE(failed.ok());
  ExpectFieldError(failed.status(), "pools[0].threads");
  EXPECT_TRUE(absl::StrContains(failed.status().message(), bad)) << failed.status();
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(ConfigTest, ValidateConfigChecksBuiltProtos) {
  proto::ActorSystemConfig config;
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.add_pools()->set_name("A");
  config.add_pools()->set_name("B");
  config.mutable_pools(1)->set_threads(0);
  ExpectFieldError(ValidateConfig(config), "pools[1].threads");
}

TEST(ConfigTest, WithDefaultsFillsStandardPools) {
  const proto::ActorSystemConfig full = WithDefaults(proto::ActorSystemConfig());
  ASSERT_EQ(full.pools_size(), 4);
  EXPECT_EQ(full.pools(0).name(), "System");
  EXPECT_EQ(full.pools(1).name(), "User");
  EXPECT_EQ(full.pools(2).name(), "Batch");
  EXPECT_EQ(full.pools(3).name(), "IC");
  for (const proto::PoolConfig& pool : full.pools()) {
    EXPECT_GE(pool.threads(), 1u) << pool.name();
    EXPECT_GT(pool.max_events_per_activation(), 0u);
    EXPECT_GT(pool.max_activation_time_us(), 0u);
  }
  EXPECT_EQ(full.default_pool(), "User");
  EXPECT_EQ(full.node_id(), 1u);
  EXPECT_EQ(full.scheduler().resolution_us(), 1000u);
  EXPECT_EQ(full.log().level(), "info");
  EXPECT_GE(full.lending().budget(), 1u);
  EXPECT_EQ(full.lending().period_ms(), 10u);
  // User and Batch lend each other threads, up to the cores; System and IC keep theirs.
  const uint32_t cores = full.pools(1).threads();
  EXPECT_EQ(full.pools(1).min_threads(), 1u);
  EXPECT_EQ(full.pools(1).max_threads(), cores);
  EXPECT_EQ(full.pools(2).min_threads(), 1u);
  EXPECT_EQ(full.pools(2).max_threads(), cores);
  EXPECT_EQ(full.pools(0).max_threads(), 1u);
  EXPECT_EQ(full.pools(3).max_threads(), 1u);
  EXPECT_GT(full.pools(0).priority(), full.pools(1).priority());
  EXPECT_GT(full.pools(1).priority(), full.pools(2).priority());
  EXPECT_TRUE(ValidateConfig(full).ok());
  // A listed pool keeps its count unless given a range.
  proto::ActorSystemConfig listed;
  listed.add_pools()->set_name("Only");
  listed.mutable_pools(0)->set_threads(3);
  const proto::ActorSystemConfig filled = WithDefaults(listed);
  EXPECT_EQ(filled.pools(0).min_threads(), 3u);
  EXPECT_EQ(filled.pools(0).max_threads(), 3u);
  // Without a pool called User, the first pool is the default.
  proto::ActorSystemConfig custom;
  custom.add_pools()->set_name("First");
  custom.add_pools()->set_name("Second");
  EXPECT_EQ(WithDefaults(custom).default_pool(), "First");
}

TEST(ConfigTest, EmptyConfigCreatesWorkingSystemWithStandardPools) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> created =
      ActorSystem::Create(proto::ActorSystemConfig());
  ASSERT_TRUE(created.ok()) << created.status();
  ActorSystem& system = **created;
  EXPECT_EQ(system.node_id(), 1u);
  EXPECT_EQ(system.config().pools_size(), 4);
  Inbox inbox;
  const char* names[] = {"System", "User", "Batch", "IC"};
  for (uint32_t i = 0; i < 4; ++i) {
    const absl::StatusOr<uint32_t> index = system.PoolIndex(names[i]);
    ASSERT_TRUE(index.ok()) << names[i] << ": " << index.status();
    EXPECT_EQ(*index, i);
    RegisterOptions options;
    options.pool = *index;
    const ActorId id = system.Register(std::make_unique<Recorder>(&inbox), options);
    ASSERT_TRUE(id) << names[i];
    EXPECT_EQ(id.pool(), *index);
    system.Send(id, std::make_unique<EvValue>(i));
  }
  ASSERT_TRUE(inbox.WaitForType(kEvValue, 4)) << "an actor on a default pool did not run";
  // Register without a pool uses the default pool, User.
  const ActorId plain = system.Register(std::make_unique<Recorder>(&inbox));
  EXPECT_EQ(plain.pool(), *system.PoolIndex("User"));
  const ActorSystemCounters counters = system.Counters();
  ASSERT_EQ(counters.pools.size(), 4u);
  EXPECT_EQ(counters.pools[0].name, "System");
  EXPECT_EQ(counters.pools[3].name, "IC");
}

TEST(ConfigTest, CreateReturnsErrorForBadConfig) {
  proto::ActorSystemConfig config;
  config.add_pools()->set_name("A");
  config.add_pools()->set_name("B");
  config.mutable_pools(1)->set_threads(0);
  const absl::StatusOr<std::unique_ptr<ActorSystem>> threads = ActorSystem::Create(config);
  ASSERT_FALSE(threads.ok());
  ExpectFieldError(threads.status(), "pools[1].threads");

  proto::ActorSystemConfig level;
  level.mutable_log()->set_level("chatty");
  const absl::StatusOr<std::unique_ptr<ActorSystem>> bad_level = ActorSystem::Create(level);
  ASSERT_FALSE(bad_level.ok());
  ExpectFieldError(bad_level.status(), "log.level");

  proto::ActorSystemConfig pool;
  pool.set_default_pool("Missing");
  const absl::StatusOr<std::unique_ptr<ActorSystem>> bad_pool = ActorSystem::Create(pool);
  ASSERT_FALSE(bad_pool.ok());
  ExpectFieldError(bad_pool.status(), "default_pool");
}

TEST(ConfigTest, PoolIndexOfUnknownNameIsNotFound) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> index = system->PoolIndex("Nope");
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kNotFound) << index.status();
  EXPECT_TRUE(absl::StrContains(index.status().message(), "Nope"));
  EXPECT_FALSE(system->PoolIndex("").ok());
  EXPECT_FALSE(system->PoolIndex("user").ok()) << "pool names are case-sensitive";
}

// Notifies from its destructor.
class Tracked : public Actor {
 public:
  explicit Tracked(troupe::Notification* destroyed)
      : Actor(&Tracked::StateWork), destroyed_(destroyed) {}
  ~Tracked() override { destroyed_->Notify(); }

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  troupe::Notification* destroyed_;
};

TEST(ConfigTest, RegisterOfNullActorReturnsEmptyId) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const uint64_t live_before = system->Counters().live_mailboxes;
  EXPECT_TRUE(system->Register(nullptr).IsEmpty());
  EXPECT_EQ(system->Counters().live_mailboxes, live_before) << "a null actor used a mailbox";
}

TEST(ConfigTest, RegisterOnOutOfRangePoolReturnsEmptyId) {
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  const uint64_t live_before = system->Counters().live_mailboxes;
  for (uint32_t pool : {4u, 5u, ActorId::kMaxPool, 0xFFFFFFFFu}) {
    troupe::Notification destroyed;
    RegisterOptions options;
    options.pool = pool;
    const ActorId id = system->Register(std::make_unique<Tracked>(&destroyed), options);
    EXPECT_TRUE(id.IsEmpty()) << "pool " << pool;
    EXPECT_TRUE(destroyed.HasBeenNotified()) << "the refused actor must be destroyed";
  }
  EXPECT_EQ(system->Counters().live_mailboxes, live_before) << "a refused actor used a mailbox";
  // The last valid index works.
  troupe::Notification destroyed;
  RegisterOptions last;
  last.pool = 3;
  const ActorId ok = system->Register(std::make_unique<Tracked>(&destroyed), last);
  EXPECT_FALSE(ok.IsEmpty());
  EXPECT_EQ(ok.pool(), 3u);
  EXPECT_FALSE(destroyed.HasBeenNotified());
  system.reset();
  EXPECT_TRUE(destroyed.HasBeenNotified());
}

}  // namespace
}  // namespace troupe
