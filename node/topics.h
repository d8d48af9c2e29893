// SPDX-License-Identifier: Apache-2.0
//
// Topics: publish/subscribe across the cluster. Any actor on any node subscribes to a topic (a
// string); an event published to the topic reaches every current subscriber, on every member
// node, once.
//
// How: every node runs one topic registry, the service Topics::kService, which knows only its
// own node's subscribers. A publish goes from the publisher to its own node's registry; that
// registry hands a copy to each of its subscribers of the topic and sends ONE copy to the
// registry of every other member of the node's membership (the nameservice it was given), which
// hands it to its own subscribers. So one copy per node crosses the network, not one per
// subscriber, and everything a publisher publishes travels one FIFO path to each subscriber.
//
// Guarantees (as implemented):
//   | what                          | guarantee                                                  |
//   |-------------------------------|------------------------------------------------------------|
//   | what a subscriber receives    | the published event's type and body (a copy parsed from    |
//   |                               | its wire form; one subscriber on the publisher's node may  |
//   |                               | get the object itself), with the publisher as sender       |
//   |                               | (empty for a publish from outside an actor), cookie 0, no  |
//   |                               | flags, and the publish's trace id                          |
//   | how often                     | at most once per publish and subscription; exactly once    |
//   |                               | unless a node or session failed on the way (below)         |
//   | order                         | per publisher: a subscriber gets one publisher's events of |
//   |                               | all topics in the order it published them. Events of       |
//   |                               | different publishers may interleave differently at         |
//   |                               | different subscribers                                      |
//   | subscribe, then publish       | EvTopicSubscribed{topic} comes back once the subscription  |
//   |                               | is recorded: every publish made after the subscriber (or   |
//   |                               | anyone it told) handled that acknowledgement reaches it,   |
//   |                               | provided the publisher's node lists the subscriber's node  |
//   |                               | as a member (see "membership")                             |
//   | unsubscribe                   | EvTopicUnsubscribed{topic} comes after every copy of the   |
//   |                               | topic sent to the subscriber; nothing of it follows        |
//   | a subscriber ends             | the registry watches it: its subscriptions go when it ends |
//   |                               | (copies already queued for it become dead letters)         |
//   | a subscriber's node dies or   | its subscribers are gone with it; a node that comes back   |
//   | leaves                        | starts with none. Others stop sending to a node once their |
//   |                               | membership drops it                                        |
// What is lost: a copy on its way to a node whose session ends (the node dies, is cut off, or
// leaves) is lost for all of that node's subscribers; so is one the interconnect refuses
// (kOverloaded: the link is slower than the publishers; kTooLarge), and one that reaches a node
// whose registry is missing (kUnknownService). Nothing is resent. A publisher that asks for it
// (PublishOptions::track) learns of each such loss: EvUndelivered{reason, source_type =
// kEvTopicCopy, cookie = the node, unsure} (events.h; LostCopyNode reads the node). A copy that
// was sent but whose fate is unknown is reported with unsure = true: its subscribers may or may
// not have got it. Copies to the publisher's own node's subscribers are never reported.
//
// Membership: the registry sends to the members its nameservice lists at the moment it handles
// the publish (it reads the list at every publish), except itself, whether or not they have
// subscribers of the topic (registries do not tell each other their topics). A client node
// (NodeEndpoint::client) has sessions with the listening members only, so its registry skips the
// other clients: a client's publish reaches its own and the listening members' subscribers,
// never another client's; a listening member's publish reaches every member's subscribers,
// clients included. A node whose membership has not learnt of a new member yet (etcd's watch
// lags a join) does not send to it. A registry without a nameservice serves its own node only.
//
// Events must be serializable (EventPB, or any event with a wire form) to be published, even to
// local subscribers only: every subscriber but one gets a copy made from the bytes (EventBytes
// are single-owner, so each copy costs one allocation and one memcpy of the body).
//
// Setting up: the registry must run on every node before the node joins the cluster, so that no
// other registry's copy finds it missing. RegisterTopics does it from NodeOptions::on_system_start
// for a nameservice the program holds; StartNodeWithTopics starts a troupe::node::Node whose
// membership (static table or etcd) is only known once it runs: its registry holds publishes, in
// order, until the node has started and handed it the membership (SetTopicsMembership).
//
// Thread-safety: the Topics functions and the setup functions are thread-safe; the registry is an
// actor. Topics::Subscribe, Unsubscribe and Publish(Actor&, ...) must be called from the actor's
// own handlers.
//
// Example (members of an actor; every node runs a registry, e.g. started by StartNodeWithTopics):
//
//   void Bootstrap() override {
//     // EvTopicSubscribed{"prices"} comes back; every publish to "prices" made after it comes too.
//     (void)troupe::node::Topics::Subscribe(*this, "prices");
//   }
//   void HandleTick(troupe::EventPtr<EvTick> ev) {
//     auto quote = std::make_unique<EvQuote>();
//     quote->record.set_seq(ev.Get()->record.seq());
//     (void)troupe::node::Topics::Publish(*this, "prices", std::move(quote));
//   }
//   void HandleQuote(troupe::EventPtr<EvQuote> ev) {  // ev->sender(): the publisher
//     quotes_->push_back(ev.Get()->record.seq());
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "interconnect/nameservice.h"
#include "node/node.h"
#include "proto/config.pb.h"
#include "proto/topics.pb.h"

