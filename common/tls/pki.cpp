#include "common/tls/pki.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <memory>
#include <utility>

namespace yard::tls {

namespace {

// The OpenSSL error queue as text (and emptied).
std::string opensslError() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    char buf[256];
    if (!reason) {
      ERR_error_string_n(e, buf, sizeof buf);
      reason = buf;
    }
    if (out.find(reason) != std::string::npos) continue;
    if (!out.empty()) out += "; ";
    out += reason;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

template <auto Free>
struct Freer {
  template <typename T>
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Freer<BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509_free>>;
using Req = std::unique_ptr<X509_REQ, Freer<X509_REQ_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Freer<GENERAL_NAMES_free>>;
using Store = std::unique_ptr<X509_STORE, Freer<X509_STORE_free>>;
using StoreCtx = std::unique_ptr<X509_STORE_CTX, Freer<X509_STORE_CTX_free>>;
using Bignum = std::unique_ptr<BIGNUM, Freer<BN_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Freer<X509_EXTENSION_free>>;

constexpr size_t kMaxPemBytes = 1 << 20;
constexpr long kMaxValidityHours = 24L * 365 * 100;
constexpr const char* kNodePrefix = "node:";

template <typename T>
Result<T> sslFail(const std::string& what) { return Result<T>::fail(what + ": " + opensslError()); }

// Encrypted keys are refused instead of OpenSSL prompting on the terminal.
int noPassword(char*, int, int, void*) { return -1; }

Bio readBio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

Result<std::string> bioText(BIO* bio, const char* what) {
  BUF_MEM* mem = nullptr;
  if (BIO_get_mem_ptr(bio, &mem) != 1 || !mem) return sslFail<std::string>(std::string("cannot write ") + what);
  return Result<std::string>::ok(std::string(mem->data, mem->length));
}

template <typename T, typename Read>
Result<T> parsePem(const std::string& pem, const std::string& what, Read read) {
  ERR_clear_error();
  if (pem.empty()) return Result<T>::fail("cannot read the " + what + ": it is empty");
  if (pem.size() > kMaxPemBytes)
    return Result<T>::fail("cannot read the " + what + ": " + std::to_string(pem.size()) +
                           " bytes, more than the 1 MiB limit");
  Bio bio = readBio(pem);
  T out(bio ? read(bio.get()) : nullptr);
  if (!out) return sslFail<T>("cannot read the " + what + " (PEM)");
  return Result<T>::ok(std::move(out));
}

Result<Key> parseKey(const std::string& pem, const std::string& what) {
  return parsePem<Key>(pem, what, [](BIO* b) { return PEM_read_bio_PrivateKey(b, nullptr, noPassword, nullptr); });
}
Result<Cert> parseCert(const std::string& pem, const std::string& what) {
  return parsePem<Cert>(pem, what, [](BIO* b) { return PEM_read_bio_X509(b, nullptr, noPassword, nullptr); });
}
Result<Req> parseReq(const std::string& pem) {
  return parsePem<Req>(pem, "certificate signing request",
                       [](BIO* b) { return PEM_read_bio_X509_REQ(b, nullptr, noPassword, nullptr); });
}

Result<std::string> keyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return sslFail<std::string>("cannot write the private key as PEM");
  return bioText(bio.get(), "the private key");
}
Result<std::string> certPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return sslFail<std::string>("cannot write the certificate as PEM");
  return bioText(bio.get(), "the certificate");
}

Result<Key> newKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return sslFail<Key>("cannot generate an EC P-256 key");
  return Result<Key>::ok(std::move(key));
}

// Ed25519/Ed448 sign without a separate digest; everything else with SHA-256.
const EVP_MD* digestFor(EVP_PKEY* key) {
  int id = EVP_PKEY_get_id(key);
  return id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 ? nullptr : EVP_sha256();
}

std::optional<std::string> checkCommonName(const std::string& cn) {
  bool ok = !cn.empty() && cn.size() <= 64;
  for (unsigned char c : cn) ok = ok && c >= 0x20 && c != 0x7f;
  if (ok) return std::nullopt;
  return "common name \"" + cn + "\": must be 1 to 64 characters without control characters";
}

