// SPDX-License-Identifier: Apache-2.0
//
// The messaging and ask workloads of the scenario runner (scenario_workloads.h).
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "interconnect/testing/scenario_workloads.h"

namespace troupe::testing::scenario_internal {

namespace {

constexpr ActorId kReceiver = ServiceId("sim-recv");
constexpr ActorId kEcho = ServiceId("sim-echo");

// Registers `actor` on `node` as the service `service` (when given); returns its id.
ActorId RegisterOn(ScenarioContext& context, NodeId node, std::unique_ptr<Actor> actor,
                   const ActorId& service = ActorId()) {
  ActorSystem& system = context.rt().node(node);
  const ActorId id = system.Register(std::move(actor));
  if (!service.IsEmpty()) {
    (void)system.RegisterService(service, id);
  }
  return id;
}

// Ends `actor` (on a live node) with EvPoison sent on its node.
void Poison(ScenarioContext& context, const ActorId& actor) {
  if (!actor.IsEmpty() && context.IsAlive(actor.node_id())) {
    context.rt().Send(std::make_unique<EventHandle>(actor, ActorId(), std::make_unique<EvPoison>()),
                      actor.node_id());
  }
}

// -- messaging
// --------------------------------------------------------------------------------------

struct SendRecord {
  ActorId sender;
  NodeId from = 0;
  NodeId to = 0;
  absl::Time at;
  size_t size = 0;
  bool tracked = false;
  bool too_large = false;
  uint32_t delivered = 0;
  uint32_t undelivered = 0;
  bool unsure = false;
  UndeliveredReason reason = UndeliveredReason::kActorNotFound;
};

struct MessagingLedger {
  std::vector<SendRecord> sends;  // index: cookie - 1
  // The last cookie each receiver got from each sender.
  std::map<std::pair<ActorId, ActorId>, uint64_t> last;
  std::vector<std::string> errors;
  std::map<UndeliveredReason, uint64_t> reasons;

  SendRecord* Find(uint64_t cookie) {
    return cookie >= 1 && cookie <= sends.size() ? &sends[cookie - 1] : nullptr;
  }
};

class Receiver final : public Actor {
 public:
  explicit Receiver(MessagingLedger* ledger) : Actor(&Receiver::StateWork), ledger_(ledger) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvSimData, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvSimData> ev) {
    SendRecord* record = ledger_->Find(ev->cookie());
    if (record == nullptr) {
      ledger_->errors.push_back(absl::StrCat("an event with unknown cookie ", ev->cookie()));
      return;
    }
    if (++record->delivered > 1) {
      ledger_->errors.push_back(absl::StrCat("event #", ev->cookie(), " from node ", record->from,
                                             " delivered ", record->delivered, " times"));
    }
    if (ev.Get()->record.value().size() != record->size) {
      ledger_->errors.push_back(absl::StrCat("event #", ev->cookie(), " arrived with ",
                                             ev.Get()->record.value().size(), " bytes, sent ",
                                             record->size));
    }
    uint64_t& last = ledger_->last[{ev->sender(), SelfId()}];
    if (ev->cookie() <= last) {
      ledger_->errors.push_back(absl::StrCat("event #", ev->cookie(), " from ",
                                             ev->sender().ToString(), " arrived after #", last,
                                             ": order per sender broken"));
    }
    last = std::max(last, ev->cookie());
  }

  MessagingLedger* ledger_;
};

class Sender final : public Actor {
 public:
  explicit Sender(MessagingLedger* ledger) : Actor(&Sender::StateWork), ledger_(ledger) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != EvUndelivered::kEventType) {
      Unhandled(ev);
      return;
    }
    const EvUndelivered* undelivered = ev->Get<EvUndelivered>();
    SendRecord* record = ledger_->Find(undelivered->cookie);
    if (record == nullptr) {
      ledger_->errors.push_back(
          absl::StrCat("Undelivered for unknown cookie ", undelivered->cookie));
      return;
    }
    ++record->undelivered;
    record->unsure = record->unsure || undelivered->unsure;
    record->reason = undelivered->reason;
    ++ledger_->reasons[undelivered->reason];
  }

  MessagingLedger* ledger_;
};

class MessagingWorkload final : public Workload {
 public:
  std::string name() const override { return "messaging"; }

