// The master's log archive: pieces in order, completion that a crash cannot fake, the
// bound per log, the retention sweep (fake clock), deleted jobs' logs by name, and who may
// archive what (the agent API's check).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "master/config/config.h"
#include "master/logs/log_archive.h"
#include "master/server/log_copies.h"

namespace fs = std::filesystem;
using namespace yard;
using namespace yard::master;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/yard-archive-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

int64_t wallMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

ArchivedLogMeta meta(int64_t jobId, const std::string& job, int64_t replicaId, int32_t attempt) {
  return {jobId, job, "train", "worker", 1, replicaId, attempt, "node-a"};
}

}  // namespace

TEST_CASE("a log is served complete only once its last piece is in", "[archive]") {
  TempDir tmp;
  int64_t now = wallMs();
  LogArchive archive({tmp.path + "/logs", 1 << 20, 86400000}, [&] { return now; });
  auto m = meta(7, "j1", 42, 0);
  REQUIRE(archive.write(m, 0, "", false).value() == 0);
  REQUIRE(archive.write(m, 0, "one\ntwo\n", false).value() == 8);
  REQUIRE(archive.write(m, 8, "three\n", false).value() == 14);

  // The agent stops here (its node is lost, or the master crashes): the log is a .part and
  // is served as incomplete, never as complete.
  auto partial = archive.find(7, 42, 0);
  REQUIRE(partial);
  CHECK_FALSE(partial->complete);
  CHECK(partial->bytes == 14);
  CHECK_FALSE(fs::exists(tmp.path + "/logs/7/42-0.log"));
  CHECK(archive.read(*partial, -1).value() == "one\ntwo\nthree\n");

  // A piece that does not continue what is held is refused, naming the field and the value.
  auto gap = archive.write(m, 20, "x\n", false);
  REQUIRE_FALSE(gap);
  CHECK(gap.error() == "archiveLog.offset: 20 does not continue the log of replica 42-0, which holds 14 bytes");

  REQUIRE(archive.write(m, 14, "four", true).value() == 18);
  auto done = archive.find(7, 42, 0);
  REQUIRE(done);
  CHECK(done->complete);
  CHECK(done->meta.label() == "train/worker/1");
  CHECK(done->meta.job == "j1");
  CHECK(done->meta.node == "node-a");
  CHECK_FALSE(fs::exists(tmp.path + "/logs/7/42-0.part"));
  CHECK(archive.read(*done, -1).value() == "one\ntwo\nthree\nfour");
  CHECK(archive.read(*done, 2).value() == "three\nfour");

  // The last piece sent again (its answer was lost) is answered as held; a restart from 0
  // (an agent that restarted) replaces the log, which stays served until the new one is in.
  CHECK(archive.write(m, 14, "four", true).value() == 18);
  REQUIRE(archive.write(m, 0, "again\n", false));
  CHECK(archive.find(7, 42, 0)->complete);
  CHECK(archive.read(*archive.find(7, 42, 0), -1).value() == "one\ntwo\nthree\nfour");
  REQUIRE(archive.write(m, 6, "", true));
  CHECK(archive.read(*archive.find(7, 42, 0), -1).value() == "again\n");
}

TEST_CASE("the archive keeps at most its bound of one log, plus the marker line", "[archive]") {
  TempDir tmp;
  LogArchive archive({tmp.path + "/logs", 4096, 86400000}, wallMs);
  auto m = meta(1, "j", 1, 0);
  std::string big(4096 + LogArchive::kMarkerRoom, 'x');
  REQUIRE(archive.write(m, 0, big, true));
  auto over = archive.write(m, 0, big + "y", true);
  REQUIRE_FALSE(over);
  CHECK(over.error() ==
        "archiveLog.offset: the log would hold 4353 bytes, more than the archive keeps of one log (4096 and a marker line)");
  auto huge = archive.write(m, 0, std::string(LogArchive::kMaxPieceBytes + 1, 'x'), false);
  REQUIRE_FALSE(huge);
  CHECK(huge.error() == "archiveLog.data: 1048577 bytes is more than one piece may carry (1048576)");
}

