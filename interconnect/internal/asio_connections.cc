// SPDX-License-Identifier: Apache-2.0
//
// The connection core's Transport methods and its write path, run on any thread (asio_core.h).
#include "interconnect/internal/asio_connections.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "asio/post.hpp"

#include "actors/check.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/internal/asio_core.h"
#include "interconnect/internal/asio_socket.h"

namespace troupe::interconnect::internal {
namespace {

// The smallest read buffer, whatever the options say.
constexpr size_t kMinReadBuffer = 1024;
// The most buffers one direct sendmsg gathers (the I/O thread's writes gather up to Asio's own
// limit per writev).
constexpr size_t kMaxGather = 64;

}  // namespace

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
  if (IsOpen(*c) && c->channel == nullptr) {
    SendWire(*c, bytes);
    return;
  }
  WriteThroughChannel(*c, bytes);
}

void AsioConnections::WriteShared(ConnectionId connection, std::vector<SharedBytes> pieces) {
  const ConnectionPtr c = Find(connection);
  if (c == nullptr) {
    return;
  }
  troupe::MutexLock lock(&c->mu);
  if (c->down || c->write_failed) {
    return;
  }
  if (IsOpen(*c) && c->channel == nullptr) {
    SendPieces(*c, pieces);
    return;
  }
  for (const SharedBytes& piece : pieces) {
    WriteThroughChannel(*c, *piece);
  }
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
  std::vector<ConnectionPtr> connections;
  {
    troupe::MutexLock lock(&mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    connections.reserve(connections_.size());
    for (const auto& [id, c] : connections_) {
      connections.push_back(c);
    }
  }
  // From here on no owner hears of its connection, as after Close: a handler that runs before
  // CloseAll (a read failing because the peer end was just refused, say) finds it down.
  for (const ConnectionPtr& c : connections) {
    troupe::MutexLock lock(&c->mu);
    c->down = true;
    c->fd = -1;
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

void AsioConnections::WriteThroughChannel(Connection& c, absl::string_view bytes) {
  if (bytes.empty() || c.down || c.write_failed) {
    return;
  }
  if (!IsOpen(c)) {
    // Established (or the channel opening) sends these.
    c.waiting.append(bytes.data(), bytes.size());
    return;
  }
  c.sealed.clear();
  if (absl::Status sealed = c.channel->Seal(bytes, c.sealed); !sealed.ok()) {
    GoDown(c, std::move(sealed));
    return;
  }
  SendWire(c, c.sealed);
}

void AsioConnections::SendWire(Connection& c, std::string& wire) {
  if (wire.empty() || c.down || c.write_failed) {
    return;
  }
  if (c.fd >= 0 && !c.writing) {
    // Nothing is queued (a queue always has a write pending): try the kernel directly, which
    // saves the hop to the I/O thread on the latency path.
    TROUPE_DCHECK(c.queued.empty());
    iovec buffer{wire.data(), wire.size()};
    const ssize_t sent = SendNow(c, &buffer, 1);
    if (sent < 0 || static_cast<size_t>(sent) == wire.size()) {
      return;
    }
    c.queued_offset = static_cast<size_t>(sent);
  }
  c.queued.push_back(std::make_shared<const std::string>(std::move(wire)));
  wire.clear();
  StartQueuedWrite(c);
}

void AsioConnections::SendPieces(Connection& c, std::vector<SharedBytes>& pieces) {
  size_t next = 0;
  size_t offset = 0;
  if (c.fd >= 0 && !c.writing) {
    // As SendWire: straight to the kernel, the pieces gathered into sendmsg calls of up to
    // kMaxGather buffers each.
    TROUPE_DCHECK(c.queued.empty());
    std::array<iovec, kMaxGather> gather{};
    while (next < pieces.size()) {
      size_t count = 0;
      size_t total = 0;
      for (size_t i = next; i < pieces.size() && count < gather.size(); ++i, ++count) {
        const size_t skip = i == next ? offset : 0;
        gather[count].iov_base = const_cast<char*>(pieces[i]->data() + skip);
        gather[count].iov_len = pieces[i]->size() - skip;
        total += gather[count].iov_len;
      }
      const ssize_t sent = SendNow(c, gather.data(), count);
      if (sent < 0) {
        return;
      }
      // Skip what the kernel took: whole pieces, then part of one.
      auto left = static_cast<size_t>(sent);
      while (next < pieces.size() && left >= pieces[next]->size() - offset) {
        left -= pieces[next]->size() - offset;
        offset = 0;
        ++next;
      }
      offset += left;
      if (static_cast<size_t>(sent) < total) {
        break;  // the socket's buffer is full: the I/O thread sends the rest
      }
    }
    if (next == pieces.size()) {
      return;
    }
    c.queued_offset = offset;
  }
  for (size_t i = next; i < pieces.size(); ++i) {
    c.queued.push_back(std::move(pieces[i]));
  }
  StartQueuedWrite(c);
}

ssize_t AsioConnections::SendNow(Connection& c, iovec* buffers, size_t count) {
  msghdr message{};
  message.msg_iov = buffers;
  message.msg_iovlen = count;
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(c.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  if (sent >= 0) {
    return sent;
  }
  const int error = errno;
  if (error == EAGAIN || error == EWOULDBLOCK) {
    return 0;
  }
  WriteFailed(c, std::error_code(error, std::system_category()));
  return -1;
}

void AsioConnections::StartQueuedWrite(Connection& c) {
  // Before the connection is up the bytes just wait: Established starts the first write.
  if (c.fd >= 0 && !c.writing && !c.queued.empty()) {
    c.writing = true;
    asio::post(io_, [this, c = c.shared_from_this()] { SendQueued(c); });
  }
}

void AsioConnections::Flush(Connection& c) {
  if (c.waiting.empty()) {
    return;
  }
  std::string waiting;
  waiting.swap(c.waiting);
  if (c.channel == nullptr) {
    SendWire(c, waiting);
    return;
  }
  WriteThroughChannel(c, waiting);
}

void AsioConnections::WriteFailed(Connection& c, const std::error_code& error) {
  if (c.channel != nullptr && c.channel->DefersWriteErrors()) {
    c.write_failed = true;
    c.queued.clear();
    c.queued_offset = 0;
    return;
  }
  GoDown(c, SocketError("write", error));
}

void AsioConnections::Retire(Connection& c) {
  c.down = true;
  c.fd = -1;
  c.writing = false;
  c.queued.clear();
  c.queued_offset = 0;
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

}  // namespace troupe::interconnect::internal
