// SPDX-License-Identifier: Apache-2.0
#include "interconnect/tls_transport.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
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
#include "asio/ssl/context.hpp"
#include "asio/ssl/stream.hpp"
#include "asio/steady_timer.hpp"
#include "asio/write.hpp"

#include "actors/check.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/internal/asio_socket.h"
#include "interconnect/internal/tls_context.h"

namespace troupe::interconnect {
namespace {

using asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;

constexpr size_t kMinReadBuffer = 1024;
// After an accept fails for a reason other than the listener closing (out of descriptors, most
// likely), the next attempt waits this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetryDelay(50);
// A connection keeps its write buffer between writes up to this capacity.
constexpr size_t kKeptWriteBuffer = size_t{1} << 20;

// One TLS connection. `stream`, `read_buffer`, `sending` and `received` belong to the I/O thread;
// the rest is shared with the threads calling Write, SetOwner, Close and Peer, under `mu`.
struct Connection : std::enable_shared_from_this<Connection> {
  Connection(ConnectionId connection_id, tcp::socket socket, asio::ssl::context& context,
             const ActorId& first_owner)
      : id(connection_id), stream(std::move(socket), context), owner(first_owner) {}

  const ConnectionId id;
  TlsStream stream;
  std::string read_buffer;
  // The bytes of the write in progress (swapped with `queued`, so both buffers are reused).
  std::string sending;
  // Application bytes have arrived: the peer accepted our certificate (see TlsFailure).
  bool received = false;

  troupe::Mutex mu;
  ActorId owner ABSL_GUARDED_BY(mu);
  // Went down or was closed: nothing more is sent to the owner, Writes are ignored.
  bool down ABSL_GUARDED_BY(mu) = false;
  // The TLS handshake is done: Writes start a write on the I/O thread.
  bool secured ABSL_GUARDED_BY(mu) = false;
  // A write is posted or in progress: Writes only append to `queued`.
  bool writing ABSL_GUARDED_BY(mu) = false;
  std::string queued ABSL_GUARDED_BY(mu);
  // "host:port" of the remote end once established; the node its certificate names once secured.
  std::string remote ABSL_GUARDED_BY(mu);
  std::optional<NodeId> certified_node ABSL_GUARDED_BY(mu);
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

class TlsTransport final : public Transport {
 public:
  TlsTransport(ActorSystem* system, TlsTransportOptions options,
               std::unique_ptr<asio::ssl::context> context);
  ~TlsTransport() override { TlsTransport::Shutdown(); }
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;
  TlsTransport(TlsTransport&&) = delete;
  TlsTransport& operator=(TlsTransport&&) = delete;

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
  // Reports the TCP connection up and starts the TLS handshake.
  void Established(const ConnectionPtr& c, bool incoming);
  // Records the peer's node, sends what was written meanwhile and starts reading.
  void Secured(const ConnectionPtr& c);
  // The status for a failed read or handshake: kUnauthenticated for a TLS error before the peer
  // sent application bytes (its verdict on our certificate arrives as an alert on the first read
  // in TLS 1.3), kUnavailable otherwise.
  absl::Status Failure(Connection& c, absl::string_view what, const std::error_code& error);
  void Read(const ConnectionPtr& c);
  void SendQueued(const ConnectionPtr& c);
  void CloseSocket(const ConnectionPtr& c) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseAll() ABSL_LOCKS_EXCLUDED(mu_);

  ActorSystem* const system_;
  const TlsTransportOptions options_;
  // Before io_ and the connections: SSL objects refer to it until they are freed.
  const std::unique_ptr<asio::ssl::context> context_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  // Held for the whole of Shutdown, so a second caller returns only once the first is done.
  troupe::Mutex shutdown_mu_;
  mutable troupe::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  ConnectionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<ConnectionId, ConnectionPtr> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Listener>> listeners_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

TlsTransport::TlsTransport(ActorSystem* system, TlsTransportOptions options,
                           std::unique_ptr<asio::ssl::context> context)
    : system_(system),
      options_(std::move(options)),
      context_(std::move(context)),
      work_(asio::make_work_guard(io_)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "troupe:tls");
    const LogBinding binding(&system_->log_context());
    io_.run();
  });
}

// -- Transport --------------------------------------------------------------------------------

absl::StatusOr<uint16_t> TlsTransport::Listen(const std::string& host, uint16_t port,
                                              const ActorId& acceptor) {
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("the transport is shut down");
    }
  }
  auto listener = std::make_shared<Listener>(io_, acceptor);
  absl::StatusOr<uint16_t> bound =
      OpenListener(io_, host, port, options_.tcp.socket_buffer_bytes, listener->acceptor);
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

