// SPDX-License-Identifier: Apache-2.0
#include "node/topics.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

#include "actors/log.h"

namespace troupe::node {
namespace {

// One node's registry: its own node's subscribers, by topic. Copies go out in the order the
// publishes arrive, which is what makes per-publisher order hold at every subscriber.
class TopicRegistry final : public Actor {
 public:
  TopicRegistry(std::shared_ptr<interconnect::Nameservice> membership, bool awaiting)
      : Actor(&TopicRegistry::StateWork), awaiting_(awaiting) {
    if (!awaiting) {
      membership_ = std::move(membership);
    }
  }

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvTopicSubscribe, HandleSubscribe);
      TROUPE_HFUNC(EvTopicUnsubscribe, HandleUnsubscribe);
      TROUPE_HFUNC(EvTopicCopy, HandleCopy);
      TROUPE_HFUNC(EvTerminated, HandleTerminated);
      TROUPE_HFUNC(EvTopicMembership, HandleMembership);
      case kEvTopicPublish:
        if (awaiting_) {
          held_.push_back(std::move(ev));
        } else {
          Publish(*ev);
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  // -- subscriptions ----------------------------------------------------------------------------

  void HandleSubscribe(EventPtr<EvTopicSubscribe> ev) {
    const ActorId subscriber = ev->sender();
    const std::string& topic = ev.Get()->record.topic();
    auto ack = std::make_unique<EvTopicSubscribed>();
    ack->record.set_topic(topic);
    if (std::string refused = Refusal(subscriber, topic); !refused.empty()) {
      ack->record.set_error(std::move(refused));
    } else {
      absl::btree_set<std::string>& topics = subscriptions_[subscriber];
      if (topics.empty()) {
        Watch(subscriber);
      }
      topics.insert(topic);
      topics_[topic].insert(subscriber);
    }
    if (!subscriber.IsEmpty()) {
      Reply(ev, std::move(ack));
    }
  }

  void HandleUnsubscribe(EventPtr<EvTopicUnsubscribe> ev) {
    const ActorId subscriber = ev->sender();
    const std::string& topic = ev.Get()->record.topic();
    auto ack = std::make_unique<EvTopicUnsubscribed>();
    ack->record.set_topic(topic);
    if (std::string refused = Refusal(subscriber, topic); !refused.empty()) {
      ack->record.set_error(std::move(refused));
    } else if (auto it = subscriptions_.find(subscriber); it != subscriptions_.end()) {
      if (it->second.erase(topic) > 0) {
        Drop(topic, subscriber);
      }
      if (it->second.empty()) {
        subscriptions_.erase(it);
        Unwatch(subscriber);
      }
    }
    if (!subscriber.IsEmpty()) {
      Reply(ev, std::move(ack));
    }
  }

  // Returns why `subscriber` may not (un)subscribe to `topic`; empty when it may.
  std::string Refusal(const ActorId& subscriber, const std::string& topic) const {
    if (subscriber.IsEmpty()) {
      return "no subscriber: the request has no sender";
    }
    if (topic.empty()) {
      return "the topic is empty";
    }
    if (subscriber.IsService() || subscriber.node_id() != SelfId().node_id()) {
      return absl::StrCat("subscriber ", subscriber.ToString(), " is not on node ",
                          SelfId().node_id(), ": subscribe at your own node's registry");
    }
    return {};
  }

  // A subscriber that ended takes its subscriptions with it.
  void HandleTerminated(EventPtr<EvTerminated> ev) {
    auto it = subscriptions_.find(ev.Get()->target());
    if (it == subscriptions_.end()) {
      return;
    }
    for (const std::string& topic : it->second) {
      Drop(topic, it->first);
    }
    subscriptions_.erase(it);
  }

  void Drop(const std::string& topic, const ActorId& subscriber) {
    auto it = topics_.find(topic);
    if (it == topics_.end()) {
      return;
    }
    it->second.erase(subscriber);
    if (it->second.empty()) {
      topics_.erase(it);
    }
  }

  // -- publishing -------------------------------------------------------------------------------

  void Publish(EventHandle& ev) {
    auto* publish = ev.Get<EvTopicPublish>();
    const ActorId publisher = ev.sender();
    if (publish->event == nullptr || !publish->event->IsSerializable()) {
      Refuse(ev, publish->event == nullptr ? 0 : publish->event->Type(), "no serializable event");
      return;
    }
    RefreshMembers();
    auto topic = topics_.find(publish->topic);
    const size_t local = topic == topics_.end() ? 0 : topic->second.size();
    const EventType type = publish->event->Type();
    std::string body;
    // A lone local subscriber with no other member gets the object itself, never serialized.
    if ((local > 1 || !remote_nodes_.empty()) && !publish->event->SerializeToString(&body)) {
      Refuse(ev, type, "its serialization failed");
      return;
    }
    const uint32_t remote_flags =
        publish->track ? kTrackDelivery | kGenerateUnsureUndelivered : kNoFlags;
    for (const NodeId node : remote_nodes_) {
      auto copy = std::make_unique<EvTopicCopy>();
      copy->record.set_topic(publish->topic);
      copy->record.set_event_type(type);
      copy->record.set_body(body);
      // The publisher is the copy's sender: a lost copy is reported to it, and the interconnect
      // keeps each sender's order, also for copies large enough to take its bulk lane.
      Send(std::make_unique<EventHandle>(Topics::ServiceOn(node), publisher, std::move(copy),
                                         remote_flags, publish->track ? node : 0, ActorId(),
                                         ev.trace_id()));
    }
    if (local == 0) {
      return;
    }
    const ActorId last = *topic->second.rbegin();
    for (const ActorId& subscriber : topic->second) {
      // The publish's own trace id: a held publish goes out while another event is handled.
      if (subscriber == last) {
        Send(std::make_unique<EventHandle>(subscriber, publisher, std::move(publish->event),
                                           kNoFlags, 0, ActorId(), ev.trace_id()));
      } else {
        Send(std::make_unique<EventHandle>(type, subscriber, publisher, std::string_view{body},
                                           kNoFlags, 0, ActorId(), ev.trace_id()));
      }
    }
  }

  // Drops a publish that cannot go out; a tracking publisher hears why.
  void Refuse(EventHandle& ev, EventType type, std::string_view why) {
    TROUPE_LOG(kWarn, kActors) << "topic registry: a publish to \""
                               << ev.Get<EvTopicPublish>()->topic << "\" from "
                               << ev.sender().ToString() << " is dropped: " << why;
    if (ev.Get<EvTopicPublish>()->track && !ev.sender().IsEmpty()) {
      Send(ev.sender(),
           std::make_unique<EvUndelivered>(UndeliveredReason::kNotSerializable, type, ev.cookie()));
    }
  }

  // Hands a publish that came from another node to this node's subscribers of its topic.
  void HandleCopy(EventPtr<EvTopicCopy> ev) {
    const proto::TopicCopy& copy = ev.Get()->record;
    auto topic = topics_.find(copy.topic());
    if (topic == topics_.end()) {
      return;
    }
    for (const ActorId& subscriber : topic->second) {
      Send(std::make_unique<EventHandle>(copy.event_type(), subscriber, ev->sender(),
                                         std::string_view{copy.body()}));
    }
  }

  // -- membership -------------------------------------------------------------------------------

  void HandleMembership(EventPtr<EvTopicMembership> ev) {
    membership_ = std::move(ev.Get()->membership);
    awaiting_ = false;
    std::deque<EventHandlePtr> held = std::exchange(held_, {});
    for (EventHandlePtr& publish : held) {
      Publish(*publish);
    }
  }

  // Reads the members at every publish: a change the nameservice has made is seen by the next
  // publish (a cached list refreshed by its watcher would miss a change not yet told to it).
  void RefreshMembers() {
    remote_nodes_.clear();
    if (membership_ == nullptr) {
      return;
    }
    const std::vector<interconnect::NodeEndpoint> members = membership_->Members();
    const NodeId self = SelfId().node_id();
    bool client = false;
    for (const interconnect::NodeEndpoint& member : members) {
      client = client || (member.node == self && member.client);
    }
    for (const interconnect::NodeEndpoint& member : members) {
      // Two clients have no session with each other.
      if (member.node != self && !(client && member.client)) {
        remote_nodes_.push_back(member.node);
      }
    }
  }

  std::shared_ptr<interconnect::Nameservice> membership_;
  // True until SetTopicsMembership: this node's publishes wait in held_, in arrival order.
  bool awaiting_;
  std::deque<EventHandlePtr> held_;
  // The members the publish being handled goes to (kept to reuse its memory).
  std::vector<NodeId> remote_nodes_;
  // Subscribers by topic, ordered so that a run's fan-out order does not depend on hashing.
  absl::flat_hash_map<std::string, absl::btree_set<ActorId>> topics_;
  // Topics by subscriber (each watched while it has one).
  absl::flat_hash_map<ActorId, absl::btree_set<std::string>> subscriptions_;
};

absl::Status RegisterTopicRegistry(ActorSystem& system,
                                   std::shared_ptr<interconnect::Nameservice> membership,
                                   bool awaiting) {
  if (!system.LookupService(Topics::kService).IsEmpty()) {
    return absl::AlreadyExistsError(
        absl::StrCat("node ", system.node_id(), " already runs a topic registry"));
  }
  absl::StatusOr<ActorId> registry =
      system.TryRegister(std::make_unique<TopicRegistry>(std::move(membership), awaiting));
  if (!registry.ok()) {
    return registry.status();
  }
  return system.RegisterService(Topics::kService, *registry);
}

absl::Status CheckTopicCaller(const Actor& self, std::string_view topic) {
  if (self.system() == nullptr || self.SelfId().IsEmpty()) {
    return absl::FailedPreconditionError("the actor is not registered");
  }
  if (topic.empty()) {
    return absl::InvalidArgumentError("the topic is empty");
  }
  return absl::OkStatus();
}

absl::Status CheckTopicEvent(std::string_view topic, const std::unique_ptr<EventBase>& event) {
  if (topic.empty()) {
    return absl::InvalidArgumentError("the topic is empty");
  }
  if (event == nullptr) {
    return absl::InvalidArgumentError("no event to publish");
  }
  if (!event->IsSerializable()) {
    return absl::InvalidArgumentError(
        absl::StrCat("event ", event->TypeName(),
                     " is local: only serializable events (EventPB) are published"));
  }
  return absl::OkStatus();
}

}  // namespace

// -- Topics ---------------------------------------------------------------------------------------

absl::Status Topics::Subscribe(const Actor& self, std::string_view topic) {
  if (absl::Status ok = CheckTopicCaller(self, topic); !ok.ok()) {
    return ok;
  }
  self.system()->Send(kService, std::make_unique<EvTopicSubscribe>(topic), kTrackDelivery, 0,
                      self.SelfId());
  return absl::OkStatus();
}

absl::Status Topics::Unsubscribe(const Actor& self, std::string_view topic) {
  if (absl::Status ok = CheckTopicCaller(self, topic); !ok.ok()) {
    return ok;
  }
  self.system()->Send(kService, std::make_unique<EvTopicUnsubscribe>(topic), kTrackDelivery, 0,
                      self.SelfId());
  return absl::OkStatus();
}

absl::Status Topics::Publish(const Actor& self, std::string_view topic,
                             std::unique_ptr<EventBase> event, PublishOptions options) {
  if (absl::Status ok = CheckTopicCaller(self, topic); !ok.ok()) {
    return ok;
  }
  if (absl::Status ok = CheckTopicEvent(topic, event); !ok.ok()) {
    return ok;
  }
  self.system()->Send(kService,
                      std::make_unique<EvTopicPublish>(topic, std::move(event), options.track),
                      options.track ? kTrackDelivery : kNoFlags, 0, self.SelfId());
  return absl::OkStatus();
}

absl::Status Topics::Publish(ActorSystem& system, std::string_view topic,
                             std::unique_ptr<EventBase> event) {
  if (absl::Status ok = CheckTopicEvent(topic, event); !ok.ok()) {
    return ok;
  }
  system.Send(kService, std::make_unique<EvTopicPublish>(topic, std::move(event), false));
  return absl::OkStatus();
}

std::optional<NodeId> Topics::LostCopyNode(const EvUndelivered& undelivered) {
  if (undelivered.source_type != kEvTopicCopy) {
    return std::nullopt;
  }
  return static_cast<NodeId>(undelivered.cookie);
}

// -- setting up -----------------------------------------------------------------------------------

absl::Status RegisterTopics(ActorSystem& system,
                            std::shared_ptr<interconnect::Nameservice> membership) {
  return RegisterTopicRegistry(system, std::move(membership), /*awaiting=*/false);
}

absl::Status RegisterTopicsAwaitingMembership(ActorSystem& system) {
  return RegisterTopicRegistry(system, nullptr, /*awaiting=*/true);
}

absl::Status SetTopicsMembership(ActorSystem& system,
                                 std::shared_ptr<interconnect::Nameservice> membership) {
  if (system.LookupService(Topics::kService).IsEmpty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", system.node_id(), " runs no topic registry"));
  }
  system.Send(Topics::kService, std::make_unique<EvTopicMembership>(std::move(membership)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Node>> StartNodeWithTopics(const proto::ActorSystemConfig& config,
                                                          NodeOptions options) {
  options.on_system_start = [user = std::move(options.on_system_start)](ActorSystem& system) {
    if (absl::Status registered = RegisterTopicsAwaitingMembership(system); !registered.ok()) {
      return registered;
    }
    return user ? user(system) : absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<Node>> node = Node::Start(config, std::move(options));
  if (!node.ok()) {
    return node;
  }
  std::shared_ptr<interconnect::Nameservice> membership;
  if ((*node)->interconnect() != nullptr) {
    membership = (*node)->interconnect()->nameservice();
  }
  if (absl::Status given = SetTopicsMembership((*node)->system(), std::move(membership));
      !given.ok()) {
    return given;
  }
  return node;
}

}  // namespace troupe::node
