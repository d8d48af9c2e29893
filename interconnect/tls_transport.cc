// SPDX-License-Identifier: Apache-2.0
#include "interconnect/tls_transport.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "asio/ssl/context.hpp"
#include "asio/ssl/error.hpp"

#include "interconnect/internal/asio_connections.h"
#include "interconnect/internal/tls_context.h"

namespace troupe::interconnect {
namespace {

using internal::CertificateNode;
using internal::Channel;
using internal::ChannelFactory;
using internal::kNoNodeReason;
using internal::MakeAsioTransport;
using internal::MakeTlsContext;
using internal::TlsReason;

// The largest plaintext of one TLS record: what one SSL_read_ex can return.
constexpr size_t kRecordSize = size_t{16} * 1024;

// One connection's TLS: an SSL object whose input and output are memory BIOs, so OpenSSL never
// touches the socket. The connection core moves the ciphertext and calls every method under the
// connection's mutex (asio_connections.h): the SSL object is used by one thread at a time, each
// use ordered after the previous one by that mutex. This is what allows a Write to encrypt and
// send on the caller's thread while the I/O thread owns the read side: with the SSL object
// reading from the socket itself (asio::ssl::stream), a read would be in progress inside OpenSSL
// whenever the connection is idle, and no other thread could write through it.
class TlsChannel final : public Channel {
 public:
  TlsChannel(SSL_CTX* context, bool incoming) : ssl_(SSL_new(context)), incoming_(incoming) {
    if (ssl_ != nullptr) {
      in_ = BIO_new(BIO_s_mem());
      out_ = BIO_new(BIO_s_mem());
      if (in_ != nullptr && out_ != nullptr) {
        // An empty input BIO asks for more rather than reporting the end of the stream.
        BIO_set_mem_eof_return(in_, -1);
        SSL_set_bio(ssl_, in_, out_);  // ssl_ owns both from here on
      }
    }
  }
  ~TlsChannel() override {
    if (ssl_ != nullptr && SSL_get_rbio(ssl_) == nullptr) {
      BIO_free(in_);
      BIO_free(out_);
    }
    SSL_free(ssl_);
  }
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;
  TlsChannel(TlsChannel&&) = delete;
  TlsChannel& operator=(TlsChannel&&) = delete;

  absl::Status Start(std::string& wire) override {
    if (ssl_ == nullptr || SSL_get_rbio(ssl_) == nullptr) {
      return absl::InternalError("TLS: cannot allocate the connection's SSL object");
    }
    if (incoming_) {
      SSL_set_accept_state(ssl_);
    } else {
      SSL_set_connect_state(ssl_);
    }
    return Handshake(wire);
  }

  absl::Status Receive(absl::string_view input, std::string& plain, std::string& wire) override {
    size_t buffered = 0;
    if (BIO_write_ex(in_, input.data(), input.size(), &buffered) != 1 || buffered != input.size()) {
      return absl::InternalError("TLS: cannot buffer the bytes read");
    }
    if (!secured_) {
      if (absl::Status step = Handshake(wire); !step.ok() || !secured_) {
        return step;
      }
    }
    absl::Status status = absl::OkStatus();
    for (;;) {
      // Plaintext is never longer than the ciphertext it comes from: size the read by what is
      // buffered, so a small record does not cost a record-sized buffer.
      const size_t available = BIO_ctrl_pending(in_) + static_cast<size_t>(SSL_pending(ssl_));
      if (available == 0) {
        break;
      }
      const size_t room = std::min(available, kRecordSize);
      ERR_clear_error();
      const size_t before = plain.size();
      plain.resize(before + room);
      size_t got = 0;
      const int result = SSL_read_ex(ssl_, plain.data() + before, room, &got);
      plain.resize(before + got);
      if (result == 1) {
        received_ = true;
        continue;
      }
      const int error = SSL_get_error(ssl_, result);
      if (error == SSL_ERROR_ZERO_RETURN) {  // the peer's close_notify
        status = absl::UnavailableError("connection closed by the peer");
      } else if (error != SSL_ERROR_WANT_READ) {
        status = Failure("read", error);
      }
      break;
    }
    Drain(wire);  // a KeyUpdate's answer, an alert
    return status;
  }

