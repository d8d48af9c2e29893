// SPDX-License-Identifier: Apache-2.0
//
// EventPB: serialization of a handle, lazy parsing by Get<E>(), the dispatcher's handling of
// bytes that do not parse (the handler never runs; a tracking sender learns kParseError), and an
// ask's reply that arrives as bytes (parsed into the asker's AskResult, or kDataLoss).
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/scoped_actor.h"
#include "actors/sync.h"
#include "ut/actors/test_events.pb.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::Describe;
using testutil::Inbox;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::WaitTimeout;
using testutil::WaitUntil;

enum : EventType {
  kEvPayload = EventSpaceBegin(kUserEventSpace + 3),
  kEvOtherPayload,
  kEvPbTestEnd,
};
static_assert(InEventSpace(kEvPbTestEnd - 1, kUserEventSpace + 3));

struct EvPayload final : EventPB<EvPayload, ut::TestPayload, kEvPayload> {
  using EventPB::EventPB;
};
struct EvOtherPayload final : EventPB<EvOtherPayload, ut::TestPayload, kEvOtherPayload> {};

ut::TestPayload MakePayload(uint64_t seq) {
  ut::TestPayload payload;
  payload.set_seq(seq);
  payload.set_text(absl::StrFormat("payload #%d", seq));
  payload.add_values(1);
  payload.add_values(70000);
  payload.add_values(static_cast<uint32_t>(seq));
  return payload;
}

void ExpectSamePayload(const ut::TestPayload& got, const ut::TestPayload& want) {
  EXPECT_EQ(got.seq(), want.seq());
  EXPECT_EQ(got.text(), want.text());
  ASSERT_EQ(got.values_size(), want.values_size());
  for (int i = 0; i < got.values_size(); ++i) {
    EXPECT_EQ(got.values(i), want.values(i)) << i;
  }
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
}

// Byte strings that are not a valid TestPayload.
std::vector<std::string> CorruptBodies() {
  return {
      std::string("\x12\x10"
                  "ab",
                  4),                      // field 2: length 16, only 2 bytes follow
      std::string("\x0f\x01", 2),          // wire type 7 does not exist
      std::string("\x08\xff\xff\xff", 4),  // field 1: truncated varint
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // overlong tag varint
  };
}

TEST(EventPbTest, SerializeTurnsHandleIntoBytes) {
  const ut::TestPayload payload = MakePayload(42);
  const ActorId to(0, 1, 10, 3);
  const ActorId from(0, 1, 11, 4);
  EventHandle handle(to, from, std::make_unique<EvPayload>(payload), kTrackDelivery, 7);
  EXPECT_EQ(handle.type(), kEvPayload);
  EXPECT_TRUE(handle.HasEvent());
  EXPECT_FALSE(handle.HasBytes());
  ASSERT_TRUE(handle.GetBase()->IsSerializable());

  const absl::Status status = handle.Serialize();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(handle.HasEvent());
  EXPECT_TRUE(handle.HasBytes());
  EXPECT_EQ(handle.GetBase(), nullptr);
  EXPECT_EQ(std::string(handle.bytes()), payload.SerializeAsString());
  // The envelope is untouched.
  EXPECT_EQ(handle.type(), kEvPayload);
  EXPECT_EQ(handle.recipient(), to);
  EXPECT_EQ(handle.sender(), from);
  EXPECT_EQ(handle.cookie(), 7u);
  EXPECT_TRUE(handle.HasFlag(kTrackDelivery));
  // Serializing again is a no-op.
  EXPECT_TRUE(handle.Serialize().ok());
  EXPECT_EQ(std::string(handle.bytes()), payload.SerializeAsString());
}

