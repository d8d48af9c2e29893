// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/asio_socket.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "asio/error.hpp"
#include "asio/ip/address.hpp"
#include "asio/socket_base.hpp"

namespace troupe::interconnect::internal {

using asio::ip::tcp;

absl::Status SocketError(absl::string_view what, const std::error_code& error) {
  return absl::UnavailableError(absl::StrCat(what, ": ", error.message()));
}

std::string EndpointText(const tcp::endpoint& endpoint) {
  const asio::ip::address& address = endpoint.address();
  return address.is_v6() ? absl::StrCat("[", address.to_string(), "]:", endpoint.port())
                         : absl::StrCat(address.to_string(), ":", endpoint.port());
}

absl::StatusOr<uint16_t> OpenListener(asio::io_context& io, const std::string& host, uint16_t port,
                                      int socket_buffer_bytes, tcp::acceptor& acceptor) {
  const std::string address = absl::StrCat(host, ":", port);
  const std::string what = absl::StrCat("listen on ", address);
  std::error_code error;
  tcp::endpoint endpoint;
  const asio::ip::address ip = asio::ip::make_address(host, error);
  if (!error) {
    endpoint = tcp::endpoint(ip, port);
  } else {
    tcp::resolver resolver(io);
    const tcp::resolver::results_type results =
        resolver.resolve(host, std::to_string(port), tcp::resolver::passive, error);
    if (error) {
      return SocketError(what, error);
    }
    if (results.empty()) {
      return absl::UnavailableError(absl::StrCat(what, ": no address"));
    }
    endpoint = results.begin()->endpoint();
  }
  acceptor.open(endpoint.protocol(), error);
  if (!error) {
    acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  }
  if (!error && socket_buffer_bytes > 0) {
    acceptor.set_option(asio::socket_base::receive_buffer_size(socket_buffer_bytes), error);
    acceptor.set_option(asio::socket_base::send_buffer_size(socket_buffer_bytes), error);
  }
  if (!error) {
    acceptor.bind(endpoint, error);
  }
  if (!error) {
    acceptor.listen(asio::socket_base::max_listen_connections, error);
  }
  if (error == asio::error::address_in_use) {
    return absl::AlreadyExistsError(absl::StrCat("address ", address, " is in use"));
  }
  if (error) {
    return SocketError(what, error);
  }
  const uint16_t bound = acceptor.local_endpoint(error).port();
  if (error) {
    return SocketError(what, error);
  }
  return bound;
}

void ApplyBufferSize(tcp::socket& socket, int bytes) {
  if (bytes > 0) {
    std::error_code ignored;
    socket.set_option(asio::socket_base::receive_buffer_size(bytes), ignored);
    socket.set_option(asio::socket_base::send_buffer_size(bytes), ignored);
  }
}

void ResolveEndpoints(asio::io_context& io, const std::string& host, uint16_t port,
                      ResolvedFn done) {
  std::error_code error;
  const asio::ip::address ip = asio::ip::make_address(host, error);
  if (!error) {
    done({asio::ip::tcp::endpoint(ip, port)}, {});
    return;
  }
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io);
  resolver->async_resolve(
      host, std::to_string(port),
      [resolver, done = std::move(done)](std::error_code resolve_error,
                                         const asio::ip::tcp::resolver::results_type& results) {
        std::vector<asio::ip::tcp::endpoint> endpoints;
        if (!resolve_error) {
          for (const auto& entry : results) {
            endpoints.push_back(entry.endpoint());
          }
        }
        done(std::move(endpoints), resolve_error);
      });
}

}  // namespace troupe::interconnect::internal
