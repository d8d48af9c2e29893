// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/asio_connections.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "asio/buffer.hpp"
#include "asio/error.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"
#include "asio/steady_timer.hpp"
#include "asio/write.hpp"

#include "actors/check.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/internal/asio_socket.h"

namespace troupe::interconnect {
namespace {

using asio::ip::tcp;

constexpr size_t kMinReadBuffer = 1024;
// After an accept fails for a reason other than the listener closing (out of descriptors, most
// likely), the next attempt waits this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetryDelay(50);
// A connection keeps its write buffers between writes up to this capacity; a burst larger than
// that (a resend after a reconnect) frees its buffer once sent.
constexpr size_t kKeptWriteBuffer = size_t{1} << 20;

// One connection; see the ownership table in asio_connections.h.
struct Connection : std::enable_shared_from_this<Connection> {
  Connection(ConnectionId connection_id, tcp::socket connection_socket, const ActorId& first_owner)
      : id(connection_id), socket(std::move(connection_socket)), owner(first_owner) {}

  const ConnectionId id;
  // -- I/O thread --
  tcp::socket socket;
  std::string read_buffer;
  // The bytes of the async write in progress (swapped with `queued`, so both buffers are reused).
  std::string sending;

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
  // Wire bytes for the I/O thread to send.
  std::string queued ABSL_GUARDED_BY(mu);
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
  // Sends `wire` after everything queued: directly when the connection is idle, else through the
  // queue. Leaves in `wire` bytes of no further use (the caller's scratch or the queue's old
  // buffer). May take the connection down.
  void SendWire(Connection& c, std::string& wire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
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

AsioConnections::AsioConnections(ActorSystem* system, TcpTransportOptions options,
                                 absl::string_view name, std::unique_ptr<ChannelFactory> channels)
    : system_(system),
      options_(std::move(options)),
      name_(name),
      read_size_(std::max(options_.read_buffer_size, kMinReadBuffer)),
      channels_(std::move(channels)),
      work_(asio::make_work_guard(io_)) {}

absl::Status AsioConnections::Start() {
  if (options_.socket_buffer_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket_buffer_bytes: must be 0 or more, got ", options_.socket_buffer_bytes));
  }
  if (!options_.io_pool.empty()) {
    const absl::Status attached = AttachIoPoller(*system_, options_.io_pool, &poller_);
    if (attached.ok()) {
      polled_ = true;
      return absl::OkStatus();
    }
    if (absl::IsNotFound(attached)) {
      return absl::InvalidArgumentError(absl::StrCat("io_pool: ", attached.message()));
    }
    TROUPE_LOG(kWarn, kInterconnect)
        << name_ << " transport: pool \"" << options_.io_pool
        << "\" cannot run its I/O, so it gets a thread of its own: " << attached;
  }
  thread_ = std::thread([this] {
    const std::string thread_name = absl::StrCat("troupe:", absl::AsciiStrToLower(name_));
    pthread_setname_np(pthread_self(), thread_name.c_str());
    const LogBinding binding(&system_->log_context());
    io_.run();
  });
  return absl::OkStatus();
}

// -- Transport --------------------------------------------------------------------------------

absl::StatusOr<uint16_t> AsioConnections::Listen(const std::string& host, uint16_t port,
                                                 const ActorId& acceptor) {
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("the transport is shut down");
    }
  }
  auto listener = std::make_shared<ListeningSocket>(io_, acceptor);
  absl::StatusOr<uint16_t> bound =
      OpenListener(io_, host, port, options_.socket_buffer_bytes, listener->acceptor);
  if (!bound.ok()) {
    return bound.status();
  }
  troupe::MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::FailedPreconditionError("the transport is shut down");
  }
  listeners_.push_back(listener);
  asio::post(io_, [this, listener] { Accept(listener); });
  return bound;
}

ConnectionId AsioConnections::Connect(const std::string& host, uint16_t port,
                                      const ActorId& owner) {
  ConnectionPtr c;
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return next_id_++;
    }
    c = std::make_shared<Connection>(next_id_++, tcp::socket(io_), owner);
    connections_.emplace(c->id, c);
  }
  asio::post(io_, [this, c, host, port] { StartConnect(c, host, port); });
  return c->id;
}

void AsioConnections::SetOwner(ConnectionId connection, const ActorId& owner) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    c->owner = owner;
  }
}