ConnectionId TlsTransport::Connect(const std::string& host, uint16_t port, const ActorId& owner) {
  ConnectionPtr c;
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return next_id_++;
    }
    c = std::make_shared<Connection>(next_id_++, tcp::socket(io_), *context_, owner);
    connections_.emplace(c->id, c);
  }
  asio::post(io_, [this, c, host, port] { StartConnect(c, host, port); });
  return c->id;
}

void TlsTransport::SetOwner(ConnectionId connection, const ActorId& owner) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    c->owner = owner;
  }
}

void TlsTransport::Write(ConnectionId connection, std::string bytes) {
  if (bytes.empty()) {
    return;
  }
  const ConnectionPtr c = Find(connection);
  if (c == nullptr) {
    return;
  }
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    if (c->queued.empty()) {
      c->queued = std::move(bytes);
    } else {
      c->queued += bytes;
    }
    // Before the handshake is done the bytes just wait: Secured starts the first write.
    if (!c->secured || c->writing) {
      return;
    }
    c->writing = true;
  }
  asio::post(io_, [this, c] { SendQueued(c); });
}

void TlsTransport::Close(ConnectionId connection) {
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    if (!c->down) {
      Retire(*c);
    }
  }
}

PeerInfo TlsTransport::Peer(ConnectionId connection) const {
  PeerInfo info;
  if (ConnectionPtr c = Find(connection)) {
    troupe::MutexLock lock(&c->mu);
    info.address = c->remote;
    info.certified_node = c->certified_node;
  }
  return info;
}

void TlsTransport::Shutdown() {
  troupe::MutexLock serial(&shutdown_mu_);
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
  }
  asio::post(io_, [this] { CloseAll(); });
  work_.reset();
  thread_.join();
}

// -- any thread -------------------------------------------------------------------------------

