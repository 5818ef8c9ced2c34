#pragma once
// Who may do what on the master (docs/security.md, "Users, roles and grants"): users, their
// API tokens, the agents' join tokens, queue and dataset grants, and the audit trail.
//
// Access keeps the working copy of users, tokens and grants in memory (loaded at start-up)
// and commits every change to the store first, applying it here only once durable, like the
// catalog (docs/design.md §3, "Durable before visible"). So a revoked token is refused from
// the moment its revoke committed, before the revoke's answer goes out.
//
// Secrets: a token is "yard_" + an 8-character id + "_" + 43 characters of base64url (32
// random bytes). The store and this cache keep only the SHA-256 of the whole secret; a
// token is found by its id and its hash compared in constant time. No secret is ever put in
// a log line, an error message or an audit record.
//
// The rules themselves (who may do what) are the small pure functions in namespace `rules`
// below, tested by tables (tests/unit/master/access_test.cpp); the client API applies them
// (master/api/client/access.cpp).
//
// REQUIRES: every method runs on the io thread, except where noted. Completions are posted
// back to it. The io_context and the store outlive Access.

#include <asio.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"
#include "master/commit/commit_queue.h"
#include "master/store/store.h"

namespace yard::master {

// The authenticated sender of a request, for every handler.
struct Caller {
  std::string user;
  bool admin = false;
  int64_t uid = -1, gid = -1;  // the user's mapping; -1 = not mapped
  std::string source;          // the peer's address (Connection::peer())
  std::string tokenId;         // the API token it used (never the secret)
};

// The built-in administrator, present from the first start; cannot be deleted.
inline constexpr const char* kAdminUser = "admin";
// How long a join token lives when its creator gives no --ttl.
inline constexpr int64_t kDefaultJoinTokenTtlMs = 24LL * 3600 * 1000;
// What one user may hold (each token is kept in memory and listed), and a description's size.
inline constexpr size_t kMaxApiTokensPerUser = 100;
inline constexpr size_t kMaxTokenDescription = 256;

// A new token's secret, as returned once to whoever created it.
struct IssuedToken {
  std::string id;
  std::string secret;
  int64_t expiresAt = 0;  // unix ms; 0 = never
};

// Token format and hashing (pure).
namespace tokens {
inline constexpr size_t kIdChars = 8;
inline constexpr size_t kSecretChars = 43;  // base64url of 32 bytes, unpadded
// A fresh "yard_<id>_<secret>" from /dev/urandom.
IssuedToken generate();
// A fresh id alone (kIdChars of the id alphabet).
std::string newId();
// "yard_<id>_<secret>" whose secret is HMAC-SHA256(key, caller, request id, id), base64url:
// the same inputs give the same secret, so a create sent again with its request id is
// answered with the secret the first send made, which no master stores. Without the key
// nobody can compute it; with it (every master holds the cluster CA's key) one could anyway.
IssuedToken derived(std::string_view key, const std::string& caller, const std::string& requestId, const std::string& id);
// The id of a well-formed secret; nullopt for anything else (wrong prefix, length, alphabet).
std::optional<std::string> idOf(std::string_view secret);
// Lower-case hex SHA-256 of `secret`.
std::string sha256Hex(std::string_view secret);
}  // namespace tokens

// The authorization rules, pure: each returns nullopt when allowed, else the refusal written
// for the person at the terminal ("user bob may not ...").
namespace rules {
// Requests only admins may make; `what` is the action in words ("create queues").
std::optional<std::string> adminOnly(const Caller& c, const std::string& what);
// Acting on a job: admins on every job, users on their own. `verb`: "cancel", "see", ...
std::optional<std::string> onJob(const Caller& c, const std::string& verb, const std::string& job,
                                 const std::string& owner);
// Submitting to `queue`: admins anywhere, users where granted.
std::optional<std::string> submitTo(const Caller& c, const std::string& queue, bool granted);
// A host task (image: host) in `queue`: admins anywhere; users only in a queue that allows
// host tasks, and only with a uid/gid mapping (the task runs as it).
std::optional<std::string> hostTask(const Caller& c, const std::string& queue, bool queueAllowsHostTasks);
// Mounting `dataset` from a job in `queue`: admins any; users when it is granted to them or
// to the queue ("queue:Q").
std::optional<std::string> mountDataset(const Caller& c, const std::string& dataset, const std::string& queue,
                                        bool grantedToUser, bool grantedToQueue);
// job list's scope: a user lists their own jobs; --all and --owner of another are for admins.
std::optional<std::string> listJobs(const Caller& c, bool all, const std::string& owner);
// Tokens of `user` (create, list): admins anyone's, users their own.
std::optional<std::string> userTokens(const Caller& c, const std::string& verb, const std::string& user);
// Whether a token is usable at `now`: nullopt, or why not ("expired at ...", "revoked", ...).
std::optional<std::string> tokenUsable(const store::TokenRecord& t, int64_t now);
// "" when `name` is a valid user name (the rules of queue names), else why not.
std::string checkUserName(const std::string& name);
}  // namespace rules

// authenticate()'s rules against the stored tokens and users rather than the registry's
// (a follower, which holds none: docs/ha.md, "When no master leads"). Records no use.
// Thread-safe (the store's reads are).
Result<Caller> authenticateStored(store::Store& store, std::string_view secret, const std::string& source, int64_t now);

class Access {
 public:
  using Clock = std::function<int64_t()>;  // unix ms
  using Log = std::function<void(const std::string&)>;
  using Reply = std::function<void(Result<bool>)>;

