// The cluster PKI against real OpenSSL: what each function produces is checked with OpenSSL's
// own APIs, not with the library's, and every bad input gets an error, never a crash.

#include <catch2/catch.hpp>

#include <cctype>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "common/tls/pki.h"

using namespace yard;
using namespace yard::tls;

namespace {

template <auto Free>
struct Freer {
  template <typename T>
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Freer<BIO_free_all>>;
using Cert = std::unique_ptr<X509, Freer<X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY_free>>;
using Req = std::unique_ptr<X509_REQ, Freer<X509_REQ_free>>;
using Ctx = std::unique_ptr<SSL_CTX, Freer<SSL_CTX_free>>;
using Ssl = std::unique_ptr<SSL, Freer<SSL_free>>;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "yard-pki-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Bio bioOf(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

Cert x509(const std::string& pem) {
  Cert c(PEM_read_bio_X509(bioOf(pem).get(), nullptr, nullptr, nullptr));
  REQUIRE(c);
  return c;
}
Key pkey(const std::string& pem) {
  Key k(PEM_read_bio_PrivateKey(bioOf(pem).get(), nullptr, nullptr, nullptr));
  REQUIRE(k);
  return k;
}
Req csr(const std::string& pem) {
  Req r(PEM_read_bio_X509_REQ(bioOf(pem).get(), nullptr, nullptr, nullptr));
  REQUIRE(r);
  return r;
}
std::string text(BIO* bio) {
  BUF_MEM* mem = nullptr;
  BIO_get_mem_ptr(bio, &mem);
  return std::string(mem->data, mem->length);
}
std::string reqPem(X509_REQ* req) {
  Bio bio(BIO_new(BIO_s_mem()));
  REQUIRE(PEM_write_bio_X509_REQ(bio.get(), req) == 1);
  return text(bio.get());
}

std::string cnOf(X509* cert) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
  return buf;
}

// The SANs as OpenSSL prints them ("IP Address:10.0.0.5", "DNS:n1.example").
std::set<std::string> sansOf(X509* cert) {
  std::set<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    Bio bio(BIO_new(BIO_s_mem()));
    GENERAL_NAME_print(bio.get(), sk_GENERAL_NAME_value(names, i));
    out.insert(text(bio.get()));
  }
  GENERAL_NAMES_free(names);
  return out;
}

// Independently of the library: SHA-256 over the DER.
std::string digestOfDer(X509* cert) {
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  REQUIRE(len > 0);
  unsigned char md[32];
  unsigned int mdLen = 0;
  REQUIRE(EVP_Digest(der, static_cast<size_t>(len), md, &mdLen, EVP_sha256(), nullptr) == 1);
  OPENSSL_free(der);
  std::string out = "sha256:";
  char hex[3];
  for (unsigned i = 0; i < mdLen; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", md[i]);
    out += hex;
  }
  return out;
}

unsigned modeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

template <typename T>
T ok(Result<T> r) {
  INFO(r.error());
  REQUIRE(r);
  return std::move(r).value();
}

Ca newCa(const std::string& cn = "test-ca") { return ok(createCa(cn, std::chrono::hours(24 * 30))); }

}  // namespace

TEST_CASE("node common names: node:X and nothing else") {
  CHECK(nodeCommonName("gpu-1") == "node:gpu-1");
  CHECK(nodeFromCommonName("node:gpu-1") == std::optional<std::string>("gpu-1"));
  CHECK(nodeFromCommonName("node:a") == std::optional<std::string>("a"));
  CHECK(nodeFromCommonName(nodeCommonName("x:y")) == std::optional<std::string>("x:y"));
  CHECK_FALSE(nodeFromCommonName("node:"));
  CHECK_FALSE(nodeFromCommonName("yard-master"));
  CHECK_FALSE(nodeFromCommonName(""));
  CHECK_FALSE(nodeFromCommonName("Node:a"));
  CHECK_FALSE(nodeFromCommonName(" node:a"));
}

TEST_CASE("generateKey makes an EC P-256 key in PKCS#8 PEM") {
  std::string pem = ok(generateKey());
  CHECK(pem.rfind("-----BEGIN PRIVATE KEY-----", 0) == 0);
  Key key = pkey(pem);
  CHECK(EVP_PKEY_get_id(key.get()) == EVP_PKEY_EC);
  char group[64] = {};
  REQUIRE(EVP_PKEY_get_group_name(key.get(), group, sizeof group, nullptr) == 1);
  CHECK(std::string(group) == "prime256v1");
  CHECK(ok(generateKey()) != pem);
}