ConnectionPtr TlsTransport::Find(ConnectionId id) const {
  troupe::MutexLock lock(&mu_);
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

ConnectionPtr TlsTransport::Adopt(tcp::socket socket, const ActorId& owner) {
  troupe::MutexLock lock(&mu_);
  if (shut_down_) {
    return nullptr;
  }
  auto c = std::make_shared<Connection>(next_id_++, std::move(socket), *context_, owner);
  connections_.emplace(c->id, c);
  return c;
}

void TlsTransport::Retire(Connection& c) {
  c.down = true;
  c.secured = false;
  c.writing = false;
  std::string().swap(c.queued);
  asio::post(io_, [this, c = c.shared_from_this()] { CloseSocket(c); });
}

void TlsTransport::GoDown(Connection& c, absl::Status reason) {
  TROUPE_LOG(kDebug, kInterconnect)
      << "TLS connection " << c.id << " with " << (c.remote.empty() ? "?" : c.remote)
      << " down: " << reason.message();
  system_->Send(c.owner, std::make_unique<EvConnectionDown>(c.id, std::move(reason)));
  Retire(c);
}

// -- I/O thread -------------------------------------------------------------------------------

void TlsTransport::Accept(const std::shared_ptr<Listener>& listener) {
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

void TlsTransport::StartConnect(const ConnectionPtr& c, const std::string& host, uint16_t port) {
  ResolveEndpoints(io_, host, port,
                   [this, c, address = absl::StrCat(host, ":", port)](
                       std::vector<tcp::endpoint> endpoints, std::error_code error) mutable {
                     ConnectTo(c, std::move(endpoints), 0, std::move(address), error);
                   });
}

void TlsTransport::ConnectTo(const ConnectionPtr& c, std::vector<tcp::endpoint> endpoints,
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
  tcp::socket& socket = c->stream.next_layer();
  std::error_code error;
  socket.close(error);
  socket.open(target.protocol(), error);
  if (error) {
    ConnectTo(c, std::move(endpoints), next + 1, std::move(address), error);
    return;
  }
  ApplyBufferSize(socket, options_.tcp.socket_buffer_bytes);
  socket.async_connect(
      target, [this, c, endpoints = std::move(endpoints), next,
               address = std::move(address)](std::error_code connect_error) mutable {
        if (!connect_error) {
          Established(c, /*incoming=*/false);
          return;
        }
        ConnectTo(c, std::move(endpoints), next + 1, std::move(address), connect_error);
      });
}

void TlsTransport::Established(const ConnectionPtr& c, bool incoming) {
  tcp::socket& socket = c->stream.next_layer();
  std::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  c->read_buffer.resize(std::max(options_.tcp.read_buffer_size, kMinReadBuffer));
  const tcp::endpoint remote = socket.remote_endpoint(ignored);
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    c->remote = EndpointText(remote);
    system_->Send(c->owner, std::make_unique<EvConnectionUp>(c->id, incoming, c->remote));
  }
  c->stream.async_handshake(incoming ? TlsStream::server : TlsStream::client,
                            [this, c](std::error_code error) {
                              if (!error) {
                                Secured(c);
                                return;
                              }
                              troupe::MutexLock lock(&c->mu);
                              if (!c->down) {
                                GoDown(*c, Failure(*c, "TLS handshake", error));
                              }
                            });
}

void TlsTransport::Secured(const ConnectionPtr& c) {
  // The verify callback already refused a certificate that names no node; this reads it again.
  const std::optional<NodeId> node =
      CertificateNode(SSL_get0_peer_certificate(c->stream.native_handle()));
  bool flush = false;
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down) {
      return;
    }
    if (!node.has_value()) {
      GoDown(*c, absl::UnauthenticatedError(absl::StrCat("TLS: ", kNoNodeReason)));
      return;
    }
    c->certified_node = node;
    c->secured = true;
    TROUPE_LOG(kDebug, kInterconnect)
        << "TLS connection " << c->id << " with " << c->remote << " secured: node " << *node << ", "
        << SSL_get_version(c->stream.native_handle()) << " "
        << SSL_get_cipher_name(c->stream.native_handle());
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

absl::Status TlsTransport::Failure(Connection& c, absl::string_view what,
                                   const std::error_code& error) {
  const std::string reason = TlsReason(error, c.stream.native_handle());
  if (IsTlsError(error) && !c.received) {
    return absl::UnauthenticatedError(absl::StrCat("TLS: ", reason));
  }
  if (error == asio::ssl::error::stream_truncated || error == asio::error::eof) {
    return absl::UnavailableError(reason);  // "connection closed by the peer"
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", reason));
}

void TlsTransport::Read(const ConnectionPtr& c) {
  c->stream.async_read_some(
      asio::buffer(c->read_buffer), [this, c](std::error_code error, size_t size) {
        std::string bytes;
        if (!error) {
          bytes.assign(c->read_buffer.data(), size);
          c->received = true;
        }
        {
          troupe::MutexLock lock(&c->mu);
          if (c->down) {
            return;
          }
          if (error) {
            GoDown(*c, Failure(*c, "read", error));
            return;
          }
          system_->Send(c->owner, std::make_unique<EvBytesReceived>(c->id, std::move(bytes)));
        }
        Read(c);
      });
}

void TlsTransport::SendQueued(const ConnectionPtr& c) {
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
  asio::async_write(c->stream, asio::buffer(c->sending),
                    [this, c](std::error_code error, size_t /*written*/) {
                      {
                        troupe::MutexLock lock(&c->mu);
                        if (c->down) {
                          return;
                        }
                        if (error && !c->received) {
                          // A peer refusing our certificate sends an alert and closes, and our
                          // first bytes may hit the closed socket before we read the alert: the
                          // pending read reports the reason. `writing` stays set, so nothing more
                          // is written.
                          return;
                        }
                        if (error) {
                          GoDown(*c, Failure(*c, "write", error));
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

void TlsTransport::CloseSocket(const ConnectionPtr& c) {
  std::error_code ignored;
  c->stream.next_layer().close(ignored);
  troupe::MutexLock lock(&mu_);
  connections_.erase(c->id);
}

void TlsTransport::CloseAll() {
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
      c->secured = false;
    }
    c->stream.next_layer().close(ignored);
  }
  // Handlers still queued (connects, handshakes, reads of closed sockets) are destroyed with the
  // io_context, never run.
  io_.stop();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeTlsTransport(ActorSystem* system,
                                                            TlsTransportOptions options) {
  TROUPE_CHECK(system != nullptr) << "MakeTlsTransport needs an ActorSystem";
  absl::StatusOr<std::unique_ptr<asio::ssl::context>> context = MakeTlsContext(options);
  if (!context.ok()) {
    return context.status();
  }
  return std::make_unique<TlsTransport>(system, std::move(options), std::move(*context));
}

}  // namespace troupe::interconnect
