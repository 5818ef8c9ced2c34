// The masters' Raft group (master/ha/raft_node.h): three members in one process, each with its
// own raft files and SQLite store, talking TLS on loopback through the real transport. A write
// committed by the leader's store is on every store; a new leader is elected when the leader
// goes; a member that comes back replays what it missed; a follower's store refuses writes.

#include "tests/unit/ha/raft_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/wire/address_list.h"
#include "master/store/schema.h"
#include "master/store/sqlite.h"

using namespace yard;
using namespace yard::master::ha;
using namespace yard::store;
using namespace yard::store::test;
using namespace yard::master::ha::test;
using namespace std::chrono_literals;

namespace {

Result<bool> addQueue(Store& store, const std::string& name) {
  return store.writeSync([&](Tx& tx) {
    QueueRecord q;
    q.name = name;
    q.cpuMillis = 1000;
    tx.upsertQueue(q);
  });
}

// Three members with election timeout `timeoutMs`: a bootstraps and leads; b and c join it as
// voters; a holds one write ("before").
struct Three {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")}, c{tmp.file("c")};
  explicit Three(unsigned timeoutMs) {
    startMember(a, pki, true, "127.0.0.1:0", 4096, timeoutMs);
    REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
    startMember(b, pki, false, "127.0.0.1:0", 4096, timeoutMs);
    startMember(c, pki, false, "127.0.0.1:0", 4096, timeoutMs);
    REQUIRE(a.raft->addVoter(b.raft->id(), b.raft->address()));
    REQUIRE(a.raft->addVoter(c.raft->id(), c.raft->address()));
    REQUIRE(addQueue(*a.store, "before"));
  }
};

}  // namespace

TEST_CASE("three masters replicate every committed write and elect a new leader when it goes", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")}, c{tmp.file("c")};
  startMember(a, pki, /*bootstrap=*/true);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  startMember(b, pki, false);
  startMember(c, pki, false);
  auto added = a.raft->addVoter(b.raft->id(), b.raft->address());
  INFO((added ? std::string() : added.error()));
  REQUIRE(added);
  REQUIRE(a.raft->addVoter(c.raft->id(), c.raft->address()));
  CHECK(a.raft->status().members.size() == 3);
  for (const auto& m : a.raft->status().members) CHECK(raftMemberName(m.address).size() == 1);

  for (int i = 0; i < 20; ++i) REQUIRE(addQueue(*a.store, "q" + std::to_string(i)));
  int64_t index = a.store->appliedIndex().value();
  CHECK(index > 0);
  REQUIRE(waitFor([&] { return b.store->appliedIndex().value() == index && c.store->appliedIndex().value() == index; }));
  CHECK(dump(b.store->path()) == dump(a.store->path()));
  CHECK(dump(c.store->path()) == dump(a.store->path()));

  // A follower's store takes no write of its own: it is not the leader.
  auto refused = addQueue(*b.store, "on-a-follower");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("not the leader"));

  // The leader goes: one of the others leads within a few election timeouts, with the writes.
  std::string aAddress = a.raft->hostPort();
  std::string before = dump(a.store->path());
  auto lost = std::chrono::steady_clock::now();
  stopMember(a);
  Peer* next = nullptr;
  REQUIRE(waitFor([&] {
    if (b.raft->status().role == Role::Leader) next = &b;
    if (c.raft->status().role == Role::Leader) next = &c;
    return next != nullptr;
  }));
  auto elected = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lost);
  CHECK(elected < 5s);
  REQUIRE(next->raft->barrier());
  Peer* other = next == &b ? &c : &b;
  REQUIRE(addQueue(*next->store, "after-failover"));
  int64_t index2 = next->store->appliedIndex().value();
  CHECK(index2 > index);
  REQUIRE(waitFor([&] { return other->store->appliedIndex().value() == index2; }));
  CHECK(dump(other->store->path()) == dump(next->store->path()));

  // The old leader comes back as a follower and catches up on what it missed, once.
  startMember(a, pki, true, aAddress);  // bootstrap is ignored: its files exist
  REQUIRE(waitFor([&] { return a.store->appliedIndex().value() == index2; }));
  CHECK(dump(a.store->path()) == dump(next->store->path()));
  CHECK(a.raft->status().role == Role::Follower);
  CHECK(dump(a.store->path()) != before);

  stopMember(a);
  stopMember(b);
  stopMember(c);
}