TEST_CASE("createCa makes a self-signed CA with keyCertSign") {
  Ca ca = ok(createCa("yard-cluster-ca", std::chrono::hours(24 * 365 * 10)));
  Cert cert = x509(ca.certPem);
  CHECK(cnOf(cert.get()) == "yard-cluster-ca");
  CHECK(X509_check_ca(cert.get()) == 1);
  CHECK((X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN) != 0);
  CHECK(X509_check_issued(cert.get(), cert.get()) == X509_V_OK);
  CHECK(X509_check_private_key(cert.get(), pkey(ca.keyPem).get()) == 1);
  int days = 0, secs = 0;
  REQUIRE(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(cert.get()), X509_get0_notAfter(cert.get())) == 1);
  CHECK(days >= 3649);
  CHECK(days <= 3651);
  CHECK(ok(verifyIssuedBy(ca.certPem, ca.certPem)));
  CHECK(ok(commonName(ca.certPem)) == "yard-cluster-ca");

  CHECK_THAT(createCa("", std::chrono::hours(1)).error(), Catch::Contains("common name"));
  CHECK_THAT(createCa("x", std::chrono::hours(0)).error(), Catch::Contains("validity"));
}

TEST_CASE("CA -> key -> CSR -> certificate: names from the CA, key from the CSR") {
  Ca ca = newCa();
  std::string key = ok(generateKey());
  std::string request = ok(makeCsr(key, "node:gpu-1"));
  Req req = csr(request);
  CHECK(X509_REQ_verify(req.get(), X509_REQ_get0_pubkey(req.get())) == 1);

  Issue what{"node:gpu-1", {"10.0.0.5", "fd00::7"}, {"gpu-1.example", "gpu-1"}, false, true, std::chrono::hours(48)};
  std::string pem = ok(issueFromCsr(ca, request, what));
  CHECK(ok(verifyIssuedBy(pem, ca.certPem)));
  Cert cert = x509(pem);
  CHECK(cnOf(cert.get()) == "node:gpu-1");
  CHECK(sansOf(cert.get()) ==
        std::set<std::string>{"IP Address:10.0.0.5", "IP Address:FD00:0:0:0:0:0:0:7", "DNS:gpu-1.example", "DNS:gpu-1"});
  CHECK(X509_check_ca(cert.get()) == 0);
  CHECK(X509_get_extended_key_usage(cert.get()) == XKU_SSL_CLIENT);
  CHECK(X509_check_private_key(cert.get(), pkey(key).get()) == 1);
  CHECK(X509_check_issued(x509(ca.certPem).get(), cert.get()) == X509_V_OK);
  CHECK(ok(keyMatchesCert(pem, key)));
  CHECK_FALSE(keyMatchesCert(pem, ok(generateKey())));

  CertInfo info = ok(inspect(pem));
  CHECK(info.commonName == "node:gpu-1");
  CHECK(info.ipSans == std::vector<std::string>{"10.0.0.5", "fd00::7"});
  CHECK(info.dnsSans == std::vector<std::string>{"gpu-1.example", "gpu-1"});
  CHECK_FALSE(info.isCa);
  auto left = info.notAfter - std::chrono::system_clock::now();
  CHECK(left > std::chrono::hours(47));
  CHECK(left <= std::chrono::hours(48));
  // Never past the CA's own end.
  Ca shortCa = ok(createCa("short", std::chrono::hours(24)));
  CertInfo capped = ok(inspect(ok(issueFromCsr(shortCa, request, what))));
  CHECK(capped.notAfter == ok(inspect(shortCa.certPem)).notAfter);

  // issueForKey: the same, from the private key; both usages by default.
  std::string server = ok(issueForKey(ca, key, Issue{kMasterName, {"127.0.0.1"}, {"localhost"}}));
  Cert serverCert = x509(server);
  CHECK(X509_get_extended_key_usage(serverCert.get()) == (XKU_SSL_SERVER | XKU_SSL_CLIENT));
  CHECK(ok(commonName(server)) == kMasterName);
}

