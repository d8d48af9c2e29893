// SPDX-License-Identifier: Apache-2.0
//
// FreeLoopbackPorts (interconnect/testing/free_ports.h): the ports it picks for node tables are
// distinct, free and below the kernel's own range.
#include "interconnect/testing/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace troupe::interconnect {
namespace {

// A node table's ports come from below the kernel's own range, where no other process's bind to
// port 0 or outgoing connection takes one before its node binds it (a test cluster once lost its
// port so to a test running beside it), and each is free.
TEST(FreeLoopbackPortsTest, AreDistinctFreeAndBelowTheKernelsOwnRange) {
  constexpr size_t kCount = 8;
  uint32_t kernel_low = 32768;
  uint32_t kernel_high = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> kernel_low >> kernel_high;
  absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(kCount);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), kCount);
  std::vector<uint16_t> sorted = *ports;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a port twice";
  std::vector<int> fds;
  for (const uint16_t port : *ports) {
    if (kernel_low >= 10000 + 16 * kCount) {
      EXPECT_GE(port, 10000);
      EXPECT_LT(port, kernel_low) << "inside the kernel's range " << kernel_low << "-"
                                  << kernel_high;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
        << "port " << port << " is not free";
  }
  for (const int fd : fds) {
    ::close(fd);
  }
}

}  // namespace
}  // namespace troupe::interconnect
