// SPDX-License-Identifier: Apache-2.0
#include "loadtest.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/events.h"
#include "actors/log.h"
#include "actors/session_events.h"
#include "actors/sync.h"
#include "actors/testing/actors.h"
#include "open_loop.h"

namespace troupe::examples {

ActorIdWords ToWords(const ActorId& id) {
  ActorIdWords words;
  words.set_local_id(id.local_id());
  words.set_hint(id.hint());
  words.set_node_word(id.node_word());
  return words;
}

ActorId FromWords(const ActorIdWords& words) {
  return ActorId::FromRaw(words.local_id(), words.hint(), words.node_word());
}

void HistogramToProto(const LatencyHistogram& histogram,
                      google::protobuf::RepeatedPtrField<HistogramBucket>* out) {
  for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    if (histogram.bucket(i) != 0) {
      HistogramBucket* bucket = out->Add();
      bucket->set_index(static_cast<uint32_t>(i));
      bucket->set_count(histogram.bucket(i));
    }
  }
}

void AddHistogramProto(const google::protobuf::RepeatedPtrField<HistogramBucket>& buckets,
                       LatencyHistogram* histogram) {
  for (const HistogramBucket& bucket : buckets) {
    histogram->AddToBucket(bucket.index(), bucket.count());
  }
}

namespace {

// What StopLoadSenders waits on: the sender service notifies once no LoadSender runs.
struct LeaveWait {
  Notification done;
  // The senders still running (relaxed: read for the caller's message only; `done` orders the
  // rest).
  std::atomic<size_t> running{0};
};

// To the sender service from StopLoadSenders (`wait` set), and from the service to each
// LoadSender (`wait` null): the node is about to leave.
struct EvLoadLeave final : EventLocal<EvLoadLeave, kEvLoadLeave> {
  explicit EvLoadLeave(std::shared_ptr<LeaveWait> leave_wait) : wait(std::move(leave_wait)) {}
  std::shared_ptr<LeaveWait> wait;
};

// From a LoadSender to its service: it reported and ended.
struct EvLoadSenderDone final : EventLocal<EvLoadSenderDone, kEvLoadSenderDone> {};

// Answers every ping with a pong carrying the same body and cookie (the shared test actor).
using Echo = testing::Echo<EvEchoPing, EvEchoPong>;

// Acknowledges data events; tracks, per sending actor, the next expected sequence number.
class LoadReceiver final : public Actor {
 public:
  LoadReceiver() : Actor(&LoadReceiver::StateWork) {}

 private:
  struct PerSender {
    // The sender's stretch (LoadData.first_seq) and the next sequence number expected in it.
    uint64_t first_seq = 0;
    uint64_t next = 1;
    uint64_t dups = 0;
    uint64_t gaps = 0;
  };

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvLoadData, HandleData);
      default:
        Unhandled(ev);
    }
  }

  void HandleData(EventPtr<EvLoadData> ev) {
    const LoadData& data = ev.Get()->record;
    PerSender& from = senders_[ev->sender()];
    if (const uint64_t first = std::max<uint64_t>(1, data.first_seq()); first > from.first_seq) {
      // A new stretch: the sender had every earlier event answered before it resumed, so the
      // ones this receiver never saw (it restarted, or they were refused) are no gap.
      from.first_seq = first;
      from.next = first;
    }
    if (data.seq() == from.next) {
      ++from.next;
    } else if (data.seq() < from.next) {
      ++from.dups;
    } else {
      from.gaps += data.seq() - from.next;
      from.next = data.seq() + 1;
    }
    auto ack = std::make_unique<EvLoadAck>();
    ack->record.set_pair_id(data.pair_id());
    ack->record.set_seq(data.seq());
    ack->record.set_sent_at_ns(data.sent_at_ns());
    ack->record.set_dups(from.dups);
    ack->record.set_gaps(from.gaps);
    Send(ev->sender(), std::move(ack));
  }

  absl::flat_hash_map<ActorId, PerSender> senders_;
};

