#include "common/wire/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace yard::wire {
namespace {

std::optional<std::string> commonNameOf(X509* cert) {
  if (!cert) return std::nullopt;
  X509_NAME* subject = X509_get_subject_name(cert);
  int at = subject ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
  if (at < 0) return std::string();
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  if (!data) return std::string();
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<size_t>(ASN1_STRING_length(data)));
}

// TLS 1.3 and nothing older: every Yard peer is Yard, so there is nothing to negotiate down to.
Result<std::shared_ptr<asio::ssl::context>> newContext(asio::ssl::context::method method) {
  using R = Result<std::shared_ptr<asio::ssl::context>>;
  auto ctx = std::make_shared<asio::ssl::context>(method);
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_3_VERSION) != 1)
    return R::fail("cannot require TLS 1.3 (OpenSSL too old?)");
  return R::ok(std::move(ctx));
}

std::string sslError(const std::string& what, const asio::error_code& ec) {
  return what + ": " + ec.message();
}

Result<bool> useIdentity(asio::ssl::context& ctx, const TlsIdentity& self) {
  asio::error_code ec;
  ctx.use_certificate_chain(asio::buffer(self.certPem), ec);
  if (ec) return Result<bool>::fail(sslError("cannot use the certificate", ec));
  ctx.use_private_key(asio::buffer(self.keyPem), asio::ssl::context::pem, ec);
  if (ec) return Result<bool>::fail(sslError("cannot use the private key", ec));
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    return Result<bool>::fail("the private key does not belong to the certificate");
  return Result<bool>::ok(true);
}

Result<bool> trust(asio::ssl::context& ctx, const std::string& caPem) {
  asio::error_code ec;
  ctx.add_certificate_authority(asio::buffer(caPem), ec);
  if (ec) return Result<bool>::fail(sslError("cannot use the CA certificate", ec));
  return Result<bool>::ok(true);
}

}  // namespace

Result<ServerTls> makeServerTls(const TlsIdentity& self, const std::string& caPem) {
  using R = Result<ServerTls>;
  auto ctx = newContext(asio::ssl::context::tls_server);
  if (!ctx) return R::fail(ctx.error());
  auto& c = *ctx.value();
  c.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::single_dh_use);
  if (auto ok = useIdentity(c, self); !ok) return R::fail(ok.error());
  // A client resuming a session (browsers do, for every further connection) is refused with
  // "internal error" by a server that verifies peers and has no session id context.
  static const unsigned char kSessionContext[] = "yard";
  SSL_CTX_set_session_id_context(c.native_handle(), kSessionContext, sizeof kSessionContext - 1);
  if (!caPem.empty()) {
    if (auto ok = trust(c, caPem); !ok) return R::fail(ok.error());
    // Asked for, verified when sent, not required (see the header).
    c.set_verify_mode(asio::ssl::verify_peer);
  }
  return R::ok(ServerTls{ctx.value()});
}

Result<ClientTls> makeClientTls(const std::string& caPem, const TlsIdentity* self, const std::string& peerName) {
  using R = Result<ClientTls>;
  if (caPem.empty()) return R::fail("no CA certificate to verify the peer with");
  auto ctx = newContext(asio::ssl::context::tls_client);
  if (!ctx) return R::fail(ctx.error());
  auto& c = *ctx.value();
  if (auto ok = trust(c, caPem); !ok) return R::fail(ok.error());
  if (self)
    if (auto ok = useIdentity(c, *self); !ok) return R::fail(ok.error());
  c.set_verify_mode(asio::ssl::verify_peer);
  return R::ok(ClientTls{ctx.value(), peerName, "", ""});
}

Result<ClientTls> makePinnedClientTls(const std::string& caPin, const TlsIdentity* self) {
  using R = Result<ClientTls>;
  auto ctx = newContext(asio::ssl::context::tls_client);
  if (!ctx) return R::fail(ctx.error());
  auto& c = *ctx.value();
  if (self)
    if (auto ok = useIdentity(c, *self); !ok) return R::fail(ok.error());
  c.set_verify_mode(asio::ssl::verify_none);  // the chain is checked against the pin afterwards
  return R::ok(ClientTls{ctx.value(), "", caPin, ""});
}

bool offerSession(SSL* ssl, const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return false;
  unsigned char buf[16384];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  const unsigned char* p = buf;
  SSL_SESSION* session = n > 0 && n < sizeof buf ? d2i_SSL_SESSION(nullptr, &p, static_cast<long>(n)) : nullptr;
  if (!session) return false;
  bool ok = SSL_SESSION_is_resumable(session) == 1 && SSL_set_session(ssl, session) == 1;
  SSL_SESSION_free(session);
  return ok;
}

void keepSession(SSL* ssl, const std::string& file) {
  // A resumed session's ticket stays good until its lifetime ends (the server then asks for a
  // full handshake, whose session is kept): not rewriting it saves a file creation per command.
  if (SSL_session_reused(ssl) == 1) return;
  SSL_SESSION* session = SSL_get1_session(ssl);
  if (!session) return;
  if (SSL_SESSION_is_resumable(session) == 1) {
    int n = i2d_SSL_SESSION(session, nullptr);
    std::string der(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    unsigned char* p = reinterpret_cast<unsigned char*>(der.data());
    if (n > 0 && i2d_SSL_SESSION(session, &p) == n) {
      std::string tmp = file + ".tmp" + std::to_string(::getpid());
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        bool whole = ::write(fd, der.data(), der.size()) == static_cast<ssize_t>(der.size());
        ::close(fd);
        if (!whole || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
      }
    }
  }
  SSL_SESSION_free(session);
}

std::optional<std::string> verifiedPeerName(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (!cert || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  return commonNameOf(cert);
}

std::string peerFingerprint(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (!cert) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert, EVP_sha256(), md, &n) != 1) return "";
  static const char* hex = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

void requirePeerName(asio::ssl::stream<asio::ip::tcp::socket>& stream, const std::string& name) {
  if (name.empty()) return;
  stream.set_verify_callback([name](bool preverified, asio::ssl::verify_context& vc) {
    if (!preverified) return false;
    X509_STORE_CTX* store = vc.native_handle();
    if (X509_STORE_CTX_get_error_depth(store) > 0) return true;
    auto cn = commonNameOf(X509_STORE_CTX_get_current_cert(store));
    if (cn && *cn == name) return true;
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return false;
  });
}

std::string handshakeError(SSL* ssl, const asio::error_code& ec, const std::string& who) {
  long verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (verify == X509_V_ERR_APPLICATION_VERIFICATION) {
    auto cn = ssl ? commonNameOf(SSL_get0_peer_certificate(ssl)) : std::nullopt;
    return who + " presented a certificate for \"" + cn.value_or("?") + "\", not the one expected";
  }
  if (verify != X509_V_OK)
    return who + "'s certificate did not verify: " + X509_verify_cert_error_string(verify) +
           " (is it from this cluster's CA? check --ca / the CA file)";
  std::string text = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    text = reason ? reason : buf;
  }
  return "TLS handshake with " + who + " failed: " + text;
}

}  // namespace yard::wire
