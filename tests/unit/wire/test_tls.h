#pragma once
// TLS settings for tests of anything that listens or connects (every connection is TLS 1.3):
// one cluster CA per test process, the master's certificate ("yard-master") and node
// certificates ("node:NAME") issued from it, as common/tls/pki.h does for real clusters.

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/tls/pki.h"
#include "common/wire/tls.h"

namespace yard::testing {

inline const tls::Ca& testCa() {
  static const tls::Ca ca = [] {
    auto c = tls::createCa("yard test CA", std::chrono::hours(24));
    REQUIRE(c);
    return c.value();
  }();
  return ca;
}

// A certificate with common name `cn` (kMasterName, or tls::nodeCommonName(node)).
inline wire::TlsIdentity testIdentity(const std::string& cn) {
  static std::map<std::string, wire::TlsIdentity> made;
  auto it = made.find(cn);
  if (it != made.end()) return it->second;
  auto key = tls::generateKey();
  REQUIRE(key);
  tls::Issue what;
  what.commonName = cn;
  what.ipSans = {"127.0.0.1"};
  auto cert = tls::issueForKey(testCa(), key.value(), what);
  REQUIRE(cert);
  return made[cn] = wire::TlsIdentity{cert.value(), key.value()};
}

// The master's side: its certificate; client certificates verified when sent.
inline wire::ServerTls testServerTls() {
  auto s = wire::makeServerTls(testIdentity(tls::kMasterName), testCa().certPem);
  REQUIRE(s);
  return s.value();
}

// A client that verifies the master; `as` non-empty: presents that certificate (a node's).
inline wire::ClientTls testClientTls(const std::string& as = "") {
  wire::TlsIdentity self;
  if (!as.empty()) self = testIdentity(as);
  auto c = wire::makeClientTls(testCa().certPem, as.empty() ? nullptr : &self, tls::kMasterName);
  REQUIRE(c);
  return c.value();
}

}  // namespace yard::testing