bool setCommonName(X509_NAME* name, const std::string& cn) {
  return X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.data()),
                                    static_cast<int>(cn.size()), -1, 0) == 1;
}

std::string cnOf(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  int i = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
  if (i < 0) return "";
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
  if (len < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return out;
}

bool isCa(X509* cert) { return (X509_get_extension_flags(cert) & EXFLAG_CA) != 0; }

std::string fingerprintOf(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(cert, EVP_sha256(), md, &len) != 1) return "";
  std::string out = "sha256:";
  char hex[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", md[i]);
    out += hex;
  }
  return out;
}

std::chrono::system_clock::time_point timeOf(const ASN1_TIME* t) {
  struct tm tm = {};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Result<bool> verifyAgainst(X509* cert, X509* ca) {
  ERR_clear_error();
  Store store(X509_STORE_new());
  StoreCtx ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1)
    return sslFail<bool>("cannot set up certificate verification");
  if (X509_verify_cert(ctx.get()) == 1) return Result<bool>::ok(true);
  return Result<bool>::fail("the certificate \"" + cnOf(cert) + "\" does not verify against the CA \"" + cnOf(ca) +
                            "\": " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
}

// What an issuer signs with: its certificate (nullptr for a self-signed one) and its key.
struct Signer {
  X509* cert;
  EVP_PKEY* key;
};

struct Extensions {
  std::vector<std::pair<int, std::string>> conf;  // nid, OpenSSL config value
  GENERAL_NAMES* sans = nullptr;                  // borrowed; may be null
};

Result<Cert> buildCert(const std::string& cn, EVP_PKEY* pub, const Signer& signer, std::chrono::hours validity,
                       const Extensions& exts) {
  using R = Result<Cert>;
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) return sslFail<Cert>("cannot create a certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return sslFail<Cert>("cannot draw a random serial number");
  serial[0] = static_cast<unsigned char>((serial[0] & 0x7f) | 0x01);  // positive, 16 bytes long
  Bignum bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())))
    return sslFail<Cert>("cannot set the serial number");
  X509* issuer = signer.cert ? signer.cert : cert.get();
  // Five minutes back, for clocks a little behind the CA's.
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), validity.count() * 3600L))
    return sslFail<Cert>("cannot set the validity period");
  if (signer.cert && ASN1_TIME_compare(X509_get0_notAfter(cert.get()), X509_get0_notAfter(signer.cert)) > 0 &&
      X509_set1_notAfter(cert.get(), X509_get0_notAfter(signer.cert)) != 1)
    return sslFail<Cert>("cannot cap the validity period at the CA's");
  if (!setCommonName(X509_get_subject_name(cert.get()), cn) ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer)) != 1 || X509_set_pubkey(cert.get(), pub) != 1)
    return sslFail<Cert>("cannot set the certificate's names and key");
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : exts.conf) {
    Extension ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str()));
    if (!ext || X509_add_ext(cert.get(), ext.get(), -1) != 1)
      return sslFail<Cert>(std::string("cannot add the extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  if (exts.sans && sk_GENERAL_NAME_num(exts.sans) > 0 &&
      X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, exts.sans, 0, X509V3_ADD_DEFAULT) != 1)
    return sslFail<Cert>("cannot add the subjectAltName extension");
  if (X509_sign(cert.get(), signer.key, digestFor(signer.key)) <= 0) return sslFail<Cert>("cannot sign the certificate");
  return R::ok(std::move(cert));
}

}  // namespace

bool isDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = name.rfind("*.", 0) == 0 ? 2 : 0;  // one leading wildcard label
  size_t label = 0;
  for (size_t i = start; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (label == 0 || label > 63 || name[i - 1] == '-' || name[i - label] == '-') return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(name[i])) || name[i] == '-') {
      ++label;
    } else {
      return false;
    }
  }
  return true;
}

