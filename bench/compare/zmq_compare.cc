// SPDX-License-Identifier: Apache-2.0
//
// ZeroMQ 4.3 side of the remote rows of the peer comparison (bench/compare/README.md), written
// with the plain libzmq C API and its default socket options. Two processes on loopback: the
// client starts its own binary again as the server (peer_process.h), which binds to
// 127.0.0.1 on ports the kernel picks, and ends it by PID at the end.
//
//   zmq_compare rtt [ROUND_TRIPS]        REQ -> REP, one 8-byte request (a sequence number) and
//                                        its echo at a time; 1,000 untimed round trips first.
//                                        Prints the mean round trip in µs.
//   zmq_compare stream [EVENTS] [BODY]   PUSH -> PULL, EVENTS messages of BODY bytes (default 64)
//                                        as fast as the PUSH socket takes them (its default high
//                                        water mark, 1,000 messages, is the only flow control),
//                                        then an empty marker; the server answers the marker with
//                                        its count over a PUSH -> PULL socket the other way.
//                                        events/s and GB/s over the wall time from the first send
//                                        to the count's arrival. An untimed marker round first
//                                        sets up both connections.
//
// Each mode prints one line of key=value pairs that run.sh reads.
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peer_process.h"
#include "report.h"

namespace {

using compare::Clock;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "zmq_compare: %s: %s\n", what, zmq_strerror(zmq_errno()));
  std::exit(1);
}

// Binds `socket` to 127.0.0.1 on a port the kernel picks and returns the port.
std::string BindLoopback(void* socket) {
  if (zmq_bind(socket, "tcp://127.0.0.1:*") != 0) {
    Die("zmq_bind");
  }
  char endpoint[256];
  size_t size = sizeof(endpoint);
  if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, endpoint, &size) != 0) {
    Die("ZMQ_LAST_ENDPOINT");
  }
  const std::string text(endpoint);
  return text.substr(text.rfind(':') + 1);
}

void Connect(void* socket, const std::string& port) {
  if (zmq_connect(socket, ("tcp://127.0.0.1:" + port).c_str()) != 0) {
    Die("zmq_connect");
  }
}

// Receives one message into `buffer` (resized to it); dies on error.
void Receive(void* socket, zmq_msg_t* message) {
  if (zmq_msg_recv(message, socket, 0) < 0) {
    Die("zmq_msg_recv");
  }
}

void SendBytes(void* socket, const void* data, size_t size) {
  if (zmq_send(socket, data, size, 0) < 0) {
    Die("zmq_send");
  }
}

// -- the server: runs until the client ends it ----------------------------------------------------

int ServeRtt() {
  void* context = zmq_ctx_new();
  void* reply = zmq_socket(context, ZMQ_REP);
  compare::AnnounceReady(BindLoopback(reply));
  zmq_msg_t message;
  zmq_msg_init(&message);
  for (;;) {
    Receive(reply, &message);
    if (zmq_msg_send(&message, reply, 0) < 0) {
      Die("zmq_msg_send");
    }
  }
}

int ServeStream() {
  void* context = zmq_ctx_new();
  void* pull = zmq_socket(context, ZMQ_PULL);
  void* push = zmq_socket(context, ZMQ_PUSH);
  const std::string data_port = BindLoopback(pull);
  compare::AnnounceReady(data_port + " " + BindLoopback(push));
  zmq_msg_t message;
  zmq_msg_init(&message);
  uint64_t count = 0;
  for (;;) {
    Receive(pull, &message);
    if (zmq_msg_size(&message) == 0) {
      SendBytes(push, &count, sizeof(count));
      count = 0;
    } else {
      ++count;
    }
  }
}

// -- the client -----------------------------------------------------------------------------------

int RunRtt(uint64_t round_trips) {
  compare::ServerProcess server({"serve-rtt"});
  if (!server.ok()) {
    std::fprintf(stderr, "zmq_compare: %s\n", server.error().c_str());
    return 1;
  }
  void* context = zmq_ctx_new();
  void* request = zmq_socket(context, ZMQ_REQ);
  Connect(request, server.line());
  zmq_msg_t message;
  zmq_msg_init(&message);
  auto round_trip = [&](uint64_t seq) {
    SendBytes(request, &seq, sizeof(seq));
    Receive(request, &message);
    uint64_t echoed = 0;
    std::memcpy(&echoed, zmq_msg_data(&message), sizeof(echoed));
    if (zmq_msg_size(&message) != sizeof(seq) || echoed != seq) {
      std::fprintf(stderr, "zmq_compare: a wrong echo\n");
      std::exit(1);
    }
  };
  for (uint64_t i = 0; i < 1000; ++i) {
    round_trip(i);
  }
  const auto start = Clock::now();
  for (uint64_t i = 0; i < round_trips; ++i) {
    round_trip(i);
  }
  compare::PrintRtt(round_trips, compare::SecondsSince(start));
  zmq_msg_close(&message);
  zmq_close(request);
  zmq_ctx_term(context);
  return 0;
}

int RunStream(uint64_t events, uint64_t body) {
  compare::ServerProcess server({"serve-stream"});
  if (!server.ok()) {
    std::fprintf(stderr, "zmq_compare: %s\n", server.error().c_str());
    return 1;
  }
  const std::string& ports = server.line();
  void* context = zmq_ctx_new();
  void* push = zmq_socket(context, ZMQ_PUSH);
  void* pull = zmq_socket(context, ZMQ_PULL);
  Connect(push, ports.substr(0, ports.find(' ')));
  Connect(pull, ports.substr(ports.find(' ') + 1));
  zmq_msg_t message;
  zmq_msg_init(&message);
  // Sends the marker and returns the server's count.
  auto marker = [&] {
    SendBytes(push, "", 0);
    Receive(pull, &message);
    uint64_t count = 0;
    std::memcpy(&count, zmq_msg_data(&message), sizeof(count));
    return count;
  };
  marker();
  const std::vector<char> payload(body, 'p');
  const auto start = Clock::now();
  for (uint64_t i = 0; i < events; ++i) {
    SendBytes(push, payload.data(), payload.size());
  }
  const uint64_t counted = marker();
  const double seconds = compare::SecondsSince(start);
  if (counted != events) {
    std::fprintf(stderr, "zmq_compare: the server counted %llu of %lld\n",
                 static_cast<unsigned long long>(counted), static_cast<unsigned long long>(events));
    return 1;
  }
  compare::PrintStream(events, body, seconds);
  zmq_msg_close(&message);
  zmq_close(push);
  zmq_close(pull);
  zmq_ctx_term(context);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve-rtt") {
    return ServeRtt();
  }
  if (mode == "serve-stream") {
    return ServeStream();
  }
  if (mode == "rtt") {
    return RunRtt(compare::CountArg(argc, argv, 2, 20'000, "ROUND_TRIPS"));
  }
  if (mode == "stream") {
    return RunStream(compare::CountArg(argc, argv, 2, 1'000'000, "EVENTS"),
                     compare::CountArg(argc, argv, 3, 64, "BODY"));
  }
  std::fprintf(stderr, "usage: %s rtt [ROUND_TRIPS] | stream [EVENTS] [BODY]\n", argv[0]);
  return 2;
}