  void OnNodeStart(ScenarioContext& context, NodeId node) override {
    senders_.resize(context.nodes() + 1);
    receivers_.resize(context.nodes() + 1);
    receivers_[node] = RegisterOn(context, node, std::make_unique<Receiver>(&ledger_), kReceiver);
    senders_[node] = RegisterOn(context, node, std::make_unique<Sender>(&ledger_));
  }

  void Tick(ScenarioContext& context) override {
    if (quiet_ || !context.Chance(0.6)) {
      return;
    }
    const NodeId from = context.RandomNode();
    if (!context.IsAlive(from)) {
      return;
    }
    const NodeId to = context.Chance(0.15) ? from : context.RandomNode(from);
    const bool overload = context.Chance(0.03);
    const uint64_t count = overload ? context.Uniform(20, 60) : context.Uniform(1, 6);
    for (uint64_t i = 0; i < count; ++i) {
      SendOne(context, from, to, overload);
    }
  }

  void Quiesce(ScenarioContext& /*context*/) override { quiet_ = true; }

  void Finish(ScenarioContext& context) override {
    for (NodeId node = 1; node < senders_.size(); ++node) {
      Poison(context, senders_[node]);
      Poison(context, receivers_[node]);
    }
  }

  void Check(ScenarioContext& context, std::vector<std::string>* violations) override {
    for (const std::string& error : ledger_.errors) {
      violations->push_back("messaging: " + error);
    }
    for (size_t i = 0; i < ledger_.sends.size(); ++i) {
      const SendRecord& r = ledger_.sends[i];
      context.Mix((uint64_t{r.delivered} << 40) | (uint64_t{r.undelivered} << 32) |
                  static_cast<uint64_t>(r.reason));
      const std::string what =
          absl::StrFormat("messaging: %s event #%d (%d bytes) node %d -> %d",
                          r.tracked ? "tracked" : "untracked", i + 1, r.size, r.from, r.to);
      if (r.undelivered > 1) {
        violations->push_back(
            absl::StrCat(what, ": reported undelivered ", r.undelivered, " times"));
      }
      if (r.too_large && r.delivered > 0) {
        violations->push_back(absl::StrCat(what, ": delivered past a max_event_size"));
      }
      // A node that stopped after the send may have taken the event (or its report) with it.
      const bool excused = r.at <= context.LastStop(r.from) || r.at <= context.LastStop(r.to);
      if (!r.tracked || excused) {
        continue;
      }
      const bool refused = r.undelivered > 0 && (r.reason == UndeliveredReason::kTooLarge ||
                                                 r.reason == UndeliveredReason::kOverloaded);
      if (context.LossFree() && !r.too_large && !refused && (r.delivered != 1 || r.unsure)) {
        violations->push_back(absl::StrCat(what, ": lost (delivered ", r.delivered,
                                           " times, undelivered ", r.undelivered, " ",
                                           UndeliveredReasonName(r.reason),
                                           r.unsure ? " unsure" : "", ") though no session ended"));
      } else if (r.delivered + r.undelivered == 0) {
        violations->push_back(absl::StrCat(what, ": no outcome (neither delivered nor reported)"));
      } else if (r.delivered > 0 && r.undelivered > 0 && !r.unsure) {
        violations->push_back(absl::StrCat(what, ": delivered, and reported undelivered (",
                                           UndeliveredReasonName(r.reason), ") without unsure"));
      }
    }
  }

  std::string Summary() const override {
    uint64_t delivered = 0;
    uint64_t tracked = 0;
    for (const SendRecord& r : ledger_.sends) {
      delivered += r.delivered;
      tracked += r.tracked ? 1 : 0;
    }
    std::string reasons;
    for (const auto& [reason, count] : ledger_.reasons) {
      absl::StrAppend(&reasons, " ", UndeliveredReasonName(reason), "=", count);
    }
    return absl::StrCat("sent=", ledger_.sends.size(), " tracked=", tracked,
                        " delivered=", delivered, " undelivered:", reasons);
  }