TEST_CASE("the sweep removes logs older than the retention, deleted jobs' included", "[archive]") {
  TempDir tmp;
  int64_t now = wallMs();
  const int64_t day = 86400000;
  LogArchive archive({tmp.path + "/logs", 1 << 20, 30 * day}, [&] { return now; });
  REQUIRE(archive.write(meta(1, "old-job", 10, 0), 0, "first run\n", true));
  REQUIRE(archive.write(meta(2, "old-job", 20, 0), 0, "second run\n", false));  // its node was lost
  REQUIRE(archive.write(meta(2, "old-job", 21, 0), 0, "", true));

  // The name finds the newest job that had it (the job itself may be deleted).
  auto logs = archive.jobLogs("old-job");
  REQUIRE(logs.size() == 2);
  CHECK(logs[0].meta.jobId == 2);
  CHECK(archive.jobLogs("no-such-job").empty());

  now += 29 * day;
  CHECK(archive.sweep() == 0);
  CHECK(archive.jobLogs("old-job").size() == 2);

  // A log written later keeps its own time.
  fs::last_write_time(tmp.path + "/logs/2/21-0.log", fs::file_time_type::clock::now() + std::chrono::hours(24 * 5));
  now += 2 * day;
  CHECK(archive.sweep() == 2);
  CHECK_FALSE(fs::exists(tmp.path + "/logs/1"));
  CHECK_FALSE(fs::exists(tmp.path + "/logs/2/20-0.part"));
  CHECK_FALSE(fs::exists(tmp.path + "/logs/2/20-0.meta"));
  REQUIRE(archive.jobLogs("old-job").size() == 1);
  now += 10 * day;
  CHECK(archive.sweep() == 1);
  CHECK(fs::is_empty(tmp.path + "/logs"));
  CHECK(archive.jobLogs("old-job").empty());
}

TEST_CASE("all logs together are bounded - the oldest complete ones go first", "[archive]") {
  TempDir tmp;
  LogArchive archive({tmp.path + "/logs", 4096, 86400000, 10000}, wallMs);
  auto past = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (int i = 0; i < 4; ++i) {  // 8,000 bytes, each an hour older than the next
    REQUIRE(archive.write(meta(1, "j", 10 + i, 0), 0, std::string(2000, 'a'), true));
    fs::last_write_time(tmp.path + "/logs/1/" + std::to_string(10 + i) + "-0.log", past + std::chrono::minutes(i));
  }
  REQUIRE(archive.write(meta(2, "k", 20, 0), 0, std::string(1000, 'b'), false));  // still arriving
  CHECK(archive.jobLogs("j").size() == 4);
  // 3,000 more: 12,000 in all, over 10,000; down to 9,000 by removing the two oldest.
  REQUIRE(archive.write(meta(2, "k", 21, 0), 0, std::string(3000, 'c'), true));
  CHECK_FALSE(fs::exists(tmp.path + "/logs/1/10-0.log"));
  CHECK_FALSE(fs::exists(tmp.path + "/logs/1/10-0.meta"));
  CHECK_FALSE(fs::exists(tmp.path + "/logs/1/11-0.log"));
  CHECK(fs::exists(tmp.path + "/logs/1/12-0.log"));
  CHECK(fs::exists(tmp.path + "/logs/2/20-0.part"));  // a log being received is not taken
  CHECK(fs::exists(tmp.path + "/logs/2/21-0.log"));
  CHECK(archive.jobLogs("j").size() == 2);
  CHECK(archive.keepTotal() == 0);
}

TEST_CASE("tailOffset finds the last lines", "[archive]") {
  CHECK(tailOffset("a\nb\nc\n", 2) == 2);
  CHECK(tailOffset("a\nb\nc", 1) == 4);
  CHECK(tailOffset("a\nb\n", 5) == 0);
  CHECK(tailOffset("a\nb\n", 0) == 4);
  CHECK(tailOffset("a\nb\n", -1) == 0);
}