TEST_CASE("followers forget a leader whose process is gone, so the first of them to stand wins", "[ha]") {
  // Raft refuses a vote while it has a leader. b would stand 3-3.5 s after finding the dead
  // leader's port refusing, c within 50-100 ms; the election timeout is 8 s. Were b still to
  // count the dead leader, it would refuse c until its own timer ran out (3 s or more); it
  // forgets it (hurryElection), so c wins at once.
  constexpr unsigned kTimeoutMs = 8000;
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")}, c{tmp.file("c")};
  startMember(a, pki, true, "127.0.0.1:0", 4096, kTimeoutMs);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  startMember(b, pki, false, "127.0.0.1:0", 4096, kTimeoutMs, [](RaftSettings& s) {
    s.hurryMinMs = 3000;
    s.hurryMaxMs = 3500;
  });
  startMember(c, pki, false, "127.0.0.1:0", 4096, kTimeoutMs, [](RaftSettings& s) {
    s.hurryMinMs = 50;
    s.hurryMaxMs = 100;
  });
  REQUIRE(a.raft->addVoter(b.raft->id(), b.raft->address()));
  REQUIRE(a.raft->addVoter(c.raft->id(), c.raft->address()));
  REQUIRE(addQueue(*a.store, "before"));
  int64_t index = a.store->appliedIndex().value();
  REQUIRE(waitFor([&] { return b.store->appliedIndex().value() == index && c.store->appliedIndex().value() == index; }));
  REQUIRE(b.raft->status().leaderId == a.raft->id());

  auto lost = std::chrono::steady_clock::now();
  stopMember(a);
  REQUIRE(waitFor([&] { return c.raft->status().role == Role::Leader; }, 10s));
  auto elected = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lost);
  INFO("c elected " << elected.count() << " ms after the leader stopped");
  CHECK(elected.count() < 2000);
  REQUIRE(waitFor([&] { return b.raft->status().leaderId == c.raft->id(); }));
  CHECK(b.raft->status().role == Role::Follower);
  REQUIRE(c.raft->barrier());
  REQUIRE(addQueue(*c.store, "after"));
  int64_t index2 = c.store->appliedIndex().value();
  REQUIRE(waitFor([&] { return b.store->appliedIndex().value() == index2; }));
  stopMember(b);
  stopMember(c);
}

TEST_CASE("a leader whose process is gone is replaced well before the election timeout", "[ha]") {
  // An election timeout of 4 s: the followers would stand after 4-8 s of silence. The leader's
  // raft port refuses connections once it has stopped, and that is enough to stand at once
  // (hurryElection in master/ha/raft_node.cpp).
  constexpr unsigned kTimeoutMs = 4000;
  Three three(kTimeoutMs);
  Peer &a = three.a, &b = three.b, &c = three.c;
  int64_t index = a.store->appliedIndex().value();
  REQUIRE(waitFor([&] { return b.store->appliedIndex().value() == index && c.store->appliedIndex().value() == index; }));

  // A live leader keeps its followers: nothing refuses, nobody stands (3 s, inside the timeout).
  std::this_thread::sleep_for(3s);
  CHECK(a.raft->status().role == Role::Leader);
  CHECK(b.raft->status().leaderId == a.raft->id());
  uint64_t term = a.raft->status().term;

  auto lost = std::chrono::steady_clock::now();
  stopMember(a);
  Peer* next = nullptr;
  REQUIRE(waitFor(
      [&] {
        if (b.raft->status().role == Role::Leader) next = &b;
        if (c.raft->status().role == Role::Leader) next = &c;
        return next != nullptr;
      },
      10s));
  auto elected = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lost);
  INFO("elected " << elected.count() << " ms after the leader stopped; the election timeout is " << kTimeoutMs << " ms");
  CHECK(elected.count() < kTimeoutMs);
  CHECK(next->raft->status().term > term);
  REQUIRE(next->raft->barrier());
  REQUIRE(addQueue(*next->store, "after"));
  Peer* other = next == &b ? &c : &b;
  int64_t index2 = next->store->appliedIndex().value();
  REQUIRE(waitFor([&] { return other->store->appliedIndex().value() == index2; }));
  CHECK(dump(other->store->path()) == dump(next->store->path()));
  stopMember(b);
  stopMember(c);
}

