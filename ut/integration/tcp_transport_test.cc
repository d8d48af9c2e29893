// SPDX-License-Identifier: Apache-2.0
//
// The TCP transport on loopback, with a real ActorSystem: connect and accept, ordered and complete
// bytes both ways (one writer, two concurrent writers), close, refused connects, taken ports,
// SetOwner, Shutdown with connections open, writes after the peer left, IPv6, and the options
// MakeTcpTransport refuses.
//
// Collector actors copy every transport event into an EventLog the test thread waits on; every
// wait has a deadline. The "nothing arrives" checks wait kQuiet and expect silence.
#include "interconnect/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/sync.h"
#include "interconnect/transport.h"
#include "proto/config.pb.h"
#include "ut/integration/transport_util.h"

namespace troupe::interconnect {
namespace {

#ifdef TROUPE_TSAN
constexpr size_t kBulkBytes = size_t{2} << 20;
#else
constexpr size_t kBulkBytes = size_t{8} << 20;
#endif

// How long a "nothing arrives" check listens.
constexpr absl::Duration kQuiet = absl::Milliseconds(200);

// Returns `size` pseudo-random bytes.
std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) {
    c = static_cast<char>(rng() & 0xff);
  }
  return bytes;
}

// Writes `payload` to `connection` in chunks of random sizes in [1, max_chunk].
void WriteInChunks(Transport& transport, ConnectionId connection, const std::string& payload,
                   size_t max_chunk, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> chunk(1, max_chunk);
  for (size_t at = 0; at < payload.size();) {
    const size_t n = std::min(chunk(rng), payload.size() - at);
    transport.Write(connection, payload.substr(at, n));
    at += n;
  }
}

struct Pair {
  ConnectionId client = 0;
  ConnectionId server = 0;
};

class TcpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ActorSystem>> system =
        ActorSystem::Create(proto::ActorSystemConfig());
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    absl::StatusOr<std::unique_ptr<Transport>> server = MakeTcpTransport(system_.get());
    absl::StatusOr<std::unique_ptr<Transport>> client = MakeTcpTransport(system_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE(client.ok()) << client.status();
    server_transport_ = std::move(*server);
    client_transport_ = std::move(*client);
    server_ = system_->Register(std::make_unique<Collector>(&server_log_));
    client_ = system_->Register(std::make_unique<Collector>(&client_log_));
    other_ = system_->Register(std::make_unique<Collector>(&other_log_));
  }

  void TearDown() override {
    for (std::unique_ptr<Transport>* transport : {&client_transport_, &server_transport_}) {
      if (*transport != nullptr) {
        (*transport)->Shutdown();
      }
    }
    if (system_ != nullptr) {
      system_->Stop();
    }
  }

  // Listens on `host` (once per test) and returns the port.
  uint16_t ListenPort(const std::string& host = "127.0.0.1") {
    if (port_ == 0) {
      absl::StatusOr<uint16_t> port = server_transport_->Listen(host, 0, server_);
      EXPECT_TRUE(port.ok()) << port.status();
      port_ = port.value_or(0);
      EXPECT_NE(port_, 0);
    }
    return port_;
  }

  // Connects the client transport to the server transport's listener; returns both ends' ids.
  Pair Connect(const std::string& host = "127.0.0.1") {
    Pair pair;
    pair.client = client_transport_->Connect(host, ListenPort(host), client_);
    const Seen up1 = Expect(client_log_, kEvConnectionUp);
    const Seen up2 = Expect(server_log_, kEvConnectionUp);
    EXPECT_EQ(up1.connection, pair.client);
    EXPECT_FALSE(up1.incoming);
    EXPECT_TRUE(up2.incoming);
    pair.server = up2.connection;
    return pair;
  }

  // The logs outlive the system, whose Stop destroys the collectors.
  EventLog server_log_;
  EventLog client_log_;
  EventLog other_log_;
  std::unique_ptr<ActorSystem> system_;
  std::unique_ptr<Transport> server_transport_;
  std::unique_ptr<Transport> client_transport_;
  ActorId server_;
  ActorId client_;
  ActorId other_;
  uint16_t port_ = 0;
};

TEST_F(TcpTransportTest, CarriesBytesBothWays) {
  const Pair pair = Connect();
  client_transport_->Write(pair.client, "ping");
  EXPECT_EQ(ReadBytes(server_log_, pair.server, 4), "ping");
  server_transport_->Write(pair.server, "pong");
  EXPECT_EQ(ReadBytes(client_log_, pair.client, 4), "pong");
}

