// SPDX-License-Identifier: Apache-2.0
//
// Socket set-up of the Asio connection core (asio_connections.h, which TCP and TLS share): the
// listening socket, the endpoints to dial, buffer sizes, and how socket errors and addresses read
// in statuses and log lines. Plain functions over Asio types; no state. And AsioPoller, which lets
// a pool's workers run an io_context (actors/node_hooks.h, IoPoller).
//
// Thread-safety: thread-compatible (each call touches only the socket it is given).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"

#include "actors/node_hooks.h"

namespace troupe::interconnect::internal {

// Returns kUnavailable "<what>: <error message>".
absl::Status SocketError(absl::string_view what, const std::error_code& error);

// Returns "a.b.c.d:port", or "[v6]:port" for IPv6.
std::string EndpointText(const asio::ip::tcp::endpoint& endpoint);

// Opens, binds and listens `acceptor` on host:port (a literal address, or a name resolved
// synchronously for a passive socket; port 0: any free one) with SO_REUSEADDR and, when
// `socket_buffer_bytes` > 0, that SO_RCVBUF/SO_SNDBUF (accepted sockets inherit them). Returns the
// bound port. kAlreadyExists when the address is taken, kUnavailable naming host:port otherwise.
absl::StatusOr<uint16_t> OpenListener(asio::io_context& io, const std::string& host, uint16_t port,
                                      int socket_buffer_bytes, asio::ip::tcp::acceptor& acceptor);

// The endpoints to dial for host:port: a literal address at once, a name through an async
// resolve on `io`. Calls `done(endpoints, error)` on `io`'s thread (or at once, for a literal);
// `error` is the resolver's when the name did not resolve (endpoints then empty).
using ResolvedFn = std::function<void(std::vector<asio::ip::tcp::endpoint>, std::error_code)>;
void ResolveEndpoints(asio::io_context& io, const std::string& host, uint16_t port,
                      ResolvedFn done);

// Sets SO_RCVBUF and SO_SNDBUF of `socket` to `bytes` when `bytes` > 0 (errors ignored: the OS
// keeps its default).
void ApplyBufferSize(asio::ip::tcp::socket& socket, int bytes);

// Runs an io_context for the workers of a pool. The io_context must keep work (a work guard)
// while attached: run_one on one without work would return at once and the worker would spin.
class AsioPoller final : public IoPoller {
 public:
  explicit AsioPoller(asio::io_context& io) : io_(io) {}

  size_t Poll() override { return io_.poll(); }
  void Wait() override {
    if (io_.run_one() > 0) {
      io_.poll();
    }
  }
  // A posted handler: Wait runs it and returns, now or at its next call.
  void Interrupt() override {
    asio::post(io_, [] {});
  }

 private:
  asio::io_context& io_;
};

}  // namespace troupe::interconnect::internal