TEST_CASE("issueFromCsr ignores the CSR's subject and extensions") {
  Ca ca = newCa();
  Key key = pkey(ok(generateKey()));
  Req req(X509_REQ_new());
  X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("yard-master"), -1, -1, 0);
  X509_REQ_set_pubkey(req.get(), key.get());
  STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
  sk_X509_EXTENSION_push(exts, X509V3_EXT_nconf_nid(nullptr, nullptr, NID_basic_constraints, "critical,CA:TRUE"));
  sk_X509_EXTENSION_push(exts, X509V3_EXT_nconf_nid(nullptr, nullptr, NID_subject_alt_name, "DNS:evil.example"));
  REQUIRE(X509_REQ_add_extensions(req.get(), exts) == 1);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  REQUIRE(X509_REQ_sign(req.get(), key.get(), EVP_sha256()) > 0);

  std::string pem = ok(issueFromCsr(ca, reqPem(req.get()), Issue{"node:n1", {}, {"n1"}}));
  Cert cert = x509(pem);
  CHECK(cnOf(cert.get()) == "node:n1");
  CHECK(X509_check_ca(cert.get()) == 0);
  CHECK(sansOf(cert.get()) == std::set<std::string>{"DNS:n1"});
}

TEST_CASE("a forged or tampered CSR is refused") {
  Ca ca = newCa();
  std::string request = ok(makeCsr(ok(generateKey()), "node:n1"));

  SECTION("someone else's public key under the requester's signature") {
    Req req = csr(request);
    Key victim = pkey(ok(generateKey()));
    REQUIRE(X509_REQ_set_pubkey(req.get(), victim.get()) == 1);
    auto r = issueFromCsr(ca, reqPem(req.get()), Issue{"node:n1"});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("signature does not verify"));
  }
  SECTION("a flipped bit in the signature") {
    Req req = csr(request);
    unsigned char* der = nullptr;
    int len = i2d_X509_REQ(req.get(), &der);
    REQUIRE(len > 10);
    der[len - 3] ^= 0x01;  // inside the ECDSA signature's s
    const unsigned char* p = der;
    Req tampered(d2i_X509_REQ(nullptr, &p, len));
    OPENSSL_free(der);
    REQUIRE(tampered);
    auto r = issueFromCsr(ca, reqPem(tampered.get()), Issue{"node:n1"});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("signature does not verify"));
  }
  SECTION("a weak RSA key") {
    Key weak(EVP_RSA_gen(1024));
    REQUIRE(weak);
    Bio bio(BIO_new(BIO_s_mem()));
    REQUIRE(PEM_write_bio_PrivateKey(bio.get(), weak.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);
    auto r = issueFromCsr(ca, ok(makeCsr(text(bio.get()), "node:n1")), Issue{"node:n1"});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("too weak"));
  }
}

TEST_CASE("a certificate from another CA does not verify") {
  Ca ours = newCa("ours"), theirs = newCa("theirs");
  std::string cert = ok(issueForKey(theirs, ok(generateKey()), Issue{kMasterName}));
  CHECK(ok(verifyIssuedBy(cert, theirs.certPem)));
  auto r = verifyIssuedBy(cert, ours.certPem);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("does not verify against the CA \"ours\""));
  // A CA with the same name but another key is another CA.
  Ca impostor = newCa("theirs");
  CHECK_FALSE(verifyIssuedBy(cert, impostor.certPem));
  // A Ca whose key is not its certificate's cannot issue.
  auto mixed = issueForKey(Ca{ours.certPem, theirs.keyPem}, ok(generateKey()), Issue{"x"});
  REQUIRE_FALSE(mixed);
  CHECK_THAT(mixed.error(), Catch::Contains("does not match the CA certificate"));
  auto leafAsCa = issueForKey(Ca{cert, theirs.keyPem}, ok(generateKey()), Issue{"x"});
  REQUIRE_FALSE(leafAsCa);
  CHECK_THAT(leafAsCa.error(), Catch::Contains("is not a CA"));
}

