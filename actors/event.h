// SPDX-License-Identifier: Apache-2.0
//
// Events and event handles.
//
// An event is an object derived from `EventBase` with a `uint32` type. Components reserve spaces of
// 65,536 types (`EventSpaceBegin(space)`) and check at compile time that they stay inside them:
//
//   enum : troupe::EventType {
//     kEvPing = troupe::EventSpaceBegin(troupe::kUserEventSpace),
//     kEvPong,
//     kEvEnd,
//   };
//   static_assert(troupe::InEventSpace(kEvEnd - 1, troupe::kUserEventSpace));
//
//   // Never leaves its node:
//   struct EvPing : troupe::EventLocal<EvPing, kEvPing> { int seq = 0; };
//   // Its body is the protobuf message my::Pong, serialized when it crosses nodes:
//   struct EvPong : troupe::EventPB<EvPong, my::Pong, kEvPong> {};
//
// An `EventHandle` is the envelope: type, flags, recipient, sender, cookie, forward target and
// trace id, plus either the event object or its serialized bytes. It takes one 64-byte block: the
// forward target and the trace id, rarely set, live in a side block allocated only when one is.
// Within one node an event is moved, never copied or serialized. An `EventPB` crossing nodes is
// serialized once; on arrival the handle keeps the bytes and `Get<E>()` parses them when a handler
// first asks.
//
// Thread-safety: handles and events are thread-compatible; ownership passes with the handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

#include "absl/status/status.h"

#include "actors/actor_id.h"
#include "actors/internal/mailbox_node.h"
#include "actors/internal/small_alloc.h"

namespace troupe {

using EventType = uint32_t;

inline constexpr uint32_t kEventSpaceBits = 16;
inline constexpr uint32_t kEventSpaceSize = 1u << kEventSpaceBits;

// Well-known event spaces. User code starts at kUserEventSpace and may use any space above it.
inline constexpr uint32_t kSystemEventSpace = 0;
inline constexpr uint32_t kInterconnectEventSpace = 1;
inline constexpr uint32_t kTestingEventSpace = 2;
// The node layer's cluster services (node/): routers from +0x000, topics from +0x100, sharded
// entities from +0x200.
inline constexpr uint32_t kClusterEventSpace = 3;
inline constexpr uint32_t kUserEventSpace = 256;

// Returns the first event type of `space` (space < 65536).
constexpr EventType EventSpaceBegin(uint32_t space) { return space << kEventSpaceBits; }

// Returns true when `type` lies inside `space`.
constexpr bool InEventSpace(EventType type, uint32_t space) {
  return (type >> kEventSpaceBits) == space;
}

// -- event type names ------------------------------------------------------------------------
//
// Log lines, dead-letter lines and metric labels name event types by their classes ("EvPing"),
// not by number. Every class built on EventLocal or EventPB declares its type number to a
// registry once, before main (no cost when an event is made or sent); EventTypeName reads it.

// Returns the name of the class declared with type `type`, without namespaces ("EvPing");
// classes sharing a number are joined by "|" ("EvA|EvB"); a number no class of the program
// declares reads "0x%08x" ("0x01000007").
std::string EventTypeName(EventType type);

namespace internal {
// Declares `type` the class of event type `number` (EventLocal and EventPB do it for their
// classes; a class built on EventBase directly may do it for itself). Returns true.
bool DeclareEventType(EventType number, const std::type_info& type);
template <typename Derived, EventType kType>
struct EventTypeDeclaration {
  // Initialized before main, for every class whose constructor the program contains.
  static inline const bool declared = DeclareEventType(kType, typeid(Derived));
};
}  // namespace internal

// -- events ----------------------------------------------------------------------------------

// Base of every event object. Events come from a per-thread size-class pool
// (actors/internal/small_alloc.h): an event is allocated on the sender's thread and freed on the
// receiver's, the worst case for malloc.
class EventBase : public internal::SmallPooled {
 public:
  EventBase() = default;
  virtual ~EventBase() = default;
  EventBase(const EventBase&) = delete;
  EventBase& operator=(const EventBase&) = delete;
  EventBase(EventBase&&) = delete;
  EventBase& operator=(EventBase&&) = delete;

