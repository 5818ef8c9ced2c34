// The certificate each node name may use (docs/security.md, "Per-node authorization").

#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store {

Result<bool> Tx::putNodeCert(const NodeCertRecord& c) {
  return guarded<bool>([&] {
    auto prepared = conn_.prepare(R"sql(
      INSERT INTO node_certs (node, fingerprint, issued_at) VALUES (?, ?, ?)
      ON CONFLICT (node) DO UPDATE SET fingerprint = excluded.fingerprint, issued_at = excluded.issued_at)sql");
    if (!prepared.isOk()) return Result<bool>::fail(prepared.error());
    sql::Stmt stmt = std::move(prepared).value();
    stmt.bindAll(c.node, c.fingerprint, c.issuedAt);
    auto r = stmt.run();
    if (!r.isOk()) return Result<bool>::fail("storing the certificate of node \"" + c.node + "\": " + r.error());
    return r;
  });
}

Result<bool> Tx::deleteNodeCert(const std::string& node) {
  return guarded<bool>([&] {
    auto prepared = conn_.prepare("DELETE FROM node_certs WHERE node = ?");
    if (!prepared.isOk()) return Result<bool>::fail(prepared.error());
    sql::Stmt stmt = std::move(prepared).value();
    stmt.bindAll(node);
    auto r = stmt.run();
    if (!r.isOk()) return Result<bool>::fail("removing the certificate of node \"" + node + "\": " + r.error());
    return r;
  });
}

}  // namespace yard::store
