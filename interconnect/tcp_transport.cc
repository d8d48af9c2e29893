// SPDX-License-Identifier: Apache-2.0
#include "interconnect/tcp_transport.h"

#include <memory>
#include <utility>

#include "interconnect/internal/asio_connections.h"

namespace troupe::interconnect {

absl::StatusOr<std::unique_ptr<Transport>> MakeTcpTransport(ActorSystem* system,
                                                            TcpTransportOptions options) {
  // The connection core with no channel: the session's bytes are the socket's bytes.
  return internal::MakeAsioTransport(system, std::move(options), "TCP", /*channels=*/nullptr);
}

}  // namespace troupe::interconnect
