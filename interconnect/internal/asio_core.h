// SPDX-License-Identifier: Apache-2.0
//
// The connection core's state behind MakeAsioTransport (asio_connections.h, which explains the
// threads, the ownership of each field and the write and read paths): one Connection per socket,
// one ListeningSocket per Listen, and AsioConnections, the Transport. Its methods are defined by
// role: asio_connections.cc the Transport methods and the write path (any thread), asio_io.cc the
// I/O thread's work (accept, connect, read, queued writes, close).
//
// Thread-safety: see asio_connections.h.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "asio/buffer.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/steady_timer.hpp"

#include "actors/actor_system.h"
#include "actors/sync.h"
#include "interconnect/internal/asio_connections.h"
#include "interconnect/internal/asio_socket.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/transport.h"

namespace troupe::interconnect::internal {

using asio::ip::tcp;

// One connection; see the ownership table in asio_connections.h.
struct Connection : std::enable_shared_from_this<Connection> {
  Connection(ConnectionId connection_id, tcp::socket connection_socket, const ActorId& first_owner)
      : id(connection_id), socket(std::move(connection_socket)), owner(first_owner) {}

  const ConnectionId id;
  // -- I/O thread --
  tcp::socket socket;
  std::string read_buffer;
  // The pieces of the async write in progress (taken from `queued`), and their buffers.
  std::vector<SharedBytes> sending;
  std::vector<asio::const_buffer> sending_buffers;

  // -- under `mu` --
  troupe::Mutex mu;
  ActorId owner ABSL_GUARDED_BY(mu);
  // Null until established, and for a transport without channels.
  std::unique_ptr<Channel> channel ABSL_GUARDED_BY(mu);
  // The connected socket's descriptor for the direct send(), -1 while connecting and once down.
  int fd ABSL_GUARDED_BY(mu) = -1;
  // Went down or was closed: nothing more is sent to the owner, Writes are ignored.
  bool down ABSL_GUARDED_BY(mu) = false;
  // An async write is posted or in progress: wire bytes append to `queued` and are never sent
  // directly, which keeps the byte order.
  bool writing ABSL_GUARDED_BY(mu) = false;
  // A write failed and the channel defers the reason to the read side: nothing more is sent.
  bool write_failed ABSL_GUARDED_BY(mu) = false;
  // Session bytes written before the connection (and its channel) opened, not yet sealed.
  std::string waiting ABSL_GUARDED_BY(mu);
  // Wire bytes for the I/O thread to send, in order; the first `queued_offset` bytes of the front
  // piece were sent already. Pieces are shared with their writer (WriteShared), not copied.
  std::deque<SharedBytes> queued ABSL_GUARDED_BY(mu);
  size_t queued_offset ABSL_GUARDED_BY(mu) = 0;
  // Scratch for the sealed bytes of one Write and the channel's output of one read.
  std::string sealed ABSL_GUARDED_BY(mu);
  std::string plain ABSL_GUARDED_BY(mu);
  // "host:port" of the remote end, once established.
  std::string remote ABSL_GUARDED_BY(mu);
};

using ConnectionPtr = std::shared_ptr<Connection>;

// One listening socket; `acceptor` and `retry` belong to the I/O thread once Listen has returned.
struct ListeningSocket {
  ListeningSocket(asio::io_context& io, const ActorId& acceptor_actor)
      : acceptor(io), retry(io), owner(acceptor_actor) {}

  tcp::acceptor acceptor;
  asio::steady_timer retry;
  const ActorId owner;
};

class AsioConnections final : public Transport {
 public:
  AsioConnections(ActorSystem* system, TcpTransportOptions options, absl::string_view name,
                  std::unique_ptr<ChannelFactory> channels);
  ~AsioConnections() override { AsioConnections::Shutdown(); }
  AsioConnections(const AsioConnections&) = delete;
  AsioConnections& operator=(const AsioConnections&) = delete;
  AsioConnections(AsioConnections&&) = delete;
  AsioConnections& operator=(AsioConnections&&) = delete;

