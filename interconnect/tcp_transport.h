// SPDX-License-Identifier: Apache-2.0
//
// The TCP implementation of Transport (transport.h): every connection is a TCP socket, driven by
// one Asio io_context: run by the workers of `io_pool` (see TcpTransportOptions), or else by an
// I/O thread ("troupe:tcp") that the transport owns. Either way one thread at a time runs it
// ("the I/O thread" below). The connection core it runs on (internal/asio_connections.h) is the
// TLS transport's too.
//
// Events follow the contract of transport.h: EvConnectionUp (to the Connect caller's owner, or to
// the listener's acceptor with `incoming`), EvBytesReceived (in order, at most
// `read_buffer_size` bytes each, to the connection's current owner), EvConnectionDown (once; also
// when Connect fails). Every socket has TCP_NODELAY. Reasons carry kUnavailable:
//   | cause                     | reason message                                       |
//   |---------------------------|------------------------------------------------------|
//   | Connect failed            | "connect to host:port: <error>"                      |
//   | the peer closed (EOF)     | "connection closed by the peer"                      |
//   | a read or write failed    | "read: <error>" / "write: <error>"                   |
//
// Write path: when nothing is queued for the connection, Write hands the bytes to the kernel with
// a non-blocking send() on the calling thread (no hop to the I/O thread, one syscall). What the
// kernel does not take is queued and the I/O thread sends it; while that send is pending, later
// Writes only append to the queue, so a busy connection sends many writes per syscall. The queue
// is unbounded: the caller bounds what it writes (the session's unacknowledged-bytes limit).
// Writes issued before the connection is up are queued and sent once it is.
//
// Close discards bytes still queued in the transport; bytes already handed to the kernel reach
// the peer before its EvConnectionDown (unless the kernel resets the connection, for example
// because bytes the closing side had not read were still waiting).
//
// Thread-safety: thread-safe (every Transport method may be called from any thread; Shutdown not
// concurrently with the destructor).
//
// Example:
//
//   absl::StatusOr<std::unique_ptr<Transport>> tcp = MakeTcpTransport(system.get());
//   if (!tcp.ok()) { return tcp.status(); }
//   absl::StatusOr<uint16_t> port = (*tcp)->Listen("127.0.0.1", 0, acceptor);
//   ConnectionId id = (*tcp)->Connect("127.0.0.1", *port, owner);  // owner gets EvConnectionUp
//   (*tcp)->Write(id, frame);
//   (*tcp)->Shutdown();  // before the ActorSystem goes away
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "actors/actor_system.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

struct TcpTransportOptions {
  // Bytes read per receive call: the largest EvBytesReceived. Values below 1 KiB count as 1 KiB.
  size_t read_buffer_size = size_t{256} * 1024;
  // SO_SNDBUF and SO_RCVBUF of every socket; 0 keeps the OS default (and its autotuning).
  int socket_buffer_bytes = 0;
  // The pool of the system whose workers run the I/O (AttachIoPoller, actors/node_hooks.h): bytes
  // that arrive wake a worker that runs the receiving actors next, with no hop through another
  // thread. Empty, or a pool that cannot poll (a node run by the deterministic test runtime): the
  // transport runs its own I/O thread.
  std::string io_pool = {};
};

// Returns a transport whose connections are TCP sockets, run by `options.io_pool`'s workers or by
// an I/O thread of its own (a warning says why when the pool was named and cannot run it: a node
// run by the deterministic test runtime, or a pool already running another transport's I/O). Its
// events go to `system`, which must outlive Shutdown() (or the transport's destruction).
// kInvalidArgument when `io_pool` names no pool of `system` or `socket_buffer_bytes` is negative.
absl::StatusOr<std::unique_ptr<Transport>> MakeTcpTransport(ActorSystem* system,
                                                            TcpTransportOptions options = {});

}  // namespace troupe::interconnect