  // Returns the event type.
  virtual EventType Type() const = 0;
  // Returns true when the event can cross nodes (EventPB).
  virtual bool IsSerializable() const { return false; }
  // Appends the wire form to `out`; returns false for local events or on serialization failure.
  virtual bool SerializeToString(std::string* /*out*/) const { return false; }
  // Returns the exact size of the wire form for SerializeToArray, or nullopt when the event
  // serializes through SerializeToString only (then its bytes are copied once more). An event that
  // overrides both must write the same bytes through either; EventHandle::Serialize prefers this.
  virtual std::optional<size_t> WireSize() const { return std::nullopt; }
  // Writes the wire form, exactly `size` bytes (WireSize's answer just before), at `out`;
  // returns false on failure.
  virtual bool SerializeToArray(char* /*out*/, size_t /*size*/) const { return false; }
  // Returns a short human-readable description for logs.
  virtual std::string ToString() const;
  // Returns the name of this event's class, without namespaces ("EvPing").
  std::string TypeName() const;
};

// A local event: never serialized, never leaves its node.
template <typename Derived, EventType kType>
class EventLocal : public EventBase {
 public:
  static constexpr EventType kEventType = kType;
  // Names the type (EventTypeName): taking the address instantiates the declaration; no code.
  EventLocal() noexcept {
    static_cast<void>(&internal::EventTypeDeclaration<Derived, kType>::declared);
  }
  EventType Type() const final { return kType; }
};

// An event whose body is the protobuf message `record`. Serialized only when it crosses nodes.
template <typename Derived, typename ProtoMessage, EventType kType>
class EventPB : public EventBase {
 public:
  static constexpr EventType kEventType = kType;
  using Proto = ProtoMessage;

  // Both name the type, as EventLocal's constructor does.
  EventPB() { static_cast<void>(&internal::EventTypeDeclaration<Derived, kType>::declared); }
  explicit EventPB(ProtoMessage message) : record(std::move(message)) {
    static_cast<void>(&internal::EventTypeDeclaration<Derived, kType>::declared);
  }

  EventType Type() const final { return kType; }
  bool IsSerializable() const final { return true; }
  bool SerializeToString(std::string* out) const final { return record.AppendToString(out); }
  std::optional<size_t> WireSize() const final {
    if (!record.IsInitialized()) {
      return std::nullopt;  // SerializeToString fails and says why
    }
    return record.ByteSizeLong();
  }
  bool SerializeToArray(char* out, size_t size) const final {
    auto* begin = reinterpret_cast<uint8_t*>(out);
    return record.SerializeWithCachedSizesToArray(begin) == begin + size;
  }
  std::string ToString() const override { return record.ShortDebugString(); }

  // Parses a received body; returns nullptr when `bytes` is not a valid message.
  static std::unique_ptr<Derived> Load(std::string_view bytes) {
    auto event = std::make_unique<Derived>();
    if (!event->record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return nullptr;
    }
    return event;
  }

  ProtoMessage record;
};

// -- serialized bytes ------------------------------------------------------------------------

class EventBytes;
// The deleter of EventBytesPtr: returns the block to the pool (or operator delete) it came from.
struct EventBytesFree {
  void operator()(EventBytes* bytes) const noexcept;
};
using EventBytesPtr = std::unique_ptr<EventBytes, EventBytesFree>;

// The serialized body of an event: its length and its bytes in one block, from the event pool
// (actors/internal/small_alloc.h) when it fits the pool's largest class (256 B with the length),
// so a small remote event costs no malloc of its own on either side; larger bodies use operator
// new, one block each. Filled once (serialization, or a receiver copying or assembling the bytes),
// then read-only.
class EventBytes {
 public:
  // Returns a block for `size` bytes, their values unspecified until written through data().
  static EventBytesPtr Make(size_t size);
  // Returns a block holding a copy of `bytes`.
  static EventBytesPtr Copy(std::string_view bytes);

  EventBytes(const EventBytes&) = delete;
  EventBytes& operator=(const EventBytes&) = delete;
  EventBytes(EventBytes&&) = delete;
  EventBytes& operator=(EventBytes&&) = delete;
  ~EventBytes() = default;

  size_t size() const { return size_; }
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  std::string_view view() const { return {data(), size_}; }

 private:
  friend struct EventBytesFree;
  explicit EventBytes(size_t size) : size_(size) {}