namespace {

Result<Names> sansFor(const Issue& what) {
  using R = Result<Names>;
  Names names(sk_GENERAL_NAME_new_null());
  if (!names) return sslFail<Names>("cannot allocate subjectAltName");
  auto push = [&](int type, ASN1_STRING* value) {
    GENERAL_NAME* name = GENERAL_NAME_new();
    if (!name) return ASN1_STRING_free(value), false;
    GENERAL_NAME_set0_value(name, type, value);
    if (sk_GENERAL_NAME_push(names.get(), name) <= 0) return GENERAL_NAME_free(name), false;
    return true;
  };
  for (const auto& ip : what.ipSans) {
    unsigned char bytes[16];
    int len = inet_pton(AF_INET, ip.c_str(), bytes) == 1 ? 4 : inet_pton(AF_INET6, ip.c_str(), bytes) == 1 ? 16 : 0;
    if (len == 0) return R::fail("ipSans: \"" + ip + "\" is not an IPv4 or IPv6 address");
    ASN1_OCTET_STRING* value = ASN1_OCTET_STRING_new();
    if (!value || ASN1_OCTET_STRING_set(value, bytes, len) != 1 || !push(GEN_IPADD, value))
      return sslFail<Names>("cannot add the IP address " + ip);
  }
  for (const auto& dns : what.dnsSans) {
    if (!isDnsName(dns))
      return R::fail("dnsSans: \"" + dns + "\" is not a DNS name (labels of 1 to 63 letters, digits and '-')");
    ASN1_IA5STRING* value = ASN1_IA5STRING_new();
    if (!value || ASN1_STRING_set(value, dns.data(), static_cast<int>(dns.size())) != 1 || !push(GEN_DNS, value))
      return sslFail<Names>("cannot add the DNS name " + dns);
  }
  return R::ok(std::move(names));
}

std::optional<std::string> checkValidity(std::chrono::hours validity) {
  if (validity.count() >= 1 && validity.count() <= kMaxValidityHours) return std::nullopt;
  return "validity: must be between 1 hour and 100 years, got " + std::to_string(validity.count()) + "h";
}

// Signs a leaf certificate for `pub` with `ca`, after checking `what` and the CA itself.
Result<std::string> issueFor(const Ca& ca, EVP_PKEY* pub, const Issue& what) {
  using R = Result<std::string>;
  if (auto bad = checkCommonName(what.commonName)) return R::fail(*bad);
  if (auto bad = checkValidity(what.validity)) return R::fail(*bad);
  if (!what.serverAuth && !what.clientAuth) return R::fail("extendedKeyUsage: neither serverAuth nor clientAuth asked");
  auto caCert = parseCert(ca.certPem, "CA certificate");
  if (!caCert) return R::fail(caCert.error());
  auto caKey = parseKey(ca.keyPem, "CA private key");
  if (!caKey) return R::fail(caKey.error());
  if (!isCa(caCert.value().get()))
    return R::fail("the CA certificate \"" + cnOf(caCert.value().get()) + "\" is not a CA (no basicConstraints CA:TRUE)");
  if (X509_check_private_key(caCert.value().get(), caKey.value().get()) != 1) {
    ERR_clear_error();
    return R::fail("the CA private key does not match the CA certificate \"" + cnOf(caCert.value().get()) + "\"");
  }
  auto sans = sansFor(what);
  if (!sans) return R::fail(sans.error());
  std::string usage = std::string(what.serverAuth ? "serverAuth" : "") +
                      (what.serverAuth && what.clientAuth ? "," : "") + (what.clientAuth ? "clientAuth" : "");
  Extensions exts{{{NID_basic_constraints, "critical,CA:FALSE"},
                   {NID_key_usage, "critical,digitalSignature"},
                   {NID_ext_key_usage, usage},
                   {NID_subject_key_identifier, "hash"},
                   {NID_authority_key_identifier, "keyid:always"}},
                  sans.value().get()};
  auto cert = buildCert(what.commonName, pub, {caCert.value().get(), caKey.value().get()}, what.validity, exts);
  if (!cert) return R::fail("issuing \"" + what.commonName + "\": " + cert.error());
  return certPem(cert.value().get());
}

}  // namespace

std::string nodeCommonName(const std::string& node) { return kNodePrefix + node; }