void AsioConnections::Write(ConnectionId connection, std::string bytes) {
  if (bytes.empty()) {
    return;
  }
  const ConnectionPtr c = Find(connection);
  if (c == nullptr) {
    return;
  }
  troupe::MutexLock lock(&c->mu);
  if (c->down || c->write_failed) {
    return;
  }
  if (!IsOpen(*c)) {
    // Established (or the channel opening) sends these.
    if (c->waiting.empty()) {
      c->waiting = std::move(bytes);
    } else {
      c->waiting += bytes;
    }
    return;
  }
  if (c->channel == nullptr) {
    SendWire(*c, bytes);
    return;
  }
  c->sealed.clear();
  if (absl::Status sealed = c->channel->Seal(bytes, c->sealed); !sealed.ok()) {
    GoDown(*c, std::move(sealed));
    return;
  }
  SendWire(*c, c->sealed);
}

void AsioConnections::Close(ConnectionId connection) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    if (!c->down) {
      Retire(*c);
    }
  }
}

PeerInfo AsioConnections::Peer(ConnectionId connection) const {
  PeerInfo info;
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return info;  // forgotten from the moment the owner may hear of it
    }
    info.address = c->remote;
    if (c->channel != nullptr) {
      c->channel->Describe(info);
    }
  }
  return info;
}

void AsioConnections::Shutdown() {
  troupe::MutexLock serial(&shutdown_mu_);
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
  }
  if (polled_) {
    // First no worker is inside the loop (and the loop keeps its work meanwhile, so a worker's
    // wait never returns at once on a loop that ran out of work)...
    DetachIoPoller(*system_, &poller_);
  }
  asio::post(io_, [this] { CloseAll(); });
  work_.reset();
  if (polled_) {
    // ...then this thread runs what is left (CloseAll, the aborted operations' handlers) until
    // the loop has no work.
    try {
      io_.run();
    } catch (const std::system_error& error) {  // epoll failed: nothing left to close cleanly
      TROUPE_LOG(kError, kInterconnect)
          << name_ << " transport: its I/O loop failed at shutdown: " << error.what();
    }
  } else if (thread_.joinable()) {
    thread_.join();
  }
}

// -- any thread -------------------------------------------------------------------------------