TEST_CASE("fingerprint is sha256: and 64 lowercase hex of the DER") {
  Ca ca = newCa();
  std::string fp = ok(fingerprint(ca.certPem));
  CHECK(fp == digestOfDer(x509(ca.certPem).get()));
  CHECK(fp.size() == 7 + 64);
  CHECK(fp.find_first_not_of("0123456789abcdef", 7) == std::string::npos);
  CHECK(ok(fingerprint(newCa().certPem)) != fp);
  CHECK(isFingerprint(fp));
  std::string upper = fp;
  for (size_t i = 7; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  CHECK(isFingerprint(upper));
  CHECK_FALSE(isFingerprint(fp.substr(0, fp.size() - 1)));
  CHECK_FALSE(isFingerprint(fp + "0"));
  CHECK_FALSE(isFingerprint("sha1:" + fp.substr(7)));
  CHECK_FALSE(isFingerprint(fp.substr(0, fp.size() - 1) + "g"));
  CHECK_FALSE(isFingerprint(""));
}

TEST_CASE("Issue fields are checked, each error naming the field and value") {
  Ca ca = newCa();
  std::string key = ok(generateKey());
  auto err = [&](const Issue& what) {
    auto r = issueForKey(ca, key, what);
    REQUIRE_FALSE(r);
    return r.error();
  };
  CHECK_THAT(err(Issue{"n", {"10.0.0.300"}}), Catch::Contains("ipSans: \"10.0.0.300\""));
  CHECK_THAT(err(Issue{"n", {"localhost"}}), Catch::Contains("ipSans: \"localhost\""));
  CHECK_THAT(err(Issue{"n", {}, {"bad name"}}), Catch::Contains("dnsSans: \"bad name\""));
  CHECK_THAT(err(Issue{"n", {}, {"-x.example"}}), Catch::Contains("dnsSans"));
  CHECK_THAT(err(Issue{"n", {}, {"a,DNS:evil"}}), Catch::Contains("dnsSans"));
  CHECK_THAT(err(Issue{""}), Catch::Contains("common name"));
  CHECK_THAT(err(Issue{std::string(65, 'a')}), Catch::Contains("common name"));
  CHECK_THAT(err(Issue{"n", {}, {}, false, false}), Catch::Contains("extendedKeyUsage"));
  CHECK_THAT(err(Issue{"n", {}, {}, true, true, std::chrono::hours(-1)}), Catch::Contains("validity"));
  CHECK(isDnsName("*.yard.example"));
  CHECK_FALSE(isDnsName("a..b"));
  CHECK_FALSE(isDnsName(std::string(64, 'a')));
}

TEST_CASE("bad PEM input returns an error, never crashes") {
  Ca ca = newCa();
  std::string key = ok(generateKey());
  std::string cert = ok(issueForKey(ca, key, Issue{"n"}));
  std::vector<std::string> junk = {
      "",
      "garbage",
      std::string("\0\xff\x01", 3),
      cert.substr(0, cert.size() / 2),
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
      "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
      "-----BEGIN PRIVATE KEY-----\n" + std::string(100, 'A') + "\n-----END PRIVATE KEY-----\n",
      std::string(2 << 20, 'A'),
  };
  for (const auto& bad : junk) {
    INFO("input of " << bad.size() << " bytes");
    CHECK_FALSE(fingerprint(bad));
    CHECK_FALSE(commonName(bad));
    CHECK_FALSE(inspect(bad));
    CHECK_FALSE(verifyIssuedBy(bad, ca.certPem));
    CHECK_FALSE(verifyIssuedBy(cert, bad));
    CHECK_FALSE(keyMatchesCert(cert, bad));
    CHECK_FALSE(makeCsr(bad, "n"));
    CHECK_FALSE(issueForKey(ca, bad, Issue{"n"}));
    CHECK_FALSE(issueFromCsr(ca, bad, Issue{"n"}));
    CHECK_FALSE(issueForKey(Ca{bad, ca.keyPem}, key, Issue{"n"}));
    CHECK_FALSE(issueForKey(Ca{ca.certPem, bad}, key, Issue{"n"}));
    CHECK_FALSE(verifyPinnedChain({bad}, ok(fingerprint(ca.certPem))));
  }
  CHECK_THAT(fingerprint("garbage").error(), Catch::Contains("cannot read the certificate"));
  CHECK_THAT(issueFromCsr(ca, "x", Issue{"n"}).error(), Catch::Contains("certificate signing request"));

  // An encrypted key is refused at once, without asking for a pass phrase on the terminal.
  Bio bio(BIO_new(BIO_s_mem()));
  char pass[] = "secret";
  REQUIRE(PEM_write_bio_PrivateKey(bio.get(), pkey(key).get(), EVP_aes_256_cbc(), nullptr, 0, nullptr, pass) == 1);
  auto encrypted = makeCsr(text(bio.get()), "n");
  REQUIRE_FALSE(encrypted);
  CHECK_THAT(encrypted.error(), Catch::Contains("private key"));
}

TEST_CASE("secret and public files: modes, atomic replace, errors naming the path") {
  TempDir dir;
  std::string secret = dir.path() + "/s.key", pub = dir.path() + "/p.pem";
  mode_t old = ::umask(0);
  REQUIRE(ok(writePublicFile(secret, "old")));  // a broader file already there is replaced
  REQUIRE(ok(writeSecretFile(secret, "new secret")));
  REQUIRE(ok(writePublicFile(pub, "public")));
  ::umask(old);
  CHECK(modeOf(secret) == 0600);
  CHECK(modeOf(pub) == 0644);
  CHECK(ok(readFile(secret)) == "new secret");
  CHECK(ok(readFile(pub)) == "public");
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 2);  // no temp file left behind

  auto missing = readFile(dir.path() + "/nope");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error(), Catch::Contains(dir.path() + "/nope"));
  auto noDir = writeSecretFile(dir.path() + "/no/such/dir/k", "x");
  REQUIRE_FALSE(noDir);
  CHECK_THAT(noDir.error(), Catch::Contains(dir.path() + "/no/such/dir/k"));
}

