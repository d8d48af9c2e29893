// SPDX-License-Identifier: Apache-2.0
//
// FreeLoopbackPorts: ports free on 127.0.0.1 right now, for the node table of a cluster on one
// machine, written before its nodes start (tests, benchmarks, the example cluster). Loopback only
// and racy by nature (a port is free when picked, not reserved), so it belongs with the test
// rigs of target troupe::interconnect_testing, not with the transports.
//
// Thread-safety: thread-safe.
//
// Example:
//
//   absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(2);
//   if (!ports.ok()) { return ports.status(); }
//   // node 1 listens on 127.0.0.1:(*ports)[0], node 2 on 127.0.0.1:(*ports)[1]
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::interconnect {

// Returns `count` distinct ports free on 127.0.0.1 right now. They are taken below the kernel's
// own range (ip_local_port_range), from 10000 up, where no other process's bind to port 0 or
// outgoing connection takes one before its node binds it; each is bound to check it, all at once,
// then released. Only when that range has no room are they bound to port 0. Another process
// binding explicit ports may still take one. kUnavailable names the socket error.
absl::StatusOr<std::vector<uint16_t>> FreeLoopbackPorts(size_t count);

}  // namespace troupe::interconnect
