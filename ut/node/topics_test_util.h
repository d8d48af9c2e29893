// SPDX-License-Identifier: Apache-2.0
//
// The actors of the topics tests (ut/node/topics_test.cc on TestRuntime, ut/integration/
// topics_test.cc over TCP): a Publisher that publishes numbered EvNews when told to, and a
// Subscriber that subscribes at bootstrap and writes what it receives into a TopicsLog that the
// test reads. The log is thread-safe, so the same actors run on real nodes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "node/topics.h"
#include "ut/actors/test_events.pb.h"

namespace troupe::node::topics_testing {

enum : EventType {
  kEvNews = EventSpaceBegin(kUserEventSpace + 61),
  kEvGo,
  kEvDo,
  kEvTopicsTestEnd,
};
static_assert(InEventSpace(kEvTopicsTestEnd - 1, kUserEventSpace + 61));

// What is published: seq is the publisher's own counter (over all its topics), text the topic.
struct EvNews final : EventPB<EvNews, ut::TestPayload, kEvNews> {};

// Tells a Publisher to publish `count` EvNews to `topic`, tracked when `track`.
struct EvGo final : EventPB<EvGo, ut::TestPayload, kEvGo> {
  EvGo() = default;
  EvGo(std::string_view topic, uint64_t count, bool track = false) {
    record.set_text(std::string(topic));
    record.set_seq(count);
    record.add_values(track ? 1 : 0);
  }
};

// Tells a Subscriber to subscribe, unsubscribe or end.
struct EvDo final : EventLocal<EvDo, kEvDo> {
  enum class Action : uint8_t { kSubscribe, kUnsubscribe, kEnd };
  EvDo(Action action_value, std::string_view topic_value)
      : action(action_value), topic(topic_value) {}
  Action action;
  std::string topic;
};

// One thing a test actor saw.
struct TopicsEntry {
  enum class Kind : uint8_t { kNews, kSubscribed, kUnsubscribed, kUndelivered };
  // The subscriber (or, for kUndelivered, the publisher) that saw it.
  ActorId actor;
  Kind kind = Kind::kNews;
  std::string topic;
  // kNews: the publisher and its seq. kUndelivered: the node the copy was lost to, and why (for
  // a Subscriber: its own node, with the lost request's type in seq).
  ActorId publisher;
  uint64_t seq = 0;
  NodeId lost_node = 0;
  UndeliveredReason reason = UndeliveredReason::kActorNotFound;
};

// Everything the test actors saw, in the order they saw it. Thread-safe.
class TopicsLog {
 public:
  // Forgets every entry.
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    entries_.clear();
  }
  void Add(TopicsEntry entry) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<TopicsEntry> Entries() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return entries_;
  }
  // Returns the entries of `actor` of `kind`, in order.
  std::vector<TopicsEntry> Of(const ActorId& actor, TopicsEntry::Kind kind) const {
    std::vector<TopicsEntry> out;
    for (TopicsEntry& entry : Entries()) {
      if (entry.actor == actor && entry.kind == kind) {
        out.push_back(std::move(entry));
      }
    }
    return out;
  }
  // Returns how many entries of `kind` there are.
  size_t Count(TopicsEntry::Kind kind) const {
    size_t count = 0;
    for (const TopicsEntry& entry : Entries()) {
      count += entry.kind == kind ? 1 : 0;
    }
    return count;
  }
  // Waits (real time) until Count(kind) >= count or `timeout` passes; returns whether it did.
  bool WaitForCount(TopicsEntry::Kind kind, size_t count, absl::Duration timeout) {
    MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      size_t seen = 0;
      for (const TopicsEntry& entry : entries_) {
        seen += entry.kind == kind ? 1 : 0;
      }
      return seen >= count;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&enough), absl::Now() + timeout);
  }

 private:
  mutable Mutex mu_;
  std::vector<TopicsEntry> entries_ ABSL_GUARDED_BY(mu_);
};

// Checks that `actor` received, of `topic` (all topics when empty), exactly the news
// `expected[publisher]` = n: seqs first_seq[publisher] .. +n-1 of each publisher, each once, in
// order. Returns a failure naming the first difference.
inline ::testing::AssertionResult ReceivedInOrder(
    const TopicsLog& log, const ActorId& actor, const std::map<ActorId, uint64_t>& expected,
    const std::map<ActorId, uint64_t>& first_seq = {}) {
  std::map<ActorId, uint64_t> next = first_seq;
  for (const TopicsEntry& entry : log.Of(actor, TopicsEntry::Kind::kNews)) {
    if (!expected.contains(entry.publisher)) {
      return ::testing::AssertionFailure()
             << actor << " got seq " << entry.seq << " from unexpected " << entry.publisher;
    }
    uint64_t& want = next[entry.publisher];
    if (entry.seq != want) {
      return ::testing::AssertionFailure() << actor << " got seq " << entry.seq << " from "
                                           << entry.publisher << ", expected " << want;
    }
    ++want;
  }
  for (const auto& [publisher, count] : expected) {
    const uint64_t first = first_seq.contains(publisher) ? first_seq.at(publisher) : 0;
    if (next[publisher] != first + count) {
      return ::testing::AssertionFailure() << actor << " got " << next[publisher] - first << " of "
                                           << count << " from " << publisher;
    }
  }
  return ::testing::AssertionSuccess();
}