 private:
  void SendOne(ScenarioContext& context, NodeId from, NodeId to, bool overload) {
    SendRecord record;
    record.sender = senders_[from];
    record.from = from;
    record.to = to;
    record.at = context.rt().Now();
    record.tracked = context.Chance(0.7);
    // The smallest max_event_size on the way; sizes stay clear of it by 16 KiB either side.
    const size_t limit =
        std::min(context.config(from).max_event_size(), context.config(to).max_event_size());
    const uint64_t roll = context.Uniform(0, 99);
    if (overload) {
      record.size = context.Uniform(32, 60) << 10;
    } else if (roll >= 70 && roll < 90) {
      record.size = context.Uniform(1, 40) << 10;
    } else if (roll >= 90 && roll < 98 && limit > (160u << 10)) {
      record.size = context.Uniform(130 << 10, std::min<size_t>(limit - (16 << 10), 700 << 10));
    } else if (roll >= 90 && from != to && limit <= (1u << 20)) {
      record.size = limit + context.Uniform(16 << 10, 64 << 10);
      record.too_large = true;
    } else {
      record.size = context.Uniform(0, 256);
    }
    ledger_.sends.push_back(record);
    auto event = std::make_unique<EvSimData>();
    event->record.set_value(std::string(record.size, static_cast<char>('a' + record.size % 26)));
    context.rt().Send(std::make_unique<EventHandle>(
        ServiceId("sim-recv", to), record.sender, std::move(event),
        record.tracked ? kTrackDelivery : kNoFlags, ledger_.sends.size()));
  }

  MessagingLedger ledger_;
  std::vector<ActorId> senders_;
  std::vector<ActorId> receivers_;
  bool quiet_ = false;
};

// -- asks
// -------------------------------------------------------------------------------------------

enum Answer : char { kAnswerNow = 0, kAnswerLate = 1, kAnswerNever = 2, kAnswerWrong = 3 };

struct AskRecord {
  NodeId from = 0;
  NodeId to = 0;
  absl::Time at;
  absl::Duration timeout;
  Answer answer = kAnswerNow;
  absl::Duration delay;
  uint32_t outcomes = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  absl::Time outcome_at;
};

struct AskLedger {
  std::vector<AskRecord> asks;
};

struct EvSimAsk final : EventLocal<EvSimAsk, kEvSimAsk> {
  explicit EvSimAsk(size_t index_value) : index(index_value) {}
  size_t index;
};

class EchoService final : public Actor {
 public:
  EchoService() : Actor(&EchoService::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvSimPing, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvSimPing> ev) {
    const std::string& value = ev.Get()->record.value();
    const Answer answer = value.empty() ? kAnswerNow : static_cast<Answer>(value[0]);
    if (answer == kAnswerNow) {
      Reply(ev, std::make_unique<EvSimPong>());
    } else if (answer == kAnswerWrong) {
      Reply(ev, std::make_unique<EvSimData>());
    } else if (answer == kAnswerLate) {
      int64_t delay_ms = 0;
      for (size_t i = 1; i < value.size(); ++i) {
        delay_ms = delay_ms * 10 + (value[i] - '0');
      }
      Schedule(absl::Milliseconds(delay_ms), ev->sender(), std::make_unique<EvSimPong>(), kNoFlags,
               ev->cookie());
    }
  }
};

class Asker final : public Actor {
 public:
  explicit Asker(AskLedger* ledger) : Actor(&Asker::StateWork), ledger_(ledger) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvSimAsk) {
      Unhandled(ev);
      return;
    }
    const size_t index = ev->Get<EvSimAsk>()->index;
    AskRecord& record = ledger_->asks[index];
    record.at = Now();
    auto ping = std::make_unique<EvSimPing>();
    std::string value(1, static_cast<char>(record.answer));
    if (record.answer == kAnswerLate) {
      value += std::to_string(absl::ToInt64Milliseconds(record.delay));
    }
    ping->record.set_value(std::move(value));
    Ask<EvSimPong>(ServiceId("sim-echo", record.to), std::move(ping), record.timeout,
                   [this, index](const AskResult<EvSimPong>& reply) {
                     AskRecord& done = ledger_->asks[index];
                     ++done.outcomes;
                     done.code = reply.status().code();
                     done.outcome_at = Now();
                   });
  }

  AskLedger* ledger_;
};

class AskWorkload final : public Workload {
 public:
  std::string name() const override { return "asks"; }

  void OnNodeStart(ScenarioContext& context, NodeId node) override {
    askers_.resize(context.nodes() + 1);
    echos_.resize(context.nodes() + 1);
    askers_[node] = RegisterOn(context, node, std::make_unique<Asker>(&ledger_));
    echos_[node] = RegisterOn(context, node, std::make_unique<EchoService>(), kEcho);
  }

