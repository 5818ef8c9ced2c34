// The file half of common/tls/pki.h: atomic secret and public files, and the master's PKI
// in its data directory.

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/tls/pki.h"

namespace yard::tls {

namespace {

constexpr auto kCaValidity = std::chrono::hours(24 * 365 * 10);
constexpr auto kMasterValidity = std::chrono::hours(24 * 365);
constexpr auto kRenewBefore = std::chrono::hours(24 * 30);
constexpr const char* kCaName = "yard-cluster-ca";

std::string sysError(const std::string& what, const std::string& path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

// Writes through a temp file beside `path` (created 0600 by mkostemp, then set to `mode`
// before any byte is written), fsync, rename over `path`, fsync of the directory.
Result<bool> writeAtomically(const std::string& path, const std::string& data, mode_t mode) {
  using R = Result<bool>;
  std::filesystem::path target(path);
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return R::fail(sysError("create a temporary file for", path));
  auto abandon = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return R::fail(why);
  };
  if (::fchmod(fd, mode) != 0) return abandon(sysError("set the mode of", tmp));
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return abandon(sysError("write", tmp));
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return abandon(sysError("fsync", tmp));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return R::fail(sysError("close", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = sysError("rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    return R::fail(why);
  }
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) return R::fail(sysError("open the directory", dir));
  int rc = ::fsync(dirFd);
  ::close(dirFd);
  if (rc != 0) return R::fail(sysError("fsync the directory", dir));
  return R::ok(true);
}

Result<bool> fileExists(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return Result<bool>::ok(true);
  if (errno == ENOENT) return Result<bool>::ok(false);
  return Result<bool>::fail(sysError("stat", path));
}

// A private key readable by anyone but its owner is refused, as ssh refuses such a key.
Result<bool> checkSecretMode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Result<bool>::fail(sysError("stat", path));
  if ((st.st_mode & 077) == 0) return Result<bool>::ok(true);
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Result<bool>::fail(path + " has mode " + mode + ": it holds a private key and must be 0600 (chmod 600 " +
                            path + ")");
}

Result<std::string> readSecret(const std::string& path) {
  auto mode = checkSecretMode(path);
  if (!mode) return Result<std::string>::fail(mode.error());
  return readFile(path);
}

// The CA in <dir>, created when neither file exists. Never replaced silently: agents pin it.
Result<Ca> loadOrCreateCa(const std::string& certPath, const std::string& keyPath) {
  using R = Result<Ca>;
  auto haveCert = fileExists(certPath);
  if (!haveCert) return R::fail(haveCert.error());
  auto haveKey = fileExists(keyPath);
  if (!haveKey) return R::fail(haveKey.error());
  if (!haveCert.value() && !haveKey.value()) {
    auto ca = createCa(kCaName, kCaValidity);
    if (!ca) return ca;
    // The key first: a ca.pem is never published without its key.
    if (auto w = writeSecretFile(keyPath, ca.value().keyPem); !w) return R::fail(w.error());
    if (auto w = writePublicFile(certPath, ca.value().certPem); !w) return R::fail(w.error());
    return ca;
  }
  if (haveCert.value() != haveKey.value()) {
    const std::string& missing = haveCert.value() ? keyPath : certPath;
    return R::fail(missing + " is missing while " + (haveCert.value() ? certPath : keyPath) +
                   " exists: restore it, or remove both to create a new cluster CA (every agent must then join again)");
  }
  auto key = readSecret(keyPath);
  if (!key) return R::fail(key.error());
  auto cert = readFile(certPath);
  if (!cert) return R::fail(cert.error());
  Ca ca{std::move(cert).value(), std::move(key).value()};
  auto info = inspect(ca.certPem);
  if (!info) return R::fail(certPath + ": " + info.error());
  if (!info.value().isCa) return R::fail(certPath + ": not a CA certificate (no basicConstraints CA:TRUE)");
  if (auto self = verifyIssuedBy(ca.certPem, ca.certPem); !self)
    return R::fail(certPath + ": the cluster CA is not usable: " + self.error());
  if (auto match = keyMatchesCert(ca.certPem, ca.keyPem); !match)
    return R::fail(keyPath + " does not belong to " + certPath + ": " + match.error());
  return R::ok(std::move(ca));
}

Result<std::string> loadOrCreateKey(const std::string& keyPath) {
  auto have = fileExists(keyPath);
  if (!have) return Result<std::string>::fail(have.error());
  if (have.value()) return readSecret(keyPath);
  auto key = generateKey();
  if (!key) return key;
  if (auto w = writeSecretFile(keyPath, key.value()); !w) return Result<std::string>::fail(w.error());
  return key;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `ips` and `names` plus the loopback names and the host name; wildcards dropped; IPs in
// inet_ntop form, names in lower case; sorted and unique, so two sets compare with ==.
Result<std::pair<std::vector<std::string>, std::vector<std::string>>> masterSans(
    const std::vector<std::string>& ips, const std::vector<std::string>& names) {
  using R = Result<std::pair<std::vector<std::string>, std::vector<std::string>>>;
  std::vector<std::string> outIps, outNames;
  std::vector<std::string> allIps = ips;
  allIps.insert(allIps.end(), {"127.0.0.1", "::1"});
  for (const auto& ip : allIps) {
    unsigned char bytes[16];
    char text[INET6_ADDRSTRLEN] = {};
    int family = inet_pton(AF_INET, ip.c_str(), bytes) == 1 ? AF_INET
                 : inet_pton(AF_INET6, ip.c_str(), bytes) == 1 ? AF_INET6 : 0;
    if (family == 0) return R::fail("ipSans: \"" + ip + "\" is not an IPv4 or IPv6 address");
    inet_ntop(family, bytes, text, sizeof text);
    if (std::string(text) == "0.0.0.0" || std::string(text) == "::") continue;  // a listen-anywhere address
    outIps.emplace_back(text);
  }
  std::vector<std::string> allNames = names;
  allNames.emplace_back("localhost");
  char host[256] = {};
  // The host name only when it makes a valid DNS SAN: a strange one must not stop the master.
  if (::gethostname(host, sizeof host - 1) == 0 && isDnsName(host)) allNames.emplace_back(host);
  for (const auto& name : allNames) outNames.push_back(lower(name));
  for (auto* v : {&outIps, &outNames}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return R::ok({std::move(outIps), std::move(outNames)});
}

// Whether master.pem can stay: issued by this CA for this key, named kMasterName, the same SANs,
// and more than 30 days left.
bool masterCertCurrent(const std::string& certPem, const MasterPki& pki, const std::vector<std::string>& ips,
                       const std::vector<std::string>& names) {
  auto info = inspect(certPem);
  if (!info || info.value().commonName != kMasterName) return false;
  if (!verifyIssuedBy(certPem, pki.ca.certPem) || !keyMatchesCert(certPem, pki.keyPem)) return false;
  if (info.value().notAfter - std::chrono::system_clock::now() < kRenewBefore) return false;
  auto haveIps = info.value().ipSans, haveNames = info.value().dnsSans;
  for (auto& n : haveNames) n = lower(n);
  std::sort(haveIps.begin(), haveIps.end());
  std::sort(haveNames.begin(), haveNames.end());
  return haveIps == ips && haveNames == names;
}

}  // namespace

Result<bool> writeSecretFile(const std::string& path, const std::string& data) {
  return writeAtomically(path, data, 0600);
}

Result<bool> writePublicFile(const std::string& path, const std::string& data) {
  return writeAtomically(path, data, 0644);
}

Result<std::string> readFile(const std::string& path) {
  using R = Result<std::string>;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return R::fail(sysError("read", path));
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = sysError("read", path);
      ::close(fd);
      return R::fail(why);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return R::ok(std::move(out));
}

Result<MasterPki> ensureMasterPki(const std::string& dir, const std::vector<std::string>& ipSans,
                                  const std::vector<std::string>& dnsSans) {
  using R = Result<MasterPki>;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return R::fail("cannot create the data directory " + dir + ": " + ec.message());
  auto sans = masterSans(ipSans, dnsSans);
  if (!sans) return R::fail("the master certificate's names: " + sans.error());
  const auto& [ips, names] = sans.value();

  MasterPki pki;
  auto ca = loadOrCreateCa(dir + "/ca.pem", dir + "/ca.key");
  if (!ca) return R::fail(ca.error());
  pki.ca = std::move(ca).value();
  auto key = loadOrCreateKey(dir + "/master.key");
  if (!key) return R::fail(key.error());
  pki.keyPem = std::move(key).value();

  std::string certPath = dir + "/master.pem";
  auto have = fileExists(certPath);
  if (!have) return R::fail(have.error());
  if (have.value()) {
    auto current = readFile(certPath);
    if (!current) return R::fail(current.error());
    if (masterCertCurrent(current.value(), pki, ips, names)) pki.certPem = std::move(current).value();
  }
  if (pki.certPem.empty()) {
    Issue what{kMasterName, ips, names, true, true, kMasterValidity};
    auto cert = issueForKey(pki.ca, pki.keyPem, what);
    if (!cert) return R::fail("cannot issue " + certPath + ": " + cert.error());
    if (auto w = writePublicFile(certPath, cert.value()); !w) return R::fail(w.error());
    pki.certPem = std::move(cert).value();
  }
  auto fp = fingerprint(pki.ca.certPem);
  if (!fp) return R::fail(fp.error());
  pki.caFingerprint = std::move(fp).value();
  return R::ok(std::move(pki));
}

}  // namespace yard::tls