// One pair's sending side (see the file comment of loadtest.h).
class LoadSender final : public Actor {
 public:
  LoadSender(LoadStart start, const ActorId& service)
      : Actor(&LoadSender::StateWork),
        start_(std::move(start)),
        service_(service),
        controller_(FromWords(start_.controller())),
        target_(kLoadReceiverService.WithNode(start_.receiver())),
        window_(std::max<uint32_t>(1, start_.window())),
        payload_(start_.payload_bytes(), 'x'),
        second_(std::max<uint32_t>(1, start_.first_second()) - 1) {}

 private:
  static constexpr absl::Duration kProgressInterval = absl::Seconds(1);
  static constexpr absl::Duration kDrainTimeout = absl::Seconds(5);
  // How often a paused pair pings its receiver's node to learn it is back.
  static constexpr absl::Duration kProbeInterval = absl::Milliseconds(100);
  // The cookie of a probe (EvEchoPing): above every data event's sequence number.
  static constexpr uint64_t kProbeCookie = uint64_t{1} << 63;
  enum Tag : uint64_t {
    kTagProgress = 1,
    kTagStop,
    kTagDrainTimeout,
    kTagProbe,
    kTagSchedule,
    kTagCatchUpEnd
  };
  // The finest a schedule's wakeup is asked for: the scheduler rounds to its resolution anyway
  // (1 ms in troupe_cluster's config), and every event due by then goes out at once.
  static constexpr absl::Duration kScheduleTick = absl::Microseconds(100);

