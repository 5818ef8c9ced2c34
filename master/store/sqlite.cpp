#include "master/store/sqlite.h"

#include <sqlite3.h>

#include <cassert>

namespace yard::store::sql {

Stmt::~Stmt() {
  if (stmt_ != nullptr) {
    // Reset ends any read transaction the statement holds (a live SELECT would otherwise
    // pin the WAL and block checkpoints); clearing keeps old bindings from leaking into the
    // next use of the cached statement.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

// Bound values are copied (SQLITE_TRANSIENT): callers bind temporaries and step later.
void Stmt::bindOne(int index, int64_t v) { sqlite3_bind_int64(stmt_, index, v); }
void Stmt::bindOne(int index, double v) { sqlite3_bind_double(stmt_, index, v); }
void Stmt::bindOne(int index, std::string_view v) {
  sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void Stmt::bindOne(int index, Blob v) {
  // An empty view may have a null data(); SQLite would store NULL. Keep it an empty blob.
  static const char kEmpty = 0;
  const char* data = v.bytes.empty() ? &kEmpty : v.bytes.data();
  sqlite3_bind_blob(stmt_, index, data, static_cast<int>(v.bytes.size()), SQLITE_TRANSIENT);
}

Result<bool> Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return Result<bool>::ok(true);
  if (rc == SQLITE_DONE) return Result<bool>::ok(false);
  sqlite3* db = sqlite3_db_handle(stmt_);
  lastError_ = sqlite3_extended_errcode(db);
  return Result<bool>::fail(sqlite3_errmsg(db));
}

Result<bool> Stmt::run() {
  for (;;) {
    auto r = step();
    if (!r.isOk() || !r.value()) return r;
  }
}

int64_t Stmt::i64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::string Stmt::blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  if (p == nullptr) return {};
  return std::string(static_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& path, bool readOnly) {
  using R = Result<std::unique_ptr<Connection>>;
  sqlite3* db = nullptr;
  int flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return R::fail(path + ": cannot open database: " + msg);
  }
  sqlite3_extended_result_codes(db, 1);
  return R::ok(std::unique_ptr<Connection>(new Connection(db, path)));
}

Connection::~Connection() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  // close_v2 never fails for a busy connection; all statements are finalized above anyway.
  sqlite3_close_v2(db_);
}

std::string Connection::errorText() const { return sqlite3_errmsg(db_); }

Result<bool> Connection::exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Result<bool>::ok(true);
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return Result<bool>::fail(msg);
}

Result<Stmt> Connection::prepare(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Result<Stmt>::ok(Stmt(it->second));
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Result<Stmt>::fail(errorText());
  // A statement with no SQL (only whitespace/comments) compiles to null: a bug in our SQL.
  assert(stmt != nullptr);
  cache_.emplace(std::string(sql), stmt);
  return Result<Stmt>::ok(Stmt(stmt));
}

Result<int64_t> Connection::queryInt(std::string_view sql) {
  auto stmt = prepare(sql);
  if (!stmt.isOk()) return Result<int64_t>::fail(stmt.error());
  Stmt s = std::move(stmt).value();
  auto row = s.step();
  if (!row.isOk()) return Result<int64_t>::fail(row.error());
  return Result<int64_t>::ok(row.value() ? s.i64(0) : 0);
}

Result<std::string> Connection::queryText(std::string_view sql) {
  auto stmt = prepare(sql);
  if (!stmt.isOk()) return Result<std::string>::fail(stmt.error());
  Stmt s = std::move(stmt).value();
  std::string out;
  for (;;) {
    auto row = s.step();
    if (!row.isOk()) return Result<std::string>::fail(row.error());
    if (!row.value()) break;
    if (!out.empty()) out += "; ";
    out += s.text(0);
  }
  return Result<std::string>::ok(out);
}

int64_t Connection::lastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
int64_t Connection::changes() const { return sqlite3_changes64(db_); }
bool Connection::inTransaction() const { return sqlite3_get_autocommit(db_) == 0; }
void Connection::setBusyTimeoutMs(int ms) { sqlite3_busy_timeout(db_, ms); }

}  // namespace yard::store::sql