ConnectionPtr AsioConnections::Find(ConnectionId id) const {
  troupe::MutexLock lock(&mu_);
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

ConnectionPtr AsioConnections::Adopt(tcp::socket socket, const ActorId& owner) {
  troupe::MutexLock lock(&mu_);
  if (shut_down_) {
    return nullptr;
  }
  auto c = std::make_shared<Connection>(next_id_++, std::move(socket), owner);
  connections_.emplace(c->id, c);
  return c;
}

bool AsioConnections::IsOpen(const Connection& c) {
  return c.fd >= 0 && (c.channel == nullptr || c.channel->open());
}

void AsioConnections::SendWire(Connection& c, std::string& wire) {
  if (wire.empty() || c.down || c.write_failed) {
    return;
  }
  if (c.fd >= 0 && !c.writing) {
    // Nothing is queued (a queue always has a write pending): try the kernel directly, which
    // saves the hop to the I/O thread on the latency path.
    TROUPE_DCHECK(c.queued.empty());
    ssize_t sent = 0;
    do {
      sent = ::send(c.fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) {
      const int error = errno;
      if (error != EAGAIN && error != EWOULDBLOCK) {
        WriteFailed(c, std::error_code(error, std::system_category()));
        return;
      }
      sent = 0;
    }
    if (static_cast<size_t>(sent) == wire.size()) {
      return;
    }
    wire.erase(0, static_cast<size_t>(sent));
  }
  if (c.queued.empty()) {
    c.queued.swap(wire);
  } else {
    c.queued += wire;
  }
  // Before the connection is up the bytes just wait: Established starts the first write.
  if (c.fd >= 0 && !c.writing) {
    c.writing = true;
    asio::post(io_, [this, c = c.shared_from_this()] { SendQueued(c); });
  }
}

void AsioConnections::Flush(Connection& c) {
  if (c.waiting.empty()) {
    return;
  }
  if (c.channel == nullptr) {
    SendWire(c, c.waiting);
    std::string().swap(c.waiting);
    return;
  }
  c.sealed.clear();
  absl::Status sealed = c.channel->Seal(c.waiting, c.sealed);
  std::string().swap(c.waiting);
  if (!sealed.ok()) {
    GoDown(c, std::move(sealed));
    return;
  }
  SendWire(c, c.sealed);
}

void AsioConnections::WriteFailed(Connection& c, const std::error_code& error) {
  if (c.channel != nullptr && c.channel->DefersWriteErrors()) {
    c.write_failed = true;
    std::string().swap(c.queued);
    return;
  }
  GoDown(c, SocketError("write", error));
}

void AsioConnections::Retire(Connection& c) {
  c.down = true;
  c.fd = -1;
  c.writing = false;
  std::string().swap(c.queued);
  std::string().swap(c.waiting);
  asio::post(io_, [this, c = c.shared_from_this()] { CloseSocket(c); });
}

void AsioConnections::GoDown(Connection& c, absl::Status reason) {
  if (c.down) {
    return;
  }
  TROUPE_LOG(kDebug, kInterconnect)
      << name_ << " connection " << c.id << " with " << (c.remote.empty() ? "?" : c.remote)
      << " down: " << reason.message();
  system_->Send(c.owner, std::make_unique<EvConnectionDown>(c.id, std::move(reason)));
  Retire(c);
}

// -- I/O thread -------------------------------------------------------------------------------

void AsioConnections::Accept(const std::shared_ptr<ListeningSocket>& listener) {
  listener->acceptor.async_accept([this, listener](std::error_code error, tcp::socket socket) {
    if (error == asio::error::operation_aborted || !listener->acceptor.is_open()) {
      return;
    }
    if (error) {
      TROUPE_LOG(kWarn, kInterconnect) << "accept: " << error.message();
      listener->retry.expires_after(kAcceptRetryDelay);
      listener->retry.async_wait([this, listener](std::error_code wait_error) {
        if (!wait_error) {
          Accept(listener);
        }
      });
      return;
    }
    if (ConnectionPtr c = Adopt(std::move(socket), listener->owner)) {
      Established(c, /*incoming=*/true);
    }
    Accept(listener);
  });
}

void AsioConnections::StartConnect(const ConnectionPtr& c, const std::string& host, uint16_t port) {
  ResolveEndpoints(io_, host, port,
                   [this, c, address = absl::StrCat(host, ":", port)](
                       std::vector<tcp::endpoint> endpoints, std::error_code error) mutable {
                     ConnectTo(c, std::move(endpoints), 0, std::move(address), error);
                   });
}

void AsioConnections::ConnectTo(const ConnectionPtr& c, std::vector<tcp::endpoint> endpoints,
                                size_t next, std::string address, std::error_code last) {
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    if (next >= endpoints.size()) {
      if (!last) {
        last = asio::error::host_not_found;
      }
      GoDown(*c, SocketError(absl::StrCat("connect to ", address), last));
      return;
    }
  }
  const tcp::endpoint target = endpoints[next];
  std::error_code error;
  c->socket.close(error);
  c->socket.open(target.protocol(), error);
  if (error) {
    ConnectTo(c, std::move(endpoints), next + 1, std::move(address), error);
    return;
  }
  ApplyBufferSize(c->socket, options_.socket_buffer_bytes);
  c->socket.async_connect(
      target, [this, c, endpoints = std::move(endpoints), next,
               address = std::move(address)](std::error_code connect_error) mutable {
        if (!connect_error) {
          Established(c, /*incoming=*/false);
          return;
        }
        ConnectTo(c, std::move(endpoints), next + 1, std::move(address), connect_error);
      });
}

void AsioConnections::Established(const ConnectionPtr& c, bool incoming) {
  std::error_code ignored;
  c->socket.set_option(tcp::no_delay(true), ignored);
  c->read_buffer.resize(read_size_);
  const tcp::endpoint remote = c->socket.remote_endpoint(ignored);
  std::unique_ptr<Channel> channel = channels_ != nullptr ? channels_->Make(incoming) : nullptr;
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    c->remote = EndpointText(remote);
    c->fd = c->socket.native_handle();
    system_->Send(c->owner, std::make_unique<EvConnectionUp>(c->id, incoming, c->remote));
    if (channel != nullptr) {
      c->channel = std::move(channel);
      c->sealed.clear();
      absl::Status started = c->channel->Start(c->sealed);
      SendWire(*c, c->sealed);
      if (!started.ok()) {
        GoDown(*c, std::move(started));
      }
    }
    if (IsOpen(*c)) {
      Flush(*c);
    }
    if (c->down) {
      return;
    }
  }
  Read(c);
}

