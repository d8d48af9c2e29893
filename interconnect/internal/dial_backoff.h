// SPDX-License-Identifier: Apache-2.0
//
// DialBackoff: when a proxy (proxy.h) may dial its peer again. Two kinds of trouble, two paces:
//   | trouble                                     | next dial                                  |
//   |---------------------------------------------|--------------------------------------------|
//   | nothing accepts the connection (not         | after 20 ms, doubling up to a heartbeat    |
//   | listening yet, restarting), the peer closes | (Unreachable)                              |
//   | it before answering, or the peer said       |                                            |
//   | goodbye (its next incarnation comes soon)   |                                            |
//   | the peer refused the handshake, or this     | not before a pause: a heartbeat, doubling  |
//   | side closed a connection for a protocol     | up to max_redial_delay (Pause)             |
//   | error                                       |                                            |
// A connection that carries the session ends the quick retries' doubling (LinkUp), and ends the
// pause when no protocol-error streak is running; a connection that moved either stream ends the
// streak (Reset). The kMaxFailedLinks-th failed link in a row ends the session.
//
// Thread-safety: thread-compatible (owned by one proxy actor).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace troupe::interconnect::internal {

class DialBackoff {
 public:
  // Connections in a row this side may close for protocol errors before the session ends.
  static constexpr uint64_t kMaxFailedLinks = 5;

  DialBackoff(absl::Duration heartbeat, absl::Duration max_pause)
      : heartbeat_(heartbeat), max_pause_(max_pause) {}

  // Returns how long a dial waits for the peer's handshake. A peer that accepted the connection
  // answers at once; one that does not (a black hole, a stuck relay) is redialled after two
  // heartbeats rather than the whole dead-peer timeout.
  absl::Duration HandshakeTimeout(absl::Duration dead_timeout) const {
    return std::min(2 * heartbeat_, dead_timeout);
  }

  // Nothing accepted a dial: returns the delay before the next one, or nullopt when a redial is
  // already scheduled.
  std::optional<absl::Duration> Unreachable() {
    if (redial_pending_) {
      return std::nullopt;
    }
    redial_pending_ = true;
    const absl::Duration delay = redial_delay_;
    redial_delay_ = std::min(redial_delay_ * 2, heartbeat_);
    return delay;
  }
  // The scheduled redial is due.
  void RedialDue() { redial_pending_ = false; }

  // A refusal or a protocol error: returns the pause before the next dial (which MayDial
  // enforces from `now`).
  absl::Duration Pause(absl::Time now) {
    pause_ = pause_ == absl::ZeroDuration() ? heartbeat_ : std::min(2 * pause_, max_pause_);
    next_dial_at_ = now + pause_;
    return pause_;
  }
  bool MayDial(absl::Time now) const { return now >= next_dial_at_; }

  // Connections in a row closed for protocol errors.
  uint64_t failed_links() const { return failed_links_; }
  // Counts one more; returns the streak's length.
  uint64_t AddFailedLink() { return ++failed_links_; }
  // Forgets the streak (it ended the session) but keeps the pause.
  void ForgetFailedLinks() { failed_links_ = 0; }
  // Ends the streak and any pause; returns whether there was one.
  bool Reset() {
    if (failed_links_ == 0 && pause_ == absl::ZeroDuration()) {
      return false;
    }
    failed_links_ = 0;
    pause_ = absl::ZeroDuration();
    next_dial_at_ = absl::InfinitePast();
    return true;
  }

  // Why the last attempt to reach the peer failed (for the line that ends a session), and whether
  // a connection ever carried a session.
  void NoteFailure(std::string why) { last_failure_ = std::move(why); }
  const std::string& last_failure() const { return last_failure_; }
  bool ever_connected() const { return ever_connected_; }
  // Why the proxy gives up on a session after trying for `waited` (the line that ends it).
  std::string GaveUp(absl::Duration waited) const {
    return absl::StrCat(
        ever_connected_ ? "could not reach it again for " : "never connected, tried for ",
        absl::FormatDuration(waited),
        last_failure_.empty() ? "" : absl::StrCat(" (last: ", last_failure_, ")"));
  }

  // A connection carries the session.
  void LinkUp() {
    ever_connected_ = true;
    redial_delay_ = kFirstRedialDelay;
    if (failed_links_ == 0) {
      pause_ = absl::ZeroDuration();  // the pause was for refusals: this one answered
      next_dial_at_ = absl::InfinitePast();
    }
  }

 private:
  static constexpr absl::Duration kFirstRedialDelay = absl::Milliseconds(20);

  const absl::Duration heartbeat_;
  const absl::Duration max_pause_;
  absl::Duration redial_delay_ = kFirstRedialDelay;
  bool redial_pending_ = false;
  uint64_t failed_links_ = 0;
  absl::Duration pause_ = absl::ZeroDuration();
  absl::Time next_dial_at_ = absl::InfinitePast();
  std::string last_failure_;
  bool ever_connected_ = false;
};

}  // namespace troupe::interconnect::internal
