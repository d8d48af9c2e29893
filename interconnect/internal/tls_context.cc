// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/tls_context.h"

#include <openssl/asn1.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "asio/ssl/error.hpp"

#include "actors/log.h"

namespace troupe::interconnect::internal {
namespace {

// Returns the node id of a name "node<N>" (any case), nullopt for anything else. Leading zeros
// are refused so that one node has one spelling.
std::optional<NodeId> ParseNodeName(absl::string_view name) {
  constexpr absl::string_view kPrefix = "node";
  if (name.size() <= kPrefix.size() || !absl::StartsWithIgnoreCase(name, kPrefix)) {
    return std::nullopt;
  }
  const absl::string_view digits = name.substr(kPrefix.size());
  if (digits.size() > 7 || digits.front() == '0') {
    return std::nullopt;
  }
  NodeId node = 0;
  for (const char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
    node = node * 10 + static_cast<NodeId>(c - '0');
  }
  if (node > ActorId::kMaxNode) {
    return std::nullopt;
  }
  return node;
}

absl::string_view View(const ASN1_STRING* text) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
          static_cast<size_t>(ASN1_STRING_length(text))};
}

// OpenSSL's verify callback: after the chain verified, the peer's own certificate (depth 0) must
// name a node too. Failing here, rather than after the handshake, makes OpenSSL send the peer an
// alert, so both ends learn the connection was refused.
int VerifyNamesNode(int preverified, X509_STORE_CTX* store) {
  if (preverified != 1 || X509_STORE_CTX_get_error_depth(store) != 0) {
    return preverified;
  }
  if (!CertificateNode(X509_STORE_CTX_get_current_cert(store)).has_value()) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  return 1;
}

// Returns the reason of the oldest error in OpenSSL's queue and clears the queue.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

// Returns OK when `path` is a readable regular file, else kInvalidArgument
// "<option>: cannot read <path>: <why>".
absl::Status CheckReadable(absl::string_view option, const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": required for TLS, got no path"));
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": cannot read ", path, ": is a directory"));
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": cannot read ", path, ": ",
                     std::error_code(errno, std::system_category()).message()));
  }
  std::fclose(file);
  return absl::OkStatus();
}

absl::Status CannotLoad(absl::string_view option, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat(option, ": cannot load ", path, ": ", TakeOpenSslError()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(
    const TlsTransportOptions& options) {
  for (const auto& [option, path] :
       {std::pair<absl::string_view, const std::string&>{"ca_file", options.ca_file},
        {"cert_file", options.cert_file},
        {"key_file", options.key_file}}) {
    if (absl::Status readable = CheckReadable(option, path); !readable.ok()) {
      return readable;
    }
  }
  ERR_clear_error();
  SSL_CTX* native = SSL_CTX_new(TLS_method());
  if (native == nullptr) {
    return absl::InternalError(absl::StrCat("SSL_CTX_new: ", TakeOpenSslError()));
  }
  // Owns `native` from here on.
  auto context = std::make_unique<asio::ssl::context>(native);
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  // Connections are long-lived and never resumed: no tickets to issue or store.
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  // Send cert_file's chain as it is: without this OpenSSL completes it from the trust store and
  // sends the CA's own certificate too, which the peer has (or must not take from us).
  SSL_CTX_set_mode(native, SSL_MODE_NO_AUTO_CHAIN);
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, &VerifyNamesNode);
  if (SSL_CTX_load_verify_locations(native, options.ca_file.c_str(), nullptr) != 1) {
    return CannotLoad("ca_file", options.ca_file);
  }
  if (SSL_CTX_use_certificate_chain_file(native, options.cert_file.c_str()) != 1) {
    return CannotLoad("cert_file", options.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(native, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(native) != 1) {
    const int reason = ERR_GET_REASON(ERR_peek_error());
    if (reason != X509_R_KEY_VALUES_MISMATCH && reason != SSL_R_PRIVATE_KEY_MISMATCH) {
      return CannotLoad("key_file", options.key_file);
    }
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "key_file: ", options.key_file, " is not the key of cert_file ", options.cert_file));
  }
  X509* own = SSL_CTX_get0_certificate(native);
  if (options.node != 0) {
    const std::optional<NodeId> named = CertificateNode(own);
    if (!named.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cert_file: ", options.cert_file,
                       " names no Troupe node (expected DNS:node<N> or CN=node<N>)"));
    }
    if (*named != options.node) {
      return absl::InvalidArgumentError(absl::StrCat("cert_file: ", options.cert_file,
                                                     " names node ", *named, ", not this node (",
                                                     options.node, ")"));
    }
  }
  if (X509_cmp_current_time(X509_get0_notAfter(own)) < 0) {
    TROUPE_LOG(kWarn, kInterconnect)
        << "cert_file " << options.cert_file << " has expired: every peer will refuse this node";
  }
  return context;
}

std::optional<NodeId> CertificateNode(X509* cert) {
  if (cert == nullptr) {
    return std::nullopt;
  }
  std::optional<NodeId> node;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, /*crit=*/nullptr, /*idx=*/nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && !node.has_value(); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS) {
        node = ParseNodeName(View(name->d.dNSName));
      }
    }
    GENERAL_NAMES_free(names);
  }
  if (node.has_value()) {
    return node;
  }
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) {
    return std::nullopt;
  }
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (length >= 0) {
    node = ParseNodeName({reinterpret_cast<const char*>(utf8), static_cast<size_t>(length)});
  }
  OPENSSL_free(utf8);
  return node;
}

bool IsTlsError(const std::error_code& error) {
  return error.category() == asio::error::get_ssl_category();
}

std::string TlsReason(const std::error_code& error, const SSL* ssl) {
  if (error == asio::ssl::error::stream_truncated || error == asio::error::eof) {
    return "connection closed by the peer";
  }
  if (!IsTlsError(error)) {
    return error.message();
  }
  // Asio keeps ERR_get_error()'s 32-bit code as an int: take the bits back unsigned.
  const auto code = static_cast<unsigned long>(static_cast<unsigned int>(error.value()));
  const char* reason = ERR_reason_error_string(code);
  std::string text = reason != nullptr ? reason : error.message();
  if (ssl != nullptr && !ERR_SYSTEM_ERROR(code) && ERR_GET_LIB(code) == ERR_LIB_SSL &&
      ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    const long result = SSL_get_verify_result(ssl);
    if (result == X509_V_ERR_APPLICATION_VERIFICATION) {
      return std::string{kNoNodeReason};
    }
    if (result != X509_V_OK) {
      absl::StrAppend(&text, ": ", X509_verify_cert_error_string(result));
    }
  }
  return text;
}

}  // namespace troupe::interconnect::internal