void AsioConnections::Read(const ConnectionPtr& c) {
  c->socket.async_read_some(
      asio::buffer(c->read_buffer), [this, c](std::error_code error, size_t size) {
        {
          troupe::MutexLock lock(&c->mu);
          if (c->down) {
            return;
          }
          if (error == asio::error::eof) {
            GoDown(*c, absl::UnavailableError("connection closed by the peer"));
            return;
          }
          if (error) {
            GoDown(*c, SocketError("read", error));
            return;
          }
          Received(*c, size);
          if (c->down) {
            return;
          }
        }
        Read(c);
      });
}

void AsioConnections::Received(Connection& c, size_t size) {
  if (c.channel == nullptr) {
    system_->Send(c.owner,
                  std::make_unique<EvBytesReceived>(c.id, std::string(c.read_buffer.data(), size)));
    return;
  }
  const bool was_open = c.channel->open();
  c.plain.clear();
  c.sealed.clear();
  absl::Status received =
      c.channel->Receive(absl::string_view(c.read_buffer.data(), size), c.plain, c.sealed);
  SendWire(c, c.sealed);
  if (!received.ok()) {
    GoDown(c, std::move(received));
    return;
  }
  if (!was_open && c.channel->open()) {
    TROUPE_LOG(kDebug, kInterconnect) << name_ << " connection " << c.id << " with " << c.remote
                                      << " secured: " << c.channel->Summary();
    Flush(c);
  }
  for (size_t at = 0; at < c.plain.size() && !c.down; at += read_size_) {
    system_->Send(c.owner,
                  std::make_unique<EvBytesReceived>(
                      c.id, c.plain.substr(at, std::min(read_size_, c.plain.size() - at))));
  }
  if (c.plain.capacity() > kKeptWriteBuffer) {
    std::string().swap(c.plain);
  }
}

void AsioConnections::SendQueued(const ConnectionPtr& c) {
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down || c->write_failed) {
      return;
    }
    if (c->sending.capacity() > kKeptWriteBuffer) {
      std::string().swap(c->sending);
    } else {
      c->sending.clear();
    }
    c->sending.swap(c->queued);
  }
  asio::async_write(c->socket, asio::buffer(c->sending),
                    [this, c](std::error_code error, size_t /*written*/) {
                      {
                        troupe::MutexLock lock(&c->mu);
                        if (c->down || c->write_failed) {
                          return;
                        }
                        if (error) {
                          WriteFailed(*c, error);
                          return;
                        }
                        if (c->queued.empty()) {
                          c->writing = false;
                          return;
                        }
                      }
                      SendQueued(c);
                    });
}

void AsioConnections::CloseSocket(const ConnectionPtr& c) {
  std::error_code ignored;
  c->socket.close(ignored);
  troupe::MutexLock lock(&mu_);
  connections_.erase(c->id);
}

void AsioConnections::CloseAll() {
  std::vector<ConnectionPtr> connections;
  std::vector<std::shared_ptr<ListeningSocket>> listeners;
  {
    troupe::MutexLock lock(&mu_);
    connections.reserve(connections_.size());
    for (const auto& [id, c] : connections_) {
      connections.push_back(c);
    }
    connections_.clear();
    listeners.swap(listeners_);
  }
  std::error_code ignored;
  for (const std::shared_ptr<ListeningSocket>& listener : listeners) {
    listener->acceptor.close(ignored);
    listener->retry.cancel();
  }
  for (const ConnectionPtr& c : connections) {
    {
      troupe::MutexLock lock(&c->mu);
      c->down = true;
      c->fd = -1;
    }
    c->socket.close(ignored);
  }
  // Handlers still queued (connects, resolves, reads of closed sockets) are destroyed with the
  // io_context, never run.
  io_.stop();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeAsioTransport(
    ActorSystem* system, TcpTransportOptions options, absl::string_view name,
    std::unique_ptr<ChannelFactory> channels) {
  TROUPE_CHECK(system != nullptr) << "the " << name << " transport needs an ActorSystem";
  auto transport =
      std::make_unique<AsioConnections>(system, std::move(options), name, std::move(channels));
  if (absl::Status started = transport->Start(); !started.ok()) {
    return started;
  }
  return transport;
}

}  // namespace troupe::interconnect