  void Bootstrap() override {
    started_ns_ = absl::GetCurrentTimeNanos();
    // A pair started during the run keeps to the run's seconds and end (LoadStart).
    absl::Duration first = kProgressInterval;
    if (start_.first_second_end_ns() != 0) {
      first = std::clamp(absl::Nanoseconds(start_.first_second_end_ns() - started_ns_),
                         absl::Milliseconds(1), kProgressInterval);
    }
    absl::Duration sending = absl::Milliseconds(start_.duration_ms());
    if (start_.end_ns() != 0) {
      sending = std::max(absl::ZeroDuration(), absl::Nanoseconds(start_.end_ns() - started_ns_));
    }
    // The run's second the sending ends in: the first, maybe partial, second, then whole ones.
    last_second_ = second_ + 1;
    if (sending > first) {
      last_second_ += static_cast<uint32_t>(
          absl::ToInt64Milliseconds(sending - first + absl::Milliseconds(999)) / 1000);
    }
    ScheduleWakeup(first, kTagProgress);
    ScheduleWakeup(sending, kTagStop);
    sending_ns_ = absl::ToInt64Nanoseconds(sending);
    if (start_.await_receiver()) {
      // Paused until the receiver's node answers (LoadStart.await_receiver); not counted a pause.
      paused_ = true;
      Probe();
      return;
    }
    Fill();
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvLoadAck, HandleAck);
      TROUPE_HFUNC(EvEchoPong, HandlePong);
      TROUPE_HFUNC(EvLoadLeave, HandleLeave);
      TROUPE_HFUNC(EvUndelivered, HandleUndelivered);
      TROUPE_HFUNC(EvNodeDisconnected, HandleDisconnected);
      TROUPE_HFUNC(EvWakeup, HandleWakeup);
      TROUPE_IGNORE(kEvNodeConnected);
      default:
        Unhandled(ev);
    }
  }

  // -- sending -------------------------------------------------------------------------------

  // Closed loop: sends until `window_` events are outstanding. Open loop: sends every event of
  // the schedule due now while the window has room (an event that finds it full stays due: the
  // next acknowledgement sends it), then wakes up when the next one is due.
  void Fill() {
    if (start_.rate_per_s() == 0) {
      while (sending_ && !paused_ && outstanding_ < window_) {
        SendData(absl::GetCurrentTimeNanos());
      }
      return;
    }
    if (!schedule_ && sending_ && !paused_) {
      // From the pair's start: rate x its sending time events. A pair that awaited its receiver
      // starts when the receiver answered and keeps to the run's end with what is left.
      const int64_t from = start_.await_receiver() ? absl::GetCurrentTimeNanos() : started_ns_;
      schedule_.emplace(from, start_.rate_per_s(), started_ns_ + sending_ns_);
    }
    if (!schedule_) {
      return;
    }
    int64_t now = absl::GetCurrentTimeNanos();
    while (sending_ && !paused_ && outstanding_ < window_ && schedule_->Due(now) > 0) {
      const uint64_t index = schedule_->Take();
      send_lag_.Record(
          static_cast<uint64_t>(std::max<int64_t>(0, now - schedule_->IntendedNs(index))));
      SendData(now);
      now = absl::GetCurrentTimeNanos();
    }
    if (schedule_->finished() && sending_) {
      sending_ = false;  // every event of the schedule is out: collect the acknowledgements
      Continue();
      return;
    }
    const int64_t until = schedule_->UntilNextNs(now);
    if (sending_ && !paused_ && outstanding_ < window_ && until >= 0 && !tick_armed_) {
      tick_armed_ = true;
      ScheduleWakeup(std::max(kScheduleTick, absl::Nanoseconds(until)), kTagSchedule);
    }
  }

  // Sends the next data event; open loop, its sequence number is its schedule index + 1.
  void SendData(int64_t now) {
    auto data = std::make_unique<EvLoadData>();
    const uint64_t seq = next_seq_++;
    data->record.set_pair_id(start_.pair_id());
    data->record.set_seq(seq);
    data->record.set_sent_at_ns(now);
    data->record.set_payload(payload_);
    data->record.set_first_seq(stretch_first_);
    // The cookie comes back in EvUndelivered: it names the lost event.
    Send(target_, std::move(data), kTrackDelivery | kSubscribeOnSession, seq);
    resolved_.push_back(false);
    ++outstanding_;
    ++sent_;
    ++second_sent_;
  }

  // Marks `seq` answered (acked or lost); returns false when it was not outstanding.
  bool Resolve(uint64_t seq) {
    if (seq < base_ || seq >= next_seq_ || resolved_[seq - base_]) {
      return false;
    }
    resolved_[seq - base_] = true;
    while (!resolved_.empty() && resolved_.front()) {
      resolved_.pop_front();
      ++base_;
    }
    --outstanding_;
    return true;
  }

  // -- answers -------------------------------------------------------------------------------

  void HandleAck(EventPtr<EvLoadAck> ev) {
    const LoadAck& ack = ev.Get()->record;
    const int64_t now = absl::GetCurrentTimeNanos();
    // base_ is the oldest outstanding seq: acks of one sender→recipient stream come in order.
    const bool in_order = ack.seq() == base_;
    if (!Resolve(ack.seq())) {
      ++reorders_;  // repeated, or for an event never sent
      return;
    }
    if (!in_order) {
      ++reorders_;
    }
    ++acked_;
    bytes_ += payload_.size();
    last_ack_ns_ = now;
    // Open loop: from the event's intended send time (open_loop.h), so that a stall counts.
    const auto rtt = schedule_
                         ? schedule_->LatencyNs(ack.seq() - 1, now)
                         : static_cast<uint64_t>(std::max<int64_t>(0, now - ack.sent_at_ns()));
    rtt_.Record(rtt);
    second_rtt_.Record(rtt);
    ++second_acked_;
    second_bytes_ += payload_.size();
    dups_ = std::max(dups_, ack.dups());
    gaps_ = std::max(gaps_, ack.gaps());
    Continue();
  }

  void HandleUndelivered(EventPtr<EvUndelivered> ev) {
    if (ev.Get()->source_type == kEvEchoPing) {
      probing_ = false;
      if (ev.Get()->reason == UndeliveredReason::kNoRoute && paused_) {
        // No member any more (with etcd it comes back under a new id): end, to be re-routed.
        receiver_left_ = true;
        sending_ = false;
        Continue();
        return;
      }
      // A probe refused: the receiver's node is not back yet.
      if (paused_ && sending_) {
        ScheduleWakeup(kProbeInterval, kTagProbe);
      }
      return;
    }
    if (!Resolve(ev->cookie())) {
      return;
    }
    ++undelivered_;
    unsure_ += ev.Get()->unsure ? 1 : 0;
    // Refused because the receiver's node is leaving (interconnect.h, "Leaving"), or reported as
    // its session ended as left: answered, not lost; the pair waits for the node to come back.
    if (ev.Get()->reason == UndeliveredReason::kShutdown || paused_) {
      ++leave_undelivered_;
      Pause();
      Continue();
      return;
    }
    if (problem_.empty()) {
      problem_ = absl::StrCat("data seq ", ev->cookie(), " undelivered (",
                              UndeliveredReasonName(ev.Get()->reason),
                              ev.Get()->unsure ? ", unsure" : "", ")");
    }
    sending_ = false;  // the pair has failed; report what it has
    Continue();
  }

  void HandleDisconnected(EventPtr<EvNodeDisconnected> ev) {
    if (ev.Get()->left) {
      // The receiver's node said goodbye: what was held for it is reported Undelivered.
      Pause();
      Continue();
      return;
    }
    ++disconnects_;
    if (problem_.empty()) {
      problem_ = absl::StrCat("session to node ", ev.Get()->node, " died with ", outstanding_,
                              " data events unacknowledged");
    }
    Finish();
  }

  void HandleWakeup(EventPtr<EvWakeup> ev) {
    switch (ev.Get()->tag) {
      case kTagProgress:
        // The last second goes out at Finish, with the drain's acknowledgements.
        if (second_ + 1 < last_second_) {
          SendProgress();
          ScheduleWakeup(kProgressInterval, kTagProgress);
        }
        break;
      case kTagStop:
        if (schedule_ && !schedule_->finished() && sending_ && !paused_) {
          // Open loop: the events due before the end still go out (the window allowing), their
          // latency growing; what is left when the catch-up ends is counted unsent.
          ScheduleWakeup(kDrainTimeout, kTagCatchUpEnd);
          Continue();
          break;
        }
        sending_ = false;
        Continue();
        break;
      case kTagCatchUpEnd:
        sending_ = false;
        Continue();
        break;
      case kTagSchedule:
        tick_armed_ = false;
        Continue();
        break;
      case kTagProbe:
        if (paused_ && sending_ && !probing_) {
          Probe();
        }
        break;
      case kTagDrainTimeout:
        if (problem_.empty()) {
          problem_ = absl::StrCat(outstanding_, " data events unacknowledged ",
                                  absl::FormatDuration(kDrainTimeout), " after the end");
        }
        Finish();
        break;
      default:
        break;
    }
  }

  // -- the receiver's node leaving, the sender's node leaving ----------------------------------

  // Stops sending until the receiver's node is back; pings it to learn when.
  void Pause() {
    if (paused_) {
      return;
    }
    paused_ = true;
    receiver_back_ = false;
    ++pauses_;
    TROUPE_LOG(kInfo, kUser) << "pair " << start_.pair_id() << ": node " << start_.receiver()
                             << " is leaving; paused with " << outstanding_ << " outstanding";
    if (!probing_) {
      Probe();
    }
  }

  void Probe() {
    probing_ = true;
    auto ping = std::make_unique<EvEchoPing>();
    ping->record.set_node(start_.receiver());
    ping->record.set_seq(pauses_);
    Send(kEchoService.WithNode(start_.receiver()), std::move(ping), kTrackDelivery, kProbeCookie);
  }

  // A probe came back: the node's next incarnation answers (the leaving one refused every send).
  void HandlePong(EventPtr<EvEchoPong> /*ev*/) {
    probing_ = false;
    if (paused_) {
      receiver_back_ = true;
      Continue();
    }
  }

  // The sender's own node is about to leave (StopLoadSenders): stop, collect the acks, report.
  void HandleLeave(EventPtr<EvLoadLeave> /*ev*/) {
    sender_left_ = true;
    sending_ = false;
    Continue();
  }

  // Sends more while running; once stopped, finishes when nothing is outstanding.
  void Continue() {
    if (paused_ && receiver_back_ && outstanding_ == 0 && sending_) {
      // Every event of the last stretch is answered: a new stretch, counted from here.
      paused_ = false;
      stretch_first_ = next_seq_;
      TROUPE_LOG(kInfo, kUser) << "pair " << start_.pair_id() << ": node " << start_.receiver()
                               << " is back; resuming at seq " << stretch_first_;
    }
    if (sending_) {
      Fill();
      return;
    }
    if (outstanding_ == 0) {
      Finish();
    } else if (!draining_) {
      draining_ = true;
      ScheduleWakeup(kDrainTimeout, kTagDrainTimeout);
    }
  }

  // Sends what the acknowledgements of second `second_ + 1` did, and starts the next second.
  void SendProgress() {
    auto progress = std::make_unique<EvLoadProgress>();
    LoadProgress& p = progress->record;
    p.set_pair_id(start_.pair_id());
    p.set_second(++second_);
    p.set_acked(second_acked_);
    p.set_bytes(second_bytes_);
    p.set_sent(second_sent_);
    HistogramToProto(second_rtt_, p.mutable_rtt());
    Send(controller_, std::move(progress));
    second_sent_ = 0;
    second_acked_ = 0;
    second_bytes_ = 0;
    second_rtt_ = LatencyHistogram();
  }

  void Finish() {
    if (finished_) {
      return;
    }
    finished_ = true;
    sending_ = false;
    // The last second, with the drain's acknowledgements (or, for a pair that ended early, the
    // second it ended in).
    if (second_ < last_second_) {
      SendProgress();
    }
    const int64_t end = last_ack_ns_ != 0 ? last_ack_ns_ : absl::GetCurrentTimeNanos();
    auto report = std::make_unique<EvLoadReport>();
    LoadReport& r = report->record;
    r.set_pair_id(start_.pair_id());
    r.set_sent(sent_);
    r.set_acked(acked_);
    r.set_bytes(bytes_);
    r.set_dups(dups_);
    r.set_gaps(gaps_);
    r.set_reorders(reorders_);
    HistogramToProto(rtt_, r.mutable_rtt());
    r.set_elapsed_ns(end - started_ns_);
    r.set_undelivered(undelivered_);
    r.set_disconnects(disconnects_);
    r.set_problem(problem_);
    r.set_unsure(unsure_);
    r.set_leave_undelivered(leave_undelivered_);
    r.set_pauses(pauses_);
    r.set_sender_left(sender_left_);
    r.set_receiver_left(receiver_left_);
    if (start_.rate_per_s() != 0) {
      // A pair that never got to send (its receiver never answered) had its whole schedule due.
      const uint64_t scheduled =
          schedule_ ? schedule_->total()
                    : OpenLoopSchedule(0, start_.rate_per_s(), sending_ns_).total();
      r.set_scheduled(scheduled);
      r.set_unsent(scheduled - std::min(scheduled, sent_));
      HistogramToProto(send_lag_, r.mutable_send_lag());
    }
    TROUPE_LOG(kInfo, kUser) << "pair " << start_.pair_id() << " done: sent " << sent_ << ", acked "
                             << acked_ << (problem_.empty() ? "" : absl::StrCat(", ", problem_));
    Send(controller_, std::move(report));
    Send(service_, std::make_unique<EvLoadSenderDone>());
    PassAway();
  }

  const LoadStart start_;
  const ActorId service_;
  const ActorId controller_;
  const ActorId target_;
  const uint32_t window_;
  const std::string payload_;

  bool sending_ = true;
  bool draining_ = false;
  bool finished_ = false;
  // The receiver's node left: nothing new is sent until it is back (receiver_back_) and every
  // event sent is answered. probing_: a ping to it is on its way.
  bool paused_ = false;
  bool receiver_back_ = false;
  bool probing_ = false;
  bool sender_left_ = false;
  bool receiver_left_ = false;
  // The first sequence number of the current stretch (LoadData.first_seq).
  uint64_t stretch_first_ = 1;
  uint64_t leave_undelivered_ = 0;
  uint32_t pauses_ = 0;
  // Sequence numbers [base_, next_seq_) are sent; resolved_[i] tells whether base_ + i is
  // answered. base_ is always the oldest unanswered one.
  uint64_t next_seq_ = 1;
  uint64_t base_ = 1;
  std::deque<bool> resolved_;
  uint64_t outstanding_ = 0;

  int64_t started_ns_ = 0;
  int64_t last_ack_ns_ = 0;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  uint64_t bytes_ = 0;
  uint64_t dups_ = 0;
  uint64_t gaps_ = 0;
  uint64_t reorders_ = 0;
  uint64_t undelivered_ = 0;
  uint64_t unsure_ = 0;
  uint64_t disconnects_ = 0;
  std::string problem_;
  LatencyHistogram rtt_;
  // The second in progress (second_ + 1): its acknowledgements and their round trips. The pair
  // reports the run's seconds LoadStart.first_second to last_second_.
  uint32_t second_;
  uint32_t last_second_ = 1;
  uint64_t second_sent_ = 0;
  uint64_t second_acked_ = 0;
  uint64_t second_bytes_ = 0;
  LatencyHistogram second_rtt_;
  // Open loop (LoadStart.rate_per_s): the schedule, from the first moment the pair may send;
  // how late each event went out; whether a wakeup for the next due event is pending.
  int64_t sending_ns_ = 0;
  std::optional<OpenLoopSchedule> schedule_;
  LatencyHistogram send_lag_;
  bool tick_armed_ = false;
};