  // Attaches the pool's poller or starts the I/O thread.
  absl::Status Start();

  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port,
                                  const ActorId& acceptor) override;
  ConnectionId Connect(const std::string& host, uint16_t port, const ActorId& owner) override;
  void SetOwner(ConnectionId connection, const ActorId& owner) override;
  void Write(ConnectionId connection, std::string bytes) override;
  void WriteShared(ConnectionId connection, std::vector<SharedBytes> pieces) override;
  void Close(ConnectionId connection) override;
  PeerInfo Peer(ConnectionId connection) const override;
  void Shutdown() override;

 private:
  // -- any thread -------------------------------------------------------------------------------

  ConnectionPtr Find(ConnectionId id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Registers a connection; null once shut down.
  ConnectionPtr Adopt(tcp::socket socket, const ActorId& owner) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns true when session bytes can be sealed and sent now.
  static bool IsOpen(const Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Writes session bytes on a connection that is not open yet (they wait) or has a channel (they
  // are sealed and sent).
  void WriteThroughChannel(Connection& c, absl::string_view bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Sends `wire` after everything queued: directly when the connection is idle, else through the
  // queue. Leaves in `wire` bytes of no further use (the caller's scratch, or nothing). May take
  // the connection down.
  void SendWire(Connection& c, std::string& wire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // The same for shared pieces: one gathered sendmsg when the connection is idle, and what the
  // kernel did not take is queued by reference.
  void SendPieces(Connection& c, std::vector<SharedBytes>& pieces)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Hands `count` buffers to the kernel with one non-blocking sendmsg on the connected socket;
  // returns the bytes it took (0 when its buffer is full), or -1 once the write failed
  // (WriteFailed ran).
  ssize_t SendNow(Connection& c, iovec* buffers, size_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Has the I/O thread send the queue, unless a write is in progress or the socket not up yet.
  void StartQueuedWrite(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Seals and sends the bytes that waited for the connection to open.
  void Flush(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // A socket write failed: down with "write: <error>", unless the channel defers the reason.
  void WriteFailed(Connection& c, const std::error_code& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Marks `c` down (nothing more reaches its owner) and has the I/O thread close and forget it.
  void Retire(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Tells the owner `reason`, then retires `c`; a no-op on a connection already down.
  void GoDown(Connection& c, absl::Status reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // -- I/O thread -------------------------------------------------------------------------------

  void Accept(const std::shared_ptr<ListeningSocket>& listener);
  void StartConnect(const ConnectionPtr& c, const std::string& host, uint16_t port);
  // Tries endpoints[next], then the following ones; `last` is the previous attempt's error.
  void ConnectTo(const ConnectionPtr& c, std::vector<tcp::endpoint> endpoints, size_t next,
                 std::string address, std::error_code last);
  // Reports the connection up, starts its channel, sends what was written meanwhile and reads.
  void Established(const ConnectionPtr& c, bool incoming);
  void Read(const ConnectionPtr& c);
  // Passes `size` bytes of the read buffer to the owner, through the channel.
  void Received(Connection& c, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void SendQueued(const ConnectionPtr& c);
  void CloseSocket(const ConnectionPtr& c) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseAll() ABSL_LOCKS_EXCLUDED(mu_);

  ActorSystem* const system_;
  const TcpTransportOptions options_;
  const std::string name_;
  const size_t read_size_;
  // Before io_ and the connections: the channels it made may refer to it.
  const std::unique_ptr<ChannelFactory> channels_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  // Runs io_ on the workers of options_.io_pool when `polled_`; otherwise thread_ runs it.
  AsioPoller poller_{io_};
  bool polled_ = false;
  // Held for the whole of Shutdown, so a second caller returns only once the first is done.
  troupe::Mutex shutdown_mu_;
  mutable troupe::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  ConnectionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<ConnectionId, ConnectionPtr> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<ListeningSocket>> listeners_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace troupe::interconnect::internal
