// SPDX-License-Identifier: Apache-2.0
//
// The mutual-TLS implementation of Transport (transport.h): every connection is a TCP socket
// carrying TLS 1.3 (OpenSSL), on the connection core of TcpTransport (internal/asio_connections.h):
// one io_context run by the workers of `tcp.io_pool`, or else by an I/O thread ("troupe:tls")
// that the transport owns. Both ends present a certificate and verify the other's: the CA file is
// the only trust anchor, a peer without a certificate is refused, and a verified certificate must
// name a Troupe node. The node id comes from the first subjectAltName DNS entry of the form
// `node<N>` (e.g. DNS:node2) or, when there is none, from a subject CN `node<N>`; N is decimal, 1
// to 1048575, without leading zeros. Peer() reports it as `certified_node`, set before the
// connection's first EvBytesReceived, so the handshake can check that the node id a peer claims
// is the one its certificate names. scripts/make-test-certs.sh makes such certificates.
//
// Events follow the contract of transport.h and TcpTransport (tcp_transport.h):
//   | event            | when                                                                  |
//   |------------------|-----------------------------------------------------------------------|
//   | EvConnectionUp   | the TCP connection is established (the TLS handshake follows)         |
//   | EvBytesReceived  | decrypted application bytes, in order, at most read_buffer_size each   |
//   | EvConnectionDown | once, with a reason (also when Connect fails):                        |
//   |                  | kUnauthenticated "TLS: <OpenSSL's reason>" for any TLS error before   |
//   |                  |   the first application bytes: the handshake failed or the peer       |
//   |                  |   refused our certificate, e.g. "TLS: certificate verify failed:      |
//   |                  |   certificate has expired", "TLS: tlsv1 alert unknown ca", "TLS: the  |
//   |                  |   peer's certificate names no Troupe node (expected DNS:node<N> or    |
//   |                  |   CN=node<N>)"                                                        |
//   |                  | kUnavailable otherwise, as TcpTransport: "connect to host:port: ...", |
//   |                  |   "connection closed by the peer", "read: ...", "write: ..."          |
// In TLS 1.3 the client finishes its handshake before the server has checked the client's
// certificate: the server's refusal reaches a dialler as an alert on its first read, which is why
// TLS errors count as kUnauthenticated until the first application bytes arrive.
//
// Write path: as TcpTransport's. Write encrypts on the calling thread and, when nothing is queued
// for the connection, sends the ciphertext with a non-blocking send() there too; the rest is
// queued for the I/O thread. OpenSSL reads and writes memory buffers, never the socket, and every
// use of a connection's SSL object holds that connection's mutex, so one SSL object is never used
// by two threads at once (a Write waits while the I/O thread decrypts what arrived for the same
// connection). Bytes written before the TLS handshake completes wait, unencrypted, and go out
// once it does. The queue is unbounded: the caller bounds what it writes. Close discards what is
// still queued and closes the socket without a TLS close_notify; the peer sees "connection closed
// by the peer".
//
// Thread-safety: thread-safe (every Transport method may be called from any thread; Shutdown not
// concurrently with the destructor).
//
// Example:
//
//   absl::StatusOr<std::unique_ptr<Transport>> tls = MakeTlsTransport(
//       system.get(), {.ca_file = "ca.crt", .cert_file = "node1.crt", .key_file = "node1.key"});
//   if (!tls.ok()) { return tls.status(); }                // names the file at fault
//   absl::StatusOr<uint16_t> port = (*tls)->Listen("127.0.0.1", 0, acceptor);
//   ConnectionId id = (*tls)->Connect("127.0.0.1", *port, owner);  // owner gets EvConnectionUp
//   (*tls)->Write(id, frame);                               // sent once the handshake is done
//   (*tls)->Shutdown();                                     // before the ActorSystem goes away
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/transport.h"

namespace troupe::interconnect {

struct TlsTransportOptions {
  // PEM file of the certificate authority that signs every node's certificate: the only one
  // trusted (the system's trust store is not used).
  std::string ca_file;
  // PEM file of this node's certificate, optionally followed by intermediates.
  std::string cert_file;
  // PEM file of the certificate's private key (unencrypted).
  std::string key_file;
  // When nonzero, cert_file must name this node id, so a node does not start with another
  // node's certificate (or one that names no node). Zero: any certificate the CA signed.
  NodeId node = 0;
  // Read buffer and socket buffer sizes and the pool that runs the I/O, as for TcpTransport.
  TcpTransportOptions tcp = {};
};

// Returns a transport whose connections are mutual TLS 1.3 over TCP, run as MakeTcpTransport's
// (`tcp.io_pool`'s workers or an I/O thread of its own). Its events go to `system`, which must
// outlive Shutdown() (or the transport's destruction). kInvalidArgument as MakeTcpTransport's for
// `tcp`, and naming the option and the file when a file cannot be read or parsed
// ("cert_file: cannot read /x/y.pem: No such file or directory"), when key_file does not match
// cert_file, and (with `node` set) when cert_file names no node or another node.
absl::StatusOr<std::unique_ptr<Transport>> MakeTlsTransport(ActorSystem* system,
                                                            TlsTransportOptions options);

}  // namespace troupe::interconnect