TEST(EventPbTest, GetParsesLazilyAndMatches) {
  const ut::TestPayload payload = MakePayload(1234567890123);
  EventHandle handle(kEvPayload, ActorId(0, 1, 1, 1), ActorId(), payload.SerializeAsString());
  EXPECT_TRUE(handle.HasBytes());
  EXPECT_FALSE(handle.HasEvent()) << "bytes are not parsed before someone asks";
  // Asking for the wrong type neither parses nor drops the bytes.
  EXPECT_EQ(handle.Get<EvOtherPayload>(), nullptr);
  EXPECT_EQ(handle.Get<testutil::EvValue>(), nullptr);
  EXPECT_TRUE(handle.HasBytes());

  EvPayload* event = handle.Get<EvPayload>();
  ASSERT_NE(event, nullptr);
  ExpectSamePayload(event->record, payload);
  EXPECT_TRUE(handle.HasEvent());
  EXPECT_FALSE(handle.HasBytes()) << "the bytes are dropped once parsed";
  EXPECT_EQ(handle.GetBase(), event);
  EXPECT_EQ(handle.Get<EvPayload>(), event) << "parsed once, then the same object";

  // Release hands the parsed object over.
  std::unique_ptr<EvPayload> released = handle.Release<EvPayload>();
  ASSERT_NE(released, nullptr);
  EXPECT_EQ(released.get(), event);
  EXPECT_FALSE(handle.HasEvent());
}

TEST(EventPbTest, SerializeThenGetRoundTrips) {
  const ut::TestPayload payload = MakePayload(9);
  EventHandle handle(ActorId(0, 1, 1, 1), ActorId(), std::make_unique<EvPayload>(payload));
  ASSERT_TRUE(handle.Serialize().ok());
  EvPayload* event = handle.Get<EvPayload>();
  ASSERT_NE(event, nullptr);
  ExpectSamePayload(event->record, payload);
  EXPECT_TRUE(absl::StrContains(event->ToString(), "payload #9")) << event->ToString();
}

// A forward target or a trace id lives in the handle's side block (event.h); the body moves with
// it through every change: serializing, parsing, releasing, and a trace id set after the body.
TEST(EventPbTest, ForwardTargetAndTraceIdKeepTheBodyReachable) {
  const ut::TestPayload payload = MakePayload(77);
  const ActorId to(0, 1, 10, 3);
  const ActorId from(0, 1, 11, 4);
  const ActorId backup(0, 1, 12, 5);
  EventHandle handle(to, from, std::make_unique<EvPayload>(payload), kForwardOnNondelivery, 9,
                     backup, 0x1234);
  EXPECT_EQ(handle.forward_to(), backup);
  EXPECT_EQ(handle.trace_id(), 0x1234u);
  ASSERT_TRUE(handle.HasEvent());
  ASSERT_TRUE(handle.Serialize().ok());
  EXPECT_TRUE(handle.HasBytes());
  EXPECT_EQ(std::string(handle.bytes()), payload.SerializeAsString());
  EvPayload* event = handle.Get<EvPayload>();
  ASSERT_NE(event, nullptr);
  ExpectSamePayload(event->record, payload);
  EXPECT_EQ(handle.GetBase(), event);
  EXPECT_EQ(handle.forward_to(), backup);
  EXPECT_EQ(handle.trace_id(), 0x1234u);
  EXPECT_EQ(handle.Release<EvPayload>().get(), event);
  EXPECT_FALSE(handle.HasEvent());
  EXPECT_FALSE(handle.HasBytes());
  EXPECT_EQ(handle.cookie(), 9u);

  // A plain handle has neither; setting a trace id later keeps its body, and 0 clears it.
  EventHandle plain(kEvPayload, to, from, payload.SerializeAsString());
  EXPECT_TRUE(plain.forward_to().IsEmpty());
  EXPECT_EQ(plain.trace_id(), 0u);
  plain.set_trace_id(0);
  EXPECT_EQ(plain.trace_id(), 0u);
  plain.set_trace_id(0xabc);
  EXPECT_EQ(plain.trace_id(), 0xabcu);
  EXPECT_TRUE(plain.forward_to().IsEmpty());
  ASSERT_NE(plain.Get<EvPayload>(), nullptr);
  ExpectSamePayload(plain.Get<EvPayload>()->record, payload);
  plain.set_trace_id(0);
  EXPECT_EQ(plain.trace_id(), 0u);
  EXPECT_NE(plain.GetBase(), nullptr);

  // A bodyless signal with a trace id.
  EventHandle signal(kEvPayload, to, from, kNoFlags, 0);
  signal.set_trace_id(5);
  EXPECT_EQ(signal.trace_id(), 5u);
  EXPECT_EQ(signal.GetBase(), nullptr);
  EXPECT_EQ(signal.Get<EvPayload>(), nullptr);
}

