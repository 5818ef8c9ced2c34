#pragma once
// A thin RAII layer over the SQLite C API, internal to master/store. It exists so that
// sqlite3.h is included in exactly one .cpp file and so that every SQLite error reaches the
// caller as a Result with SQLite's own text, never as an ignored return code.
//
// Threading: a Connection (and the statements it caches) is used by one thread at a time;
// the owner of the Connection provides that exclusion (Store: the writer thread owns the
// write connection, a mutex guards the read connection).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"
#include "master/store/changeset.h"

struct sqlite3;
struct sqlite3_stmt;

namespace yard::store::sql {

// Marks a value to be bound as a BLOB rather than TEXT (the job spec is capnp bytes).
struct Blob {
  std::string_view bytes;
};

// A prepared statement borrowed from its Connection's cache. Reset and cleared on destruction
// so the next user of the same SQL starts clean. Move-only.
class Stmt {
 public:
  // `capture`: where a statement that writes records itself when it runs (Connection's
  // capture, changeset.h); null when the connection does not capture.
  explicit Stmt(sqlite3_stmt* stmt, Changeset* capture = nullptr) : stmt_(stmt), capture_(capture) {}
  Stmt(Stmt&& other) noexcept
      : stmt_(other.stmt_), capture_(other.capture_), binds_(std::move(other.binds_)), captured_(other.captured_) {
    other.stmt_ = nullptr;
  }
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt();

  // Binds parameters 1..N in order.
  template <typename... Args>
  Stmt& bindAll(const Args&... args) {
    int index = 0;
    (bindOne(++index, args), ...);
    return *this;
  }

  sqlite3_stmt* handle() const { return stmt_; }
  // Binds one captured value (changeset.h) at `index` (1-based).
  void bindValue(int index, const CapturedValue& v);

  // Advances: ok(true) when a row is ready, ok(false) when done, fail(SQLite's text) on error.
  Result<bool> step();
  // Runs a statement that returns no rows to completion.
  Result<bool> run();
  // The extended SQLite result code of the last failed step (e.g. SQLITE_CONSTRAINT_UNIQUE).
  int lastError() const { return lastError_; }

  // Column readers for the current row; NULL reads as 0 or "".
  int64_t i64(int col) const;
  int32_t i32(int col) const { return static_cast<int32_t>(i64(col)); }
  bool flag(int col) const { return i64(col) != 0; }
  double real(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;

 private:
  void bindOne(int index, int64_t v);
  void bindOne(int index, int32_t v) { bindOne(index, static_cast<int64_t>(v)); }
  void bindOne(int index, bool v) { bindOne(index, static_cast<int64_t>(v ? 1 : 0)); }
  void bindOne(int index, double v);
  void bindOne(int index, std::string_view v);
  void bindOne(int index, const std::string& v) { bindOne(index, std::string_view(v)); }
  void bindOne(int index, const char* v) { bindOne(index, std::string_view(v)); }
  void bindOne(int index, Blob v);

  void remember(int index, CapturedValue v);

  sqlite3_stmt* stmt_;
  int lastError_ = 0;
  Changeset* capture_ = nullptr;
  std::vector<CapturedValue> binds_;  // while capturing
  bool captured_ = false;             // recorded at its first step
};

class Connection {
 public:
  // Opens (creating if missing) the database at `path` read-write, or read-only when
  // `readOnly`. Opening does not read the file; the first statement does.
  static Result<std::unique_ptr<Connection>> open(const std::string& path, bool readOnly = false);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more statements without parameters (schema, pragmas, BEGIN/COMMIT).
  Result<bool> exec(std::string_view sql);
  // A cached prepared statement for `sql` (compiled once per connection).
  Result<Stmt> prepare(std::string_view sql);
  // The first column of the first row of `sql` as an integer (pragmas, counts).
  Result<int64_t> queryInt(std::string_view sql);
  // The first column of every row of `sql` as text (e.g. PRAGMA quick_check).
  Result<std::string> queryText(std::string_view sql);

  // Capture (changeset.h): from startCapture() on, every statement that writes, and every
  // SAVEPOINT, RELEASE and ROLLBACK TO, is recorded as it runs, until takeCapture() hands the
  // record over and stops. Statements prepared before startCapture() are captured too (the
  // cache hands out a Stmt that knows whether its connection captures).
  void startCapture();
  Changeset takeCapture();

  // The whole database as one image (sqlite3_serialize), as the caller's transaction sees it,
  // marked as a rollback-journal database so that it opens anywhere (raft snapshots).
  Result<std::string> serialize();
  // Replaces this database's content with `image` (a serialize() of a database of the same
  // page size) through SQLite's backup API, in one step; other connections see it at their
  // next transaction.
  Result<bool> restoreFrom(const std::string& image);

  int64_t lastInsertRowid() const;
  int64_t changes() const;
  // False once SQLite has rolled back the open transaction by itself (e.g. after an I/O
  // error or SQLITE_FULL), which voids every write made since BEGIN.
  bool inTransaction() const;
  void setBusyTimeoutMs(int ms);
  const std::string& path() const { return path_; }

 private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  std::string errorText() const;

  sqlite3* db_;
  std::string path_;
  std::map<std::string, sqlite3_stmt*, std::less<>> cache_;
  bool capturing_ = false;
  Changeset capture_;
};

// Runs `changes` (captured on another connection, changeset.h) on `conn`, in the caller's
// transaction: each statement with its values, checking it succeeds or fails as it did where
// it was captured. The first that does not is the error ("diverged at statement N: ...").
Result<bool> applyChangeset(Connection& conn, const Changeset& changes);

}  // namespace yard::store::sql
