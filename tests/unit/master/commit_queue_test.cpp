// The commit-then-apply rule (master/commit/commit_queue.h) decided once: operations on one key run
// one at a time in arrival order, each after the previous one's write is applied; keys
// overlap; an exclusive operation holds every key while it commits; tryRun drops work on a
// busy key; completions after the queue is gone touch nothing. A real store underneath.
#include <catch2/catch.hpp>

#include <asio.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "master/commit/commit_queue.h"
#include "tests/unit/master/node_harness.h"

using namespace yard;
using master::CommitQueue;

namespace {

struct Fixture {
  Fixture() {
    auto s = store::Store::open(dir.path() + "/state.db");
    REQUIRE(s);
    db = std::move(s).value();
    queue = std::make_unique<CommitQueue>(io, *db);
  }
  void run(int rounds = 20) {
    for (int i = 0; i < rounds; ++i) {
      REQUIRE(db->writeSync([](store::Tx&) {}));
      io.restart();
      io.run_for(std::chrono::milliseconds(10));
    }
  }
  // An operation that records its start, commits a queue row, and records its apply.
  CommitQueue::Op op(const std::string& name, std::vector<std::string>& log) {
    return [name, &log](CommitQueue::Slot slot) {
      log.push_back("start " + name);
      store::QueueRecord q;
      q.name = name;
      q.state = QueueState::Running;
      q.placement = "binpack";
      slot.commit([q](store::Tx& tx) { tx.upsertQueue(q); }, [name, &log](Result<bool> r) {
        log.push_back("apply " + name + (r ? "" : " failed"));
      });
    };
  }

  test::TempDir dir;
  asio::io_context io;
  std::unique_ptr<store::Store> db;
  std::unique_ptr<CommitQueue> queue;
};

}  // namespace

TEST_CASE("operations on one key wait for the change in flight, in order", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k", f.op("a", log));
  f.queue->run("k", f.op("b", log));
  f.queue->run("k", f.op("c", log));
  CHECK(log == std::vector<std::string>{"start a"});
  CHECK(f.queue->busy("k"));
  f.run();
  CHECK(log == std::vector<std::string>{"start a", "apply a", "start b", "apply b", "start c", "apply c"});
  CHECK(!f.queue->busy("k"));
}

TEST_CASE("different keys overlap - tryRun drops work on a busy key", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k1", f.op("a", log));
  f.queue->run("k2", f.op("b", log));
  CHECK(log == std::vector<std::string>{"start a", "start b"});
  CHECK(!f.queue->tryRun("k1", f.op("dropped", log)));
  f.run();
  CHECK(f.queue->tryRun("k1", f.op("now", log)));
  f.run();
  CHECK(std::count(log.begin(), log.end(), "apply now") == 1);
  CHECK(std::count(log.begin(), log.end(), "start dropped") == 0);
}

TEST_CASE("an exclusive operation holds every key while it commits", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k1", f.op("before", log));
  CHECK(f.queue->tryRunExclusive(f.op("pass", log)));
  CHECK(f.queue->exclusiveBusy());
  CHECK(!f.queue->tryRunExclusive(f.op("second pass", log)));
  f.queue->run("k2", f.op("after", log));  // a free key still waits for the pass
  CHECK(log == std::vector<std::string>{"start before", "start pass"});
  f.run();
  auto pos = [&](const std::string& s) { return std::find(log.begin(), log.end(), s) - log.begin(); };
  CHECK(pos("apply pass") < pos("start after"));
  CHECK(pos("apply after") < static_cast<long>(log.size()));
}

TEST_CASE("done() frees the key without a write", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k", [&](CommitQueue::Slot s) {
    log.push_back("refused");
    s.done();
  });
  f.queue->run("k", f.op("next", log));
  f.run();
  CHECK(log == std::vector<std::string>{"refused", "start next", "apply next"});
}

TEST_CASE("a failed write is applied as a failure and frees the key", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k", [&](CommitQueue::Slot s) {
    s.commit([](store::Tx& tx) { tx.fail("refused by the test"); },
             [&](Result<bool> r) { log.push_back(r ? "ok" : r.error()); });
  });
  f.queue->run("k", f.op("next", log));
  f.run();
  REQUIRE(log.size() >= 2);
  CHECK(log[0] == "refused by the test");
  CHECK(log.back() == "apply next");
}

TEST_CASE("completions after the queue is gone touch nothing", "[commit]") {
  Fixture f;
  std::vector<std::string> log;
  f.queue->run("k", f.op("orphan", log));
  f.queue.reset();
  f.run();
  CHECK(log == std::vector<std::string>{"start orphan"});
}
