#include "master/store/sqlite.h"

#include <cstring>

#include <sqlite3.h>

#include <cassert>
#include <string_view>
#include <utility>

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

void Stmt::remember(int index, CapturedValue v) {
  if (!capture_ || index < 1) return;
  if (binds_.size() < size_t(index)) binds_.resize(size_t(index));
  binds_[size_t(index) - 1] = std::move(v);
}

// Bound values are copied (SQLITE_TRANSIENT): callers bind temporaries and step later.
void Stmt::bindOne(int index, int64_t v) {
  sqlite3_bind_int64(stmt_, index, v);
  if (capture_) remember(index, {CapturedValue::Int, v, 0, {}});
}
void Stmt::bindOne(int index, double v) {
  sqlite3_bind_double(stmt_, index, v);
  if (capture_) remember(index, {CapturedValue::Real, 0, v, {}});
}
void Stmt::bindOne(int index, std::string_view v) {
  sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (capture_) remember(index, {CapturedValue::Text, 0, 0, std::string(v)});
}
void Stmt::bindOne(int index, Blob v) {
  // An empty view may have a null data(); SQLite would store NULL. Keep it an empty blob.
  static const char kEmpty = 0;
  const char* data = v.bytes.empty() ? &kEmpty : v.bytes.data();
  sqlite3_bind_blob(stmt_, index, data, static_cast<int>(v.bytes.size()), SQLITE_TRANSIENT);
  if (capture_) remember(index, {CapturedValue::Blob, 0, 0, std::string(v.bytes)});
}

void Stmt::bindValue(int index, const CapturedValue& v) {
  switch (v.kind) {
    case CapturedValue::Null:
      sqlite3_bind_null(stmt_, index);
      remember(index, v);
      break;
    case CapturedValue::Int: bindOne(index, v.i); break;
    case CapturedValue::Real: bindOne(index, v.r); break;
    case CapturedValue::Text: bindOne(index, std::string_view(v.s)); break;
    case CapturedValue::Blob: bindOne(index, Blob{v.s}); break;
  }
}

namespace {

// What a replica of the database must run too: statements that write, and the savepoints
// that scope them (SQLite counts transaction control as read-only). BEGIN, COMMIT and a whole
// ROLLBACK are the capturer's own business: a changeset is applied in its own transaction.
bool replicates(sqlite3_stmt* stmt) {
  if (!sqlite3_stmt_readonly(stmt)) return true;
  std::string_view sql = sqlite3_sql(stmt);
  return sql.starts_with("SAVEPOINT") || sql.starts_with("RELEASE") || sql.starts_with("ROLLBACK TO");
}

// What a row change did, for checking a replay: the rows changed, and an INSERT's rowid.
void rowEffects(sqlite3_stmt* stmt, CapturedStatement& c) {
  if (!c.ok || sqlite3_stmt_readonly(stmt)) return;
  sqlite3* db = sqlite3_db_handle(stmt);
  c.changes = sqlite3_changes64(db);
  if (std::string_view(sqlite3_sql(stmt)).starts_with("INSERT")) c.rowid = sqlite3_last_insert_rowid(db);
}

}  // namespace

Result<bool> Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (capture_ && !captured_ && replicates(stmt_)) {
    captured_ = true;
    CapturedStatement c{sqlite3_sql(stmt_), binds_, rc == SQLITE_ROW || rc == SQLITE_DONE};
    rowEffects(stmt_, c);
    capture_->push_back(std::move(c));
  }
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

Result<std::string> Connection::serialize() {
  using R = Result<std::string>;
  sqlite3_int64 size = 0;
  unsigned char* bytes = sqlite3_serialize(db_, "main", &size, 0);
  if (bytes == nullptr) return R::fail(path_ + ": cannot copy the database: " + errorText());
  std::string image(reinterpret_cast<const char*>(bytes), static_cast<size_t>(size));
  sqlite3_free(bytes);
  // Bytes 18 and 19 of the header: the file format versions, 2 for WAL. An in-memory copy
  // cannot be in WAL mode.
  if (image.size() >= 100) image[18] = image[19] = 1;
  return R::ok(std::move(image));
}

