// SPDX-License-Identifier: Apache-2.0
//
// gRPC 1.51 side of the remote rows of the peer comparison (bench/compare/README.md), written with
// the synchronous C++ API and default channel and server options, plaintext (insecure
// credentials) as the other programs. Two processes on loopback: the client starts its own binary
// again as the server (../peer_process.h), which listens on 127.0.0.1 on a port the kernel picks,
// and ends it by PID at the end.
//
//   grpc_compare rtt [ROUND_TRIPS]        one PingPong bidirectional stream: Write one Blob (a
//                                         sequence number), Read its echo, one at a time. A
//                                         stream rather than unary calls: it is what a user does
//                                         for the lowest latency (no call set-up per request).
//                                         1,000 untimed round trips first. Prints the mean round
//                                         trip in µs.
//   grpc_compare stream [EVENTS] [BODY]   one Stream client stream: EVENTS Blobs of BODY bytes
//                                         (default 64) written one after another (HTTP/2 flow
//                                         control paces the writer), WritesDone, then the server's
//                                         count. events/s and GB/s over the wall time from the
//                                         call's start to its Finish. A first untimed call of
//                                         1,000 Blobs warms the channel up.
//
// Each mode prints one line of key=value pairs that run.sh reads.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "grpc_compare.grpc.pb.h"
#include "peer_process.h"
#include "report.h"

namespace {

using compare::Clock;

class CompareService final : public compare::Compare::Service {
  grpc::Status PingPong(grpc::ServerContext* /*context*/,
                        grpc::ServerReaderWriter<compare::Blob, compare::Blob>* stream) override {
    compare::Blob blob;
    while (stream->Read(&blob)) {
      if (!stream->Write(blob)) {
        break;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Stream(grpc::ServerContext* /*context*/, grpc::ServerReader<compare::Blob>* reader,
                      compare::Count* count) override {
    compare::Blob blob;
    uint64_t n = 0;
    while (reader->Read(&blob)) {
      ++n;
    }
    count->set_count(n);
    return grpc::Status::OK;
  }
};

// Listens on 127.0.0.1, port picked by the kernel, until the client ends this process.
int Serve() {
  CompareService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "grpc_compare: the server did not start\n");
    return 1;
  }
  compare::AnnounceReady(std::to_string(port));
  server->Wait();
  return 0;
}

std::unique_ptr<compare::Compare::Stub> Connect(const std::string& port) {
  return compare::Compare::NewStub(
      grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials()));
}

int RunRtt(uint64_t round_trips) {
  compare::ServerProcess server({"serve"});
  if (!server.ok()) {
    std::fprintf(stderr, "grpc_compare: %s\n", server.error().c_str());
    return 1;
  }
  std::unique_ptr<compare::Compare::Stub> stub = Connect(server.line());
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<compare::Blob, compare::Blob>> stream =
      stub->PingPong(&context);
  compare::Blob request;
  compare::Blob reply;
  auto round_trip = [&](uint64_t seq) {
    request.set_seq(seq);
    if (!stream->Write(request) || !stream->Read(&reply) || reply.seq() != seq) {
      std::fprintf(stderr, "grpc_compare: round trip %llu failed\n",
                   static_cast<unsigned long long>(seq));
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
  const double seconds = compare::SecondsSince(start);
  stream->WritesDone();
  if (const grpc::Status status = stream->Finish(); !status.ok()) {
    std::fprintf(stderr, "grpc_compare: PingPong: %s\n", status.error_message().c_str());
    return 1;
  }
  compare::PrintRtt(round_trips, seconds);
  return 0;
}

// Streams `events` Blobs of `body` bytes on one call; returns the server's count, or -1.
int64_t StreamOnce(compare::Compare::Stub& stub, uint64_t events, uint64_t body) {
  grpc::ClientContext context;
  compare::Count count;
  std::unique_ptr<grpc::ClientWriter<compare::Blob>> writer = stub.Stream(&context, &count);
  compare::Blob blob;
  blob.set_data(std::string(body, 'p'));
  for (uint64_t i = 0; i < events; ++i) {
    blob.set_seq(i);
    if (!writer->Write(blob)) {
      break;
    }
  }
  writer->WritesDone();
  if (const grpc::Status status = writer->Finish(); !status.ok()) {
    std::fprintf(stderr, "grpc_compare: Stream: %s\n", status.error_message().c_str());
    return -1;
  }
  return static_cast<int64_t>(count.count());
}

int RunStream(uint64_t events, uint64_t body) {
  compare::ServerProcess server({"serve"});
  if (!server.ok()) {
    std::fprintf(stderr, "grpc_compare: %s\n", server.error().c_str());
    return 1;
  }
  std::unique_ptr<compare::Compare::Stub> stub = Connect(server.line());
  if (StreamOnce(*stub, 1000, body) != 1000) {
    return 1;
  }
  const auto start = Clock::now();
  const int64_t counted = StreamOnce(*stub, events, body);
  const double seconds = compare::SecondsSince(start);
  if (counted != static_cast<int64_t>(events)) {
    std::fprintf(stderr, "grpc_compare: the server counted %lld of %lld\n",
                 static_cast<long long>(counted), static_cast<unsigned long long>(events));
    return 1;
  }
  compare::PrintStream(events, body, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve") {
    return Serve();
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