  size_t size_;
};

// -- handles ---------------------------------------------------------------------------------

// Delivery flags of a handle (bitwise-or them).
enum EventFlags : uint32_t {
  kNoFlags = 0,
  // The sender receives `EvUndelivered` when the event cannot be delivered.
  kTrackDelivery = 1u << 0,
  // An undeliverable event goes to the handle's forward target instead.
  kForwardOnNondelivery = 1u << 1,
  // The sender is told when the session to the recipient's node connects and disconnects.
  kSubscribeOnSession = 1u << 2,
  // On session loss, an event whose fate is unknown is reported as unsure-undelivered.
  kGenerateUnsureUndelivered = 1u << 3,
  // Priority class in a kPriority mailbox (ignored by the other kinds): handled before normal
  // events (kPriorityHigh) or after them (kPriorityLow); FIFO within a class. With both set, high.
  kPriorityHigh = 1u << 4,
  kPriorityLow = 1u << 5,
};

class EventHandle;
using EventHandlePtr = std::unique_ptr<EventHandle>;

namespace internal {
// What a handle holds beyond its 64 bytes, allocated only when a forward target or a trace id is
// set: the handle's body word moves here, and the handle points at this block instead.
struct HandleExtras : SmallPooled {
  ActorId forward_to;
  uint64_t trace_id = 0;
  void* body = nullptr;
};
}  // namespace internal

// The envelope of one event. Owns the event object or its serialized bytes.
class EventHandle : public internal::MailboxNode, public internal::SmallPooled {
 public:
  // Wraps a live event object (must not be null).
  EventHandle(ActorId recipient, ActorId sender, std::unique_ptr<EventBase> event,
              uint32_t flags = kNoFlags, uint64_t cookie = 0, ActorId forward_to = {},
              uint64_t trace_id = 0);
  // Wraps serialized bytes of an event of `type` (as received from another node).
  EventHandle(EventType type, ActorId recipient, ActorId sender, EventBytesPtr bytes,
              uint32_t flags = kNoFlags, uint64_t cookie = 0, ActorId forward_to = {},
              uint64_t trace_id = 0);
  // The same with a copy of `bytes`.
  EventHandle(EventType type, ActorId recipient, ActorId sender, std::string_view bytes,
              uint32_t flags = kNoFlags, uint64_t cookie = 0, ActorId forward_to = {},
              uint64_t trace_id = 0);
  // Makes a handle of `type` with no body (system signals such as Bootstrap).
  EventHandle(EventType type, ActorId recipient, ActorId sender, uint32_t flags, uint64_t cookie);
  ~EventHandle();
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  EventHandle(EventHandle&&) = delete;
  EventHandle& operator=(EventHandle&&) = delete;

  // -- envelope ------------------------------------------------------------------------------

  EventType type() const { return type_; }
  uint32_t flags() const { return flags_; }
  bool HasFlag(EventFlags flag) const { return (flags_ & flag) != 0; }
  const ActorId& recipient() const { return recipient_; }
  const ActorId& sender() const { return sender_; }
  uint64_t cookie() const { return cookie_; }
  ActorId forward_to() const { return extras() != nullptr ? extras()->forward_to : ActorId(); }
  uint64_t trace_id() const { return extras() != nullptr ? extras()->trace_id : 0; }

  // Points the handle at a new recipient (service rewrite, forwarding).
  void set_recipient(ActorId recipient) { recipient_ = recipient; }
  // Sets the trace id (see "trace ids" in log.h; 0: none).
  void set_trace_id(uint64_t trace_id);
  // Sets the forward target that kForwardOnNondelivery sends the event to (empty: none). A
  // relay that passes events on (a router) sets it to learn of the ones its next hop cannot take.
  void set_forward_to(ActorId forward_to);
  void set_flags(uint32_t flags) { flags_ = flags; }

  // -- body ----------------------------------------------------------------------------------

  // Returns true when the handle carries a live event object.
  bool HasEvent() const { return GetBase() != nullptr; }
  // Returns true when the handle carries serialized bytes not yet parsed.
  bool HasBytes() const { return Tag(body()) == kBytes; }
  // Returns the live event object or nullptr (serialized or bodyless handle).
  EventBase* GetBase() const { return EventOf(body()); }

  // Returns the event as `E`, parsing serialized bytes on first use. Returns nullptr when the type
  // does not match, the handle has no body, or the bytes do not parse (then the bytes are kept).
  template <typename E>
  E* Get();

  // Takes the event object out of the handle (parsing first when needed); nullptr as for Get.
  template <typename E>
  std::unique_ptr<E> Release() {
    if (Get<E>() == nullptr) {
      return nullptr;
    }
    return std::unique_ptr<E>(static_cast<E*>(ReleaseBase().release()));
  }
  // Takes the event object out of the handle, whatever its type (nullptr when it holds none).
  std::unique_ptr<EventBase> ReleaseBase();

