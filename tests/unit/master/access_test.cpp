// Users, tokens and grants (master/access/access.h): the rules by table, the token format, and
// Access over a real store in a temp dir (what survives a restart, the admin's first token,
// what a user's deletion takes with it).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "master/access/access.h"
#include "tests/unit/master/node_harness.h"

using namespace yard;
using master::Caller;
namespace rules = master::rules;
namespace tokens = master::tokens;

namespace {

const Caller kAdmin{"admin", true, 0, 0, "127.0.0.1:1", "id"};
const Caller kBob{"bob", false, -1, -1, "127.0.0.1:2", "id"};
const Caller kMapped{"carol", false, 1001, 1001, "127.0.0.1:3", "id"};

using Refusal = std::optional<std::string>;

}  // namespace

TEST_CASE("access rules: who may do what, by table", "[access]") {
  struct Row {
    const char* what;
    Refusal got, want;
  };
  const std::vector<Row> rows = {
      {"admin creates queues", rules::adminOnly(kAdmin, "create queues"), std::nullopt},
      {"user creates queues", rules::adminOnly(kBob, "create queues"), "user bob may not create queues: admins only"},
      {"owner cancels", rules::onJob(kBob, "cancel", "x", "bob"), std::nullopt},
      {"other cancels", rules::onJob(kBob, "cancel", "x", "alice"), "user bob may not cancel job x: it belongs to alice"},
      {"admin cancels any", rules::onJob(kAdmin, "cancel", "x", "alice"), std::nullopt},
      {"granted submits", rules::submitTo(kBob, "team-a", true), std::nullopt},
      {"admin submits anywhere", rules::submitTo(kAdmin, "team-a", false), std::nullopt},
      {"host task, queue without it", rules::hostTask(kMapped, "q", false),
       "queue q does not allow host tasks (image: host); an admin sets it with yardctl queue update q --allow-host-tasks"},
      {"host task, no uid", rules::hostTask(kBob, "q", true),
       "user bob may not run host tasks (image: host): host tasks run as their owner's uid and gid, and bob has none "
       "(an admin creates the user with --uid and --gid)"},
      {"host task, mapped, allowed", rules::hostTask(kMapped, "q", true), std::nullopt},
      {"host task, admin", rules::hostTask(kAdmin, "q", false), std::nullopt},
      {"dataset granted to user", rules::mountDataset(kBob, "d", "q", true, false), std::nullopt},
      {"dataset granted to queue", rules::mountDataset(kBob, "d", "q", false, true), std::nullopt},
      {"dataset not granted", rules::mountDataset(kBob, "d", "q", false, false),
       "user bob may not mount dataset d: not granted to bob or to queue q (an admin grants it with yardctl dataset "
       "grant d bob)"},
      {"dataset, admin", rules::mountDataset(kAdmin, "d", "q", false, false), std::nullopt},
      {"list own", rules::listJobs(kBob, false, ""), std::nullopt},
      {"list own by name", rules::listJobs(kBob, false, "bob"), std::nullopt},
      {"list all", rules::listJobs(kBob, true, ""), "user bob may not list every user's jobs (--all): admins only"},
      {"list another's", rules::listJobs(kBob, false, "alice"), "user bob may not list the jobs of alice: admins only"},
      {"admin lists all", rules::listJobs(kAdmin, true, ""), std::nullopt},
      {"own tokens", rules::userTokens(kBob, "create", "bob"), std::nullopt},
      {"another's tokens", rules::userTokens(kBob, "list", "alice"),
       "user bob may not list the tokens of user alice: admins only"},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    CHECK(r.got == r.want);
  }
  auto submit = rules::submitTo(kBob, "team-a", false);
  REQUIRE(submit);
  CHECK_THAT(*submit, Catch::StartsWith("user bob may not submit to queue team-a: not granted"));
}

TEST_CASE("access rules: a token is usable until revoked, expired or used up", "[access]") {
  store::TokenRecord api{"abcdefgh", "api", "bob", "h", 0, 0, -1, false, "", 0};
  CHECK(rules::tokenUsable(api, 5) == std::nullopt);
  api.expiresAt = 1'700'000'010'000;
  CHECK(rules::tokenUsable(api, 1'700'000'009'999) == std::nullopt);
  CHECK(rules::tokenUsable(api, 1'700'000'010'000) == Refusal("expired at 2023-11-14T22:13:30Z"));
  api.revoked = true;
  CHECK(rules::tokenUsable(api, 5) == Refusal("revoked"));
  store::TokenRecord join{"abcdefgh", "join", "", "h", 0, 0, 1, false, "", 0};
  CHECK(rules::tokenUsable(join, 5) == std::nullopt);
  join.usesLeft = 0;
  CHECK(rules::tokenUsable(join, 5) == Refusal("used up"));
  join.usesLeft = -1;  // unlimited
  CHECK(rules::tokenUsable(join, 5) == std::nullopt);
  CHECK(rules::checkUserName("bob").empty());
  CHECK_THAT(rules::checkUserName("Bob!"), Catch::StartsWith("user name "));
  CHECK_THAT(rules::checkUserName(""), Catch::StartsWith("user name "));
}

