// SPDX-License-Identifier: Apache-2.0
#include "interconnect/tcp_transport.h"

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
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "asio/buffer.hpp"
#include "asio/error.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/address.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"
#include "asio/socket_base.hpp"
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

// One TCP connection. `socket`, `read_buffer` and `sending` belong to the I/O thread; the rest is
// shared with the threads calling Write, SetOwner and Close, under `mu`.
struct Connection : std::enable_shared_from_this<Connection> {
  Connection(ConnectionId connection_id, tcp::socket connection_socket, const ActorId& first_owner)
      : id(connection_id), socket(std::move(connection_socket)), owner(first_owner) {}

  const ConnectionId id;
  tcp::socket socket;
  std::string read_buffer;
  // The bytes of the async write in progress (swapped with `queued`, so both buffers are reused).
  std::string sending;

  troupe::Mutex mu;
  ActorId owner ABSL_GUARDED_BY(mu);
  // The connected socket's descriptor for Write's direct send(), -1 while connecting and once
  // down. The I/O thread closes the socket only after `down` is set, so a send() made under `mu`
  // with `fd >= 0` never races the close.
  int fd ABSL_GUARDED_BY(mu) = -1;
  // Went down or was closed: nothing more is sent to the owner, Writes are ignored.
  bool down ABSL_GUARDED_BY(mu) = false;
  // An async write is posted or in progress: Writes append to `queued` and never send directly,
  // which keeps the byte order.
  bool writing ABSL_GUARDED_BY(mu) = false;
  std::string queued ABSL_GUARDED_BY(mu);
  // "host:port" of the remote end, once established.
  std::string remote ABSL_GUARDED_BY(mu);
};

using ConnectionPtr = std::shared_ptr<Connection>;

// One listening socket; `acceptor` and `retry` belong to the I/O thread once Listen has returned.
struct Listener {
  Listener(asio::io_context& io, const ActorId& acceptor_actor)
      : acceptor(io), retry(io), owner(acceptor_actor) {}

  tcp::acceptor acceptor;
  asio::steady_timer retry;
  const ActorId owner;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(ActorSystem* system, TcpTransportOptions options);
  ~TcpTransport() override { TcpTransport::Shutdown(); }
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;
  TcpTransport(TcpTransport&&) = delete;
  TcpTransport& operator=(TcpTransport&&) = delete;

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
  // Marks `c` down (nothing more reaches its owner) and has the I/O thread close and forget it.
  void Retire(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Tells the owner `reason`, then retires `c`.
  void GoDown(Connection& c, absl::Status reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // -- I/O thread -------------------------------------------------------------------------------

  void Accept(const std::shared_ptr<Listener>& listener);
  void StartConnect(const ConnectionPtr& c, const std::string& host, uint16_t port);
  // Tries endpoints[next], then the following ones; `last` is the previous attempt's error.
  void ConnectTo(const ConnectionPtr& c, std::vector<tcp::endpoint> endpoints, size_t next,
                 std::string address, std::error_code last);
  // Reports the connection up, sends what was written meanwhile and starts reading.
  void Established(const ConnectionPtr& c, bool incoming);
  void Read(const ConnectionPtr& c);
  void SendQueued(const ConnectionPtr& c);
  void CloseSocket(const ConnectionPtr& c) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseAll() ABSL_LOCKS_EXCLUDED(mu_);

  ActorSystem* const system_;
  const TcpTransportOptions options_;
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
  std::vector<std::shared_ptr<Listener>> listeners_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

TcpTransport::TcpTransport(ActorSystem* system, TcpTransportOptions options)
    : system_(system), options_(std::move(options)), work_(asio::make_work_guard(io_)) {
  TROUPE_CHECK(system_ != nullptr) << "MakeTcpTransport needs an ActorSystem";
  if (!options_.io_pool.empty()) {
    const absl::Status attached = AttachIoPoller(*system_, options_.io_pool, &poller_);
    if (attached.ok()) {
      polled_ = true;
      return;
    }
    TROUPE_LOG(kWarn, kInterconnect)
        << "TCP transport: pool \"" << options_.io_pool
        << "\" cannot run its I/O, so it gets a thread of its own: " << attached;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "troupe:tcp");
    const LogBinding binding(&system_->log_context());
    io_.run();
  });
}

// -- Transport --------------------------------------------------------------------------------

absl::StatusOr<uint16_t> TcpTransport::Listen(const std::string& host, uint16_t port,
                                              const ActorId& acceptor) {
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("the transport is shut down");
    }
  }
  auto listener = std::make_shared<Listener>(io_, acceptor);
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

ConnectionId TcpTransport::Connect(const std::string& host, uint16_t port, const ActorId& owner) {
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

void TcpTransport::SetOwner(ConnectionId connection, const ActorId& owner) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    c->owner = owner;
  }
}