TEST_F(TcpTransportTest, CarriesMegabytesInOrderBothWays) {
  const Pair pair = Connect();
  const std::string up = RandomBytes(kBulkBytes, 1);
  const std::string down = RandomBytes(kBulkBytes, 2);
  // Both directions at once from one thread: neither side's reads wait for the other's writes.
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<size_t> chunk(1, size_t{64} * 1024);
  size_t at_up = 0;
  size_t at_down = 0;
  while (at_up < up.size() || at_down < down.size()) {
    const size_t n = std::min(chunk(rng), up.size() - at_up);
    client_transport_->Write(pair.client, up.substr(at_up, n));
    at_up += n;
    const size_t m = std::min(chunk(rng), down.size() - at_down);
    server_transport_->Write(pair.server, down.substr(at_down, m));
    at_down += m;
  }
  const std::string got_up = ReadBytes(server_log_, pair.server, up.size());
  const std::string got_down = ReadBytes(client_log_, pair.client, down.size());
  EXPECT_EQ(got_up.size(), up.size());
  EXPECT_TRUE(got_up == up) << "client to server bytes differ";
  EXPECT_EQ(got_down.size(), down.size());
  EXPECT_TRUE(got_down == down) << "server to client bytes differ";
}

TEST_F(TcpTransportTest, KeepsOrderWithConcurrentWritersOnTwoConnections) {
  const Pair first = Connect();
  const Pair second = Connect();
  const size_t size = kBulkBytes / 4;
  const std::string payload1 = RandomBytes(size, 11);
  const std::string payload2 = RandomBytes(size, 12);
  std::thread writer1(
      [&] { WriteInChunks(*client_transport_, first.client, payload1, size_t{16} * 1024, 21); });
  std::thread writer2(
      [&] { WriteInChunks(*client_transport_, second.client, payload2, size_t{16} * 1024, 22); });
  writer1.join();
  writer2.join();
  const std::vector<std::string> got = ReadBytes(server_log_, {first.server, second.server}, size);
  EXPECT_TRUE(got[0] == payload1) << "first connection's bytes differ";
  EXPECT_TRUE(got[1] == payload2) << "second connection's bytes differ";
}

TEST_F(TcpTransportTest, KeepsEachWriteWholeWithConcurrentWritersOnOneConnection) {
  const Pair pair = Connect();
  ExpectWholeWritesFromConcurrentWriters(*client_transport_, pair.client, server_log_, pair.server);
}

TEST_F(TcpTransportTest, SendsWhatWasWrittenBeforeTheConnectionWasUp) {
  const uint16_t port = ListenPort();
  const ConnectionId id = client_transport_->Connect("127.0.0.1", port, client_);
  client_transport_->Write(id, "early");
  EXPECT_EQ(Expect(client_log_, kEvConnectionUp).connection, id);
  const Seen up = Expect(server_log_, kEvConnectionUp);
  EXPECT_EQ(ReadBytes(server_log_, up.connection, 5), "early");
}

TEST_F(TcpTransportTest, CloseTellsOnlyThePeer) {
  const Pair pair = Connect();
  client_transport_->Write(pair.client, "bye");
  client_transport_->Close(pair.client);
  EXPECT_EQ(ReadBytes(server_log_, pair.server, 3), "bye");
  const Seen down = Expect(server_log_, kEvConnectionDown);
  EXPECT_EQ(down.connection, pair.server);
  EXPECT_EQ(down.reason.code(), absl::StatusCode::kUnavailable);
  server_transport_->Write(pair.server, "too late");  // ignored: the connection is down
  client_transport_->Write(pair.client, "too late");  // ignored: closed
  client_transport_->Close(pair.client);              // harmless
  EXPECT_FALSE(client_log_.Next(kQuiet).has_value());
  EXPECT_FALSE(server_log_.Next(kQuiet).has_value());
}

TEST_F(TcpTransportTest, ConnectWithoutListenerReportsDown) {
  // A port that was just free: listen on it with a transport, then shut that transport down.
  absl::StatusOr<std::unique_ptr<Transport>> gone = MakeTcpTransport(system_.get());
  ASSERT_TRUE(gone.ok()) << gone.status();
  absl::StatusOr<uint16_t> port = (*gone)->Listen("127.0.0.1", 0, other_);
  ASSERT_TRUE(port.ok()) << port.status();
  (*gone)->Shutdown();
  const ConnectionId id = client_transport_->Connect("127.0.0.1", *port, client_);
  const Seen down = Expect(client_log_, kEvConnectionDown);
  EXPECT_EQ(down.connection, id);
  EXPECT_EQ(down.reason.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(down.reason.message(), absl::StrCat("127.0.0.1:", *port)))
      << down.reason;
  EXPECT_FALSE(client_log_.Next(kQuiet).has_value());
  EXPECT_FALSE(other_log_.Next(kQuiet).has_value());
}

