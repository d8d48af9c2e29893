// SPDX-License-Identifier: Apache-2.0
//
// The OpenSSL side of the TLS transport (tls_transport.h): building the one SSL_CTX a transport
// uses for both roles from its CA, certificate and key files; reading the node id a certificate
// names; and turning a failed TLS operation into the reason text of EvConnectionDown.
//
// Thread-safety: MakeTlsContext and CertificateNode are thread-safe. TlsReason reads the SSL
// object's verify result: call it on the thread that drives that SSL object.
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "asio/ssl/context.hpp"

#include "actors/actor_id.h"
#include "interconnect/tls_transport.h"

namespace troupe::interconnect::internal {

// The reason given when a verified certificate names no node.
inline constexpr absl::string_view kNoNodeReason =
    "the peer's certificate names no Troupe node (expected DNS:node<N> or CN=node<N>)";

// Returns a context for both client and server connections: TLS 1.3 only, `ca_file` as the only
// trust anchor, this node's certificate chain and key, peer verification required both ways (with
// a certificate that names a node), no session tickets. kInvalidArgument naming the option and
// file (see MakeTlsTransport).
absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(
    const TlsTransportOptions& options);

// Returns the node id `cert` names (see tls_transport.h), nullopt when it names none.
std::optional<NodeId> CertificateNode(X509* cert);

// Returns true when `error` comes from OpenSSL (a failed handshake, an alert, a bad record), as
// opposed to the socket or the peer closing.
bool IsTlsError(const std::error_code& error);

// Returns OpenSSL's reason for `error` on `ssl` without the library name ("tlsv1 alert unknown
// ca"), followed for a failed certificate verification by the verifier's reason ("certificate
// verify failed: certificate has expired"), or kNoNodeReason.
std::string TlsReason(const std::error_code& error, const SSL* ssl);

}  // namespace troupe::interconnect::internal