void TcpTransport::Write(ConnectionId connection, std::string bytes) {
  if (bytes.empty()) {
    return;
  }
  const ConnectionPtr c = Find(connection);
  if (c == nullptr) {
    return;
  }
  bool start = false;
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    if (c->fd >= 0 && !c->writing) {
      // Nothing is queued (a queue always has a write pending): try the kernel directly, which
      // saves the hop to the I/O thread on the latency path.
      TROUPE_DCHECK(c->queued.empty());
      ssize_t sent = 0;
      do {
        sent = ::send(c->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      } while (sent < 0 && errno == EINTR);
      if (sent < 0) {
        const int error = errno;
        if (error != EAGAIN && error != EWOULDBLOCK) {
          GoDown(*c, SocketError("write", std::error_code(error, std::system_category())));
          return;
        }
        sent = 0;
      }
      if (static_cast<size_t>(sent) == bytes.size()) {
        return;
      }
      bytes.erase(0, static_cast<size_t>(sent));
    }
    if (c->queued.empty()) {
      c->queued = std::move(bytes);
    } else {
      c->queued += bytes;
    }
    // Before the connection is up the bytes just wait: Established starts the first write.
    if (c->fd >= 0 && !c->writing) {
      c->writing = true;
      start = true;
    }
  }
  if (start) {
    asio::post(io_, [this, c] { SendQueued(c); });
  }
}

void TcpTransport::Close(ConnectionId connection) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    if (!c->down) {
      Retire(*c);
    }
  }
}

PeerInfo TcpTransport::Peer(ConnectionId connection) const {
  PeerInfo info;
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    info.address = c->remote;
  }
  return info;
}

void TcpTransport::Shutdown() {
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
          << "TCP transport: its I/O loop failed at shutdown: " << error.what();
    }
  } else {
    thread_.join();
  }
}

// -- any thread -------------------------------------------------------------------------------

ConnectionPtr TcpTransport::Find(ConnectionId id) const {
  troupe::MutexLock lock(&mu_);
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

ConnectionPtr TcpTransport::Adopt(tcp::socket socket, const ActorId& owner) {
  troupe::MutexLock lock(&mu_);
  if (shut_down_) {
    return nullptr;
  }
  auto c = std::make_shared<Connection>(next_id_++, std::move(socket), owner);
  connections_.emplace(c->id, c);
  return c;
}

void TcpTransport::Retire(Connection& c) {
  c.down = true;
  c.fd = -1;
  c.writing = false;
  std::string().swap(c.queued);
  asio::post(io_, [this, c = c.shared_from_this()] { CloseSocket(c); });
}

void TcpTransport::GoDown(Connection& c, absl::Status reason) {
  system_->Send(c.owner, std::make_unique<EvConnectionDown>(c.id, std::move(reason)));
  Retire(c);
}

// -- I/O thread -------------------------------------------------------------------------------

void TcpTransport::Accept(const std::shared_ptr<Listener>& listener) {
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

void TcpTransport::StartConnect(const ConnectionPtr& c, const std::string& host, uint16_t port) {
  ResolveEndpoints(io_, host, port,
                   [this, c, address = absl::StrCat(host, ":", port)](
                       std::vector<tcp::endpoint> endpoints, std::error_code error) mutable {
                     ConnectTo(c, std::move(endpoints), 0, std::move(address), error);
                   });
}

void TcpTransport::ConnectTo(const ConnectionPtr& c, std::vector<tcp::endpoint> endpoints,
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

void TcpTransport::Established(const ConnectionPtr& c, bool incoming) {
  std::error_code ignored;
  c->socket.set_option(tcp::no_delay(true), ignored);
  c->read_buffer.resize(std::max(options_.read_buffer_size, kMinReadBuffer));
  const tcp::endpoint remote = c->socket.remote_endpoint(ignored);
  bool flush = false;
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    c->remote = EndpointText(remote);
    c->fd = c->socket.native_handle();
    system_->Send(c->owner, std::make_unique<EvConnectionUp>(c->id, incoming, c->remote));
    if (!c->queued.empty()) {
      c->writing = true;
      flush = true;
    }
  }
  if (flush) {
    SendQueued(c);
  }
  Read(c);
}

void TcpTransport::Read(const ConnectionPtr& c) {
  c->socket.async_read_some(
      asio::buffer(c->read_buffer), [this, c](std::error_code error, size_t size) {
        std::string bytes;
        if (!error) {
          bytes.assign(c->read_buffer.data(), size);
        }
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
          system_->Send(c->owner, std::make_unique<EvBytesReceived>(c->id, std::move(bytes)));
        }
        Read(c);
      });
}

void TcpTransport::SendQueued(const ConnectionPtr& c) {
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
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
                        if (c->down) {
                          return;
                        }
                        if (error) {
                          GoDown(*c, SocketError("write", error));
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

void TcpTransport::CloseSocket(const ConnectionPtr& c) {
  std::error_code ignored;
  c->socket.close(ignored);
  troupe::MutexLock lock(&mu_);
  connections_.erase(c->id);
}

void TcpTransport::CloseAll() {
  std::vector<ConnectionPtr> connections;
  std::vector<std::shared_ptr<Listener>> listeners;
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
  for (const std::shared_ptr<Listener>& listener : listeners) {
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

std::unique_ptr<Transport> MakeTcpTransport(ActorSystem* system, TcpTransportOptions options) {
  return std::make_unique<TcpTransport>(system, std::move(options));
}

}  // namespace troupe::interconnect
