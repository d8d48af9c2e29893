// SPDX-License-Identifier: Apache-2.0
#include "actors/event.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "actors/events.h"
#include "actors/log.h"
#include "actors/sync.h"

namespace troupe {
namespace {

// The classes declared per event type number (internal::DeclareEventType).
struct EventTypeRegistry {
  troupe::Mutex mu;
  absl::flat_hash_map<EventType, std::vector<const std::type_info*>> classes ABSL_GUARDED_BY(mu);
};

EventTypeRegistry& Registry() {
  // Built on first use (declarations run during static initialization), never destroyed.
  static auto* const registry = new EventTypeRegistry;
  return *registry;
}

// "troupe::testutil::EvPing" -> "EvPing"; template arguments keep theirs.
std::string ShortName(const std::type_info& type) {
  std::string name = internal::TypeName(&type);
  std::string_view head = name;
  head = head.substr(0, head.find('<'));
  const size_t colons = head.rfind("::");
  return colons == std::string_view::npos ? name : name.substr(colons + 2);
}

}  // namespace

namespace internal {

bool DeclareEventType(EventType number, const std::type_info& type) {
  EventTypeRegistry& registry = Registry();
  troupe::MutexLock lock(&registry.mu);
  std::vector<const std::type_info*>& classes = registry.classes[number];
  if (std::none_of(classes.begin(), classes.end(),
                   [&type](const std::type_info* known) { return *known == type; })) {
    classes.push_back(&type);
  }
  return true;
}

}  // namespace internal

std::string EventTypeName(EventType type) {
  std::vector<const std::type_info*> classes;
  {
    EventTypeRegistry& registry = Registry();
    troupe::MutexLock lock(&registry.mu);
    if (auto it = registry.classes.find(type); it != registry.classes.end()) {
      classes = it->second;
    }
  }
  if (classes.empty()) {
    return absl::StrFormat("0x%08x", type);
  }
  std::vector<std::string> names;
  names.reserve(classes.size());
  for (const std::type_info* known : classes) {
    names.push_back(ShortName(*known));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return absl::StrJoin(names, "|");
}

std::string EventBase::ToString() const { return absl::StrFormat("event 0x%08x", Type()); }

std::string EventBase::TypeName() const { return ShortName(typeid(*this)); }

EventHandle::EventHandle(ActorId recipient, ActorId sender, std::unique_ptr<EventBase> event,
                         uint32_t flags, uint64_t cookie, ActorId forward_to, uint64_t trace_id)
    : EventHandle(event->Type(), recipient, sender, flags, cookie, forward_to, trace_id) {
  body() = WordOf(event.release());
}

EventBytesPtr EventBytes::Make(size_t size) {
  void* block = internal::SmallAllocate(sizeof(EventBytes) + size);
  return EventBytesPtr(new (block) EventBytes(size));
}

EventBytesPtr EventBytes::Copy(std::string_view bytes) {
  EventBytesPtr copy = Make(bytes.size());
  if (!bytes.empty()) {
    std::memcpy(copy->data(), bytes.data(), bytes.size());
  }
  return copy;
}

void EventBytesFree::operator()(EventBytes* bytes) const noexcept {
  const size_t size = sizeof(EventBytes) + bytes->size_;
  bytes->~EventBytes();
  internal::SmallFree(bytes, size);
}

EventHandle::EventHandle(EventType type, ActorId recipient, ActorId sender, EventBytesPtr bytes,
                         uint32_t flags, uint64_t cookie, ActorId forward_to, uint64_t trace_id)
    : EventHandle(type, recipient, sender, flags, cookie, forward_to, trace_id) {
  if (bytes != nullptr) {
    body() = WordOf(bytes.release());
  }
}

EventHandle::EventHandle(EventType type, ActorId recipient, ActorId sender, std::string_view bytes,
                         uint32_t flags, uint64_t cookie, ActorId forward_to, uint64_t trace_id)
    : EventHandle(type, recipient, sender, EventBytes::Copy(bytes), flags, cookie, forward_to,
                  trace_id) {}

EventHandle::EventHandle(EventType type, ActorId recipient, ActorId sender, uint32_t flags,
                         uint64_t cookie)
    : EventHandle(type, recipient, sender, flags, cookie, ActorId(), 0) {}

EventHandle::EventHandle(EventType type, ActorId recipient, ActorId sender, uint32_t flags,
                         uint64_t cookie, ActorId forward_to, uint64_t trace_id)
    : type_(type), flags_(flags), recipient_(recipient), sender_(sender), cookie_(cookie) {
  if (!forward_to.IsEmpty() || trace_id != 0) {
    internal::HandleExtras& extras = MutableExtras();
    extras.forward_to = forward_to;
    extras.trace_id = trace_id;
  }
}

EventHandle::~EventHandle() {
  FreeBody(body());
  delete extras();
}

void EventHandle::FreeBody(void* word) {
  if (Tag(word) == kBytes) {
    EventBytesFree()(BytesOf(word));
  } else {
    delete EventOf(word);
  }
}

internal::HandleExtras& EventHandle::MutableExtras() {
  if (internal::HandleExtras* extras = this->extras(); extras != nullptr) {
    return *extras;
  }
  auto* extras = new internal::HandleExtras();
  extras->body = word_;
  word_ = reinterpret_cast<char*>(extras) + kExtras;
  return *extras;
}

void EventHandle::set_trace_id(uint64_t trace_id) {
  if (trace_id != 0 || extras() != nullptr) {
    MutableExtras().trace_id = trace_id;
  }
}

void EventHandle::set_forward_to(ActorId forward_to) {
  if (!forward_to.IsEmpty() || extras() != nullptr) {
    MutableExtras().forward_to = forward_to;
  }
}

std::unique_ptr<EventBase> EventHandle::ReleaseBase() {
  void*& word = body();
  EventBase* event = EventOf(word);
  if (event != nullptr) {
    word = nullptr;
  }
  return std::unique_ptr<EventBase>(event);
}

absl::Status EventHandle::Serialize() {
  if (HasBytes()) {
    return absl::OkStatus();
  }
  EventBase* event = GetBase();
  if (event == nullptr || !event->IsSerializable()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("event 0x%08x is local and cannot be serialized", type_));
  }
  EventBytesPtr bytes;
  if (const std::optional<size_t> size = event->WireSize(); size.has_value()) {
    // Protobuf caps a message at 2 GiB; the interconnect's max_event_size is far below.
    if (*size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return absl::InternalError(
          absl::StrFormat("event 0x%08x is %u bytes, over protobuf's 2 GiB", type_, *size));
    }
    bytes = EventBytes::Make(*size);
    if (!event->SerializeToArray(bytes->data(), *size)) {
      return absl::InternalError(absl::StrFormat("event 0x%08x failed to serialize", type_));
    }
  } else {
    std::string wire;
    if (!event->SerializeToString(&wire)) {
      return absl::InternalError(absl::StrFormat("event 0x%08x failed to serialize", type_));
    }
    bytes = EventBytes::Copy(wire);
  }
  delete event;
  body() = WordOf(bytes.release());
  return absl::OkStatus();
}

std::string EventHandle::ToString() const {
  return absl::StrFormat("event 0x%08x from %s to %s cookie %u", type_, sender_.ToString(),
                         recipient_.ToString(), cookie_);
}

const char* UndeliveredReasonName(UndeliveredReason reason) {
  switch (reason) {
    case UndeliveredReason::kActorNotFound:
      return "actor-not-found";
    case UndeliveredReason::kUnknownService:
      return "unknown-service";
    case UndeliveredReason::kNoRoute:
      return "no-route";
    case UndeliveredReason::kDisconnected:
      return "disconnected";
    case UndeliveredReason::kTooLarge:
      return "too-large";
    case UndeliveredReason::kParseError:
      return "parse-error";
    case UndeliveredReason::kShutdown:
      return "shutdown";
    case UndeliveredReason::kNotSerializable:
      return "not-serializable";
    case UndeliveredReason::kOverloaded:
      return "overloaded";
  }
  return "unknown";
}

bool EvUndelivered::SerializeToString(std::string* out) const {
  proto::Undelivered wire;
  wire.set_reason(static_cast<uint32_t>(reason));
  wire.set_source_type(source_type);
  wire.set_cookie(cookie);
  wire.set_unsure(unsure);
  return wire.AppendToString(out);
}

namespace {
// EvUndelivered is built on EventBase directly: it declares its type itself.
const bool undelivered_declared = internal::DeclareEventType(kEvUndelivered, typeid(EvUndelivered));
}  // namespace

std::unique_ptr<EvUndelivered> EvUndelivered::Load(std::string_view bytes) {
  proto::Undelivered wire;
  if (!wire.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return nullptr;
  }
  return std::make_unique<EvUndelivered>(static_cast<UndeliveredReason>(wire.reason()),
                                         wire.source_type(), wire.cookie(), wire.unsure());
}

std::string EvUndelivered::ToString() const {
  return absl::StrFormat("undelivered(%s, source %s (0x%08x), cookie %u%s)",
                         UndeliveredReasonName(reason), EventTypeName(source_type), source_type,
                         cookie, unsure ? ", unsure" : "");
}

const char* TerminationReasonName(TerminationReason reason) {
  switch (reason) {
    case TerminationReason::kStopped:
      return "stopped";
    case TerminationReason::kFailed:
      return "failed";
    case TerminationReason::kNodeLost:
      return "node-lost";
    case TerminationReason::kNotFound:
      return "not-found";
    case TerminationReason::kNodeLeft:
      return "node-left";
  }
  return "unknown";
}

namespace internal {

proto::ActorIdWire ToWire(const ActorId& id) {
  proto::ActorIdWire wire;
  wire.set_local_id(id.local_id());
  wire.set_hint(id.hint());
  wire.set_node_word(id.node_word());
  return wire;
}

ActorId FromWire(const proto::ActorIdWire& wire) {
  return ActorId::FromRaw(wire.local_id(), wire.hint(), wire.node_word());
}

}  // namespace internal

std::string EvTerminated::ToString() const {
  return absl::StrFormat("terminated(%s, %s)", target().ToString(),
                         TerminationReasonName(reason()));
}

std::string EvDeadLetter::ToString() const {
  return absl::StrFormat("dead-letter(%s, event %s (0x%08x) from %s to %s cookie %u)",
                         UndeliveredReasonName(reason), EventTypeName(type), type,
                         sender.ToString(), recipient.ToString(), cookie);
}

}  // namespace troupe