TEST_CASE("only the node an attempt was placed on may archive its log", "[archive]") {
  TempDir tmp;
  asio::io_context io;
  LogArchiveService service(io, {tmp.path + "/logs", 1 << 20, 86400000}, wallMs, nullptr);
  auto request = [&](const std::string& node, const std::string& data) {
    capnp::MallocMessageBuilder msg;
    auto a = msg.initRoot<agentapi::ArchiveLog>();
    a.setToken("t");
    a.setNode(node);
    a.setJob("gone");
    a.setReplicaId(5);
    a.setAttempt(1);
    a.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
    a.setLast(true);
    std::optional<Result<uint64_t>> out;
    service.receive(a.asReader(), nullptr, [&](Result<uint64_t> r) { out = r; });
    for (int i = 0; i < 500 && !out; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      io.restart();
      io.poll();
    }
    REQUIRE(out);
    return *out;
  };
  // Unknown to the master (no job, no heartbeat placed it): nothing is stored.
  auto refused = request("node-a", "secret\n");
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == "archiveLog: replica 5-1 of job gone was not placed on node node-a");
  CHECK_FALSE(fs::exists(tmp.path + "/logs"));

  // A heartbeat's answer listed it for node-a; then the job was deleted.
  JobEntry job;
  job.rec.id = 3;
  job.rec.name = "gone";
  job.tasks.resize(1);
  job.tasks[0].rec.name = "run";
  store::ReplicaRecord rec;
  rec.id = 5;
  rec.attempt = 1;
  rec.role = "run";
  rec.index = 0;
  rec.node = "node-a";
  service.notePlacement("node-a", job, 0, rec);
  CHECK_FALSE(request("node-b", "not mine\n"));
  auto stored = request("node-a", "its output\n");
  REQUIRE(stored);
  CHECK(stored.value() == 11);

  std::optional<std::vector<LogArchive::Entry>> logs;
  service.jobLogs("gone", [&](std::vector<LogArchive::Entry> e) { logs = std::move(e); });
  for (int i = 0; i < 500 && !logs; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    io.restart();
    io.poll();
  }
  REQUIRE(logs);
  REQUIRE(logs->size() == 1);
  CHECK((*logs)[0].meta.label() == "run/run/0");
  CHECK((*logs)[0].complete);
  service.stop();
}

TEST_CASE("log_retention and log_archive_max_bytes are read from the master's config", "[archive]") {
  auto c = parseMasterConfig("log_retention = \"7d\"\nlog_archive_max_bytes = \"1Mi\"\n", "m.toml");
  REQUIRE(c);
  CHECK(c.value().logRetentionSeconds == 7 * 86400);
  CHECK(c.value().logArchiveMaxBytes == 1 << 20);
  auto defaults = parseMasterConfig("", "m.toml");
  CHECK(defaults.value().logRetentionSeconds == 30 * 86400);
  CHECK(defaults.value().logArchiveMaxBytes == 10 << 20);
  auto small = parseMasterConfig("log_archive_max_bytes = 100\n", "m.toml");
  REQUIRE_FALSE(small);
  CHECK(small.error() == "m.toml: log_archive_max_bytes: 100 must be from 4Ki to 1Ti (like \"10Mi\")");
  auto zero = parseMasterConfig("log_retention = 0\n", "m.toml");
  REQUIRE_FALSE(zero);
  CHECK(zero.error() == "m.toml: log_retention: must be a duration from 1s to 3650d (like \"30d\")");
  CHECK(defaults.value().logArchiveMaxTotalBytes == int64_t{20} << 30);
  auto total = parseMasterConfig("log_archive_max_total_bytes = \"5Gi\"\n", "m.toml");
  REQUIRE(total);
  CHECK(total.value().logArchiveMaxTotalBytes == int64_t{5} << 30);
  auto under = parseMasterConfig("log_archive_max_total_bytes = \"1Mi\"\n", "m.toml");
  REQUIRE_FALSE(under);
  CHECK(under.error() == "m.toml: log_archive_max_total_bytes: 1048576 must be from log_archive_max_bytes (10485760) to "
                         "1Pi (like \"20Gi\")");
}