TEST_CASE("a leader hands its lead to the other members before it stops", "[ha]") {
  // An election timeout of 4 s: an election after the leader's stop would take 4-8 s, or
  // about half a second by the refused-port path. A handed-over lead is taken at once.
  constexpr unsigned kTimeoutMs = 4000;
  Three three(kTimeoutMs);
  Peer &a = three.a, &b = three.b, &c = three.c;
  uint64_t term = a.raft->status().term;

  // Only a leader hands a lead on.
  auto refused = b.raft->handOffLead();
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("cannot hand the lead on"));

  auto asked = std::chrono::steady_clock::now();
  auto to = a.raft->handOffLead();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked);
  REQUIRE(to);
  INFO("handed over in " << took.count() << " ms; the election timeout is " << kTimeoutMs << " ms");
  CHECK(took.count() < 1000);
  Peer* next = to.value() == b.raft->id() ? &b : &c;
  REQUIRE(to.value() == next->raft->id());
  REQUIRE(waitFor([&] { return next->raft->status().role == Role::Leader; }, 2s));
  CHECK(next->raft->status().term == term + 1);
  REQUIRE(waitFor([&] { return a.raft->status().leaderId == next->raft->id(); }, 2s));
  CHECK(a.raft->status().role == Role::Follower);

  // The new leader takes writes; the old one, now a follower, applies them.
  REQUIRE(next->raft->barrier());
  REQUIRE(addQueue(*next->store, "after"));
  int64_t index = next->store->appliedIndex().value();
  REQUIRE(waitFor([&] { return a.store->appliedIndex().value() == index; }));
  CHECK(dump(a.store->path()) == dump(next->store->path()));
  stopMember(a);
  stopMember(b);
  stopMember(c);
}

TEST_CASE("a master without a majority commits nothing", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")};
  startMember(a, pki, true);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  startMember(b, pki, false);
  REQUIRE(a.raft->addVoter(b.raft->id(), b.raft->address()));
  REQUIRE(addQueue(*a.store, "held-by-both"));
  std::string held = dump(a.store->path());
  stopMember(b);
  // Two voters, one gone: the leader steps down and the write fails, rolled back here too.
  auto w = addQueue(*a.store, "held-by-none");
  REQUIRE_FALSE(w);
  CHECK(dump(a.store->path()) == held);
  // Its fate was the next leader's to decide: a client is told "not the leader", and asks again.
  CHECK_THAT(w.error(), Catch::Contains(wire::kLeadLost));
  CHECK_THAT(wire::notLeaderWhenLeadLost(w.error()), Catch::StartsWith(std::string(wire::kNotLeader) + ": "));
  stopMember(a);
}

TEST_CASE("the transport's messages round-trip and refuse malformed bytes", "[ha]") {
  Fields f{"call", "", std::string("\0\x01\xff", 3), std::string(5000, 'x')};
  std::string bytes = encodeFields(f);
  auto back = decodeFields(bytes.substr(4));
  REQUIRE(back);
  CHECK(*back == f);
  CHECK_FALSE(decodeFields(bytes.substr(4, bytes.size() - 5)));
  CHECK_FALSE(decodeFields(bytes.substr(4) + "x"));
  CHECK_FALSE(decodeFields("\xff\xff\xff\xff"));
}

namespace {

// A plain TCP connection to `hostPort` ("127.0.0.1:PORT"); -1 when it cannot be made.
int dialTcp(const std::string& hostPort) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(hostPort.substr(hostPort.rfind(':') + 1))));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the peer closed `fd` within `ms` (it sends nothing before a TLS client speaks).
bool closedWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, 0) <= 0;
}

}  // namespace

TEST_CASE("the raft port makes room past its bound by closing the oldest connection not known as a master's", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")};
  startMember(a, pki, true);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  std::string port = a.raft->hostPort();
  // 64 idle connections from one address (no TLS handshake) are held for the handshake's
  // deadline; a 65th closes the oldest of them, and is held itself.
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) {
    int fd = dialTcp(port);
    REQUIRE(fd >= 0);
    held.push_back(fd);
  }
  CHECK_FALSE(closedWithin(held.front(), 300));
  int extra = dialTcp(port);
  REQUIRE(extra >= 0);
  CHECK(closedWithin(held.front(), 2000));
  CHECK_FALSE(closedWithin(extra, 300));
  CHECK_FALSE(closedWithin(held[1], 100));
  // A master's call from the same address, the flood still there: it gets in and is answered.
  auto r = callMaster(port, pki.peer, {"whois"}, 2s);
  INFO((r ? "" : r.error()));
  CHECK(r.isOk());
  ::close(extra);
  for (int fd : held) ::close(fd);
  stopMember(a);
}

TEST_CASE("a master whose store is lost rebuilds it from the log", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")};
  startMember(a, pki, true);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  for (int i = 0; i < 20; ++i) REQUIRE(addQueue(*a.store, "q" + std::to_string(i)));
  std::string held = dump(a.store->path());
  std::string address = a.raft->hostPort();
  stopMember(a);
  fs::remove(a.dir + "/state.db");
  fs::remove(a.dir + "/state.db-wal");
  fs::remove(a.dir + "/state.db-shm");
  startMember(a, pki, false, address);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  REQUIRE(a.raft->barrier());
  CHECK(dump(a.store->path()) == held);
  stopMember(a);
}

