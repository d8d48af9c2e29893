// SPDX-License-Identifier: Apache-2.0
//
// The connection core's I/O thread (asio_core.h): accept, connect (every resolved endpoint in
// turn), the read loop, the writes the kernel did not take at once, and closing.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "asio/buffer.hpp"
#include "asio/error.hpp"
#include "asio/write.hpp"

#include "actors/log.h"
#include "actors/sync.h"
#include "interconnect/internal/asio_core.h"
#include "interconnect/internal/asio_socket.h"

namespace troupe::interconnect::internal {
namespace {

// After an accept fails for a reason other than the listener closing (out of descriptors, most
// likely), the next attempt waits this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetryDelay(50);
// A connection keeps its channel's buffer of decrypted bytes between reads up to this capacity; a
// burst larger than that frees it once used.
constexpr size_t kKeptBuffer = size_t{1} << 20;

}  // namespace

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
    std::string bytes;
    if (size >= read_size_ / 2) {
      // The read buffer itself goes to the owner (a session's decoder takes it over and decodes
      // in place); a new one costs less than copying this much.
      bytes.swap(c.read_buffer);
      bytes.resize(size);
      c.read_buffer.resize(read_size_);
    } else {
      bytes.assign(c.read_buffer.data(), size);
    }
    system_->Send(c.owner, std::make_unique<EvBytesReceived>(c.id, std::move(bytes)));
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
  if (c.plain.empty() || c.down) {
    return;
  }
  if (c.plain.size() >= read_size_ / 2 && c.plain.size() <= read_size_) {
    // Handed over whole, as a large read without a channel.
    system_->Send(c.owner, std::make_unique<EvBytesReceived>(c.id, std::move(c.plain)));
    c.plain = std::string();
    c.plain.reserve(read_size_);
    return;
  }
  for (size_t at = 0; at < c.plain.size() && !c.down; at += read_size_) {
    system_->Send(c.owner,
                  std::make_unique<EvBytesReceived>(
                      c.id, c.plain.substr(at, std::min(read_size_, c.plain.size() - at))));
  }
  if (c.plain.capacity() > kKeptBuffer) {
    std::string().swap(c.plain);
  }
}

void AsioConnections::SendQueued(const ConnectionPtr& c) {
  c->sending.clear();
  c->sending_buffers.clear();
  {
    troupe::MutexLock lock(&c->mu);
    if (c->down || c->write_failed) {
      return;
    }
    size_t offset = std::exchange(c->queued_offset, 0);
    for (SharedBytes& piece : c->queued) {
      c->sending_buffers.emplace_back(piece->data() + offset, piece->size() - offset);
      c->sending.push_back(std::move(piece));
      offset = 0;
    }
    c->queued.clear();
  }
  asio::async_write(c->socket, c->sending_buffers,
                    [this, c](std::error_code error, size_t /*written*/) {
                      // The pieces' owners may free them now.
                      c->sending.clear();
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

}  // namespace troupe::interconnect::internal