namespace troupe::node {

// -- events -------------------------------------------------------------------------------------

enum TopicEventType : EventType {
  kEvTopicSubscribe = EventSpaceBegin(kClusterEventSpace) + 0x100,
  kEvTopicUnsubscribe,
  kEvTopicSubscribed,
  kEvTopicUnsubscribed,
  kEvTopicPublish,
  kEvTopicCopy,
  kEvTopicMembership,
  kEvTopicEnd,
};
static_assert(kEvTopicEnd - 1 <= EventSpaceBegin(kClusterEventSpace) + 0x1ff,
              "topic events stay in their range of the cluster space");

// Subscribes the sender to `topic` (Topics::Subscribe sends it); the answer is EvTopicSubscribed.
struct EvTopicSubscribe final : EventPB<EvTopicSubscribe, proto::TopicRequest, kEvTopicSubscribe> {
  EvTopicSubscribe() = default;
  explicit EvTopicSubscribe(std::string_view topic) { record.set_topic(std::string(topic)); }
};
// Unsubscribes the sender from `topic`; the answer is EvTopicUnsubscribed.
struct EvTopicUnsubscribe final
    : EventPB<EvTopicUnsubscribe, proto::TopicRequest, kEvTopicUnsubscribe> {
  EvTopicUnsubscribe() = default;
  explicit EvTopicUnsubscribe(std::string_view topic) { record.set_topic(std::string(topic)); }
};

// The registry's answer to EvTopicSubscribe, with the request's cookie (so Ask works): the
// subscription is recorded (ok()), or refused, and error() says why (an empty topic, a subscriber
// on another node than the registry's).
struct EvTopicSubscribed final : EventPB<EvTopicSubscribed, proto::TopicAck, kEvTopicSubscribed> {
  const std::string& topic() const { return record.topic(); }
  bool ok() const { return record.error().empty(); }
  const std::string& error() const { return record.error(); }
};
// The registry's answer to EvTopicUnsubscribe (also when the sender was not subscribed).
struct EvTopicUnsubscribed final
    : EventPB<EvTopicUnsubscribed, proto::TopicAck, kEvTopicUnsubscribed> {
  const std::string& topic() const { return record.topic(); }
  bool ok() const { return record.error().empty(); }
  const std::string& error() const { return record.error(); }
};

// A publish on its way from the publisher to its node's registry (Topics::Publish sends it).
// Local: publishes cross nodes as EvTopicCopy.
struct EvTopicPublish final : EventLocal<EvTopicPublish, kEvTopicPublish> {
  EvTopicPublish(std::string_view topic_value, std::unique_ptr<EventBase> event_value, bool tracked)
      : topic(topic_value), event(std::move(event_value)), track(tracked) {}
  std::string topic;
  std::unique_ptr<EventBase> event;
  // Remote copies go tracked (see PublishOptions::track).
  bool track;
};

// The one copy of a publish that a registry sends to another node's registry. Its sender is the
// publisher; with a tracked publish its cookie is the destination node.
struct EvTopicCopy final : EventPB<EvTopicCopy, proto::TopicCopy, kEvTopicCopy> {};

// Hands a registry its membership (SetTopicsMembership).
struct EvTopicMembership final : EventLocal<EvTopicMembership, kEvTopicMembership> {
  explicit EvTopicMembership(std::shared_ptr<interconnect::Nameservice> value)
      : membership(std::move(value)) {}
  std::shared_ptr<interconnect::Nameservice> membership;
};

// -- subscribing and publishing -----------------------------------------------------------------

struct PublishOptions {
  // True: the publisher learns of every remote copy lost (see the file comment), and of a missing
  // local registry (EvUndelivered{kUnknownService, source_type = kEvTopicPublish}).
  bool track = false;
};

class Topics {
 public:
  // The registry of the node a send is made on (node 0: the local one).
  static constexpr ActorId kService = ServiceId("troupe.topic");