  // Converts a live serializable event into its bytes (what the interconnect sends). Returns
  // kFailedPrecondition for a local event and kInternal when protobuf serialization fails.
  absl::Status Serialize();
  // Returns the serialized bytes (empty when the handle holds no bytes).
  std::string_view bytes() const {
    return HasBytes() ? BytesOf(body())->view() : std::string_view{};
  }

  // Returns "type 0x... from ... to ..." for logs.
  std::string ToString() const;

 private:
  // The body word: a pointer to the event object (or null), to its bytes, or to the extras block
  // that holds the body word instead, told apart by its two low bits (each pointee is aligned to
  // at least 8).
  enum BodyTag : uintptr_t { kEvent = 0, kBytes = 1, kExtras = 2, kTagMask = 3 };
  static BodyTag Tag(const void* word) {
    return static_cast<BodyTag>(reinterpret_cast<uintptr_t>(word) & kTagMask);
  }
  // The pointer without its tag (pointer arithmetic: the tag is an offset into the pointee).
  static void* Untag(void* word) { return static_cast<char*>(word) - Tag(word); }
  static EventBase* EventOf(void* word) {
    return Tag(word) == kEvent ? static_cast<EventBase*>(word) : nullptr;
  }
  static EventBytes* BytesOf(void* word) { return static_cast<EventBytes*>(Untag(word)); }
  static void* WordOf(EventBase* event) { return event; }
  static void* WordOf(EventBytes* bytes) { return reinterpret_cast<char*>(bytes) + kBytes; }
  // Frees what a body word points at.
  static void FreeBody(void* word);

  internal::HandleExtras* extras() const {
    return Tag(word_) == kExtras ? static_cast<internal::HandleExtras*>(Untag(word_)) : nullptr;
  }
  // The body word, wherever it lives.
  void* body() const { return extras() != nullptr ? extras()->body : word_; }
  void*& body() { return extras() != nullptr ? extras()->body : word_; }
  // Returns the extras block, allocating it (with the body word moved into it) if needed.
  internal::HandleExtras& MutableExtras();

  // The envelope alone; the public constructors delegate here and add the body.
  EventHandle(EventType type, ActorId recipient, ActorId sender, uint32_t flags, uint64_t cookie,
              ActorId forward_to, uint64_t trace_id);

  EventType type_;
  uint32_t flags_;
  ActorId recipient_;
  ActorId sender_;
  uint64_t cookie_;
  void* word_ = nullptr;
};

static_assert(sizeof(EventHandle) == 64, "a handle is one 64-byte pool block");
static_assert(alignof(EventBase) >= 4 && alignof(EventBytes) >= 4 &&
                  alignof(internal::HandleExtras) >= 4,
              "the body word keeps its tag in the pointers' two low bits");

// A handler's typed view of the handle being handled: `ev->sender()`, `ev.Get()->field`.
// Valid during the handler call only; `Release()` takes ownership of the whole handle.
template <typename E>
class EventPtr {
 public:
  explicit EventPtr(EventHandlePtr& handle) : handle_(handle) {}

  EventHandle* operator->() const { return handle_.get(); }
  // Returns the typed event (already parsed by the dispatcher; never null inside a handler).
  E* Get() const { return handle_->template Get<E>(); }
  // Takes the handle out (e.g. to keep or forward it); the handler must not use `this` after.
  EventHandlePtr Release() const { return std::move(handle_); }

 private:
  EventHandlePtr& handle_;
};

// -- implementation ---------------------------------------------------------------------------

namespace internal {
template <typename E, typename = void>
struct HasLoad : std::false_type {};
template <typename E>
struct HasLoad<E, std::void_t<decltype(E::Load(std::string_view()))>> : std::true_type {};
}  // namespace internal

template <typename E>
E* EventHandle::Get() {
  if (type_ != E::kEventType) {
    return nullptr;
  }
  void*& word = body();
  if (EventBase* event = EventOf(word); event != nullptr) {
    return static_cast<E*>(event);
  }
  if constexpr (internal::HasLoad<E>::value) {
    if (Tag(word) == kBytes) {
      std::unique_ptr<E> parsed = E::Load(BytesOf(word)->view());
      if (parsed == nullptr) {
        return nullptr;
      }
      FreeBody(word);
      word = WordOf(parsed.get());
      return parsed.release();
    }
  }
  return nullptr;
}

}  // namespace troupe