// Bodies below, at and far above the event pool's largest block (small_alloc.h) serialize straight
// into their EventBytes block, byte for byte what protobuf writes, and parse back.
TEST(EventPbTest, BodiesOfEverySizeSerializeAsProtobufDoes) {
  for (const size_t text_size : {size_t{0}, size_t{1}, size_t{200}, size_t{250}, size_t{300},
                                 size_t{4096}, size_t{1} << 20}) {
    ut::TestPayload payload = MakePayload(text_size);
    payload.set_text(std::string(text_size, 'z'));
    EventHandle handle(ActorId(0, 1, 1, 1), ActorId(), std::make_unique<EvPayload>(payload));
    ASSERT_TRUE(handle.Serialize().ok()) << text_size;
    EXPECT_EQ(handle.bytes().size(), payload.ByteSizeLong()) << text_size;
    EXPECT_EQ(std::string(handle.bytes()), payload.SerializeAsString()) << text_size;
    EvPayload* event = handle.Get<EvPayload>();
    ASSERT_NE(event, nullptr) << text_size;
    ExpectSamePayload(event->record, payload);
  }
}

// An event that only knows SerializeToString (no WireSize) still serializes, through a copy.
TEST(EventPbTest, EventsWithOnlySerializeToStringStillSerialize) {
  const EvUndelivered original(UndeliveredReason::kTooLarge, kEvPayload, /*cookie=*/77,
                               /*unsure=*/true);
  EXPECT_FALSE(original.WireSize().has_value());
  std::string expected;
  ASSERT_TRUE(original.SerializeToString(&expected));
  EventHandle handle(ActorId(0, 1, 1, 1), ActorId(),
                     std::make_unique<EvUndelivered>(UndeliveredReason::kTooLarge, kEvPayload,
                                                     /*cookie=*/77, /*unsure=*/true));
  ASSERT_TRUE(handle.Serialize().ok());
  EXPECT_EQ(std::string(handle.bytes()), expected);
  EvUndelivered* parsed = handle.Get<EvUndelivered>();
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->reason, UndeliveredReason::kTooLarge);
  EXPECT_EQ(parsed->source_type, kEvPayload);
  EXPECT_EQ(parsed->cookie, 77u);
  EXPECT_TRUE(parsed->unsure);
}

TEST(EventBytesTest, MakeAndCopyHoldTheirLength) {
  const EventBytesPtr empty = EventBytes::Copy("");
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_TRUE(empty->view().empty());
  for (const size_t size : {size_t{1}, size_t{248}, size_t{249}, size_t{100000}}) {
    const std::string text(size, static_cast<char>('a' + size % 26));
    const EventBytesPtr copy = EventBytes::Copy(text);
    EXPECT_EQ(copy->view(), text) << size;
    EventBytesPtr made = EventBytes::Make(size);
    ASSERT_EQ(made->size(), size);
    std::memcpy(made->data(), text.data(), size);
    EventHandle handle(kEvPayload, ActorId(0, 1, 1, 1), ActorId(), std::move(made));
    EXPECT_TRUE(handle.HasBytes());
    EXPECT_EQ(handle.bytes(), text) << size;
  }
}