  // Returns the registry of node `node`.
  static constexpr ActorId ServiceOn(NodeId node) { return ServiceId("troupe.topic", node); }

  // Subscribes `self` to `topic` at its node's registry; `self` then gets EvTopicSubscribed (with
  // ok()) once the subscription is recorded, or EvUndelivered{kUnknownService} when its node runs
  // no registry. Subscribing again is one subscription (and one more acknowledgement).
  // kInvalidArgument for an empty topic, kFailedPrecondition when `self` is not registered.
  static absl::Status Subscribe(const Actor& self, std::string_view topic);
  // Unsubscribes `self` from `topic`; `self` then gets EvTopicUnsubscribed. Errors as Subscribe.
  static absl::Status Unsubscribe(const Actor& self, std::string_view topic);

  // Publishes `event` to `topic` from `self` (the sender its subscribers see). kInvalidArgument
  // for an empty topic or a null or local (not serializable) event, kFailedPrecondition when
  // `self` is not registered; the event is then dropped.
  static absl::Status Publish(const Actor& self, std::string_view topic,
                              std::unique_ptr<EventBase> event, PublishOptions options = {});
  // Publishes from outside an actor (the subscribers see an empty sender; nothing can be
  // tracked). Publishes from one thread keep their order. Errors as above.
  static absl::Status Publish(ActorSystem& system, std::string_view topic,
                              std::unique_ptr<EventBase> event);

  // Returns the node a tracked publish lost its copy to, when `undelivered` reports one (its
  // source_type is kEvTopicCopy); nullopt for any other EvUndelivered.
  static std::optional<NodeId> LostCopyNode(const EvUndelivered& undelivered);
};

// -- setting up ---------------------------------------------------------------------------------

// Registers `system`'s topic registry as the service Topics::kService, with `membership` as the
// cluster's members (null: this node alone). Call it before the node joins (from
// NodeOptions::on_system_start). kAlreadyExists when the node has a registry; TryRegister's and
// RegisterService's errors otherwise.
absl::Status RegisterTopics(ActorSystem& system,
                            std::shared_ptr<interconnect::Nameservice> membership);
// Registers the registry with its membership to come (SetTopicsMembership): it records
// subscriptions and takes copies from other nodes at once, and holds this node's publishes, in
// order, until the membership arrives. Errors as RegisterTopics.
absl::Status RegisterTopicsAwaitingMembership(ActorSystem& system);
// Hands `system`'s registry its membership (null: this node alone), replacing any it had; held
// publishes then go out, in order. kFailedPrecondition when the node has no registry.
absl::Status SetTopicsMembership(ActorSystem& system,
                                 std::shared_ptr<interconnect::Nameservice> membership);

// Starts a Node (Node::Start) with a topic registry: registered before `options.on_system_start`
// runs (so the actors it registers may subscribe and publish at once), and given the node's
// membership (its interconnect's nameservice; none without an interconnect) once the node runs.
// Errors as Node::Start.
absl::StatusOr<std::unique_ptr<Node>> StartNodeWithTopics(const proto::ActorSystemConfig& config,
                                                          NodeOptions options = {});

}  // namespace troupe::node