Result<bool> Connection::restoreFrom(const std::string& image) {
  using R = Result<bool>;
  sqlite3* mem = nullptr;
  if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(mem);
    return R::fail("cannot open an in-memory database");
  }
  auto* copy = static_cast<unsigned char*>(sqlite3_malloc64(image.size()));
  if (copy == nullptr) {
    sqlite3_close_v2(mem);
    return R::fail("out of memory for a database image of " + std::to_string(image.size()) + " bytes");
  }
  std::memcpy(copy, image.data(), image.size());
  int rc = sqlite3_deserialize(mem, "main", copy, static_cast<sqlite3_int64>(image.size()),
                               static_cast<sqlite3_int64>(image.size()),
                               SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
  if (rc != SQLITE_OK) {
    std::string why = sqlite3_errmsg(mem);
    sqlite3_close_v2(mem);
    return R::fail("not a database image: " + why);
  }
  sqlite3_backup* backup = sqlite3_backup_init(db_, "main", mem, "main");
  if (backup == nullptr) {
    std::string why = errorText();
    sqlite3_close_v2(mem);
    return R::fail(path_ + ": cannot restore: " + why);
  }
  rc = sqlite3_backup_step(backup, -1);
  int finished = sqlite3_backup_finish(backup);
  sqlite3_close_v2(mem);
  if (rc != SQLITE_DONE) return R::fail(path_ + ": restore failed: " + std::string(sqlite3_errstr(rc)));
  if (finished != SQLITE_OK) return R::fail(path_ + ": restore failed: " + errorText());
  return R::ok(true);
}

Result<bool> Connection::exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Result<bool>::ok(true);
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return Result<bool>::fail(msg);
}

void Connection::startCapture() {
  capture_.clear();
  capturing_ = true;
}

Changeset Connection::takeCapture() {
  capturing_ = false;
  return std::exchange(capture_, {});
}

Result<Stmt> Connection::prepare(std::string_view sql) {
  Changeset* capture = capturing_ ? &capture_ : nullptr;
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Result<Stmt>::ok(Stmt(it->second, capture));
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Result<Stmt>::fail(errorText());
  // A statement with no SQL (only whitespace/comments) compiles to null: a bug in our SQL.
  assert(stmt != nullptr);
  cache_.emplace(std::string(sql), stmt);
  return Result<Stmt>::ok(Stmt(stmt, capture));
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

Result<bool> applyChangeset(Connection& conn, const Changeset& changes) {
  for (size_t i = 0; i < changes.size(); ++i) {
    const CapturedStatement& c = changes[i];
    // Built only when it is said: a follower applies every statement of every change.
    auto diverged = [&](const std::string& why) {
      return Result<bool>::fail("diverged at statement " + std::to_string(i + 1) + " of " + std::to_string(changes.size()) +
                                " (" + c.sql.substr(0, 60) + "): " + why);
    };
    auto stmt = conn.prepare(c.sql);
    if (!stmt) return diverged("it does not compile here: " + stmt.error());
    Stmt s = std::move(stmt).value();
    for (size_t p = 0; p < c.params.size(); ++p) s.bindValue(int(p + 1), c.params[p]);
    auto r = s.run();
    if (r.isOk() != c.ok) return diverged(c.ok ? "it failed here: " + r.error() : "it succeeded here but failed there");
    CapturedStatement here;
    here.ok = r.isOk();
    rowEffects(s.handle(), here);
    if (here.changes != c.changes)
      return diverged("it changed " + std::to_string(here.changes) + " rows here, " + std::to_string(c.changes) + " there");
    if (here.rowid != c.rowid)
      return diverged("it inserted rowid " + std::to_string(here.rowid) + " here, " + std::to_string(c.rowid) + " there");
  }
  return Result<bool>::ok(true);
}

}  // namespace yard::store::sql