TEST_CASE("ensureMasterPki creates the files, reuses the CA and re-issues master.pem for new SANs") {
  TempDir tmp;
  std::string dir = tmp.path() + "/data";
  MasterPki first = ok(ensureMasterPki(dir, {"0.0.0.0", "192.0.2.10"}, {"master.example"}));
  CHECK(modeOf(dir + "/ca.key") == 0600);
  CHECK(modeOf(dir + "/master.key") == 0600);
  CHECK(modeOf(dir + "/ca.pem") == 0644);
  CHECK(modeOf(dir + "/master.pem") == 0644);
  CHECK(ok(readFile(dir + "/ca.pem")) == first.ca.certPem);
  CHECK(ok(readFile(dir + "/master.pem")) == first.certPem);
  CHECK(first.caFingerprint == digestOfDer(x509(first.ca.certPem).get()));
  CHECK(ok(verifyIssuedBy(first.certPem, first.ca.certPem)));
  Cert cert = x509(first.certPem);
  CHECK(cnOf(cert.get()) == kMasterName);
  CHECK(X509_get_extended_key_usage(cert.get()) == (XKU_SSL_SERVER | XKU_SSL_CLIENT));
  std::set<std::string> sans = sansOf(cert.get());
  for (const char* want : {"IP Address:192.0.2.10", "IP Address:127.0.0.1", "DNS:master.example", "DNS:localhost"})
    CHECK(sans.count(want) == 1);
  CHECK(sans.count("IP Address:0.0.0.0") == 0);
  int days = 0, secs = 0;
  REQUIRE(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(cert.get())) == 1);
  CHECK(days >= 364);
  CHECK(days <= 365);

  // The same names: everything kept.
  MasterPki second = ok(ensureMasterPki(dir, {"192.0.2.10", "0.0.0.0"}, {"MASTER.example"}));
  CHECK(second.caFingerprint == first.caFingerprint);
  CHECK(second.ca.keyPem == first.ca.keyPem);
  CHECK(second.certPem == first.certPem);

  // A new advertise address: the same CA and key, a new master.pem that covers it.
  MasterPki third = ok(ensureMasterPki(dir, {"192.0.2.10", "198.51.100.7"}, {"master.example"}));
  CHECK(third.caFingerprint == first.caFingerprint);
  CHECK(third.keyPem == first.keyPem);
  CHECK(third.certPem != first.certPem);
  CHECK(ok(readFile(dir + "/master.pem")) == third.certPem);
  CHECK(sansOf(x509(third.certPem).get()).count("IP Address:198.51.100.7") == 1);
  CHECK(ok(verifyIssuedBy(third.certPem, first.ca.certPem)));

  SECTION("a master.pem from another CA is replaced") {
    Ca other = newCa("yard-cluster-ca");
    std::string foreign = ok(issueForKey(other, third.keyPem, Issue{kMasterName, {"192.0.2.10"}}));
    REQUIRE(ok(writePublicFile(dir + "/master.pem", foreign)));
    MasterPki again = ok(ensureMasterPki(dir, {"192.0.2.10", "198.51.100.7"}, {"master.example"}));
    CHECK(ok(verifyIssuedBy(again.certPem, first.ca.certPem)));
    CHECK(ok(readFile(dir + "/master.pem")) == again.certPem);
  }
  SECTION("a master.pem that expires within 30 days is replaced") {
    CertInfo info = ok(inspect(third.certPem));
    Issue shortLived{kMasterName, info.ipSans, info.dnsSans, true, true, std::chrono::hours(24 * 29)};
    REQUIRE(ok(writePublicFile(dir + "/master.pem", ok(issueForKey(first.ca, third.keyPem, shortLived)))));
    MasterPki again = ok(ensureMasterPki(dir, {"192.0.2.10", "198.51.100.7"}, {"master.example"}));
    CHECK(ok(inspect(again.certPem)).notAfter - std::chrono::system_clock::now() > std::chrono::hours(24 * 360));
  }
  SECTION("a ca.key readable by others is refused, naming the path and the mode") {
    REQUIRE(::chmod((dir + "/ca.key").c_str(), 0644) == 0);
    auto r = ensureMasterPki(dir, {}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains(dir + "/ca.key") && Catch::Contains("0644") && Catch::Contains("0600"));
  }
  SECTION("a ca.key without its ca.pem is refused, not replaced") {
    std::filesystem::remove(dir + "/ca.pem");
    auto r = ensureMasterPki(dir, {}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains(dir + "/ca.pem is missing"));
    CHECK_FALSE(std::filesystem::exists(dir + "/ca.pem"));
  }
  SECTION("a ca.key that is not ca.pem's is refused") {
    REQUIRE(ok(writeSecretFile(dir + "/ca.key", newCa().keyPem)));
    auto r = ensureMasterPki(dir, {}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("ca.key does not belong to"));
  }
  SECTION("a bad address is an error naming it") {
    auto r = ensureMasterPki(dir, {"master.example"}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("\"master.example\""));
  }
}

