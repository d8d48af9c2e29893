// SPDX-License-Identifier: Apache-2.0
//
// Raw-socket probes for the integration tests: talk to a node's port without a Troupe transport,
// the way a stray client or a port scanner would.
//
// Every call is bounded (a 10 s receive timeout); nothing here retries.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace troupe::testutil {

// Connects to 127.0.0.1:`port`, writes `bytes` and reads until the node closes the connection;
// returns true when the node closes it, by FIN or by RST (a node that closes with our bytes still
// unread in its socket resets the connection: the kernel's choice, not the node's), false when the
// connect fails or nothing closes the connection within 10 s. A short write fails the test
// (EXPECT); another receive error fails it naming errno.
inline bool PeerClosesAfter(uint16_t port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return false;
  }
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  std::string buffer(256, '\0');
  ssize_t got = 0;
  do {
    got = ::recv(fd, buffer.data(), buffer.size(), 0);
  } while (got > 0);
  const int error = errno;
  ::close(fd);
  if (got == 0 || error == ECONNRESET) {
    return true;
  }
  EXPECT_TRUE(error == EAGAIN || error == EWOULDBLOCK) << "recv: " << std::strerror(error);
  return false;  // the 10 s receive timeout passed
}

}  // namespace troupe::testutil
