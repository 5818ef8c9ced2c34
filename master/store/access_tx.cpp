// Tx: users, tokens, grants and the audit trail (master/access/access.h). Like tx.cpp, each is a
// statement or two on the writer connection inside the write's savepoint.

#include <sqlite3.h>

#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store {
namespace {

template <typename... Args>
Result<bool> runSql(sql::Connection& conn, int& code, const char* sqlText, const Args&... args) {
  code = 0;
  auto prepared = conn.prepare(sqlText);
  if (!prepared.isOk()) return Result<bool>::fail(prepared.error());
  sql::Stmt stmt = std::move(prepared).value();
  stmt.bindAll(args...);
  auto r = stmt.run();
  if (!r.isOk()) code = stmt.lastError();
  return r;
}

Result<bool> described(Result<bool> r, const std::string& what) {
  if (r.isOk()) return r;
  return Result<bool>::fail(what + ": " + r.error());
}

std::string inQuotes(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

Result<bool> Tx::upsertUser(const UserRecord& u) {
  return guarded<bool>([&] {
    int code = 0;
    return described(runSql(conn_, code, R"sql(
      INSERT INTO users (name, admin, uid, gid, created_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (name) DO UPDATE SET
        admin = excluded.admin, uid = excluded.uid, gid = excluded.gid, created_at = excluded.created_at)sql",
      u.name, u.admin, u.uid, u.gid, u.createdAt), "storing user " + inQuotes(u.name));
  });
}

Result<bool> Tx::deleteUser(const std::string& name) {
  return guarded<bool>([&] {
    int code = 0;
    auto r = described(runSql(conn_, code, "DELETE FROM users WHERE name = ?", name), "deleting user " + inQuotes(name));
    if (r.isOk() && conn_.changes() == 0) return Result<bool>::fail("user " + inQuotes(name) + " does not exist");
    if (r.isOk())
      r = described(runSql(conn_, code, "UPDATE tokens SET revoked = 1 WHERE kind = 'api' AND user = ?", name),
                    "revoking the tokens of user " + inQuotes(name));
    if (r.isOk())
      r = described(runSql(conn_, code, "DELETE FROM queue_grants WHERE user = ?", name),
                    "deleting the queue grants of user " + inQuotes(name));
    if (r.isOk())
      r = described(runSql(conn_, code, "DELETE FROM dataset_grants WHERE grantee = ?", name),
                    "deleting the dataset grants of user " + inQuotes(name));
    return r;
  });
}

Result<bool> Tx::upsertToken(const TokenRecord& t) {
  return guarded<bool>([&] {
    int code = 0;
    return described(runSql(conn_, code, R"sql(
      INSERT INTO tokens (token_id, kind, user, secret_sha256, created_at, expires_at, uses_left, revoked,
                          description, last_used_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (token_id) DO UPDATE SET
        kind = excluded.kind, user = excluded.user, secret_sha256 = excluded.secret_sha256,
        created_at = excluded.created_at, expires_at = excluded.expires_at, uses_left = excluded.uses_left,
        revoked = excluded.revoked, description = excluded.description, last_used_at = excluded.last_used_at)sql",
      t.id, t.kind, t.user, t.secretSha256, t.createdAt, t.expiresAt, t.usesLeft, t.revoked, t.description,
      t.lastUsedAt), "storing token " + inQuotes(t.id));
  });
}

Result<bool> Tx::insertGrant(GrantTable table, const GrantRecord& g) {
  return guarded<bool>([&] {
    int code = 0;
    const char* text = table == GrantTable::Queue
                           ? "INSERT INTO queue_grants (queue, user) VALUES (?, ?) ON CONFLICT DO NOTHING"
                           : "INSERT INTO dataset_grants (dataset, grantee) VALUES (?, ?) ON CONFLICT DO NOTHING";
    return described(runSql(conn_, code, text, g.object, g.user),
                     std::string("granting ") + (table == GrantTable::Queue ? "queue " : "dataset ") +
                         inQuotes(g.object) + " to " + inQuotes(g.user));
  });
}

Result<bool> Tx::deleteGrant(GrantTable table, const GrantRecord& g) {
  return guarded<bool>([&] {
    int code = 0;
    const char* text = table == GrantTable::Queue ? "DELETE FROM queue_grants WHERE queue = ? AND user = ?"
                                                  : "DELETE FROM dataset_grants WHERE dataset = ? AND grantee = ?";
    std::string what = std::string(table == GrantTable::Queue ? "queue " : "dataset ") + g.object;
    auto r = described(runSql(conn_, code, text, g.object, g.user), "revoking " + what + " from " + g.user);
    if (r.isOk() && conn_.changes() == 0) return Result<bool>::fail(what + " is not granted to " + g.user);
    return r;
  });
}

Result<int64_t> Tx::appendAudit(AuditRecord& rec) {
  return guarded<int64_t>([&] {
    int code = 0;
    auto r = described(runSql(conn_, code, R"sql(
      INSERT INTO audit (at, user, source, request, target, outcome, message) VALUES (?, ?, ?, ?, ?, ?, ?))sql",
      rec.at, rec.user, rec.source, rec.request, rec.target, rec.outcome, rec.message), "storing an audit record");
    if (!r.isOk()) return Result<int64_t>::fail(r.error());
    rec.id = conn_.lastInsertRowid();
    return Result<int64_t>::ok(rec.id);
  });
}

Result<bool> Tx::recordRequest(const std::string& id, const std::string& user, const std::string& request,
                              const std::string& answer, int64_t atMs) {
  return guarded<bool>([&] {
    int code = 0;
    auto r = described(runSql(conn_, code, "INSERT INTO requests (id, user, request, answer, at) VALUES (?, ?, ?, ?, ?)",
                              id, user, request, answer, atMs),
                       "recording request " + id);
    if (!r.isOk()) return r;
    constexpr int64_t kDayMs = 24LL * 3600 * 1000;
    return described(runSql(conn_, code, "DELETE FROM requests WHERE at < ?", atMs - kDayMs), "forgetting old requests");
  });
}

}  // namespace yard::store
