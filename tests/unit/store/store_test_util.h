#pragma once
// What the store's tests share: a temp directory, opening a store, a write that must
// succeed, job rows with tasks, and files to damage.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>

#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store::test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "yard-store-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline std::unique_ptr<Store> openStore(const std::string& path) {
  auto s = Store::open(path);
  INFO((s.isOk() ? std::string() : s.error()));
  REQUIRE(s.isOk());
  return std::move(s).value();
}

inline State load(Store& store) {
  auto st = store.loadAll();
  INFO((st.isOk() ? std::string() : st.error()));
  REQUIRE(st.isOk());
  return std::move(st).value();
}

inline void writeOk(Store& store, Store::Write w) {
  auto r = store.writeSync(std::move(w));
  INFO((r.isOk() ? std::string() : r.error()));
  REQUIRE(r.isOk());
}

// A spec blob with NUL and high bytes, as capnp messages have.
inline std::string specBytes(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) % 256);
  return s;
}

inline JobRecord job(const std::string& name) {
  JobRecord j;
  j.name = name;
  j.queue = "team-a";
  j.state = JobState::Queued;
  j.reason = "waiting for quota";
  j.priority = 5;
  j.spec = specBytes(2048, static_cast<int>(name.size()));
  j.submittedAt = 1700000000123;
  return j;
}

// One job with three tasks in one write; the unit the crash test checks for wholeness.
inline int64_t insertJobWithTasks(Tx& tx, JobRecord& j) {
  auto id = tx.insertJob(j);
  if (!id.isOk()) return 0;
  std::vector<TaskRecord> tasks(3);
  for (int i = 0; i < 3; ++i) {
    tasks[i].jobId = j.id;
    tasks[i].name = "task-" + std::to_string(i);
    tasks[i].state = TaskState::Waiting;
  }
  tx.insertTasks(tasks);
  EventRecord ev{0, j.id, "", "", 0, j.submittedAt, "Queued", "submitted"};
  tx.appendEvent(ev);
  return j.id;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void overwrite(const std::string& path, size_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A closed store holding `jobs` jobs (with tasks), for the corruption tests.
inline void makeStore(const std::string& path, int jobs) {
  auto store = openStore(path);
  for (int i = 0; i < jobs; ++i) {
    writeOk(*store, [i](Tx& tx) {
      JobRecord j = job("job-" + std::to_string(i));
      insertJobWithTasks(tx, j);
    });
  }
}

inline void requireRefused(const std::string& path, const std::string& expected) {
  auto s = Store::open(path);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.error(), Catch::Contains(path));
  CHECK_THAT(s.error(), Catch::Contains(expected));
}

// Every row of every table of the database at `path`, in rowid order, with SQLite's quote():
// equal dumps are equal databases (ids, sqlite_sequence and the applied index included).
inline std::string dump(const std::string& path) {
  auto conn = sql::Connection::open(path, /*readOnly=*/true);
  REQUIRE(conn);
  auto tables = conn.value()->queryText("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  REQUIRE(tables);
  std::string out;
  std::string list = tables.value();
  for (size_t start = 0; start < list.size();) {
    size_t end = list.find("; ", start);
    std::string table = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? list.size() : end + 2;
    auto columns = conn.value()->queryText("SELECT name FROM pragma_table_info('" + table + "')");
    REQUIRE(columns);
    std::string expr;
    std::string cols = columns.value();
    for (size_t c = 0; c < cols.size();) {
      size_t e = cols.find("; ", c);
      expr += (expr.empty() ? "" : " || '|' || ") + std::string("quote(\"") +
              cols.substr(c, e == std::string::npos ? std::string::npos : e - c) + "\")";
      c = e == std::string::npos ? cols.size() : e + 2;
    }
    auto rows = conn.value()->queryText("SELECT " + expr + " FROM \"" + table + "\" ORDER BY rowid");
    REQUIRE(rows);
    out += table + ": " + rows.value() + "\n";
  }
  return out;
}

}  // namespace yard::store::test
