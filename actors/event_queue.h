// SPDX-License-Identifier: Apache-2.0
//
// EventQueue: events handed from many threads to one consumer without a lock, for extensions that
// pass events between threads outside a mailbox (the interconnect's router queues remote events
// for a peer's proxy this way). A push is one atomic exchange and one store and allocates nothing:
// it links the event through the same node a mailbox uses, so an event is in at most one queue or
// mailbox at a time. Events pushed by one thread come out in the order it pushed them.
//
// Pop may return null while a producer is between its two steps, with its event (and any pushed
// behind it) not yet reachable. A consumer that must see every event has each producer signal it
// after Push, as the router does with its kick flag (interconnect/internal/peer_table.h).
//
// Thread-safety: Push is thread-safe; Pop and the destructor belong to one consumer at a time.
//
// Example:
//
//   troupe::EventQueue queue;
//   queue.Push(std::move(ev));                  // any thread
//   while (troupe::EventHandlePtr next = queue.Pop()) {
//     Handle(std::move(next));                  // the consumer
//   }
#pragma once

#include <utility>

#include "actors/event.h"
#include "actors/internal/mailbox_queues.h"

namespace troupe {

class EventQueue {
 public:
  EventQueue() = default;
  // Frees the events still queued.
  ~EventQueue() {
    while (Pop() != nullptr) {
    }
  }
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;
  EventQueue(EventQueue&&) = delete;
  EventQueue& operator=(EventQueue&&) = delete;

  void Push(EventHandlePtr ev) { queue_.Push(ev.release()); }
  // The oldest reachable event, or null (see the file comment).
  EventHandlePtr Pop() { return EventHandlePtr(static_cast<EventHandle*>(queue_.Pop())); }

 private:
  internal::IntrusiveMpscQueue queue_;
};

}  // namespace troupe
