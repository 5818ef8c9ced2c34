#include "agent/link/bootstrap.h"

#include "common/wire/address_list.h"

#include <sys/stat.h>

#include <capnp/message.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/tls/pki.h"
#include "common/wire/client.h"
#include "schema/agent.capnp.h"

namespace yard::agent {
namespace {

using R = Result<NodeCredentials>;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Loads what an earlier join stored, and checks it still fits this agent.
R load(const std::string& dir, const std::string& node) {
  auto cert = tls::readFile(dir + "/node.pem");
  auto key = tls::readFile(dir + "/node.key");
  auto ca = tls::readFile(dir + "/ca.pem");
  for (const auto* f : {&cert, &key, &ca})
    if (!*f) return R::fail(f->error());
  auto cn = tls::commonName(cert.value());
  if (!cn) return R::fail(dir + "/node.pem: " + cn.error());
  if (cn.value() != tls::nodeCommonName(node))
    return R::fail(dir + "/node.pem is the certificate of \"" + cn.value() + "\", and this agent is node \"" + node +
                   "\": remove " + dir + " to join again under this name");
  if (auto ok = tls::verifyIssuedBy(cert.value(), ca.value()); !ok)
    return R::fail(dir + "/node.pem does not verify against " + dir + "/ca.pem (" + ok.error() + "): remove " + dir +
                   " to join again");
  if (auto ok = tls::keyMatchesCert(cert.value(), key.value()); !ok)
    return R::fail(dir + "/node.key does not belong to node.pem: remove " + dir + " to join again");
  return R::ok(NodeCredentials{{cert.value(), key.value()}, ca.value()});
}

// A failure that waiting cannot fix: the master could not be verified (wrong CA or pin).
bool verificationFailure(const std::string& why) {
  return why.find("did not verify") != std::string::npos || why.find("presented a certificate") != std::string::npos ||
         why.find("refusing the master") != std::string::npos;
}

}  // namespace

Result<std::string> joinTokenOf(const AgentConfig& config) {
  if (!config.token.empty()) return Result<std::string>::ok(config.token);
  if (!config.tokenFile.empty()) {
    auto text = tls::readFile(config.tokenFile);
    if (!text) return Result<std::string>::fail("token_file: " + text.error());
    std::string t = text.value().substr(0, text.value().find('\n'));
    while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
    if (t.empty()) return Result<std::string>::fail("token_file: " + config.tokenFile + " is empty");
    return Result<std::string>::ok(t);
  }
  const char* env = std::getenv("YARD_JOIN_TOKEN");
  return Result<std::string>::ok(env ? env : "");
}

std::string missingCredentials(const AgentConfig& config) {
  std::string dir = config.dataDir + "/tls";
  if (exists(dir + "/node.pem")) return "";
  auto token = joinTokenOf(config);
  if (!token) return token.error();
  if (token.value().empty())
    return "no node certificate in " + dir + " and no join token to get one: set YARD_JOIN_TOKEN, or "
           "token_file (--token-file FILE)";
  return "";
}

R ensureNodeCredentials(const AgentConfig& config, std::function<void(const std::string&)> log,
                        std::function<bool()> stopping) {
  std::string dir = config.dataDir + "/tls";
  if (exists(dir + "/node.pem")) return load(dir, config.name);

  if (std::string missing = missingCredentials(config); !missing.empty()) return R::fail(missing);
  auto token = joinTokenOf(config);
  if (!token) return R::fail(token.error());
  Result<wire::ClientTls> tlsSettings = Result<wire::ClientTls>::fail("");
  std::string givenCa;
  if (!config.caFile.empty()) {
    auto ca = tls::readFile(config.caFile);
    if (!ca) return R::fail("--ca: " + ca.error());
    givenCa = ca.value();
    tlsSettings = wire::makeClientTls(givenCa, nullptr, tls::kMasterName);
  } else if (!config.caFingerprint.empty()) {
    if (!tls::isFingerprint(config.caFingerprint))
      return R::fail("--ca-fingerprint: \"" + config.caFingerprint + "\" is not sha256:<64 hex digits>");
    tlsSettings = wire::makePinnedClientTls(config.caFingerprint, nullptr);
  } else {
    return R::fail("to join, the agent must be able to verify the master: pass --ca FILE (the master's "
                   "<data-dir>/ca.pem) or --ca-fingerprint sha256:... (yard-master logs it at start)");
  }
  if (!tlsSettings) return R::fail(tlsSettings.error());

  auto key = tls::generateKey();
  if (!key) return R::fail(key.error());
  auto csr = tls::makeCsr(key.value(), tls::nodeCommonName(config.name));
  if (!csr) return R::fail(csr.error());

  std::string lastWhy;
  std::string target = config.master;  // the list, or the leader a follower named (docs/ha.md)
  int hops = 0;
  while (!stopping()) {
    auto client = wire::FrameClient::connect(target, tlsSettings.value(), std::chrono::seconds(5));
    if (!client) {
      if (verificationFailure(client.error())) return R::fail("joining: " + client.error());
      if (client.error() != lastWhy) log("joining: " + client.error() + "; retrying every second");
      lastWhy = client.error();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    capnp::MallocMessageBuilder msg;
    auto req = msg.initRoot<agentapi::AgentRequest>();
    req.setId(1);
    auto join = req.initJoin();
    join.setToken(token.value());
    join.setNode(config.name);
    join.setCsrPem(csr.value());
    join.setAddress(config.address);
    auto answer = client.value()->call(msg);
    if (!answer) {
      log("joining: " + answer.error() + "; retrying every second");
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    auto resp = answer.value()->root<agentapi::AgentResponse>();
    if (resp.isError()) {
      std::string why = resp.getError().cStr();
      if (why.rfind(wire::kNotLeader, 0) == 0) {
        // A follower of several masters: to the leader it names, else the list again shortly.
        auto is = why.find(" is at ");
        if (is != std::string::npos && hops < 3) {
          target = why.substr(is + 7);
          ++hops;
        } else {
          if (why != lastWhy) log("joining: " + why + "; retrying every second");
          lastWhy = why;
          target = config.master;
          hops = 0;
          std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        continue;
      }
      return R::fail("the master refused the join: " + why);
    }
    if (!resp.isJoined()) return R::fail("the master answered the join with something else (an older yard-master?)");
    std::string cert = resp.getJoined().getCertPem(), ca = resp.getJoined().getCaPem();
    // The CA the master hands over must be the one we verified it with.
    std::string trusted = givenCa.empty() ? client.value()->pinnedCaPem() : givenCa;
    auto fpGot = tls::fingerprint(ca), fpTrusted = tls::fingerprint(trusted);
    if (!fpGot || !fpTrusted || fpGot.value() != fpTrusted.value())
      return R::fail("the master sent a CA other than the one it was verified with");
    if (auto ok = tls::verifyIssuedBy(cert, ca); !ok) return R::fail("the node certificate from the master: " + ok.error());
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
    if (auto w = tls::writeSecretFile(dir + "/node.key", key.value()); !w) return R::fail(w.error());
    if (auto w = tls::writePublicFile(dir + "/ca.pem", ca); !w) return R::fail(w.error());
    // Last: node.pem is what says "joined" (ensureNodeCredentials looks for it first).
    if (auto w = tls::writePublicFile(dir + "/node.pem", cert); !w) return R::fail(w.error());
    log("joined the master as node " + config.name + "; certificate in " + dir + "/node.pem");
    return R::ok(NodeCredentials{{cert, key.value()}, ca});
  }
  return R::fail("stopped before joining the master");
}

}  // namespace yard::agent
