#pragma once
// The cluster PKI: keys, certificate requests, a cluster CA, certificates it issues, the
// master's files in its data directory, and the agent's side of CA pinning
// (docs/security.md, "The cluster PKI").
//
// Every function takes and returns PEM text, never throws, and answers bad input (garbage PEM,
// a forged request, a wrong pin) with an error that says what failed. OpenSSL 3 APIs only.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"

struct ssl_st;  // OpenSSL's SSL

namespace yard::tls {

// Role names carried in certificate subjects (CN). A client checks the peer's CN exactly.
inline constexpr const char* kMasterName = "yard-master";
// "node:" + node.
std::string nodeCommonName(const std::string& node);
// The inverse: the node of "node:X"; nullopt for anything else, "node:" (empty node) included.
std::optional<std::string> nodeFromCommonName(const std::string& cn);

// A new EC P-256 private key, PKCS#8 PEM.
Result<std::string> generateKey();
// A PEM certificate signing request for `commonName`, signed by `keyPem` (a private key PEM).
Result<std::string> makeCsr(const std::string& keyPem, const std::string& commonName);

struct Ca {
  std::string certPem, keyPem;
};
// A self-signed CA: CA:TRUE, keyCertSign, an EC P-256 key of its own.
Result<Ca> createCa(const std::string& commonName, std::chrono::hours validity);

// A name fit for a dnsSans entry: labels of 1 to 63 letters, digits and '-' (not at either end),
// 253 characters at most, optionally one leading "*." label.
bool isDnsName(const std::string& name);

struct Issue {
  std::string commonName{};
  std::vector<std::string> ipSans{}, dnsSans{};  // subjectAltName entries (IP literals; DNS names)
  bool serverAuth = true, clientAuth = true;     // extendedKeyUsage; at least one must be set
  std::chrono::hours validity{24 * 365};
};
// A certificate, signed by `ca`, for the public half of `keyPem` (a private key PEM).
Result<std::string> issueForKey(const Ca& ca, const std::string& keyPem, const Issue& what);
// A certificate for the CSR's public key. The CSR's self-signature is verified (a forged CSR
// is refused) and its subject and extensions are IGNORED: the CA decides names from `what`.
// Keys weaker than 112 bits of security (RSA < 2048) are refused.
Result<std::string> issueFromCsr(const Ca& ca, const std::string& csrPem, const Issue& what);

// "sha256:" + 64 lowercase hex of the certificate's DER (what `openssl x509 -fingerprint
// -sha256` prints, without its colons and in lower case).
Result<std::string> fingerprint(const std::string& certPem);
// `text` has that form ("sha256:" and 64 hex digits of either case): what a --ca-fingerprint
// flag must be before anything is dialled with it.
bool isFingerprint(std::string_view text);
// The subject's CN.
Result<std::string> commonName(const std::string& certPem);
// The certificate verifies against `caPem` (signature, validity period now). Returns true or
// an error saying why not (never false), so `if (!r || !r.value())` and `if (!r)` both work.
Result<bool> verifyIssuedBy(const std::string& certPem, const std::string& caPem);
// `keyPem` is the private half of the certificate's public key.
Result<bool> keyMatchesCert(const std::string& certPem, const std::string& keyPem);

// What a certificate says, for renewal decisions and messages.
struct CertInfo {
  std::string commonName;
  std::vector<std::string> ipSans, dnsSans;  // IPs as inet_ntop writes them
  std::chrono::system_clock::time_point notBefore, notAfter;
  bool isCa = false;
};
Result<CertInfo> inspect(const std::string& certPem);

// Files. Secret files are written 0600, public files 0644, both atomically (a temp file in the
// same directory, fsync, rename, fsync of the directory).
Result<bool> writeSecretFile(const std::string& path, const std::string& data);
Result<bool> writePublicFile(const std::string& path, const std::string& data);
Result<std::string> readFile(const std::string& path);

// The master's PKI in its data directory, created on first start, reused after:
//   <dir>/ca.pem (0644), <dir>/ca.key (0600), <dir>/master.pem (0644), <dir>/master.key (0600).
// The CA (CN "yard-cluster-ca") is created once, valid 10 years; an expired CA, a ca.pem
// without ca.key (or the reverse), or a key that does not match is an error, never silently
// replaced (agents pin the CA). The master certificate (CN kMasterName, server+client usage,
// 1 year) is issued when missing and re-issued whenever its SANs differ from those asked,
// it does not verify against the CA, its key does not match master.key, or it expires within
// 30 days; otherwise it is kept. Its SANs are `ipSans` and `dnsSans` plus 127.0.0.1, ::1,
// localhost and the host name; wildcard addresses (0.0.0.0, ::) are dropped. master.key is
// kept across re-issues. A ca.key or master.key with mode broader than 0600 is an error naming
// the path and the mode.
struct MasterPki {
  Ca ca;
  std::string certPem, keyPem;
  std::string caFingerprint;  // fingerprint(ca.certPem), for the agents' --ca-fingerprint
};
Result<MasterPki> ensureMasterPki(const std::string& dir, const std::vector<std::string>& ipSans,
                                  const std::vector<std::string>& dnsSans);

// Agent side of kubeadm-style pinning: given the peer's certificate chain as PEMs (leaf first,
// as SSL_get_peer_cert_chain returns it on a client), finds the certificate whose fingerprint
// equals `pin` ("sha256:..."), checks that it is a CA and that the leaf verifies against it and
// has CN kMasterName; returns that CA's PEM. A miss says "the master's CA fingerprint is
// sha256:X, expected sha256:Y". REQUIRES of the master: it sends its CA in the chain.
Result<std::string> verifyPinnedChain(const std::vector<std::string>& chainPems, const std::string& pin);

// The peer's certificate chain as PEMs, leaf first, on either side of a connection (a server's
// SSL_get_peer_cert_chain lacks the client's leaf; this adds it). An error if the peer sent none.
Result<std::vector<std::string>> chainPems(ssl_st* ssl);

}  // namespace yard::tls