TEST_F(TcpTransportTest, ListenOnATakenPortIsAlreadyExists) {
  const uint16_t port = ListenPort();
  EXPECT_EQ(client_transport_->Listen("127.0.0.1", port, client_).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(server_transport_->Listen("127.0.0.1", port, server_).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(TcpTransportTest, ListenOnAnUnknownHostIsUnavailable) {
  const absl::Status status = server_transport_->Listen("192.0.2.1", 0, server_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(status.message(), "192.0.2.1:0")) << status;
}

TEST_F(TcpTransportTest, SetOwnerRedirectsLaterBytes) {
  const Pair pair = Connect();
  client_transport_->Write(pair.client, "one");
  EXPECT_EQ(ReadBytes(server_log_, pair.server, 3), "one");
  server_transport_->SetOwner(pair.server, other_);
  client_transport_->Write(pair.client, "two");
  EXPECT_EQ(ReadBytes(other_log_, pair.server, 3), "two");
  client_transport_->Close(pair.client);
  EXPECT_EQ(Expect(other_log_, kEvConnectionDown).connection, pair.server);
  EXPECT_FALSE(server_log_.Next(kQuiet).has_value());
}

TEST_F(TcpTransportTest, ShutdownWithOpenConnectionsIsPromptAndIdempotent) {
  std::vector<Pair> pairs;
  pairs.reserve(3);
  for (int i = 0; i < 3; ++i) {
    pairs.push_back(Connect());
  }
  for (const Pair& pair : pairs) {
    client_transport_->Write(pair.client, "unread");
  }
  const absl::Time start = absl::Now();
  client_transport_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  client_transport_->Shutdown();

  // The peers see every connection end (after whatever bytes made it).
  size_t downs = 0;
  while (downs < pairs.size()) {
    std::optional<Seen> seen = server_log_.Next();
    if (!seen) {
      ADD_FAILURE() << "only " << downs << " connections went down";
      break;
    }
    downs += seen->type == kEvConnectionDown ? 1 : 0;
  }

  // Everything after Shutdown is a no-op.
  EXPECT_EQ(client_transport_->Listen("127.0.0.1", 0, client_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const ConnectionId late = client_transport_->Connect("127.0.0.1", ListenPort(), client_);
  EXPECT_NE(late, pairs.back().client);
  client_transport_->Write(late, "x");
  client_transport_->Write(pairs[0].client, "x");
  client_transport_->SetOwner(pairs[0].client, other_);
  client_transport_->Close(pairs[1].client);
  EXPECT_FALSE(client_log_.Next(kQuiet).has_value());
  EXPECT_FALSE(server_log_.Next(kQuiet).has_value());
}

TEST_F(TcpTransportTest, WritesAfterThePeerClosedDoNotCrash) {
  const Pair pair = Connect();
  server_transport_->Close(pair.server);
  // Keep writing: the first writes may still be accepted by the kernel, then the reset or the
  // EOF takes the connection down, exactly once.
  const std::string chunk(4096, 'w');
  std::optional<Seen> down;
  const absl::Time deadline = absl::Now() + kWait;
  while (!down && absl::Now() < deadline) {
    client_transport_->Write(pair.client, chunk);
    down = client_log_.Next(absl::Milliseconds(1));
  }
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->type, kEvConnectionDown);
  EXPECT_EQ(down->connection, pair.client);
  EXPECT_EQ(down->reason.code(), absl::StatusCode::kUnavailable);
  for (int i = 0; i < 100; ++i) {
    client_transport_->Write(pair.client, chunk);
  }
  EXPECT_FALSE(client_log_.Next(kQuiet).has_value());
  EXPECT_FALSE(server_log_.Next(kQuiet).has_value());
}

TEST_F(TcpTransportTest, ConnectsByHostName) {
  const Pair pair = Connect("localhost");
  client_transport_->Write(pair.client, "named");
  EXPECT_EQ(ReadBytes(server_log_, pair.server, 5), "named");
}

TEST_F(TcpTransportTest, RefusesOptionsItCannotHonour) {
  absl::StatusOr<std::unique_ptr<Transport>> no_pool =
      MakeTcpTransport(system_.get(), {.io_pool = "NoSuchPool"});
  EXPECT_EQ(no_pool.status().code(), absl::StatusCode::kInvalidArgument) << no_pool.status();
  EXPECT_TRUE(absl::StrContains(no_pool.status().message(), "io_pool")) << no_pool.status();
  absl::StatusOr<std::unique_ptr<Transport>> negative =
      MakeTcpTransport(system_.get(), {.socket_buffer_bytes = -1});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument) << negative.status();
  EXPECT_TRUE(absl::StrContains(negative.status().message(), "socket_buffer_bytes"))
      << negative.status();
}

TEST_F(TcpTransportTest, WorksOverIpv6Loopback) {
  absl::StatusOr<uint16_t> port = server_transport_->Listen("::1", 0, server_);
  if (!port.ok()) {
    GTEST_SKIP() << "no IPv6 loopback: " << port.status();
  }
  port_ = *port;
  const Pair pair = Connect("::1");
  client_transport_->Write(pair.client, "six");
  EXPECT_EQ(ReadBytes(server_log_, pair.server, 3), "six");
  server_transport_->Write(pair.server, "vier");
  EXPECT_EQ(ReadBytes(client_log_, pair.client, 4), "vier");
}

}  // namespace
}  // namespace troupe::interconnect
