// SPDX-License-Identifier: Apache-2.0
//
// What the transport tests (tcp_transport_test.cc, tls_test.cc) share: a Collector actor that
// copies every transport event it receives into an EventLog, the test thread's FIFO of them with
// deadline-bounded waits, readers that expect events of a type or a connection's bytes, and the
// concurrent-writers check both transports must pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/sync.h"
#include "interconnect/transport.h"
#include "ut/actors/test_util.h"

namespace troupe::interconnect {

// The longest any single wait may take (a passing test never gets close).
inline const absl::Duration kWait = absl::Seconds(testutil::kUnderSanitizer ? 30 : 10);

// What a Collector saw of one transport event.
struct Seen {
  EventType type = 0;
  ConnectionId connection = 0;
  bool incoming = false;
  std::string bytes;
  absl::Status reason;
};

// A thread-safe FIFO of Seen events.
class EventLog {
 public:
  void Add(Seen seen) ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    events_.push_back(std::move(seen));
  }

  // Pops the oldest event, waiting up to `timeout` for one.
  std::optional<Seen> Next(absl::Duration timeout = kWait) ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), absl::Now() + timeout)) {
      return std::nullopt;
    }
    Seen seen = std::move(events_.front());
    events_.pop_front();
    return seen;
  }

 private:
  troupe::Mutex mu_;
  std::deque<Seen> events_ ABSL_GUARDED_BY(mu_);
};

// Copies every transport event it receives into an EventLog.
class Collector : public Actor {
 public:
  explicit Collector(EventLog* log) : Actor(&Collector::StateWork), log_(log) {}

 private:
  TROUPE_STATE(StateWork) {
    Seen seen;
    seen.type = ev->type();
    if (auto* up = ev->Get<EvConnectionUp>()) {
      seen.connection = up->connection;
      seen.incoming = up->incoming;
    } else if (auto* bytes = ev->Get<EvBytesReceived>()) {
      seen.connection = bytes->connection;
      seen.bytes = std::move(bytes->bytes);
    } else if (auto* down = ev->Get<EvConnectionDown>()) {
      seen.connection = down->connection;
      // A copy of its own, not a share of the event's: the event's status is released on this
      // worker while the test thread reads the copy, and the reference count between them lives
      // in Debian's abseil, which ThreadSanitizer does not see into.
      seen.reason = absl::Status(down->reason.code(), std::string(down->reason.message()));
    } else {
      Unhandled(ev);
      return;
    }
    log_->Add(std::move(seen));
  }

  EventLog* log_;
};

// Returns the next event of `log`, failing the test unless it is of `type`.
inline Seen Expect(EventLog& log, EventType type) {
  std::optional<Seen> seen = log.Next();
  if (!seen) {
    ADD_FAILURE() << "no event of type " << type << " within " << kWait;
    return {};
  }
  EXPECT_EQ(seen->type, type) << "connection " << seen->connection << " " << seen->reason;
  return *std::move(seen);
}

// Reads `size` bytes per connection from `log` (EvBytesReceived only); returns them by connection
// in the order of `connections`. Stops early when no bytes arrive for kWait.
inline std::vector<std::string> ReadBytes(EventLog& log,
                                          const std::vector<ConnectionId>& connections,
                                          size_t size) {
  std::vector<std::string> got(connections.size());
  std::vector<bool> complete(connections.size(), false);
  size_t done = 0;
  while (done < connections.size()) {
    std::optional<Seen> seen = log.Next();
    if (!seen) {
      ADD_FAILURE() << "bytes stopped arriving";
      break;
    }
    if (seen->type != kEvBytesReceived) {
      ADD_FAILURE() << "unexpected event " << seen->type << " on " << seen->connection << ": "
                    << seen->reason;
      break;
    }
    bool known = false;
    for (size_t i = 0; i < connections.size(); ++i) {
      if (connections[i] == seen->connection) {
        known = true;
        got[i] += seen->bytes;
        EXPECT_LE(got[i].size(), size);
        if (!complete[i] && got[i].size() >= size) {
          complete[i] = true;
          ++done;
        }
      }
    }
    EXPECT_TRUE(known) << "bytes for connection " << seen->connection;
  }
  return got;
}