// Publishes numbered EvNews when told (EvGo); logs the copies a tracked publish lost.
class Publisher final : public Actor {
 public:
  explicit Publisher(TopicsLog* log) : Actor(&Publisher::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvGo, HandleGo);
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      default:
        Unhandled(ev);
    }
  }

  void HandleGo(EventPtr<EvGo> ev) {
    const ut::TestPayload& go = ev.Get()->record;
    for (uint64_t i = 0; i < go.seq(); ++i) {
      auto news = std::make_unique<EvNews>();
      news->record.set_seq(next_++);
      news->record.set_text(go.text());
      const absl::Status published =
          Topics::Publish(*this, go.text(), std::move(news), {.track = go.values(0) == 1});
      EXPECT_TRUE(published.ok()) << published;
    }
  }

  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    const EvUndelivered& undelivered = *ev.Get();
    log_->Add({.actor = SelfId(),
               .kind = TopicsEntry::Kind::kUndelivered,
               .topic = {},
               .publisher = SelfId(),
               .seq = undelivered.cookie,
               .lost_node = Topics::LostCopyNode(undelivered).value_or(0),
               .reason = undelivered.reason});
  }

  TopicsLog* log_;
  uint64_t next_ = 0;
};

// Subscribes to `topics` at bootstrap; logs acks and news; does what EvDo says.
class Subscriber final : public Actor {
 public:
  // Sends EvGo(go_topic, 1) to each of `notify` when a subscription is acknowledged.
  Subscriber(TopicsLog* log, std::vector<std::string> topics, std::vector<ActorId> notify = {},
             std::string go_topic = {})
      : Actor(&Subscriber::StateWork),
        log_(log),
        topics_(std::move(topics)),
        notify_(std::move(notify)),
        go_topic_(std::move(go_topic)) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvNews, HandleNews);
      TROUPE_HFUNC(EvTopicSubscribed, HandleSubscribed);
      TROUPE_HFUNC(EvTopicUnsubscribed, HandleUnsubscribed);
      TROUPE_HFUNC(EvDo, HandleDo);
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      default:
        Unhandled(ev);
    }
  }

  void Bootstrap() override {
    for (const std::string& topic : topics_) {
      const absl::Status subscribed = Topics::Subscribe(*this, topic);
      EXPECT_TRUE(subscribed.ok()) << subscribed;
    }
  }

  void HandleNews(EventPtr<EvNews> ev) {
    log_->Add({.actor = SelfId(),
               .kind = TopicsEntry::Kind::kNews,
               .topic = ev.Get()->record.text(),
               .publisher = ev->sender(),
               .seq = ev.Get()->record.seq(),
               .lost_node = 0,
               .reason = UndeliveredReason::kActorNotFound});
  }

  void HandleSubscribed(EventPtr<EvTopicSubscribed> ev) {
    EXPECT_TRUE(ev.Get()->ok()) << ev.Get()->error();
    Log(TopicsEntry::Kind::kSubscribed, ev.Get()->topic());
    for (const ActorId& publisher : notify_) {
      Send(publisher, std::make_unique<EvGo>(go_topic_, 1));
    }
  }

  void HandleUnsubscribed(EventPtr<EvTopicUnsubscribed> ev) {
    EXPECT_TRUE(ev.Get()->ok()) << ev.Get()->error();
    Log(TopicsEntry::Kind::kUnsubscribed, ev.Get()->topic());
  }

  // A request its node's registry could not take (none runs there).
  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    log_->Add({.actor = SelfId(),
               .kind = TopicsEntry::Kind::kUndelivered,
               .topic = {},
               .publisher = {},
               .seq = ev.Get()->source_type,
               .lost_node = SelfId().node_id(),
               .reason = ev.Get()->reason});
  }

  void HandleDo(EventPtr<EvDo> ev) {
    switch (ev.Get()->action) {
      case EvDo::Action::kSubscribe:
        EXPECT_TRUE(Topics::Subscribe(*this, ev.Get()->topic).ok());
        break;
      case EvDo::Action::kUnsubscribe:
        EXPECT_TRUE(Topics::Unsubscribe(*this, ev.Get()->topic).ok());
        break;
      case EvDo::Action::kEnd:
        PassAway();
        break;
    }
  }

  void Log(TopicsEntry::Kind kind, const std::string& topic) {
    log_->Add({.actor = SelfId(),
               .kind = kind,
               .topic = topic,
               .publisher = {},
               .seq = 0,
               .lost_node = 0,
               .reason = UndeliveredReason::kActorNotFound});
  }

  TopicsLog* log_;
  std::vector<std::string> topics_;
  std::vector<ActorId> notify_;
  std::string go_topic_;
};

}  // namespace troupe::node::topics_testing
