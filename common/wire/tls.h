#pragma once
// TLS for every frame connection (docs/security.md, "Transport"): TLS 1.3 only, certificates
// from the cluster CA (common/tls/pki.h). Who a peer is comes from its certificate's common
// name, which the CA alone decides: "yard-master" for the master, "node:NAME" for an agent.
// A client checks that name exactly (as Nomad checks "server.<region>.nomad"), not the address
// it dialled: the CA is private to the cluster, so a name it signed is an identity.

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <memory>
#include <optional>
#include <string>

#include "common/util/result.h"

namespace yard::wire {

// A certificate (PEM, leaf first, then any chain) and its private key (PEM).
struct TlsIdentity {
  std::string certPem, keyPem;
};

// What a listener presents and whom it accepts.
struct ServerTls {
  std::shared_ptr<asio::ssl::context> context;
};

// What an outgoing connection trusts and presents.
struct ClientTls {
  std::shared_ptr<asio::ssl::context> context;
  // The common name the server's certificate must carry; empty = any name the CA signed.
  std::string peerName;
  // Instead of a CA: the SHA-256 fingerprint ("sha256:...") of the CA the server's chain must
  // contain (an agent's first contact, as kubeadm pins). FrameClient only.
  std::string caPin;
  // FrameClient only: a file that keeps a TLS session ticket between processes (yardctl's,
  // under ~/.cache/yard/, mode 0600). A connection resumes the session it holds, skipping the
  // certificate signature and its verification, and stores the ticket the server sends. The
  // caller names one file per (server address, CA, peer name): a session is only ever
  // offered to the server whose verified handshake made it. Empty: no resumption.
  std::string sessionFile;
};

// Tries `file`'s session on `ssl` (before the handshake); false when there is none usable.
bool offerSession(SSL* ssl, const std::string& file);
// Stores `ssl`'s session in `file` (0600, replaced atomically) when it can be resumed and was
// not itself resumed from it.
void keepSession(SSL* ssl, const std::string& file);

// TLS 1.3 only. `caPem` non-empty: a client certificate is asked for and, when the client
// sends one, verified against it (not required: the client API takes tokens, and an agent
// without a node certificate may still ask to join). Errors name what was wrong.
Result<ServerTls> makeServerTls(const TlsIdentity& self, const std::string& caPem);
// TLS 1.3 only; verifies the server against `caPem`, presents `self` when given.
Result<ClientTls> makeClientTls(const std::string& caPem, const TlsIdentity* self, const std::string& peerName);
// Verifies nothing during the handshake; FrameClient checks the chain against `caPin` after it.
Result<ClientTls> makePinnedClientTls(const std::string& caPin, const TlsIdentity* self);

// The common name of the peer's certificate when the handshake verified it against the CA;
// nullopt when the peer sent none (or it did not verify, which fails the handshake).
std::optional<std::string> verifiedPeerName(SSL* ssl);
// "sha256:" + hex of the DER of the peer's certificate; "" when it sent none.
std::string peerFingerprint(SSL* ssl);

// Why a handshake failed, for people: the verification error when there was one ("the
// certificate is signed by an unknown CA ..."), else the TLS error.
std::string handshakeError(SSL* ssl, const asio::error_code& ec, const std::string& who);

// Sets up `stream` to check the peer's name during the handshake (depth 0).
void requirePeerName(asio::ssl::stream<asio::ip::tcp::socket>& stream, const std::string& name);

}  // namespace yard::wire