  Access(asio::io_context& io, store::Store& store, Clock now, Log log);
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;

  // Loads users, tokens and grants. When the store has no users yet (the first start, or the
  // first since users existed) creates the built-in admin and its API token, whose secret
  // goes to `<dataDir>/admin.token` (0600, one line) and nowhere else; logs the path.
  // REQUIRES: before the io loop runs (it writes synchronously).
  Result<bool> load(const store::State& state, const std::string& dataDir);
  // The config's join_token (may be empty): accepted by redeemJoinToken besides token objects.
  void setStaticJoinToken(std::string token) { staticJoinToken_ = std::move(token); }
  static std::string adminTokenPath(const std::string& dataDir) { return dataDir + "/admin.token"; }

  // The caller holding API token `secret`, or why not: "not authenticated: no token (...)"
  // when empty, "not authenticated: the token is unknown, expired or revoked" otherwise.
  Result<Caller> authenticate(std::string_view secret, const std::string& source);

  // Agents (the lead's join, docs/security.md "Agent bootstrap"): accepts the static join
  // token or a live join-token object (not expired, not revoked, uses left). A counted use is
  // committed before done(nullopt). Refusals: "join token expired at ...", "join token used
  // up", "join token revoked", "join token unknown". The secret appears in no message or log.
  void redeemJoinToken(const std::string& secret, const std::string& node,
                       std::function<void(std::optional<std::string> refusal)> done);
  // The same, with the peer's `source` for the audit record, and `precheck`: run once the
  // token is known good and before a use is spent; its refusal is the join's (audited as
  // refused, no use spent).
  void redeemJoinToken(const std::string& secret, const std::string& node, const std::string& source,
                       std::function<std::optional<std::string>()> precheck,
                       std::function<void(std::optional<std::string> refusal)> done);

  // A master's join (docs/ha.md, "Joining"; it is given the cluster CA's key). With a
  // master_join_token (setMasterJoinToken) only that token is accepted: an agent's join token,
  // static or made by yardctl, is refused ("join token refused for a master: ..."). Without
  // one, as redeemJoinToken. Audited as "master.join", target `master`, either way.
  void setMasterJoinToken(std::string token) { masterJoinToken_ = std::move(token); }
  // `source`: the joiner's IP:PORT, for the audit record.
  void redeemMasterJoinToken(const std::string& secret, const std::string& master, const std::string& source,
                             std::function<void(std::optional<std::string> refusal)> done);

  // Users.
  // `also`: written in the same transaction (a request id's record, docs/ha.md).
  void createUser(const store::UserRecord& user, Reply reply, std::function<void(store::Tx&)> also = {});
  // Revokes the user's API tokens and drops their grants; their jobs keep their owner.
  void deleteUser(const std::string& name, Reply reply);
  const std::map<std::string, store::UserRecord>& users() const { return users_; }
  const store::UserRecord* user(const std::string& name) const;
  int32_t liveTokens(const std::string& user) const;  // API tokens neither expired nor revoked

