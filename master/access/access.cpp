#include "master/access/access.h"

#include "common/tls/pki.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <algorithm>

#include "common/config/client_config.h"
#include "common/spec/validate.h"
#include "common/util/random.h"

namespace yard::master {
namespace {

// Ids: 32 letters and digits (no 0/1/l/o, which read alike), so that a byte mod 32 is unbiased.
constexpr std::string_view kIdAlphabet = "abcdefghijkmnpqrstuvwxyz23456789";
constexpr std::string_view kBase64Url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view kPrefix = "yard_";
// lastUsedAt is written at most this often per token: a request must not cost a store write.
constexpr int64_t kPersistUseEveryMs = 60'000;

void randomBytes(unsigned char* out, size_t n) {
  size_t have = 0;
  while (have < n) {
    ssize_t got = getrandom(out + have, n - have, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {  // no kernel randomness: no secret can be made safely
      std::fprintf(stderr, "yard-master: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    have += static_cast<size_t>(got);
  }
}

std::string base64Url(const unsigned char* in, size_t n) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    acc = (acc << 8) | in[i];
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kBase64Url[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kBase64Url[(acc << (6 - bits)) & 63];
  return out;
}

std::string rfc3339(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<bool> refuse(std::string why) { return Result<bool>::fail(std::move(why)); }


}  // namespace

namespace tokens {

std::string newId() {
  unsigned char id[kIdChars];
  randomBytes(id, sizeof id);
  std::string out;
  for (unsigned char b : id) out += kIdAlphabet[b % kIdAlphabet.size()];
  return out;
}

IssuedToken generate() {
  unsigned char secret[32];
  randomBytes(secret, sizeof secret);
  IssuedToken t;
  t.id = newId();
  t.secret = std::string(kPrefix) + t.id + "_" + base64Url(secret, sizeof secret);
  return t;
}

IssuedToken derived(std::string_view key, const std::string& caller, const std::string& requestId, const std::string& id) {
  // NULs separate the fields: none of them can hold one (names, hex ids), so no two inputs
  // run together into the same message.
  std::string message = std::string("yard token secret v1") + '\0' + caller + '\0' + requestId + '\0' + id;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), mac, &len) == nullptr || len != 32) {
    std::fprintf(stderr, "yard-master: HMAC-SHA256 is unavailable in this OpenSSL\n");
    std::abort();
  }
  IssuedToken t;
  t.id = id;
  t.secret = std::string(kPrefix) + id + "_" + base64Url(mac, 32);
  return t;
}

std::optional<std::string> idOf(std::string_view s) {
  if (s.size() != kPrefix.size() + kIdChars + 1 + kSecretChars || s.substr(0, kPrefix.size()) != kPrefix ||
      s[kPrefix.size() + kIdChars] != '_')
    return std::nullopt;
  std::string_view id = s.substr(kPrefix.size(), kIdChars);
  std::string_view rest = s.substr(kPrefix.size() + kIdChars + 1);
  for (char c : id)
    if (kIdAlphabet.find(c) == std::string_view::npos) return std::nullopt;
  for (char c : rest)
    if (kBase64Url.find(c) == std::string_view::npos) return std::nullopt;
  return std::string(id);
}

std::string sha256Hex(std::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    std::fprintf(stderr, "yard-master: SHA-256 is unavailable in this OpenSSL\n");
    std::abort();
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace tokens

namespace rules {

std::optional<std::string> adminOnly(const Caller& c, const std::string& what) {
  if (c.admin) return std::nullopt;
  return "user " + c.user + " may not " + what + ": admins only";
}

std::optional<std::string> onJob(const Caller& c, const std::string& verb, const std::string& job,
                                 const std::string& owner) {
  if (c.admin || c.user == owner) return std::nullopt;
  return "user " + c.user + " may not " + verb + " job " + job + ": it belongs to " + owner;
}

std::optional<std::string> submitTo(const Caller& c, const std::string& queue, bool granted) {
  if (c.admin || granted) return std::nullopt;
  return "user " + c.user + " may not submit to queue " + queue + ": not granted (an admin grants it with yardctl queue grant " +
         queue + " " + c.user + ")";
}

std::optional<std::string> hostTask(const Caller& c, const std::string& queue, bool queueAllowsHostTasks) {
  if (c.admin) return std::nullopt;
  if (!queueAllowsHostTasks)
    return "queue " + queue + " does not allow host tasks (image: host); an admin sets it with yardctl queue update " +
           queue + " --allow-host-tasks";
  if (c.uid < 0 || c.gid < 0)
    return "user " + c.user + " may not run host tasks (image: host): host tasks run as their owner's uid and gid, and " +
           c.user + " has none (an admin creates the user with --uid and --gid)";
  return std::nullopt;
}

std::optional<std::string> mountDataset(const Caller& c, const std::string& dataset, const std::string& queue,
                                        bool grantedToUser, bool grantedToQueue) {
  if (c.admin || grantedToUser || grantedToQueue) return std::nullopt;
  return "user " + c.user + " may not mount dataset " + dataset + ": not granted to " + c.user + " or to queue " + queue +
         " (an admin grants it with yardctl dataset grant " + dataset + " " + c.user + ")";
}

std::optional<std::string> listJobs(const Caller& c, bool all, const std::string& owner) {
  if (c.admin) return std::nullopt;
  if (all) return "user " + c.user + " may not list every user's jobs (--all): admins only";
  if (!owner.empty() && owner != c.user) return "user " + c.user + " may not list the jobs of " + owner + ": admins only";
  return std::nullopt;
}

std::optional<std::string> userTokens(const Caller& c, const std::string& verb, const std::string& user) {
  if (c.admin || c.user == user) return std::nullopt;
  return "user " + c.user + " may not " + verb + " the tokens of user " + user + ": admins only";
}

std::optional<std::string> tokenUsable(const store::TokenRecord& t, int64_t now) {
  if (t.revoked) return "revoked";
  if (t.expiresAt != 0 && now >= t.expiresAt) return "expired at " + rfc3339(t.expiresAt);
  if (t.kind == "join" && t.usesLeft == 0) return "used up";
  return std::nullopt;
}

std::string checkUserName(const std::string& name) {
  std::string why = spec::checkName(name, 1, 63);
  return why.empty() ? "" : "user name " + why;
}

}  // namespace rules

Access::Access(asio::io_context& io, store::Store& store, Clock now, Log log)
    : io_(io), store_(store), commits_(io, store), now_(std::move(now)), log_(std::move(log)) {}

Result<bool> Access::load(const store::State& state, const std::string& dataDir) {
  for (const auto& u : state.users) users_[u.name] = u;
  for (const auto& t : state.tokens) {
    tokens_[t.id] = t;
    persistedUse_[t.id] = t.lastUsedAt;
  }
  queueGrants_.insert(state.queueGrants.begin(), state.queueGrants.end());
  datasetGrants_.insert(state.datasetGrants.begin(), state.datasetGrants.end());
  if (!users_.empty()) return Result<bool>::ok(true);

  // First start: the built-in admin and its token. The file is written before the rows are
  // committed: a crash between leaves no users, and the next start writes a new one.
  int64_t now = now_();
  store::UserRecord admin{kAdminUser, true, 0, 0, now};
  IssuedToken issued = tokens::generate();
  store::TokenRecord token{issued.id, "api", kAdminUser, tokens::sha256Hex(issued.secret), now, 0, -1, false,
                           "created at the master's first start (admin.token)", 0};
  std::string path = adminTokenPath(dataDir);
  if (auto written = tls::writeSecretFile(path, issued.secret + "\n"); !written)
    return Result<bool>::fail("cannot write the admin token: " + written.error());
  auto stored = store_.writeSync([admin, token](store::Tx& tx) {
    tx.upsertUser(admin);
    tx.upsertToken(token);
  });
  if (!stored) return Result<bool>::fail("cannot create the admin user: " + stored.error());
  users_[admin.name] = admin;
  tokens_[token.id] = token;
  persistedUse_[token.id] = 0;
  if (log_)
    log_("created user admin; its API token (id " + token.id + ") is in " + path +
         " (mode 0600): yardctl reads it with --token, $YARD_TOKEN or its config file");
  return Result<bool>::ok(true);
}

namespace {

// An API token's rules, wherever its record and its user's come from: found by the id in the
// secret, of kind "api", the secret's hash equal, usable at `now`, its user present. Every
// refusal but a missing token is the same text, so that a probe learns nothing from it.
// `token(id)` and `user(name)` return the record or null.
template <typename TokenOf, typename UserOf>
Result<Caller> callerOf(std::string_view secret, const std::string& source, int64_t now, TokenOf token, UserOf user) {
  using R = Result<Caller>;
  if (secret.empty())
    return R::fail("not authenticated: no token (pass --token, set YARD_TOKEN, or put token in ~/.config/yard/config.toml)");
  const std::string bad = "not authenticated: the token is unknown, expired or revoked";
  auto id = tokens::idOf(secret);
  if (!id) return R::fail(bad);
  const store::TokenRecord* t = token(*id);
  // The hash is computed whatever was found, so a miss takes as long as a wrong secret.
  std::string hash = tokens::sha256Hex(secret);
  if (!t || t->kind != "api" || !tokensEqual(hash, t->secretSha256)) return R::fail(bad);
  if (rules::tokenUsable(*t, now)) return R::fail(bad);
  const store::UserRecord* u = user(t->user);
  if (!u) return R::fail(bad);
  return R::ok(Caller{u->name, u->admin, u->uid, u->gid, source, t->id});
}

}  // namespace

Result<Caller> Access::authenticate(std::string_view secret, const std::string& source) {
  int64_t now = now_();
  store::TokenRecord* found = nullptr;
  auto caller = callerOf(
      secret, source, now,
      [this, &found](const std::string& id) -> const store::TokenRecord* {
        auto it = tokens_.find(id);
        found = it == tokens_.end() ? nullptr : &it->second;
        return found;
      },
      [this](const std::string& name) { return user(name); });
  if (caller) touch(*found, now);
  return caller;
}

Result<Caller> authenticateStored(store::Store& store, std::string_view secret, const std::string& source, int64_t now) {
  std::optional<std::string> unreadable;
  std::optional<store::TokenRecord> token;
  std::optional<store::UserRecord> user;
  auto caller = callerOf(
      secret, source, now,
      [&](const std::string& id) -> const store::TokenRecord* {
        auto t = store.token(id);
        if (!t) unreadable = t.error();
        token = t ? t.value() : std::nullopt;
        return token ? &*token : nullptr;
      },
      [&](const std::string& name) -> const store::UserRecord* {
        auto u = store.user(name);
        if (!u) unreadable = u.error();
        user = u ? u.value() : std::nullopt;
        return user ? &*user : nullptr;
      });
  if (unreadable) return Result<Caller>::fail("cannot check the token: " + *unreadable);
  return caller;
}

void Access::touch(store::TokenRecord& t, int64_t now) {
  t.lastUsedAt = now;
  if (now - persistedUse_[t.id] < kPersistUseEveryMs) return;
  persistedUse_[t.id] = now;
  // Behind any change to the token in flight (a revoke), from the record as it is then.
  commits_.tryRun("t/" + t.id, [this, id = t.id](CommitQueue::Slot slot) {
    auto it = tokens_.find(id);
    if (it == tokens_.end()) return slot.done();
    slot.commit([rec = it->second](store::Tx& tx) { tx.upsertToken(rec); }, {});
  });
}

void Access::redeemJoinToken(const std::string& secret, const std::string& node,
                             std::function<void(std::optional<std::string>)> done) {
  redeemJoin(secret, node, "node.join", "", {}, std::move(done));
}

void Access::redeemJoinToken(const std::string& secret, const std::string& node, const std::string& source,
                             std::function<std::optional<std::string>()> precheck,
                             std::function<void(std::optional<std::string>)> done) {
  redeemJoin(secret, node, "node.join", source, std::move(precheck), std::move(done));
}

void Access::redeemJoin(const std::string& secret, const std::string& node, const char* request,
                        const std::string& source, std::function<std::optional<std::string>()> precheck,
                        std::function<void(std::optional<std::string>)> done) {
  auto finish = [this, node, request, source, done](std::optional<std::string> refusal, const std::string& which) {
    store::AuditRecord rec;
    rec.request = request;
    rec.source = source;
    rec.target = node;
    rec.outcome = refusal ? "refused" : "ok";
    rec.message = refusal ? *refusal : "joined with " + which;
    record(rec, [done, refusal] { done(refusal); });
  };
  if (!staticJoinToken_.empty() && tokensEqual(secret, staticJoinToken_)) {
    if (auto refused = precheck ? precheck() : std::nullopt) return finish(refused, "");
    return finish(std::nullopt, "the configured join_token");
  }
  auto id = tokens::idOf(secret);
  if (!id) return finish("join token unknown", "");
  commits_.run("t/" + *id, [this, id = *id, hash = tokens::sha256Hex(secret), finish, precheck](CommitQueue::Slot slot) {
    auto it = tokens_.find(id);
    std::optional<std::string> why;
    if (it == tokens_.end() || it->second.kind != "join" || !tokensEqual(hash, it->second.secretSha256))
      why = "join token unknown";
    else if (auto unusable = rules::tokenUsable(it->second, now_()))
      why = "join token " + *unusable;
    if (!why && precheck) why = precheck();  // the token is good: a refusal here spends no use
    if (why) {
      slot.done();
      return finish(why, "");
    }
    store::TokenRecord next = it->second;
    next.lastUsedAt = now_();
    if (next.usesLeft > 0) next.usesLeft--;
    slot.commit([next](store::Tx& tx) { tx.upsertToken(next); },
                [this, next, finish](Result<bool> r) {
                  if (!r) return finish("join token " + next.id + " could not be recorded: " + r.error(), "");
                  tokens_[next.id] = next;
                  persistedUse_[next.id] = next.lastUsedAt;
                  finish(std::nullopt, "join token " + next.id);
                });
  });
}

void Access::redeemMasterJoinToken(const std::string& secret, const std::string& master, const std::string& source,
                                   std::function<void(std::optional<std::string>)> done) {
  if (masterJoinToken_.empty()) return redeemJoin(secret, master, "master.join", source, {}, std::move(done));
  std::optional<std::string> refusal;
  if (!tokensEqual(secret, masterJoinToken_))
    refusal = "join token refused for a master: this cluster admits masters with its master_join_token only, and "
              "this is not it (agents' join tokens do not admit a master, which is given the cluster CA's key)";
  store::AuditRecord rec;
  rec.request = "master.join";
  rec.target = master;
  rec.source = source;
  rec.outcome = refusal ? "refused" : "ok";
  rec.message = refusal ? *refusal : "joined with the configured master_join_token";
  record(rec, [done, refusal] { done(refusal); });
}

const store::UserRecord* Access::user(const std::string& name) const {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

int32_t Access::liveTokens(const std::string& name) const {
  int32_t n = 0;
  int64_t now = now_();
  for (const auto& [id, t] : tokens_) n += t.kind == "api" && t.user == name && !rules::tokenUsable(t, now);
  return n;
}

void Access::change(const std::string& key, std::function<std::string()> check, store::Store::Write write,
                     std::function<void()> apply, Reply reply) {
  commits_.change(key, std::move(check), std::move(write), std::move(apply), std::move(reply));
}

void Access::createUser(const store::UserRecord& in, Reply reply, std::function<void(store::Tx&)> also) {
  store::UserRecord u = in;
  u.createdAt = now_();
  if (auto why = rules::checkUserName(u.name); !why.empty()) return reply(refuse(why));
  if ((u.uid < 0) != (u.gid < 0)) return reply(refuse("--uid and --gid go together: give both or neither"));
  if (u.uid > 4294967294LL || u.gid > 4294967294LL || u.uid < -1 || u.gid < -1)
    return reply(refuse("--uid/--gid: " + std::to_string(u.uid) + "/" + std::to_string(u.gid) +
                        " must be between 0 and 4294967294"));
  change(
      "u/" + u.name, [this, u] { return users_.count(u.name) ? "user " + u.name + " already exists" : ""; },
      [u, also](store::Tx& tx) {
        tx.upsertUser(u);
        if (also) also(tx);
      },
      [this, u] { users_[u.name] = u; }, std::move(reply));
}

void Access::deleteUser(const std::string& name, Reply reply) {
  if (name == kAdminUser) return reply(refuse("user admin is built in and cannot be deleted"));
  change(
      "u/" + name, [this, name] { return users_.count(name) ? "" : "user " + name + " does not exist"; },
      [name](store::Tx& tx) { tx.deleteUser(name); },
      [this, name] {
        users_.erase(name);
        for (auto& [id, t] : tokens_)
          if (t.kind == "api" && t.user == name) t.revoked = true;
        std::erase_if(queueGrants_, [&](const store::GrantRecord& g) { return g.user == name; });
        std::erase_if(datasetGrants_, [&](const store::GrantRecord& g) { return g.user == name; });
      },
      std::move(reply));
}

std::string Access::newTokenId() const {
  std::string id = tokens::newId();
  while (tokens_.count(id)) id = tokens::newId();  // ids are short: collisions are possible
  return id;
}

void Access::issue(store::TokenRecord rec, std::function<void(Result<IssuedToken>)> done, Origin origin) {
  IssuedToken issued;
  if (!origin.requestId.empty() && !secretKey_.empty()) {
    std::string id = origin.tokenId.empty() ? newTokenId() : origin.tokenId;
    if (tokens_.count(id)) return done(Result<IssuedToken>::fail("token " + id + " exists already; send the create again"));
    issued = tokens::derived(secretKey_, origin.caller, origin.requestId, id);
  } else {
    issued = tokens::generate();
    while (tokens_.count(issued.id)) issued = tokens::generate();  // ids are short: collisions are possible
  }
  rec.id = issued.id;
  rec.secretSha256 = tokens::sha256Hex(issued.secret);
  issued.expiresAt = rec.expiresAt;
  // Keyed by the id: nothing else can know it yet; the user's key orders it after a delete.
  std::string key = rec.kind == "api" ? "u/" + rec.user : "t/" + rec.id;
  commits_.run(key, [this, rec, issued, done, origin](CommitQueue::Slot slot) {
    if (rec.kind == "api" && !users_.count(rec.user)) {
      slot.done();
      return done(Result<IssuedToken>::fail("user " + rec.user + " does not exist"));
    }
    if (rec.kind == "api") {  // each is held in memory and checked at every request: bounded
      auto live = static_cast<size_t>(liveTokens(rec.user));
      if (live >= kMaxApiTokensPerUser) {
        slot.done();
        return done(Result<IssuedToken>::fail("user " + rec.user + " has " + std::to_string(live) +
                                              " API tokens, the most one user may hold: revoke one first (yardctl user "
                                              "token list " + rec.user + ")"));
      }
    }
    auto write = [rec, also = origin.also](store::Tx& tx) {
      tx.upsertToken(rec);
      if (also) also(tx);  // the request's record, in the same transaction
    };
    slot.commit(write, [this, rec, issued, done](Result<bool> r) {
      if (!r) return done(Result<IssuedToken>::fail(r.error()));
      tokens_[rec.id] = rec;
      persistedUse_[rec.id] = 0;
      done(Result<IssuedToken>::ok(issued));
    });
  });
}

namespace {

// A token's description is shown in `user token list` and kept with the token.
std::string badDescription(const std::string& description) {
  if (description.size() <= kMaxTokenDescription) return "";
  return "--description: must be at most " + std::to_string(kMaxTokenDescription) + " bytes (it has " +
         std::to_string(description.size()) + ")";
}

}  // namespace

void Access::createApiToken(const std::string& user, int64_t ttlMs, const std::string& description,
                            std::function<void(Result<IssuedToken>)> done, Origin origin) {
  if (ttlMs < 0) return done(Result<IssuedToken>::fail("--ttl: must be 0 (never expires) or more"));
  if (auto bad = badDescription(description); !bad.empty()) return done(Result<IssuedToken>::fail(bad));
  int64_t now = now_();
  store::TokenRecord rec{"", "api", user, "", now, ttlMs == 0 ? 0 : now + ttlMs, -1, false, description, 0};
  issue(std::move(rec), std::move(done), std::move(origin));
}

void Access::createJoinToken(int64_t ttlMs, int32_t uses, const std::string& description,
                             std::function<void(Result<IssuedToken>)> done, Origin origin) {
  if (ttlMs < 0) return done(Result<IssuedToken>::fail("--ttl: must be more than 0"));
  if (uses < 0) return done(Result<IssuedToken>::fail("--uses: " + std::to_string(uses) + " must be 0 (unlimited) or more"));
  if (auto bad = badDescription(description); !bad.empty()) return done(Result<IssuedToken>::fail(bad));
  int64_t now = now_();
  store::TokenRecord rec{"", "join", "", "", now, now + (ttlMs == 0 ? kDefaultJoinTokenTtlMs : ttlMs),
                         uses == 0 ? -1 : uses, false, description, 0};
  issue(std::move(rec), std::move(done), std::move(origin));
}

Result<IssuedToken> Access::issuedAgain(const std::string& id, const std::string& requestId,
                                        const std::string& caller) const {
  using R = Result<IssuedToken>;
  auto it = tokens_.find(id);
  if (it == tokens_.end()) return R::fail("token " + id + " was created by this request, and deleted since");
  if (it->second.revoked) return R::fail("token " + id + " was created by this request, and revoked since");
  if (secretKey_.empty()) return R::fail("token " + id + " was created by this request; its secret cannot be given again");
  IssuedToken t = tokens::derived(secretKey_, caller, requestId, id);
  if (tokens::sha256Hex(t.secret) != it->second.secretSha256)
    return R::fail("token " + id + " was created by this request, but its secret cannot be given again (the key it was "
                   "derived with changed); revoke it and create another");
  t.expiresAt = it->second.expiresAt;
  return R::ok(std::move(t));
}

void Access::revokeToken(const std::string& id, Reply reply) {
  auto next = std::make_shared<store::TokenRecord>();
  change(
      "t/" + id,
      [this, id, next] {
        auto it = tokens_.find(id);
        if (it == tokens_.end()) return "token " + id + " does not exist";
        *next = it->second;
        next->revoked = true;
        return std::string();
      },
      [next](store::Tx& tx) { tx.upsertToken(*next); }, [this, next] { tokens_[next->id] = *next; }, std::move(reply));
}

const store::TokenRecord* Access::token(const std::string& id) const {
  auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

std::vector<store::TokenRecord> Access::tokensOf(const std::string& kind, const std::string& user) const {
  std::vector<store::TokenRecord> out;
  for (const auto& [id, t] : tokens_)
    if (t.kind == kind && (kind != "api" || t.user == user)) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.createdAt != b.createdAt ? a.createdAt < b.createdAt : a.id < b.id;
  });
  return out;
}

void Access::grant(store::GrantTable table, const store::GrantRecord& g, Reply reply) {
  bool toQueue = g.user.rfind("queue:", 0) == 0;
  auto& set = table == store::GrantTable::Queue ? queueGrants_ : datasetGrants_;
  change(
      "u/" + g.user,
      [this, g, toQueue] { return toQueue || users_.count(g.user) ? "" : "user " + g.user + " does not exist"; },
      [table, g](store::Tx& tx) { tx.insertGrant(table, g); }, [&set, g] { set.insert(g); }, std::move(reply));
}

void Access::revoke(store::GrantTable table, const store::GrantRecord& g, Reply reply) {
  auto& set = table == store::GrantTable::Queue ? queueGrants_ : datasetGrants_;
  std::string what = std::string(table == store::GrantTable::Queue ? "queue " : "dataset ") + g.object;
  change(
      "u/" + g.user, [&set, g, what] { return set.count(g) ? "" : what + " is not granted to " + g.user; },
      [table, g](store::Tx& tx) { tx.deleteGrant(table, g); }, [&set, g] { set.erase(g); }, std::move(reply));
}

bool Access::queueGranted(const std::string& queue, const std::string& user) const {
  return queueGrants_.count({queue, user}) > 0;
}

bool Access::datasetGranted(const std::string& dataset, const std::string& grantee) const {
  return datasetGrants_.count({dataset, grantee}) > 0;
}

std::vector<std::string> Access::grantees(store::GrantTable table, const std::string& object) const {
  const auto& set = table == store::GrantTable::Queue ? queueGrants_ : datasetGrants_;
  std::vector<std::string> out;
  for (auto it = set.lower_bound({object, ""}); it != set.end() && it->object == object; ++it) out.push_back(it->user);
  return out;
}

void Access::forgetQueue(const std::string& name) {
  std::erase_if(queueGrants_, [&](const store::GrantRecord& g) { return g.object == name; });
  std::erase_if(datasetGrants_, [&](const store::GrantRecord& g) { return g.user == "queue:" + name; });
}

void Access::forgetDataset(const std::string& name) {
  std::erase_if(datasetGrants_, [&](const store::GrantRecord& g) { return g.object == name; });
}

std::string Access::cut(const std::string& message) {
  return message.size() > 2000 ? message.substr(0, 2000) + "..." : message;
}

store::AuditRecord Access::prepared(store::AuditRecord rec) const {
  if (rec.at == 0) rec.at = now_();
  rec.message = cut(rec.message);
  if (rec.target.size() > 500) rec.target = rec.target.substr(0, 500) + "...";
  return rec;
}

void Access::record(store::AuditRecord rec, std::function<void()> then) {
  rec = prepared(std::move(rec));
  // The completion runs on the store's writer thread, maybe after Access is gone: it holds
  // only what it was given.
  store_.write([rec](store::Tx& tx) mutable { tx.appendAudit(rec); },
               [&io = io_, log = log_, then = std::move(then), request = rec.request](Result<bool> r) {
                 asio::post(io, [r, log, then, request] {
                   if (!r && log) log("audit record of " + request + " not stored: " + r.error());
                   if (then) then();
                 });
               });
}

std::string writeDevClientEntry(const std::string& address, const std::string& dataDir, const std::string& http) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::absolute(dataDir, ec);
  std::string tokenPath = Access::adminTokenPath(dir.string()), ca = (dir / "ca.pem").string();
  std::string instead = "; export YARD_TOKEN=$(cat " + tokenPath + ") YARD_CA=" + ca + " for yardctl instead";
  std::ifstream in(tokenPath);
  std::string token;
  std::getline(in, token);
  if (token.empty()) return "dev cluster: " + tokenPath + " is missing or empty, so yardctl's config was not written";
  std::string path = config::clientConfigPath();
  auto written = config::writeMasterEntry(path, address, token, ca, http);
  if (!written) return "dev cluster: cannot write yardctl's config: " + written.error() + instead;
  return "dev cluster: yardctl's config " + path + " now has this master (" + address +
         "): the admin token, the CA" + (http.empty() ? "" : " and its HTTP API") + "; YARD_MASTER=" + address +
         " is all yardctl needs";
}

}  // namespace yard::master