std::optional<std::string> nodeFromCommonName(const std::string& cn) {
  std::string prefix = kNodePrefix;
  if (cn.size() <= prefix.size() || cn.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return cn.substr(prefix.size());
}

Result<std::string> generateKey() {
  ERR_clear_error();
  auto key = newKey();
  if (!key) return Result<std::string>::fail(key.error());
  return keyPem(key.value().get());
}

Result<std::string> makeCsr(const std::string& keyPemText, const std::string& cn) {
  using R = Result<std::string>;
  if (auto bad = checkCommonName(cn)) return R::fail(*bad);
  auto key = parseKey(keyPemText, "private key");
  if (!key) return R::fail(key.error());
  Req req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1 ||
      !setCommonName(X509_REQ_get_subject_name(req.get()), cn) || X509_REQ_set_pubkey(req.get(), key.value().get()) != 1 ||
      X509_REQ_sign(req.get(), key.value().get(), digestFor(key.value().get())) <= 0)
    return sslFail<std::string>("cannot make a certificate signing request for \"" + cn + "\"");
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509_REQ(bio.get(), req.get()) != 1)
    return sslFail<std::string>("cannot write the certificate signing request as PEM");
  return bioText(bio.get(), "the certificate signing request");
}

Result<Ca> createCa(const std::string& cn, std::chrono::hours validity) {
  using R = Result<Ca>;
  ERR_clear_error();
  if (auto bad = checkCommonName(cn)) return R::fail(*bad);
  if (auto bad = checkValidity(validity)) return R::fail(*bad);
  auto key = newKey();
  if (!key) return R::fail(key.error());
  Extensions exts{{{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                   {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                   {NID_subject_key_identifier, "hash"},
                   {NID_authority_key_identifier, "keyid:always"}},
                  nullptr};
  auto cert = buildCert(cn, key.value().get(), {nullptr, key.value().get()}, validity, exts);
  if (!cert) return R::fail("creating the CA \"" + cn + "\": " + cert.error());
  auto certText = certPem(cert.value().get());
  if (!certText) return R::fail(certText.error());
  auto keyText = keyPem(key.value().get());
  if (!keyText) return R::fail(keyText.error());
  return R::ok(Ca{std::move(certText).value(), std::move(keyText).value()});
}

Result<std::string> issueForKey(const Ca& ca, const std::string& keyPemText, const Issue& what) {
  auto key = parseKey(keyPemText, "private key");
  if (!key) return Result<std::string>::fail(key.error());
  return issueFor(ca, key.value().get(), what);
}

Result<std::string> issueFromCsr(const Ca& ca, const std::string& csrPem, const Issue& what) {
  using R = Result<std::string>;
  auto req = parseReq(csrPem);
  if (!req) return R::fail(req.error());
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req.value().get());
  if (!pub) return sslFail<std::string>("the certificate signing request carries no usable public key");
  if (X509_REQ_verify(req.value().get(), pub) != 1) {
    ERR_clear_error();
    return R::fail("the certificate signing request's signature does not verify: it is forged or corrupted");
  }
  if (int bits = EVP_PKEY_get_security_bits(pub); bits < 112)
    return R::fail("the certificate signing request's key is too weak: " + std::to_string(bits) +
                   " bits of security, at least 112 needed (EC P-256, or RSA of 2048 bits or more)");
  return issueFor(ca, pub, what);
}

Result<std::string> fingerprint(const std::string& pem) {
  auto cert = parseCert(pem, "certificate");
  if (!cert) return Result<std::string>::fail(cert.error());
  std::string fp = fingerprintOf(cert.value().get());
  if (fp.empty()) return sslFail<std::string>("cannot compute the certificate's SHA-256 fingerprint");
  return Result<std::string>::ok(fp);
}

Result<std::string> commonName(const std::string& pem) {
  auto cert = parseCert(pem, "certificate");
  if (!cert) return Result<std::string>::fail(cert.error());
  std::string cn = cnOf(cert.value().get());
  if (cn.empty()) return Result<std::string>::fail("the certificate has no common name (CN) in its subject");
  return Result<std::string>::ok(cn);
}

Result<bool> verifyIssuedBy(const std::string& pem, const std::string& caPem) {
  auto cert = parseCert(pem, "certificate");
  if (!cert) return Result<bool>::fail(cert.error());
  auto ca = parseCert(caPem, "CA certificate");
  if (!ca) return Result<bool>::fail(ca.error());
  return verifyAgainst(cert.value().get(), ca.value().get());
}

Result<bool> keyMatchesCert(const std::string& pem, const std::string& keyPemText) {
  auto cert = parseCert(pem, "certificate");
  if (!cert) return Result<bool>::fail(cert.error());
  auto key = parseKey(keyPemText, "private key");
  if (!key) return Result<bool>::fail(key.error());
  if (X509_check_private_key(cert.value().get(), key.value().get()) == 1) return Result<bool>::ok(true);
  ERR_clear_error();
  return Result<bool>::fail("the private key does not match the certificate \"" + cnOf(cert.value().get()) + "\"");
}

Result<CertInfo> inspect(const std::string& pem) {
  auto parsed = parseCert(pem, "certificate");
  if (!parsed) return Result<CertInfo>::fail(parsed.error());
  X509* cert = parsed.value().get();
  CertInfo info;
  info.commonName = cnOf(cert);
  info.notBefore = timeOf(X509_get0_notBefore(cert));
  info.notAfter = timeOf(X509_get0_notAfter(cert));
  info.isCa = isCa(cert);
  Names sans(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans.get(), i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      info.dnsSans.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_STRING* s = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      int len = ASN1_STRING_length(s);
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof text))
        info.ipSans.emplace_back(text);
    }
  }
  ERR_clear_error();
  return Result<CertInfo>::ok(std::move(info));
}

