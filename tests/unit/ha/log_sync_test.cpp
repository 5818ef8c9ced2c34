// The log archive's catch-up between masters (master/server/log_sync.h): three raft members in
// one process (real raft, TLS on loopback), each follower answering the archive calls with its
// own LogCopies, as yard-master wires them. The leader fetches a log only a follower holds,
// copies each member what it lacks, keeps every copy's time of writing and time marks, and
// leaves alone a log about to age out.

#include <sys/stat.h>

#include <future>
#include <mutex>

#include "master/logs/log_archive.h"
#include "master/server/log_copies.h"
#include "master/server/log_sync.h"
#include "tests/unit/ha/raft_harness.h"

using namespace yard;
using namespace yard::master;
using namespace yard::master::ha::test;
using yard::store::test::TempDir;

namespace {

constexpr int64_t kDayMs = 86400000;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

LogArchive::Options optionsOf(const std::string& dir) { return {dir + "/logs", 10u << 20, 30 * kDayMs}; }

// A complete log in the archive at `dir`, written `agoMs` ago.
void archive(const std::string& dir, const ArchivedLogMeta& m, const std::string& text, const std::string& times,
             int64_t agoMs) {
  LogArchive a(optionsOf(dir), nowMs);
  uint64_t offset = 0;
  do {
    size_t n = std::min<size_t>(text.size() - offset, LogArchive::kMaxPieceBytes);
    bool last = offset + n == text.size();
    auto w = a.write(m, offset, std::string_view(text).substr(offset, n), last, last ? times : "");
    INFO((w ? std::string() : w.error()));
    REQUIRE(w);
    offset += n;
  } while (offset < text.size());
  REQUIRE(a.setWrittenAt({m.jobId, m.replicaId, m.attempt}, nowMs() - agoMs));
}

struct Held {
  std::string text, times;
  int64_t writtenMs = 0;
  ArchivedLogMeta meta;
};

std::optional<Held> held(const std::string& dir, int64_t job, int64_t replica, int32_t attempt) {
  LogArchive a(optionsOf(dir), nowMs);
  auto e = a.find(job, replica, attempt);
  if (!e || !e->complete) return std::nullopt;
  auto text = a.read(*e, -1);
  REQUIRE(text);
  return Held{text.value(), a.timesOf({job, replica, attempt}), a.writtenAt({job, replica, attempt}).value_or(0),
              e->meta};
}

// A follower as yard-master wires one: the archive calls go to its LogCopies.
void serveCopies(Peer& p, LogCopies& copies) {
  p.raft->transport().setCallHandler([&copies](ha::Fields req, bool isMaster, const std::string&, std::function<void(ha::Fields)> answer) {
    if (!isMaster || req.empty() || req[0].rfind("archive", 0) != 0) return answer({"error", "unexpected"});
    copies.receive(std::move(req), std::move(answer));
  });
}

}  // namespace

TEST_CASE("the leader fetches the logs it lacks and copies each master the ones it lacks", "[ha]") {
  TempDir tmp;
  Pki pki = makePki(tmp.file("pki"));
  Peer a{tmp.file("a")}, b{tmp.file("b")}, c{tmp.file("c")};
  startMember(a, pki, true);
  REQUIRE(waitFor([&] { return a.raft->status().role == ha::Role::Leader; }));
  startMember(b, pki, false);
  startMember(c, pki, false);
  REQUIRE(a.raft->addVoter(b.raft->id(), b.raft->address()));
  REQUIRE(a.raft->addVoter(c.raft->id(), c.raft->address()));
  LogCopies bCopies(optionsOf(b.dir), nowMs), cCopies(optionsOf(c.dir), nowMs);
  serveCopies(b, bCopies);
  serveCopies(c, cCopies);

  // Only b holds log 7/70-0 (three pieces, two days old) and an old one about to age out;
  // only the leader holds 8/80-1 (an empty log).
  ArchivedLogMeta onB{7, "train", "main", "worker", 2, 70, 0, "node-1"};
  std::string big(LogArchive::kMaxPieceBytes * 2 + 1000, 'x');
  for (size_t i = 0; i < big.size(); i += 100) big[i] = '\n';
  archive(b.dir, onB, big, "marks-of-b", 2 * kDayMs);
  ArchivedLogMeta old{9, "gone", "main", "main", 0, 90, 0, "node-2"};
  archive(b.dir, old, "old\n", "", 30 * kDayMs - 60000);
  ArchivedLogMeta onA{8, "eval", "main", "main", 0, 80, 1, "node-2"};
  archive(a.dir, onA, "", "", 1000);

  asio::io_context io;
  LogArchiveService service(io, optionsOf(a.dir), nowMs, nullptr);
  std::vector<std::string> said;
  std::mutex saidMu;
  LogSync sync(*a.raft, pki.peer, optionsOf(a.dir), nowMs, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(saidMu);
    said.push_back(line);
  });
  sync.start(service, std::chrono::hours(1));  // no pass of its own: this test runs them
  LogSync::Moved moved = sync.pass();
  INFO(Catch::rangeToString(said));
  CHECK(moved.fetched == 1);
  CHECK(moved.copied == 3);  // 7/70-0 to c, 8/80-1 to b and to c

  auto original = held(b.dir, 7, 70, 0);
  REQUIRE(original);
  for (const std::string& dir : {a.dir, c.dir}) {
    auto copy = held(dir, 7, 70, 0);
    REQUIRE(copy);
    CHECK(copy->text == big);
    CHECK(copy->times == "marks-of-b");
    CHECK(copy->writtenMs == original->writtenMs);  // it ages out with its original
    CHECK(copy->meta.job == "train");
    CHECK(copy->meta.role == "worker");
    CHECK(copy->meta.index == 2);
    CHECK(copy->meta.node == "node-1");
  }
  for (const std::string& dir : {b.dir, c.dir}) {
    auto copy = held(dir, 8, 80, 1);
    REQUIRE(copy);
    CHECK(copy->text.empty());
    CHECK(copy->meta.job == "eval");
  }
  CHECK_FALSE(held(a.dir, 9, 90, 0));  // about to age out on b: left alone
  CHECK_FALSE(held(c.dir, 9, 90, 0));

  // Everyone holds everything now: the next pass moves nothing.
  LogSync::Moved again = sync.pass();
  CHECK(again.fetched == 0);
  CHECK(again.copied == 0);

  // A member that does not answer is passed over; the others are still caught up.
  ArchivedLogMeta later{10, "later", "main", "main", 0, 100, 0, "node-1"};
  archive(a.dir, later, "later\n", "", 0);
  std::string cAddress = c.raft->hostPort();
  c.raft->transport().setCallHandler([](ha::Fields, bool, const std::string&, std::function<void(ha::Fields)> answer) {
    answer({"error", "archive-list: this master leads now"});
  });
  LogSync::Moved partial = sync.pass();
  CHECK(partial.copied == 1);
  CHECK(held(b.dir, 10, 100, 0));
  CHECK_FALSE(held(c.dir, 10, 100, 0));
  {
    std::lock_guard<std::mutex> lock(saidMu);
    bool named = false;
    for (const auto& line : said) named = named || line.find("cannot list the logs of master c") != std::string::npos;
    CHECK(named);
  }

  sync.stop();
  service.stop();
  a.raft->transport().setCallHandler(nullptr);
  b.raft->transport().setCallHandler(nullptr);
  c.raft->transport().setCallHandler(nullptr);
  stopMember(b);
  stopMember(c);
  stopMember(a);
}