TEST_CASE("snapshots bound the log and bring a member far behind up to date", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")}, c{tmp.file("c")};
  startMember(a, pki, true, "127.0.0.1:0", 8);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  startMember(b, pki, false, "127.0.0.1:0", 8);
  startMember(c, pki, false, "127.0.0.1:0", 8);
  REQUIRE(a.raft->addVoter(b.raft->id(), b.raft->address()));
  REQUIRE(a.raft->addVoter(c.raft->id(), c.raft->address()));
  std::string cAddress = c.raft->hostPort();
  stopMember(c);
  for (int i = 0; i < 60; ++i) REQUIRE(addQueue(*a.store, "q" + std::to_string(i)));
  int64_t index = a.store->appliedIndex().value();
  // The leader's log was cut behind snapshots: c cannot be sent the entries it missed.
  bool snapshotted = false;
  for (const auto& e : fs::directory_iterator(a.dir + "/raft"))
    snapshotted = snapshotted || e.path().filename().string().rfind("snapshot-", 0) == 0;
  CHECK(snapshotted);

  startMember(c, pki, false, cAddress, 8);
  REQUIRE(waitFor([&] { return c.store->appliedIndex().value() == index; }));
  CHECK(dump(c.store->path()) == dump(a.store->path()));
  // The restored store takes the following entries as any follower's does.
  REQUIRE(addQueue(*a.store, "after-snapshot"));
  int64_t index2 = a.store->appliedIndex().value();
  REQUIRE(waitFor([&] { return c.store->appliedIndex().value() == index2 && b.store->appliedIndex().value() == index2; }));
  CHECK(dump(c.store->path()) == dump(a.store->path()));
  CHECK(dump(b.store->path()) == dump(a.store->path()));

  // A follower whose store is lost restarts from its own snapshot, then the log after it.
  std::string bAddress = b.raft->hostPort();
  stopMember(b);
  fs::remove(b.dir + "/state.db");
  fs::remove(b.dir + "/state.db-wal");
  fs::remove(b.dir + "/state.db-shm");
  startMember(b, pki, false, bAddress, 8);
  REQUIRE(waitFor([&] { return b.store->appliedIndex().value() == index2; }));
  CHECK(dump(b.store->path()) == dump(a.store->path()));
  stopMember(a);
  stopMember(b);
  stopMember(c);
}

TEST_CASE("a snapshot of an older schema is upgraded as it is restored", "[ha]") {
  // A master upgraded to this build restores the snapshot an older one took: its store must
  // end with this build's schema, not the snapshot's.
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")};
  startMember(a, pki, true, "127.0.0.1:0", 8);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  {
    // As a master of schema version 15 held it: no requests.request column (16) nor jobs_deleted index (17) yet.
    auto old = sql::Connection::open(a.store->path()).value();
    old->setBusyTimeoutMs(5000);
    REQUIRE(old->exec("DROP INDEX jobs_deleted; ALTER TABLE requests DROP COLUMN request; PRAGMA user_version = 15"));
  }
  for (int i = 0; i < 20; ++i) REQUIRE(addQueue(*a.store, "q" + std::to_string(i)));  // snapshots of it
  std::string address = a.raft->hostPort();
  stopMember(a);
  startMember(a, pki, false, address, 8);
  REQUIRE(waitFor([&] { return a.raft->status().role == Role::Leader; }));
  REQUIRE(a.raft->barrier());
  auto conn = sql::Connection::open(a.store->path(), true).value();
  CHECK(conn->queryInt("PRAGMA user_version").value() == schema::currentVersion());
  CHECK(conn->queryInt("SELECT count(*) FROM requests WHERE request = ''"));  // the column is back
  CHECK(conn->queryInt("SELECT count(*) FROM sqlite_master WHERE name = 'jobs_deleted'").value() == 1);
  CHECK(conn->queryInt("SELECT count(*) FROM queues WHERE name LIKE 'q%'").value() == 20);
  conn.reset();
  stopMember(a);
}

TEST_CASE("a member whose store cannot say what it holds fails to start with why and nothing crashes", "[ha]") {
  // Regression: RaftNode's destructor waited on a state machine that start() had not made yet,
  // and closed a libuv loop it had not opened.
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  fs::create_directories(tmp.file("a"));
  auto store = openStore(tmp.file("a") + "/state.db");
  {
    auto conn = sql::Connection::open(tmp.file("a") + "/state.db");
    REQUIRE(conn);
    REQUIRE(conn.value()->exec("DROP TABLE replication"));
  }
  RaftSettings s;
  s.dir = tmp.file("a") + "/raft";
  s.bindAddress = "127.0.0.1:0";
  s.bootstrap = true;
  s.serverTls = pki.server;
  s.peerTls = pki.peer;
  s.fatal = [](const std::string& why) { FAIL("fatal: " << why); };
  auto node = RaftNode::start(s, *store);
  REQUIRE_FALSE(node);
  CHECK_THAT(node.error(), Catch::Contains("replication"));
}
