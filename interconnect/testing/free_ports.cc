// SPDX-License-Identifier: Apache-2.0
#include "interconnect/testing/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace troupe::interconnect {

namespace {

// Lowest port FreeLoopbackPorts hands out below the kernel's own range.
constexpr uint32_t kFirstPickedPort = 10000;

// The range the kernel takes ports from by itself (a bind to port 0, a connection's local port):
// /proc/sys/net/ipv4/ip_local_port_range, or Linux's default when it cannot be read.
std::pair<uint32_t, uint32_t> KernelPortRange() {
  uint32_t low = 32768;
  uint32_t high = 60999;
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  uint32_t read_low = 0;
  uint32_t read_high = 0;
  if (file >> read_low >> read_high && read_low <= read_high && read_high <= 65535) {
    low = read_low;
    high = read_high;
  }
  return {low, high};
}

// Binds a new socket to 127.0.0.1:`port` (0: the kernel picks). Returns the socket, or -1 with
// errno set.
int BindLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

uint16_t BoundPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  return ntohs(address.sin_port);
}

}  // namespace

absl::StatusOr<std::vector<uint16_t>> FreeLoopbackPorts(size_t count) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  absl::Status status;
  const auto [kernel_low, kernel_high] = KernelPortRange();
  // Below the kernel's range when it leaves room: there no bind to port 0 and no outgoing
  // connection of another process takes a port between its release here and its node's bind (a
  // cluster's port was once taken so by a test running beside it). From a random start, so that
  // two callers at once rarely try the same ports; each is bound to check that it is free.
  const uint32_t span = kernel_low > kFirstPickedPort ? kernel_low - kFirstPickedPort : 0;
  if (span >= 16 * count) {
    std::random_device entropy;
    const uint32_t start = std::uniform_int_distribution<uint32_t>(0, span - 1)(entropy);
    for (uint32_t tried = 0; tried < span && ports.size() < count; ++tried) {
      const auto port = static_cast<uint16_t>(kFirstPickedPort + (start + tried) % span);
      const int fd = BindLoopback(port);
      if (fd >= 0) {
        fds.push_back(fd);
        ports.push_back(port);
      } else if (errno != EADDRINUSE && errno != EACCES) {
        status = absl::UnavailableError(
            absl::StrCat("bind 127.0.0.1:", port, ": ",
                         std::error_code(errno, std::system_category()).message()));
        break;
      }
    }
  }
  // The rest (no room below the kernel's range, or none of it free) from the kernel's range:
  // bound to port 0 all at once, so the kernel hands out different ones.
  while (status.ok() && ports.size() < count) {
    const int fd = BindLoopback(0);
    const uint16_t port = fd >= 0 ? BoundPort(fd) : 0;
    if (fd >= 0) {
      fds.push_back(fd);
    }
    if (port == 0) {
      status = absl::UnavailableError(
          absl::StrCat("bind 127.0.0.1:0 (kernel range ", kernel_low, "-", kernel_high,
                       "): ", std::error_code(errno, std::system_category()).message()));
      break;
    }
    ports.push_back(port);
  }
  for (const int fd : fds) {
    ::close(fd);
  }
  if (!status.ok()) {
    return status;
  }
  return ports;
}

}  // namespace troupe::interconnect