  // Tokens. ttlMs 0 = never expires (API) or kDefaultJoinTokenTtlMs (join); uses 0 = unlimited.
  // A create with a request id (docs/ha.md, "Request ids") names its token's id beforehand
  // (newTokenId) and gets a derived secret (tokens::derived, with the secret key); `also` is
  // written in the token's transaction (the request's record). Without one: a random secret.
  struct Origin {
    std::string tokenId, requestId, caller;
    std::function<void(store::Tx&)> also;
  };
  void createApiToken(const std::string& user, int64_t ttlMs, const std::string& description,
                      std::function<void(Result<IssuedToken>)> done, Origin origin = {});
  void createJoinToken(int64_t ttlMs, int32_t uses, const std::string& description,
                       std::function<void(Result<IssuedToken>)> done, Origin origin = {});
  // An id no token has.
  std::string newTokenId() const;
  // The key request-made secrets are derived with: the same on every master of a cluster (the
  // master sets it from the cluster CA's private key). Empty: creates with a request id get a
  // random secret, and their resend is refused.
  void setSecretKey(std::string key) { secretKey_ = std::move(key); }
  // The answer to a token create sent again: token `id`, made by `caller`'s request
  // `requestId`, with its secret derived again and checked against the stored hash.
  Result<IssuedToken> issuedAgain(const std::string& id, const std::string& requestId, const std::string& caller) const;
  void revokeToken(const std::string& id, Reply reply);
  const store::TokenRecord* token(const std::string& id) const;
  // Tokens of one kind ("api" of `user`, or "join"), in creation order.
  std::vector<store::TokenRecord> tokensOf(const std::string& kind, const std::string& user) const;

  // Grants. The object and the user must exist (the caller checks the object).
  void grant(store::GrantTable table, const store::GrantRecord& g, Reply reply);
  void revoke(store::GrantTable table, const store::GrantRecord& g, Reply reply);
  bool queueGranted(const std::string& queue, const std::string& user) const;
  bool datasetGranted(const std::string& dataset, const std::string& grantee) const;
  std::vector<std::string> grantees(store::GrantTable table, const std::string& object) const;
  // After a queue or dataset was deleted (the store dropped its grants in the same write).
  void forgetQueue(const std::string& name);
  void forgetDataset(const std::string& name);

  // Audit: stores `record` (its `at` set now when 0), then runs `then` on the io thread,
  // whether or not the record could be stored (a failure is logged).
  void record(store::AuditRecord record, std::function<void()> then);
  // The same record made ready to be written by the caller, in the transaction of the change
  // it describes (one commit per request): its `at` set now when 0, long fields cut.
  store::AuditRecord prepared(store::AuditRecord record) const;
  // An audit message as stored: at most 2,000 bytes, then "...".
  static std::string cut(const std::string& message);

 private:
  // redeemJoinToken's work, audited as `request` ("node.join" or "master.join").
  void redeemJoin(const std::string& secret, const std::string& node, const char* request, const std::string& source,
                  std::function<std::optional<std::string>()> precheck,
                  std::function<void(std::optional<std::string> refusal)> done);
  void change(const std::string& key, std::function<std::string()> check, store::Store::Write write,
              std::function<void()> apply, Reply reply);
  void issue(store::TokenRecord rec, std::function<void(Result<IssuedToken>)> done, Origin origin);
  void touch(store::TokenRecord& t, int64_t now);

  asio::io_context& io_;
  store::Store& store_;
  CommitQueue commits_;
  Clock now_;
  Log log_;
  std::string staticJoinToken_;
  std::string masterJoinToken_;
  std::string secretKey_;  // setSecretKey
  std::map<std::string, store::UserRecord> users_;
  std::map<std::string, store::TokenRecord> tokens_;  // by id
  std::map<std::string, int64_t> persistedUse_;       // token id -> lastUsedAt as last stored
  std::set<store::GrantRecord> queueGrants_, datasetGrants_;
};

// yard-master --dev: writes the entry for the dev master at `address` (its admin token, and
// <dataDir>/ca.pem as an absolute path) into the local user's yardctl config
// (common/config/client_config.h). Returns the line to log: where it went, or why not and what
// to export instead. Never the secret.
std::string writeDevClientEntry(const std::string& address, const std::string& dataDir, const std::string& http = "");

}  // namespace yard::master
