// SPDX-License-Identifier: Apache-2.0
//
// The mutual-TLS implementation of Transport (transport.h): every connection is a TCP socket
// carrying TLS 1.3 (OpenSSL through Asio), driven by one I/O thread ("troupe:tls") that the
// transport owns. Both ends present a certificate and verify the other's: the CA file is the only
// trust anchor, a peer without a certificate is refused, and a verified certificate must name a
// Troupe node. The node id comes from the first subjectAltName DNS entry of the form `node<N>`
// (e.g. DNS:node2) or, when there is none, from a subject CN `node<N>`; N is decimal, 1 to
// 1048575, without leading zeros. Peer() reports it as `certified_node`, set before the
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
// Write path: Write appends to the connection's queue; bytes written before the TLS handshake
// completes wait in it. Every SSL call runs on the I/O thread (an SSL object must not be read and
// written on two threads at once), so unlike TcpTransport there is no direct send() from the
// caller's thread: each write costs a hop to the I/O thread, and while one is in progress later
// Writes only append, so a busy connection encrypts and sends everything queued at once. The
// queue is unbounded: the caller bounds what it writes. Close discards what is still queued and
// closes the socket without a TLS close_notify; the peer sees "connection closed by the peer".
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
  // Read buffer and socket buffer sizes, as for TcpTransport.
  TcpTransportOptions tcp = {};
};

// Returns a transport whose connections are mutual TLS 1.3 over TCP, and starts its I/O thread.
// Its events go to `system`, which must outlive Shutdown() (or the transport's destruction).
// kInvalidArgument naming the option and the file when a file cannot be read or parsed
// ("cert_file: cannot read /x/y.pem: No such file or directory"), when key_file does not match
// cert_file, and (with `node` set) when cert_file names no node or another node.
absl::StatusOr<std::unique_ptr<Transport>> MakeTlsTransport(ActorSystem* system,
                                                            TlsTransportOptions options);

}  // namespace troupe::interconnect
