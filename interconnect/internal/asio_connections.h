// SPDX-License-Identifier: Apache-2.0
//
// The one connection core of the Asio transports (tcp_transport.h, tls_transport.h): a Transport
// whose connections are TCP sockets on one io_context, with the bookkeeping of connection ids and
// owners, listening sockets and accept, connect (every resolved endpoint in turn), the read loop,
// the write path and close and shutdown. A transport built on it differs only in its Channel, the
// transform of one connection's bytes between the session and the socket:
//   | transport | channel                                                                    |
//   |-----------|----------------------------------------------------------------------------|
//   | TCP       | none: the session's bytes are the socket's bytes                           |
//   | TLS       | OpenSSL over memory BIOs (tls_transport.cc): handshake, verification,      |
//   |           | encryption; it never touches the socket, the core moves its ciphertext     |
//
// Threads. The io_context is run by the workers of `options.io_pool` (AttachIoPoller,
// actors/node_hooks.h) or else by an I/O thread of the core's own ("troupe:<name>"); either way
// one thread at a time runs it: "the I/O thread" below. Transport methods run on any thread.
//
// Ownership and locking, per connection:
//   | state                                   | owner                                          |
//   |-----------------------------------------|------------------------------------------------|
//   | the socket, the read buffer, the bytes   | the I/O thread                                 |
//   | of the async write in progress           |                                                |
//   | owner, remote address, the Channel,      | shared, under the connection's mutex           |
//   | the write queues, the up/down flags      |                                                |
// The connection's mutex is held for every Channel call, so one thread at a time uses a channel
// (OpenSSL: one SSL object must never be used by two threads at once), and the mutex orders each
// use after the previous one on whichever thread that ran. The I/O thread closes a socket only
// after marking its connection down under the mutex, so a send() made under the mutex on a
// connection that is up never races the close.
//
// Write path. Write seals the bytes (the channel, on the calling thread) and, when no write is in
// progress, hands them to the kernel with a non-blocking send() on the calling thread: no hop to
// the I/O thread, one syscall. What the kernel does not take is queued and the I/O thread sends
// it; while that send is pending, later Writes only append to the queue, so a busy connection
// sends many writes per syscall (one gathered writev of the queued pieces). WriteShared takes
// shared pieces (a session's frames, which its stream keeps for resend): without a channel they
// go out in one gathered sendmsg, and what the kernel does not take is queued by reference, so a
// frame is never copied between the encoder and the kernel; with a channel each piece is sealed
// as a Write's bytes. Bytes written before the connection is up, or before its channel is open
// (the TLS handshake), wait unsealed and go out when it opens. The queues are unbounded: the
// caller bounds what it writes.
//
// Read path. The I/O thread reads up to `read_buffer_size` bytes, passes them through the channel
// (under the mutex: a writer to the same connection waits for a decryption) and sends the owner
// EvBytesReceived chunks of at most `read_buffer_size` bytes. A read (or its decryption) of at
// least half that size is not copied: the buffer itself moves into the event (a session's decoder
// takes it over and decodes its frames in place) and the next read gets a new one; smaller reads
// are copied, so a small event does not hold a large buffer.
//
// Thread-safety: the Transport is thread-safe (Shutdown not concurrently with the destructor); a
// Channel is thread-compatible and the core serialises its use as above; a ChannelFactory must be
// thread-safe (the I/O thread and Connect callers use it).
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "actors/actor_system.h"
#include "interconnect/tcp_transport.h"
#include "interconnect/transport.h"

namespace troupe::interconnect::internal {

// What one connection does to its bytes between the session and the socket. Created when the TCP
// connection is up; every call is made with the connection's mutex held (see above). A status a
// method returns goes to the owner as the reason of EvConnectionDown, as it is.
class Channel {
 public:
  Channel() = default;
  virtual ~Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  Channel(Channel&&) = delete;
  Channel& operator=(Channel&&) = delete;

  // Starts the channel on a connection just established; appends to `wire` what must be sent
  // first (a TLS ClientHello).
  virtual absl::Status Start(std::string& wire) = 0;
  // Takes `input`, bytes read from the socket; appends what they carry for the session to
  // `plain` and what must be sent back (handshake messages, alerts) to `wire`. `wire` is sent
  // even when the result is an error (so an alert reaches the peer before the close).
  virtual absl::Status Receive(absl::string_view input, std::string& plain, std::string& wire) = 0;
  // Returns true once Seal may be called (the handshake is done).
  virtual bool open() const = 0;
  // Appends to `wire` the bytes that carry `plain`. Only once open().
  virtual absl::Status Seal(absl::string_view plain, std::string& wire) = 0;
  // Adds what the channel proved about the peer (the certified node) to `info`.
  virtual void Describe(PeerInfo& info) const = 0;
  // Returns a line for the debug log when the channel opens ("node 2, TLSv1.3 TLS_AES_…").
  virtual std::string Summary() const = 0;
  // Returns true while a failed socket write should not end the connection by itself: the read
  // side will report why (a TLS peer refusing our certificate closes after an alert, and our
  // first bytes may hit the closed socket before we read the alert). Nothing more is sent then.
  virtual bool DefersWriteErrors() const = 0;
};

// Makes the Channel of each connection. Thread-safe.
class ChannelFactory {
 public:
  ChannelFactory() = default;
  virtual ~ChannelFactory() = default;
  ChannelFactory(const ChannelFactory&) = delete;
  ChannelFactory& operator=(const ChannelFactory&) = delete;
  ChannelFactory(ChannelFactory&&) = delete;
  ChannelFactory& operator=(ChannelFactory&&) = delete;

  // Returns the channel of a connection just established; `incoming`: accepted by a listener
  // (the TLS server side).
  virtual std::unique_ptr<Channel> Make(bool incoming) = 0;
};

// Returns a transport over the connection core, named `name` ("TCP", "TLS": log lines and the
// I/O thread's name). `channels` null: the bytes go as they are. Events go to `system`, which
// must outlive Shutdown() (or the transport's destruction). kInvalidArgument when
// `options.io_pool` names no pool of `system` or `options.socket_buffer_bytes` is negative; a
// pool that cannot poll (a node run by the deterministic test runtime, or one already running
// another transport's I/O) gets the transport a thread of its own, with a warning.
absl::StatusOr<std::unique_ptr<Transport>> MakeAsioTransport(
    ActorSystem* system, TcpTransportOptions options, absl::string_view name,
    std::unique_ptr<ChannelFactory> channels);

}  // namespace troupe::interconnect::internal