TEST_CASE("verifyPinnedChain accepts the pinned CA and names the real one on a miss") {
  TempDir tmp;
  MasterPki pki = ok(ensureMasterPki(tmp.path(), {}, {}));
  std::vector<std::string> chain = {pki.certPem, pki.ca.certPem};
  CHECK(ok(verifyPinnedChain(chain, pki.caFingerprint)) == pki.ca.certPem);
  std::string upper = pki.caFingerprint;
  for (size_t i = 7; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  CHECK(ok(verifyPinnedChain(chain, upper)) == pki.ca.certPem);

  std::string wrong = ok(fingerprint(newCa().certPem));
  auto miss = verifyPinnedChain(chain, wrong);
  REQUIRE_FALSE(miss);
  CHECK(miss.error() == "the master's CA fingerprint is " + pki.caFingerprint + ", expected " + wrong);

  auto leafPin = verifyPinnedChain(chain, ok(fingerprint(pki.certPem)));
  REQUIRE_FALSE(leafPin);
  CHECK_THAT(leafPin.error(), Catch::Contains("is not a CA"));

  auto noCa = verifyPinnedChain({pki.certPem}, pki.caFingerprint);
  REQUIRE_FALSE(noCa);
  CHECK_THAT(noCa.error(), Catch::Contains("no CA certificate"));

  // A leaf from another CA, presented with the pinned CA: refused.
  Ca other = newCa();
  std::string foreignLeaf = ok(issueForKey(other, pki.keyPem, Issue{kMasterName}));
  auto foreign = verifyPinnedChain({foreignLeaf, pki.ca.certPem}, pki.caFingerprint);
  REQUIRE_FALSE(foreign);
  CHECK_THAT(foreign.error(), Catch::Contains("does not verify"));

  // A node's certificate is not the master's.
  std::string nodeLeaf = ok(issueForKey(pki.ca, ok(generateKey()), Issue{nodeCommonName("n1")}));
  auto node = verifyPinnedChain({nodeLeaf, pki.ca.certPem}, pki.caFingerprint);
  REQUIRE_FALSE(node);
  CHECK_THAT(node.error(), Catch::Contains("CN \"node:n1\", expected \"yard-master\""));

  CHECK_THAT(verifyPinnedChain(chain, "sha256:abc").error(), Catch::Contains("64 hex digits"));
  CHECK_THAT(verifyPinnedChain(chain, "md5:" + pki.caFingerprint.substr(7)).error(), Catch::Contains("sha256:"));
  CHECK_THAT(verifyPinnedChain({}, pki.caFingerprint).error(), Catch::Contains("no certificate"));
}

namespace {

// A TLS 1.3 handshake between two SSL objects over an in-memory BIO pair.
bool handshake(SSL* client, SSL* server) {
  for (int round = 0; round < 100; ++round) {
    int c = SSL_do_handshake(client), s = SSL_do_handshake(server);
    if (c == 1 && s == 1) return true;
    auto stuck = [](SSL* ssl, int rc) {
      int e = SSL_get_error(ssl, rc);
      return rc != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
    };
    if (stuck(client, c) || stuck(server, s)) return false;
  }
  return false;
}

Ctx context(const SSL_METHOD* method, const std::string& certPemText, const std::string& keyPemText,
            const std::string& caPemText) {
  Ctx ctx(SSL_CTX_new(method));
  REQUIRE(ctx);
  REQUIRE(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION) == 1);
  REQUIRE(SSL_CTX_use_certificate(ctx.get(), x509(certPemText).get()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey(ctx.get(), pkey(keyPemText).get()) == 1);
  REQUIRE(SSL_CTX_add1_chain_cert(ctx.get(), x509(caPemText).get()) == 1);
  return ctx;
}

}  // namespace

TEST_CASE("chainPems and pinning over a real TLS 1.3 handshake, both directions") {
  TempDir tmp;
  MasterPki pki = ok(ensureMasterPki(tmp.path(), {}, {}));
  std::string nodeKey = ok(generateKey());
  std::string nodeCert = ok(issueFromCsr(pki.ca, ok(makeCsr(nodeKey, "ignored")), Issue{nodeCommonName("n1")}));

  Ctx serverCtx = context(TLS_server_method(), pki.certPem, pki.keyPem, pki.ca.certPem);
  Ctx clientCtx = context(TLS_client_method(), nodeCert, nodeKey, pki.ca.certPem);
  // The server asks for the client's certificate and trusts the cluster CA; the client pins.
  REQUIRE(X509_STORE_add_cert(SSL_CTX_get_cert_store(serverCtx.get()), x509(pki.ca.certPem).get()) == 1);
  SSL_CTX_set_verify(serverCtx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify(clientCtx.get(), SSL_VERIFY_NONE, nullptr);

  Ssl client(SSL_new(clientCtx.get())), server(SSL_new(serverCtx.get()));
  BIO *clientBio = nullptr, *serverBio = nullptr;
  REQUIRE(BIO_new_bio_pair(&clientBio, 0, &serverBio, 0) == 1);
  SSL_set_bio(client.get(), clientBio, clientBio);
  SSL_set_bio(server.get(), serverBio, serverBio);
  SSL_set_connect_state(client.get());
  SSL_set_accept_state(server.get());
  REQUIRE(handshake(client.get(), server.get()));
  CHECK(SSL_version(client.get()) == TLS1_3_VERSION);

  std::vector<std::string> seenByClient = ok(chainPems(client.get()));
  REQUIRE(seenByClient.size() == 2);
  CHECK(ok(fingerprint(seenByClient[0])) == ok(fingerprint(pki.certPem)));
  CHECK(ok(verifyPinnedChain(seenByClient, pki.caFingerprint)) == seenByClient[1]);
  CHECK(ok(fingerprint(seenByClient[1])) == pki.caFingerprint);

  std::vector<std::string> seenByServer = ok(chainPems(server.get()));
  REQUIRE_FALSE(seenByServer.empty());
  CHECK(nodeFromCommonName(ok(commonName(seenByServer[0]))) == std::optional<std::string>("n1"));
  CHECK(ok(verifyIssuedBy(seenByServer[0], pki.ca.certPem)));

  CHECK_FALSE(chainPems(nullptr));
}