  bool open() const override { return secured_; }

  absl::Status Seal(absl::string_view plain, std::string& wire) override {
    ERR_clear_error();
    size_t written = 0;
    if (SSL_write_ex(ssl_, plain.data(), plain.size(), &written) != 1) {
      absl::Status failed = Failure("write", SSL_get_error(ssl_, 0));
      Drain(wire);
      return failed;
    }
    Drain(wire);
    return absl::OkStatus();
  }

  void Describe(PeerInfo& info) const override { info.certified_node = node_; }

  std::string Summary() const override {
    return absl::StrCat("node ", node_.value_or(0), ", ", SSL_get_version(ssl_), " ",
                        SSL_get_cipher_name(ssl_));
  }

  bool DefersWriteErrors() const override { return !received_; }

 private:
  // Runs the handshake as far as the bytes received allow; sets secured_ once it is done and the
  // peer's certificate names a node.
  absl::Status Handshake(std::string& wire) {
    ERR_clear_error();
    const int result = SSL_do_handshake(ssl_);
    const int error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, result);
    absl::Status status = absl::OkStatus();
    if (result == 1) {
      // The verify callback already refused a certificate that names no node; this reads it.
      node_ = CertificateNode(SSL_get0_peer_certificate(ssl_));
      if (node_.has_value()) {
        secured_ = true;
      } else {
        status = absl::UnauthenticatedError(absl::StrCat("TLS: ", kNoNodeReason));
      }
    } else if (error != SSL_ERROR_WANT_READ) {
      status = Failure("TLS handshake", error);
    }
    Drain(wire);
    return status;
  }

  // The status of a failed SSL call whose SSL_get_error is `error`: kUnauthenticated for a TLS
  // error before the peer sent application bytes (in TLS 1.3 its verdict on our certificate
  // arrives as an alert on the first read), kUnavailable "<what>: <reason>" otherwise.
  absl::Status Failure(absl::string_view what, int error) {
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (error != SSL_ERROR_SSL || code == 0) {
      return absl::UnavailableError(absl::StrCat(what, ": OpenSSL error ", error));
    }
    // The error_code Asio would give for it, so TlsReason reads it as for any TLS error.
    const std::error_code tls_error(static_cast<int>(code), asio::error::get_ssl_category());
    const std::string reason = TlsReason(tls_error, ssl_);
    if (!received_) {
      return absl::UnauthenticatedError(absl::StrCat("TLS: ", reason));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", reason));
  }

  // Moves what OpenSSL wrote for the peer to the end of `wire`.
  void Drain(std::string& wire) {
    // BIO_read rather than BIO_get_mem_data and BIO_reset: a reset clears the BIO's whole buffer.
    const size_t size = BIO_ctrl_pending(out_);
    if (size == 0) {
      return;
    }
    const size_t before = wire.size();
    wire.resize(before + size);
    size_t got = 0;
    if (BIO_read_ex(out_, wire.data() + before, size, &got) != 1) {
      got = 0;
    }
    wire.resize(before + got);
  }

  SSL* const ssl_;
  BIO* in_ = nullptr;
  BIO* out_ = nullptr;
  const bool incoming_;
  // The handshake is done and the peer's certificate names node_.
  bool secured_ = false;
  std::optional<NodeId> node_;
  // Application bytes have arrived: the peer accepted our certificate.
  bool received_ = false;
};

class TlsChannels final : public ChannelFactory {
 public:
  explicit TlsChannels(std::unique_ptr<asio::ssl::context> context)
      : context_(std::move(context)) {}

  std::unique_ptr<Channel> Make(bool incoming) override {
    return std::make_unique<TlsChannel>(context_->native_handle(), incoming);
  }

 private:
  const std::unique_ptr<asio::ssl::context> context_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeTlsTransport(ActorSystem* system,
                                                            TlsTransportOptions options) {
  absl::StatusOr<std::unique_ptr<asio::ssl::context>> context = MakeTlsContext(options);
  if (!context.ok()) {
    return context.status();
  }
  return MakeAsioTransport(system, std::move(options.tcp), "TLS",
                           std::make_unique<TlsChannels>(std::move(*context)));
}

}  // namespace troupe::interconnect