bool isFingerprint(std::string_view text) {
  if (text.size() != 7 + 64 || text.substr(0, 7) != "sha256:") return false;
  for (char c : text.substr(7))
    if (std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
  return true;
}

Result<std::string> verifyPinnedChain(const std::vector<std::string>& chain, const std::string& pinText) {
  using R = Result<std::string>;
  std::string pin = pinText;
  for (auto& c : pin) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!isFingerprint(pin)) return R::fail("CA fingerprint \"" + pinText + "\": must be sha256: followed by 64 hex digits");
  if (chain.empty()) return R::fail("the master sent no certificate");
  std::vector<Cert> certs;
  for (size_t i = 0; i < chain.size(); ++i) {
    auto cert = parseCert(chain[i], "master's certificate chain, certificate " + std::to_string(i));
    if (!cert) return R::fail(cert.error());
    certs.push_back(std::move(cert).value());
  }
  size_t found = certs.size(), lastCa = certs.size();
  for (size_t i = 0; i < certs.size(); ++i) {
    if (found == certs.size() && fingerprintOf(certs[i].get()) == pin) found = i;
    if (isCa(certs[i].get())) lastCa = i;
  }
  if (found == certs.size()) {
    if (lastCa == certs.size())
      return R::fail("the master sent no CA certificate in its chain (" + std::to_string(certs.size()) +
                     " certificates), expected the CA " + pin);
    return R::fail("the master's CA fingerprint is " + fingerprintOf(certs[lastCa].get()) + ", expected " + pin);
  }
  X509* ca = certs[found].get();
  if (!isCa(ca)) return R::fail("the certificate " + pin + " (CN \"" + cnOf(ca) + "\") in the master's chain is not a CA");
  auto verified = verifyAgainst(certs[0].get(), ca);
  if (!verified) return R::fail("the master's certificate: " + verified.error());
  if (std::string cn = cnOf(certs[0].get()); cn != kMasterName)
    return R::fail("the master's certificate has CN \"" + cn + "\", expected \"" + kMasterName + "\"");
  return R::ok(chain[found]);
}

Result<std::vector<std::string>> chainPems(ssl_st* ssl) {
  using R = Result<std::vector<std::string>>;
  X509* leaf = ssl ? SSL_get0_peer_certificate(ssl) : nullptr;
  if (!leaf) return R::fail("the peer sent no certificate");
  std::vector<std::string> out;
  auto leafPem = certPem(leaf);
  if (!leafPem) return R::fail(leafPem.error());
  out.push_back(std::move(leafPem).value());
  STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl);
  for (int i = 0; chain && i < sk_X509_num(chain); ++i) {
    X509* cert = sk_X509_value(chain, i);
    if (X509_cmp(cert, leaf) == 0) continue;  // a client's view starts with the leaf
    auto pem = certPem(cert);
    if (!pem) return R::fail(pem.error());
    out.push_back(std::move(pem).value());
  }
  return R::ok(std::move(out));
}

}  // namespace yard::tls