// Reads `size` bytes of `connection` from `log`.
inline std::string ReadBytes(EventLog& log, ConnectionId connection, size_t size) {
  return ReadBytes(log, std::vector<ConnectionId>{connection}, size)[0];
}

// Has four threads write records of random sizes to `connection` of `sender` at once, and
// expects `receiver` (the other end, reported to `receiver_log`) to get every record whole and
// each writer's records in order. Two writers use Write, one record a call; the other two
// WriteShared, 1 to 16 records a call, each a piece only the transport still holds once the call
// returns (so a piece the kernel did not take at once must stay alive in the transport's queue).
inline void ExpectWholeWritesFromConcurrentWriters(Transport& sender, ConnectionId connection,
                                                   EventLog& receiver_log, ConnectionId receiver) {
  constexpr int kWriters = 4;
  constexpr uint32_t kRecords = 3000;
  // A record: writer (1 byte), sequence (4 bytes, little-endian), length (2 bytes), then `length`
  // copies of writer + sequence.
  auto record = [](uint8_t writer, uint32_t seq, uint16_t length) {
    std::string r;
    r.push_back(static_cast<char>(writer));
    for (int shift = 0; shift < 32; shift += 8) {
      r.push_back(static_cast<char>((seq >> shift) & 0xff));
    }
    r.push_back(static_cast<char>(length & 0xff));
    r.push_back(static_cast<char>(length >> 8));
    r.append(length, static_cast<char>((writer + seq) & 0xff));
    return r;
  };
  size_t total = 0;
  std::vector<std::vector<std::string>> records(kWriters);
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<uint16_t> length(0, 2000);
  for (int w = 0; w < kWriters; ++w) {
    for (uint32_t seq = 0; seq < kRecords; ++seq) {
      records[w].push_back(record(static_cast<uint8_t>(w), seq, length(rng)));
      total += records[w].back().size();
    }
  }
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      if (w % 2 == 0) {
        for (const std::string& r : records[w]) {
          sender.Write(connection, r);
        }
        return;
      }
      std::mt19937_64 group_rng(w);
      std::uniform_int_distribution<size_t> group(1, 16);
      for (size_t at = 0; at < records[w].size();) {
        const size_t end = std::min(records[w].size(), at + group(group_rng));
        std::vector<SharedBytes> pieces;
        for (; at < end; ++at) {
          pieces.push_back(std::make_shared<const std::string>(records[w][at]));
        }
        sender.WriteShared(connection, std::move(pieces));
      }
    });
  }
  for (std::thread& writer : writers) {
    writer.join();
  }
  const std::string got = ReadBytes(receiver_log, receiver, total);
  if (got.size() != total) {
    ADD_FAILURE() << "got " << got.size() << " of " << total << " bytes";
    return;
  }
  std::vector<uint32_t> next(kWriters, 0);
  for (size_t at = 0; at < got.size();) {
    const auto writer = static_cast<uint8_t>(got[at]);
    if (writer >= kWriters || next[writer] >= kRecords) {
      ADD_FAILURE() << "no record of writer " << int{writer} << " at byte " << at;
      return;
    }
    const std::string& expected = records[writer][next[writer]];
    if (got.compare(at, expected.size(), expected) != 0) {
      ADD_FAILURE() << "writer " << int{writer} << " record " << next[writer] << " at byte " << at;
      return;
    }
    at += expected.size();
    ++next[writer];
  }
  for (int w = 0; w < kWriters; ++w) {
    EXPECT_EQ(next[w], kRecords);
  }
}

}  // namespace troupe::interconnect