TEST_CASE("a log is completed only once its copies are made", "[archive]") {
  TempDir tmp;
  int64_t now = wallMs();
  LogArchive archive({tmp.path + "/logs", 1 << 20, 86400000}, [&] { return now; });
  auto m = meta(7, "j1", 42, 0);
  std::string seen;
  LogArchive::Complete refuse = [&](const std::string& part) {
    std::ifstream in(part);
    seen.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return Result<bool>::fail("the log is held by this master and 0 of the 2 others");
  };
  REQUIRE(archive.write(m, 0, "one\n", false));
  auto r = archive.write(m, 4, "two\n", true, {}, refuse);
  REQUIRE_FALSE(r);
  CHECK(r.error() == "the log is held by this master and 0 of the 2 others");
  CHECK(seen == "one\ntwo\n");  // the whole log, fsynced, before the rename
  CHECK_FALSE(archive.find(7, 42, 0)->complete);
  // The agent ships it again from the start; now the copies are made.
  LogArchive::Complete accept = [](const std::string&) { return Result<bool>::ok(true); };
  REQUIRE(archive.write(m, 0, "one\ntwo\n", true, {}, accept).value() == 8);
  CHECK(archive.find(7, 42, 0)->complete);
}

TEST_CASE("a follower writes the leader's copies of a log to its own archive", "[archive]") {
  TempDir tmp;
  int64_t now = wallMs();
  LogCopies copies({tmp.path + "/logs", 1 << 20, 86400000}, [&] { return now; });
  auto call = [&](ha::Fields f) {
    std::promise<ha::Fields> p;
    copies.receive(std::move(f), [&p](ha::Fields a) { p.set_value(std::move(a)); });
    return p.get_future().get();
  };
  auto fields = [](std::string jobId, std::string offset, std::string last, std::string data) {
    return ha::Fields{"archive", jobId, "j1", "train", "worker", "1", "42", "0", "node-a", offset, last, data, "1000 0\n"};
  };
  CHECK(call(fields("7", "0", "0", "one\n")) == ha::Fields{"ok", "4"});
  CHECK(call(fields("7", "4", "1", "two\n")) == ha::Fields{"ok", "8"});
  LogArchive archive({tmp.path + "/logs", 1 << 20, 86400000}, [&] { return now; });
  auto e = archive.find(7, 42, 0);
  REQUIRE(e);
  CHECK(e->complete);
  CHECK(e->meta.job == "j1");
  CHECK(e->meta.label() == "train/worker/1");
  CHECK(archive.read(*e, -1).value() == "one\ntwo\n");
  // The same checks as the leader's: a gap, and malformed fields, each named.
  auto gap = call(fields("7", "20", "1", "x"));
  REQUIRE(gap.size() == 2);
  CHECK(gap[0] == "error");
  CHECK(gap[1].find("archiveLog.offset: 20") != std::string::npos);
  CHECK(call(fields("-3", "0", "1", "x")) == ha::Fields{"error", "archive: job id: \"-3\" is not a positive number"});
  CHECK(call(fields("7", "0", "yes", "x")) == ha::Fields{"error", "archive: last: must be 0 or 1, not \"yes\""});
  CHECK(call({"archive", "7"}) == ha::Fields{"error", "archive: expected 13 or 14 fields, not 2"});
  CHECK(call({"archived"}) == ha::Fields{"error", "archived: not a log archive call"});
  // Once this master leads, its own archive service writes the directory.
  copies.stop();
  CHECK(call(fields("8", "0", "1", "x")) == ha::Fields{"error", "archive: this master leads now"});
}