TEST(EventPbTest, SerializeRefusesLocalEvents) {
  EventHandle local(ActorId(0, 1, 1, 1), ActorId(), std::make_unique<testutil::EvValue>(3));
  const absl::Status status = local.Serialize();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(local.HasEvent()) << "a failed Serialize must keep the event";
  EXPECT_FALSE(local.HasBytes());
  ASSERT_NE(local.Get<testutil::EvValue>(), nullptr);
  EXPECT_EQ(local.Get<testutil::EvValue>()->value, 3u);

  EventHandle bodyless(kEvWakeup, ActorId(0, 1, 1, 1), ActorId(), kNoFlags, 0);
  EXPECT_EQ(bodyless.Serialize().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EventPbTest, CorruptBytesDoNotParse) {
  for (const std::string& bytes : CorruptBodies()) {
    EXPECT_EQ(EvPayload::Load(bytes), nullptr) << "Load accepted corrupt bytes";
    EventHandle handle(kEvPayload, ActorId(0, 1, 1, 1), ActorId(), bytes);
    EXPECT_EQ(handle.Get<EvPayload>(), nullptr);
    EXPECT_TRUE(handle.HasBytes()) << "the bytes are kept when they do not parse";
    EXPECT_FALSE(handle.HasEvent());
    EXPECT_EQ(std::string(handle.bytes()), bytes);
  }
  // An empty body is a valid (all-default) message.
  EventHandle empty(kEvPayload, ActorId(0, 1, 1, 1), ActorId(), std::string());
  ASSERT_NE(empty.Get<EvPayload>(), nullptr);
  EXPECT_EQ(empty.Get<EvPayload>()->record.seq(), 0u);
}

// Handles EvPayload through TROUPE_HFUNC and logs what its handler saw.
class PayloadActor : public Actor {
 public:
  struct Log {
    troupe::Mutex mu;
    std::vector<ut::TestPayload> payloads ABSL_GUARDED_BY(mu);
    std::atomic<int> calls{0};
  };

  PayloadActor(Inbox* inbox, Log* log)
      : Actor(&PayloadActor::StateWork), inbox_(inbox), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvPayload, Handle);
      default:
        Unhandled(ev);
    }
  }

  void Handle(EventPtr<EvPayload> ev) {
    log_->calls.fetch_add(1, std::memory_order_relaxed);
    EvPayload* event = ev.Get();
    Received r = Describe(*ev.operator->());
    {
      troupe::MutexLock lock(&log_->mu);
      // Null would mean the handler got a half-parsed message.
      log_->payloads.push_back(event != nullptr ? event->record : ut::TestPayload());
    }
    r.value = event != nullptr ? event->record.seq() : ~uint64_t{0};
    inbox_->Add(r);
  }

  Inbox* inbox_;
  Log* log_;
};

TEST(EventPbTest, HandlerReceivesSerializedEventParsed) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  PayloadActor::Log log;
  const ActorId actor = system->Register(std::make_unique<PayloadActor>(&inbox, &log));
  // One live event and one that arrives as bytes (as from another node).
  system->Send(actor, std::make_unique<EvPayload>(MakePayload(1)));
  system->Send(std::make_unique<EventHandle>(kEvPayload, actor, ActorId(),
                                             MakePayload(2).SerializeAsString()));
  ASSERT_TRUE(inbox.WaitForType(kEvPayload, 2));
  troupe::MutexLock lock(&log.mu);
  ASSERT_EQ(log.payloads.size(), 2u);
  ExpectSamePayload(log.payloads[0], MakePayload(1));
  ExpectSamePayload(log.payloads[1], MakePayload(2));
}