TEST_CASE("tokens: yard_ + 8-char id + _ + 43 base64url characters, stored as SHA-256", "[access]") {
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto t = tokens::generate();
    CHECK(t.secret.size() == 57);
    CHECK(t.secret.rfind("yard_" + t.id + "_", 0) == 0);
    REQUIRE(tokens::idOf(t.secret) == std::optional<std::string>(t.id));
    ids.insert(t.id);
  }
  CHECK(ids.size() == 50);
  const std::vector<std::string> malformed = {
      "", "yard_", "e2e-token", "yard_abcdefgh_" + std::string(42, 'A'), "yard_abcdefgh_" + std::string(44, 'A'),
      "yard_ABCDEFGH_" + std::string(43, 'A'),  // upper case is not in the id alphabet
      "yard_abcdefgh-" + std::string(43, 'A'), "yard_abcdefgh_" + std::string(42, 'A') + "=",
      "card_abcdefgh_" + std::string(43, 'A')};
  for (const auto& m : malformed) {
    INFO(m);
    CHECK_FALSE(tokens::idOf(m).has_value());
  }
  CHECK(tokens::sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

namespace {

// Access over NodeHarness's store and io_context (run by settle()).
struct AccessHarness {
  AccessHarness() { open(); }
  void open() {
    auto state = nodes.db->loadAll();
    REQUIRE(state);
    access = std::make_unique<master::Access>(nodes.io, *nodes.db, [this] { return now; },
                                              [this](const std::string& l) { logs.push_back(l); });
    REQUIRE(access->load(state.value(), nodes.dir.path()));
  }
  void reopen() {
    nodes.settle();
    access.reset();
    nodes.reopen();
    open();
  }
  Result<bool> call(const std::function<void(master::Access::Reply)>& op) {
    std::optional<Result<bool>> out;
    op([&out](Result<bool> r) { out = r; });
    nodes.settle();
    REQUIRE(out);
    return *out;
  }
  master::IssuedToken apiToken(const std::string& user, int64_t ttlMs = 0) {
    std::optional<Result<master::IssuedToken>> out;
    access->createApiToken(user, ttlMs, "test", [&](Result<master::IssuedToken> r) { out = r; });
    nodes.settle();
    REQUIRE(out);
    REQUIRE(*out);
    return out->value();
  }
  std::string adminSecret() {
    std::ifstream in(master::Access::adminTokenPath(nodes.dir.path()));
    std::string s;
    std::getline(in, s);
    return s;
  }

  test::NodeHarness nodes{30};
  int64_t now = test::NodeHarness::kStart;
  std::vector<std::string> logs;
  std::unique_ptr<master::Access> access;
};

}  // namespace

TEST_CASE("access: the first start creates admin and admin.token (0600), once", "[access]") {
  AccessHarness h;
  std::string secret = h.adminSecret();
  REQUIRE(tokens::idOf(secret));
  struct stat st {};
  REQUIRE(::stat(master::Access::adminTokenPath(h.nodes.dir.path()).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto who = h.access->authenticate(secret, "127.0.0.1:9");
  REQUIRE(who);
  CHECK(who.value().user == "admin");
  CHECK(who.value().admin);
  CHECK(who.value().uid == 0);
  CHECK(who.value().source == "127.0.0.1:9");
  // The log says where the token is, never what it is.
  REQUIRE(h.logs.size() == 1);
  CHECK_THAT(h.logs[0], Catch::Contains("admin.token"));
  CHECK(h.logs[0].find(secret) == std::string::npos);
  CHECK(h.logs[0].find(secret.substr(14)) == std::string::npos);

  // A restart keeps the admin and its token, and writes no new one.
  h.reopen();
  CHECK(h.adminSecret() == secret);
  CHECK(h.access->authenticate(secret, "x"));
  CHECK(h.logs.size() == 1);
  // The store holds the hash, not the secret.
  auto state = h.nodes.db->loadAll();
  REQUIRE(state.value().tokens.size() == 1);
  CHECK(state.value().tokens[0].secretSha256 == tokens::sha256Hex(secret));
}

TEST_CASE("access: users, tokens and grants survive a restart - deleting a user takes its tokens and grants", "[access]") {
  AccessHarness h;
  CHECK(h.call([&](auto r) { h.access->createUser({"bob", false, 1001, 1002, 0}, r); }));
  CHECK(h.call([&](auto r) { h.access->createUser({"bob", false, -1, -1, 0}, r); }).error() == "user bob already exists");
  CHECK(h.call([&](auto r) { h.access->createUser({"eve", false, 5, -1, 0}, r); }).error() ==
        "--uid and --gid go together: give both or neither");
  CHECK(h.call([&](auto r) { h.access->deleteUser("admin", r); }).error() == "user admin is built in and cannot be deleted");
  auto bob = h.apiToken("bob");
  auto brief = h.apiToken("bob", 1000);
  CHECK(h.call([&](auto r) { h.access->grant(store::GrantTable::Queue, {"team-a", "bob"}, r); }));
  CHECK(h.call([&](auto r) { h.access->grant(store::GrantTable::Dataset, {"imagenet", "queue:team-a"}, r); }));
  CHECK(h.call([&](auto r) { h.access->grant(store::GrantTable::Queue, {"team-a", "nobody"}, r); }).error() ==
        "user nobody does not exist");
  CHECK(h.call([&](auto r) { h.access->revoke(store::GrantTable::Queue, {"team-b", "bob"}, r); }).error() ==
        "queue team-b is not granted to bob");

  h.reopen();
  auto who = h.access->authenticate(bob.secret, "x");
  REQUIRE(who);
  CHECK(who.value().uid == 1001);
  CHECK(who.value().gid == 1002);
  CHECK(h.access->queueGranted("team-a", "bob"));
  CHECK(h.access->datasetGranted("imagenet", "queue:team-a"));
  CHECK(h.access->liveTokens("bob") == 2);
  h.now += 1000;  // the brief token expires
  CHECK_FALSE(h.access->authenticate(brief.secret, "x"));
  CHECK(h.access->liveTokens("bob") == 1);

  CHECK(h.call([&](auto r) { h.access->deleteUser("bob", r); }));
  CHECK_FALSE(h.access->authenticate(bob.secret, "x"));
  CHECK_FALSE(h.access->queueGranted("team-a", "bob"));
  h.reopen();
  CHECK_FALSE(h.access->authenticate(bob.secret, "x"));  // revoked durably
  CHECK_FALSE(h.access->queueGranted("team-a", "bob"));
  CHECK(h.access->datasetGranted("imagenet", "queue:team-a"));
  // The name may be used again, with nothing of the old bob's.
  CHECK(h.call([&](auto r) { h.access->createUser({"bob", false, -1, -1, 0}, r); }));
  CHECK_FALSE(h.access->authenticate(bob.secret, "x"));
  CHECK(h.access->liveTokens("bob") == 0);
}

TEST_CASE("access: a token's description and one user's live API tokens are bounded", "[access]") {
  AccessHarness h;
  CHECK(h.call([&](auto r) { h.access->createUser({"bob", false, -1, -1, 0}, r); }));
  std::optional<Result<master::IssuedToken>> out;
  h.access->createApiToken("bob", 0, std::string(257, 'x'), [&](auto r) { out = r; });
  h.nodes.settle();
  REQUIRE(out);
  CHECK(out->error() == "--description: must be at most 256 bytes (it has 257)");
  out.reset();
  h.access->createJoinToken(0, 1, std::string(300, 'x'), [&](auto r) { out = r; });
  h.nodes.settle();
  REQUIRE(out);
  CHECK(out->error() == "--description: must be at most 256 bytes (it has 300)");
  std::vector<master::IssuedToken> held;
  for (size_t i = 0; i < master::kMaxApiTokensPerUser; ++i) held.push_back(h.apiToken("bob"));
  out.reset();
  h.access->createApiToken("bob", 0, "one more", [&](auto r) { out = r; });
  h.nodes.settle();
  REQUIRE(out);
  CHECK(out->error() == "user bob has 100 API tokens, the most one user may hold: revoke one first (yardctl user token "
                        "list bob)");
  CHECK(h.call([&](auto r) { h.access->revokeToken(*tokens::idOf(held[0].secret), r); }));
  h.apiToken("bob");  // room again
}

TEST_CASE("access: a revoke is durable before it is answered, and a join token's use too", "[access]") {
  AccessHarness h;
  auto admin = h.adminSecret();
  std::string id = *tokens::idOf(admin);
  std::optional<Result<master::IssuedToken>> join;
  h.access->createJoinToken(0, 2, "two agents", [&](auto r) { join = r; });
  h.nodes.settle();
  REQUIRE(join);
  REQUIRE(*join);
  std::vector<std::optional<std::string>> outcomes;
  for (int i = 0; i < 3; ++i)
    h.access->redeemJoinToken(join->value().secret, "n" + std::to_string(i), [&](auto r) { outcomes.push_back(r); });
  h.nodes.settle();
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0] == std::nullopt);
  CHECK(outcomes[1] == std::nullopt);
  CHECK(outcomes[2] == std::optional<std::string>("join token used up"));
  h.reopen();
  std::optional<std::string> after = "not called";
  h.access->redeemJoinToken(join->value().secret, "n9", [&](auto r) { after = r; });
  h.nodes.settle();
  CHECK(after == std::optional<std::string>("join token used up"));  // the uses were stored

  bool answered = false;
  h.access->revokeToken(id, [&](Result<bool> r) {
    CHECK(r);
    answered = true;
    // By the time the revoke is answered the token is refused.
    CHECK_FALSE(h.access->authenticate(admin, "x"));
  });
  h.nodes.settle();
  CHECK(answered);
  h.reopen();
  CHECK_FALSE(h.access->authenticate(admin, "x"));
  CHECK(h.call([&](auto r) { h.access->revokeToken("zzzzzzzz", r); }).error() == "token zzzzzzzz does not exist");
}

TEST_CASE("access: a follower checks a token against the stored copies by the leader's rules", "[access]") {
  // authenticateStored: what a follower answering `cluster status --stale` does (docs/ha.md).
  AccessHarness h;
  CHECK(h.call([&](auto r) { h.access->createUser({"bob", false, 1001, 1002, 0}, r); }));
  auto bob = h.apiToken("bob");
  auto brief = h.apiToken("bob", 1000);
  std::optional<Result<master::IssuedToken>> join;
  h.access->createJoinToken(0, 2, "an agent", [&](auto r) { join = r; });
  h.nodes.settle();
  REQUIRE(join);
  REQUIRE(*join);

  auto who = master::authenticateStored(*h.nodes.db, bob.secret, "10.0.0.9:1", h.now);
  REQUIRE(who);
  CHECK(who.value().user == "bob");
  CHECK_FALSE(who.value().admin);
  CHECK(who.value().uid == 1001);
  CHECK(who.value().source == "10.0.0.9:1");
  CHECK(who.value().tokenId == bob.id);
  auto admin = master::authenticateStored(*h.nodes.db, h.adminSecret(), "x", h.now);
  REQUIRE(admin);
  CHECK(admin.value().admin);

  const std::string bad = "not authenticated: the token is unknown, expired or revoked";
  // A join token is not an API token; a secret with a known id and another secret is refused.
  CHECK(master::authenticateStored(*h.nodes.db, join->value().secret, "x", h.now).error() == bad);
  std::string forged = bob.secret;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  CHECK(master::authenticateStored(*h.nodes.db, forged, "x", h.now).error() == bad);
  CHECK(master::authenticateStored(*h.nodes.db, "e2e-token", "x", h.now).error() == bad);
  CHECK_THAT(master::authenticateStored(*h.nodes.db, "", "x", h.now).error(), Catch::StartsWith("not authenticated: no token"));
  // Expired by the clock given; revoked once the revoke is stored.
  CHECK(master::authenticateStored(*h.nodes.db, brief.secret, "x", h.now + 999));
  CHECK(master::authenticateStored(*h.nodes.db, brief.secret, "x", h.now + 1000).error() == bad);
  CHECK(h.call([&](auto r) { h.access->revokeToken(bob.id, r); }));
  CHECK(master::authenticateStored(*h.nodes.db, bob.secret, "x", h.now).error() == bad);
  // A deleted user's tokens go with it.
  auto carol = (h.call([&](auto r) { h.access->createUser({"carol", false, -1, -1, 0}, r); }), h.apiToken("carol"));
  CHECK(master::authenticateStored(*h.nodes.db, carol.secret, "x", h.now));
  CHECK(h.call([&](auto r) { h.access->deleteUser("carol", r); }));
  CHECK(master::authenticateStored(*h.nodes.db, carol.secret, "x", h.now).error() == bad);
}
