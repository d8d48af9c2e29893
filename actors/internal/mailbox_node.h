// SPDX-License-Identifier: Apache-2.0
//
// The intrusive link every queued event carries, so a mailbox push allocates nothing.
#pragma once

#include <atomic>

namespace troupe::internal {

struct MailboxNode {
  // Written by the producer that links the next node (release), read by the mailbox's reader
  // (acquire).
  std::atomic<MailboxNode*> next{nullptr};
};

}  // namespace troupe::internal