TEST(EventPbTest, CorruptBytesNeverReachHandlerAndReportParseError) {
  CapturingLogSink sink;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  PayloadActor::Log log;
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  const ActorId actor = system->Register(std::make_unique<PayloadActor>(&inbox, &log));
  const std::vector<std::string> corrupt = CorruptBodies();
  for (size_t i = 0; i < corrupt.size(); ++i) {
    system->Send(std::make_unique<EventHandle>(kEvPayload, actor, probe, corrupt[i], kTrackDelivery,
                                               100 + i));
  }
  // Then a good one: the actor is still alive and its handler still works.
  system->Send(std::make_unique<EventHandle>(
      kEvPayload, actor, probe, MakePayload(5).SerializeAsString(), kTrackDelivery, 200));
  ASSERT_TRUE(probe_inbox.WaitForType(kEvUndelivered, corrupt.size()));
  ASSERT_TRUE(inbox.WaitForType(kEvPayload, 1));
  const std::vector<Received> reports = probe_inbox.OfType(kEvUndelivered);
  ASSERT_EQ(reports.size(), corrupt.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].reason, UndeliveredReason::kParseError);
    EXPECT_EQ(reports[i].source_type, kEvPayload);
    EXPECT_EQ(reports[i].undelivered_cookie, 100 + i);
  }
  EXPECT_EQ(log.calls.load(), 1) << "the handler ran for a message that did not parse";
  {
    troupe::MutexLock lock(&log.mu);
    ASSERT_EQ(log.payloads.size(), 1u);
    ExpectSamePayload(log.payloads[0], MakePayload(5));
  }
  EXPECT_TRUE(sink.Contains(absl::StrFormat("0x%08x", kEvPayload)))
      << "the dropped message is logged with its type";

  // Untracked corrupt bytes are dropped and counted.
  const uint64_t dropped_before = system->Counters().dropped_events;
  system->Send(std::make_unique<EventHandle>(kEvPayload, actor, probe, corrupt[0], kNoFlags, 300));
  EXPECT_TRUE(WaitUntil([&] { return system->Counters().dropped_events == dropped_before + 1; }));
  EXPECT_EQ(log.calls.load(), 1);
  EXPECT_EQ(probe_inbox.OfType(kEvUndelivered).size(), corrupt.size());
}

TEST(EventPbTest, SerializedPoisonStillEndsActor) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  EventHandle poison(ActorId(0, 1, 1, 1), ActorId(), std::make_unique<EvPoison>());
  ASSERT_TRUE(poison.Serialize().ok());
  const std::string bytes(poison.bytes());
  Inbox inbox;
  troupe::Notification destroyed;
  const ActorId id = system->Register(std::make_unique<Recorder>(&inbox, &destroyed));
  system->Send(std::make_unique<EventHandle>(kEvPoison, id, ActorId(), bytes));
  EXPECT_TRUE(destroyed.WaitForNotificationWithTimeout(WaitTimeout()));
}

// Answers any request with a kEvPayload reply made of `bytes` (as a reply from another node
// arrives), with the request's cookie.
class BytesReplier final : public Actor {
 public:
  explicit BytesReplier(std::string bytes)
      : Actor(&BytesReplier::StateWork), bytes_(std::move(bytes)) {}

 private:
  TROUPE_STATE(StateWork) {
    Send(std::make_unique<EventHandle>(kEvPayload, ev->sender(), SelfId(), bytes_, kNoFlags,
                                       ev->cookie()));
  }

  std::string bytes_;
};

TEST(EventPbTest, AnAskedReplyInBytesIsParsedForTheAskerOrIsDataLoss) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorId good =
      system->Register(std::make_unique<BytesReplier>(MakePayload(9).SerializeAsString()));
  AskResult<EvPayload> reply =
      AskFuture<EvPayload>(*system, good, std::make_unique<EvPayload>(MakePayload(1)),
                           WaitTimeout())
          .get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ExpectSamePayload((*reply)->record, MakePayload(9));

  for (const std::string& bytes : CorruptBodies()) {
    const ActorId corrupt = system->Register(std::make_unique<BytesReplier>(bytes));
    reply = AskFuture<EvPayload>(*system, corrupt, std::make_unique<EvPayload>(MakePayload(1)),
                                 WaitTimeout())
                .get();
    EXPECT_EQ(reply.status().code(), absl::StatusCode::kDataLoss) << reply.status();
  }
}

}  // namespace
}  // namespace troupe
