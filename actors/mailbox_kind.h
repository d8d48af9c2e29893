// SPDX-License-Identifier: Apache-2.0
//
// The mailbox kinds an actor can be registered with (RegisterOptions::mailbox, or a pool's
// `default_mailbox` in the config). Every kind has one reader and many writers, never blocks the
// reader, allocates nothing per push beyond the event itself, and activates an idle mailbox with
// exactly one transition. They differ in how writers meet and how the reader drains; see
// bench/README.md ("Mailbox kinds") for measurements and when to choose each.
#pragma once

#include <cstdint>

namespace troupe {

enum class MailboxKind : uint8_t {
  // The pool's configured default (`default_mailbox`, kLockFree unless the config says otherwise).
  kPoolDefault = 0,
  // Lock-free intrusive queue (Vyukov MPSC): a push is one atomic exchange. The general-purpose
  // kind; an idle mailbox costs one cache line.
  kLockFree = 1,
  // A ring of event pointers in 32-slot segments. Writers take a short spin lock among
  // themselves; the reader never does and reads slots with no atomic read-modify-write. The
  // easiest to reason about; a push costs two locked instructions, so on the measured figures
  // LockFree (or HTSwap for streams) is faster even with one writer.
  kSimple = 2,
  // Four lock-free lanes, each writer (by sender id) always on the same one; the reader sweeps
  // them in turn. For many concurrent writers: they contend on four tails instead of one.
  kRevolving = 3,
  // Writers push onto a lock-free stack; the reader swaps the whole pending list out at once with
  // one exchange and reverses it, then pops with plain loads. For bursts read in batches.
  kHTSwap = 4,
  // Four classes handled in order: system events (bootstrap, poison, wakeup, undelivered), then
  // kPriorityHigh, normal, kPriorityLow (event flags); FIFO within a class.
  kPriority = 5,
};

inline constexpr uint32_t kMailboxKindCount = 6;

// Returns "LockFree", "Simple", ... ("PoolDefault" for kPoolDefault, "Invalid" otherwise): a
// NUL-terminated string with static storage, so it passes to absl::StrCat, StrFormat's %s, printf
// and operator<<, and converts to std::string_view. Compare names as std::string_view, not with ==
// on the pointer.
constexpr const char* MailboxKindName(MailboxKind kind) {
  switch (kind) {
    case MailboxKind::kPoolDefault:
      return "PoolDefault";
    case MailboxKind::kLockFree:
      return "LockFree";
    case MailboxKind::kSimple:
      return "Simple";
    case MailboxKind::kRevolving:
      return "Revolving";
    case MailboxKind::kHTSwap:
      return "HTSwap";
    case MailboxKind::kPriority:
      return "Priority";
  }
  return "Invalid";
}

}  // namespace troupe