TEST_CASE("a follower lists and serves its complete logs piece by piece to a master", "[ha]") {
  TempDir tmp;
  std::string dir = tmp.file("f");
  ArchivedLogMeta m{3, "job-x", "t", "r", 1, 30, 2, "node-9"};
  std::string text(LogArchive::kMaxPieceBytes + 10, 'y');
  archive(dir, m, text, "marks", 5000);
  {  // a log still arriving is not listed
    LogArchive a(optionsOf(dir), nowMs);
    REQUIRE(a.write({3, "job-x", "t", "r", 1, 31, 0, "node-9"}, 0, "partial", false));
  }
  LogCopies copies(optionsOf(dir), nowMs);
  auto call = [&](ha::Fields req) {
    std::promise<ha::Fields> p;
    copies.receive(std::move(req), [&p](ha::Fields f) { p.set_value(std::move(f)); });
    return p.get_future().get();
  };
  auto list = call({"archive-list", "0"});
  REQUIRE(list.size() == 2);
  CHECK(list[0] == "ok");
  CHECK(list[1] == "3 30 2\n");
  CHECK(call({"archive-list", std::to_string(nowMs() + 60000)}) == ha::Fields{"ok", ""});

  auto first = call({"archive-get", "3", "30", "2", "0"});
  REQUIRE(first.size() == 11);
  CHECK(first[0] == "ok");
  CHECK(first[1] == "job-x");
  CHECK(first[4] == "1");
  CHECK(first[5] == "node-9");
  CHECK(first[6] == std::to_string(text.size()));
  CHECK(first[8] == "0");
  CHECK(first[9].size() == LogArchive::kMaxPieceBytes);
  CHECK(first[10].empty());
  auto second = call({"archive-get", "3", "30", "2", std::to_string(LogArchive::kMaxPieceBytes)});
  REQUIRE(second.size() == 11);
  CHECK(second[8] == "1");
  CHECK(second[9].size() == 10);
  CHECK(second[10] == "marks");

  auto missing = call({"archive-get", "3", "31", "0", "0"});
  REQUIRE(missing.size() == 2);
  CHECK(missing[0] == "error");
  CHECK_THAT(missing[1], Catch::Contains("no complete log 3/31-0"));
  auto past = call({"archive-get", "3", "30", "2", "99999999"});
  REQUIRE(past.size() == 2);
  CHECK_THAT(past[1], Catch::Contains("past the end"));
  auto bad = call({"archive-get", "3", "x", "2", "0"});
  REQUIRE(bad.size() == 2);
  CHECK(bad[1] == "archive-get: replica id: \"x\" is not a number");
  CHECK(call({"archive-list", "soon"}) == ha::Fields{"error", "archive-list: since: \"soon\" is not a time in ms"});
  auto badWritten = call({"archive", "4", "j", "t", "r", "0", "40", "0", "n", "0", "1", "data", "", "soon"});
  REQUIRE(badWritten.size() == 2);
  CHECK_THAT(badWritten[1], Catch::Contains("written: \"soon\" is not a time in ms"));

  copies.stop();
  auto afterLead = call({"archive-list", "0"});
  REQUIRE(afterLead.size() == 2);
  CHECK_THAT(afterLead[1], Catch::Contains("this master leads now"));
}