// Spawns one LoadSender per LoadStart; once the node is leaving (StopLoadSenders), ends them and
// answers a later LoadStart with a report saying so.
class LoadSenderService final : public Actor {
 public:
  LoadSenderService() : Actor(&LoadSenderService::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvLoadStart, HandleStart);
      TROUPE_HFUNC(EvLoadLeave, HandleLeave);
      TROUPE_HFUNC(EvLoadSenderDone, HandleDone);
      default:
        Unhandled(ev);
    }
  }

  void HandleLeave(EventPtr<EvLoadLeave> ev) {
    leaving_ = true;
    if (ev.Get()->wait != nullptr) {
      waits_.push_back(ev.Get()->wait);
    }
    for (const ActorId& sender : live_) {
      Send(sender, std::make_unique<EvLoadLeave>(nullptr));
    }
    NotifyWhenDone();
  }

  void HandleDone(EventPtr<EvLoadSenderDone> ev) {
    live_.erase(ev->sender());
    NotifyWhenDone();
  }

  void NotifyWhenDone() {
    for (const std::shared_ptr<LeaveWait>& wait : waits_) {
      wait->running.store(live_.size(), std::memory_order_relaxed);  // read after a timeout
      if (live_.empty() && !wait->done.HasBeenNotified()) {
        wait->done.Notify();
      }
    }
  }

  void HandleStart(EventPtr<EvLoadStart> ev) {
    const LoadStart& start = ev.Get()->record;
    if (leaving_) {
      // Sent before the controller learned the node leaves: a clean end, restarted like the rest.
      auto report = std::make_unique<EvLoadReport>();
      report->record.set_pair_id(start.pair_id());
      report->record.set_sender_left(true);
      Send(FromWords(start.controller()), std::move(report));
      return;
    }
    TROUPE_LOG(kInfo, kUser) << "pair " << start.pair_id() << ": sending to node "
                             << start.receiver() << " for " << start.duration_ms() << " ms ("
                             << start.payload_bytes() << " B payload, window " << start.window()
                             << (start.rate_per_s() == 0
                                     ? std::string(", closed loop")
                                     : absl::StrCat(", open loop at ", start.rate_per_s(), "/s"))
                             << ")";
    live_.insert(Register(std::make_unique<LoadSender>(start, SelfId())));
  }

  bool leaving_ = false;
  absl::flat_hash_set<ActorId> live_;
  std::vector<std::shared_ptr<LeaveWait>> waits_;
};

absl::Status RegisterService(ActorSystem* system, const ActorId& service,
                             std::unique_ptr<Actor> actor) {
  const ActorId id = system->Register(std::move(actor));
  if (id.IsEmpty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot register the actor of service ", service.ServiceName()));
  }
  return system->RegisterService(service, id);
}

}  // namespace

absl::Status RegisterNodeServices(ActorSystem* system) {
  if (absl::Status status = RegisterService(system, kEchoService, std::make_unique<Echo>());
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          RegisterService(system, kLoadSenderService, std::make_unique<LoadSenderService>());
      !status.ok()) {
    return status;
  }
  return RegisterService(system, kLoadReceiverService, std::make_unique<LoadReceiver>());
}

size_t StopLoadSenders(ActorSystem* system, absl::Duration timeout) {
  auto wait = std::make_shared<LeaveWait>();
  system->Send(kLoadSenderService, std::make_unique<EvLoadLeave>(wait));
  if (wait->done.WaitForNotificationWithTimeout(timeout)) {
    return 0;
  }
  // Acquire is not needed: the count is only printed.
  return std::max<size_t>(1, wait->running.load(std::memory_order_relaxed));
}

}  // namespace troupe::examples