  void Tick(ScenarioContext& context) override {
    if (quiet_ || !context.Chance(0.4)) {
      return;
    }
    const NodeId from = context.RandomNode();
    if (!context.IsAlive(from)) {
      return;
    }
    for (uint64_t i = context.Uniform(1, 3); i > 0; --i) {
      AskRecord record;
      record.from = from;
      record.to = context.Chance(0.2) ? from : context.RandomNode(from);
      record.timeout = absl::Milliseconds(static_cast<int64_t>(context.Uniform(20, 600)));
      const uint64_t roll = context.Uniform(0, 9);
      record.answer = roll < 6   ? kAnswerNow
                      : roll < 8 ? kAnswerLate
                      : roll < 9 ? kAnswerNever
                                 : kAnswerWrong;
      record.delay = absl::Milliseconds(static_cast<int64_t>(context.Uniform(0, 800)));
      ledger_.asks.push_back(record);
      context.rt().Send(
          std::make_unique<EventHandle>(askers_[from], ActorId(),
                                        std::make_unique<EvSimAsk>(ledger_.asks.size() - 1)),
          from);
    }
  }

  void Quiesce(ScenarioContext& /*context*/) override { quiet_ = true; }

  void Finish(ScenarioContext& context) override {
    for (NodeId node = 1; node < askers_.size(); ++node) {
      Poison(context, askers_[node]);
      Poison(context, echos_[node]);
    }
  }

  void Check(ScenarioContext& context, std::vector<std::string>* violations) override {
    // One tick of the node's timer resolution (1 ms) either side of the timeout.
    constexpr absl::Duration kSlack = absl::Milliseconds(2);
    for (size_t i = 0; i < ledger_.asks.size(); ++i) {
      const AskRecord& r = ledger_.asks[i];
      context.Mix((uint64_t{r.outcomes} << 32) | static_cast<uint64_t>(r.code));
      const std::string what =
          absl::StrFormat("asks: ask #%d node %d -> %d (answer %d, timeout %s)", i, r.from, r.to,
                          static_cast<int>(r.answer), absl::FormatDuration(r.timeout));
      if (r.outcomes > 1) {
        violations->push_back(absl::StrCat(what, ": ", r.outcomes, " outcomes"));
      }
      if (r.at == absl::Time() || r.at <= context.LastStop(r.from)) {
        continue;  // never asked (the asker's node died first), or the asker died with it
      }
      if (r.outcomes == 0) {
        violations->push_back(absl::StrCat(what, ": no outcome"));
        continue;
      }
      const absl::Duration took = r.outcome_at - r.at;
      if (took > r.timeout + kSlack) {
        violations->push_back(absl::StrCat(what, ": outcome ", absl::StatusCodeToString(r.code),
                                           " after ", absl::FormatDuration(took)));
      }
      if (r.code == absl::StatusCode::kDeadlineExceeded && took + kSlack < r.timeout) {
        violations->push_back(
            absl::StrCat(what, ": timed out early, after ", absl::FormatDuration(took)));
      }
      const bool can_succeed =
          r.answer == kAnswerNow || (r.answer == kAnswerLate && r.delay < r.timeout);
      if (r.code == absl::StatusCode::kOk && !can_succeed) {
        violations->push_back(absl::StrCat(what, ": answered OK"));
      }
    }
  }

  std::string Summary() const override {
    std::map<absl::StatusCode, uint64_t> codes;
    for (const AskRecord& r : ledger_.asks) {
      if (r.outcomes > 0) {
        ++codes[r.code];
      }
    }
    std::string out = absl::StrCat("asks=", ledger_.asks.size());
    for (const auto& [code, count] : codes) {
      absl::StrAppend(&out, " ", absl::StatusCodeToString(code), "=", count);
    }
    return out;
  }

 private:
  AskLedger ledger_;
  std::vector<ActorId> askers_;
  std::vector<ActorId> echos_;
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Workload> MakeMessagingWorkload() { return std::make_unique<MessagingWorkload>(); }
std::unique_ptr<Workload> MakeAskWorkload() { return std::make_unique<AskWorkload>(); }

}  // namespace troupe::testing::scenario_internal
