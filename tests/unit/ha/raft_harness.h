#pragma once
// Raft members in one process for tests (master/ha/raft_node.h): each with its own raft files
// and SQLite store, talking TLS on loopback through the real transport.

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "common/tls/pki.h"
#include "common/wire/tls.h"
#include "master/ha/raft_node.h"
#include "tests/unit/store/store_test_util.h"

namespace yard::master::ha::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::Store;
using store::test::openStore;

struct Pki {
  wire::ServerTls server;
  wire::ClientTls peer;
};

inline Pki makePki(const std::string& dir) {
  auto pki = tls::ensureMasterPki(dir, {}, {});
  REQUIRE(pki);
  wire::TlsIdentity identity{pki.value().certPem + pki.value().ca.certPem, pki.value().keyPem};
  auto server = wire::makeServerTls(identity, pki.value().ca.certPem);
  auto peer = wire::makeClientTls(pki.value().ca.certPem, &identity, tls::kMasterName);
  REQUIRE(server);
  REQUIRE(peer);
  return Pki{server.value(), peer.value()};
}

struct Peer {
  std::string dir;
  std::unique_ptr<Store> store = nullptr;
  std::unique_ptr<RaftNode> raft = nullptr;
};

inline void startMember(Peer& m, const Pki& pki, bool bootstrap, const std::string& bind = "127.0.0.1:0",
                 unsigned snapshotEvery = 4096, unsigned electionTimeoutMs = 300,
                 const std::function<void(RaftSettings&)>& tweak = {}) {
  fs::create_directories(m.dir);
  m.store = openStore(m.dir + "/state.db");
  RaftSettings s;
  s.dir = m.dir + "/raft";
  s.bindAddress = bind;
  s.name = fs::path(m.dir).filename().string();  // "a": the configuration holds "a@127.0.0.1:PORT"
  s.bootstrap = bootstrap;
  s.electionTimeoutMs = electionTimeoutMs;
  s.heartbeatMs = 50;
  s.snapshotThreshold = snapshotEvery;
  s.snapshotTrailing = snapshotEvery / 4;
  s.serverTls = pki.server;
  s.peerTls = pki.peer;
  s.fatal = [](const std::string& why) { FAIL("fatal: " << why); };
  if (tweak) tweak(s);
  auto node = RaftNode::start(s, *m.store);
  INFO((node ? std::string() : node.error()));
  REQUIRE(node);
  m.raft = std::move(node).value();
  RaftNode* raft = m.raft.get();
  m.store->setReplicator([raft](const std::string& changes) { return raft->propose(changes); });
}

inline void stopMember(Peer& m) {
  m.raft.reset();  // first: its state machine writes to the store
  m.store.reset();
}

template <typename Pred>
inline bool waitFor(Pred pred, std::chrono::milliseconds limit = 10s) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace yard::master::ha::test
