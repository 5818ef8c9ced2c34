// `yardctl user ...`, `token ...`, `whoami`, `audit`, `queue grant|revoke`, `dataset
// grant|revoke` and `node delete` (docs/security.md, "Users, roles and grants").
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "common/spec/quantity.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "common/api_json/job_output.h"
#include "common/api_json/output.h"
#include "master/yardctl/report.h"
#include "common/api_json/resource_output.h"
#include "master/yardctl/time_flag.h"
#include "master/yardctl/job_text.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"

namespace yard::ctl {

using namespace yard::api_json;  // the shapes -o json shares with the HTTP API (common/api_json)

namespace {

// --ttl: a duration (30d, 12h, 90m, 3600); "" = the master's default. Seconds, or the error.
Result<int64_t> ttlSeconds(const std::string& text) {
  if (text.empty()) return Result<int64_t>::ok(0);
  auto s = spec::parseDurationSeconds(text);
  if (!s) return Result<int64_t>::fail("--ttl: " + s.error());
  if (s.value() <= 0) return Result<int64_t>::fail("--ttl: \"" + text + "\" must be more than 0");
  return s;
}

// --since / --until: time_flag.h, against this machine's clock; unset = 0 (no bound).
Result<int64_t> timeFlag(const std::string& flag, const std::string& text) {
  if (text.empty()) return Result<int64_t>::ok(0);
  return parseTimeFlag(flag, text, wallClockMs());
}


Json tokenJson(api::TokenInfo::Reader t) {
  return {{"id", t.getId().cStr()},
          {"kind", t.getKind().cStr()},
          {"user", t.getUser().cStr()},
          {"createdAt", t.getCreatedAt()},
          {"expiresAt", t.getExpiresAt()},
          {"usesLeft", t.getUsesLeft()},
          {"revoked", t.getRevoked()},
          {"description", t.getDescription().cStr()},
          {"lastUsedAt", t.getLastUsedAt()}};
}

Json auditJson(api::AuditRecord::Reader r) {
  return {{"at", r.getAt()},
          {"user", r.getUser().cStr()},
          {"source", r.getSource().cStr()},
          {"request", r.getRequest().cStr()},
          {"target", r.getTarget().cStr()},
          {"outcome", r.getOutcome().cStr()},
          {"message", r.getMessage().cStr()}};
}

std::string tokenState(api::TokenInfo::Reader t, int64_t now) {
  if (t.getRevoked()) return "revoked";
  if (t.getExpiresAt() != 0 && now >= t.getExpiresAt()) return "expired";
  if (t.getKind() == "join" && t.getUsesLeft() == 0) return "used up";
  return "active";
}

std::string idText(int64_t id) { return id < 0 ? "-" : std::to_string(id); }

// Runs one request and prints whichever answer comes back.
template <typename Fill>
int run(GlobalOptions& global, Streams io, Fill fill) {
  int exitCode = kExitOk;
  auto frame = request(global, io, fill, exitCode);
  if (!frame) return exitCode;
  auto r = frame->template root<api::Response>();
  bool json = jsonOutput(global);
  Json out;
  int64_t now = wallClockMs();
  switch (r.which()) {
    case api::Response::DONE:
      if (json) out = {{"result", r.getDone().cStr()}};
      else io.out << r.getDone().cStr() << "\n";
      break;
    case api::Response::USER:
    case api::Response::USERS: {
      std::vector<api::UserInfo::Reader> list;
      if (r.isUser()) list.push_back(r.getUser());
      else for (auto u : r.getUsers()) list.push_back(u);
      printItems(out, json, r.isUser(), list, userJson, [&](const std::vector<api::UserInfo::Reader>& items) {
        Table t({"NAME", "ROLE", "UID", "GID", "TOKENS", "CREATED"});
        for (auto u : items)
          t.row({u.getName().cStr(), u.getAdmin() ? "admin" : "user", idText(u.getUid()), idText(u.getGid()),
                 std::to_string(u.getTokens()), timeText(u.getCreatedAt())});
        t.print(io.out);
      });
      break;
    }
    case api::Response::SECRET: {
      auto s = r.getSecret();
      if (json) {
        out = {{"id", s.getId().cStr()}, {"secret", s.getSecret().cStr()}, {"expiresAt", s.getExpiresAt()}};
      } else {
        // The secret alone on stdout (so that `$(yardctl ... token create ...)` captures it);
        // what to know about it on stderr.
        io.out << s.getSecret().cStr() << "\n";
        io.err << "token " << s.getId().cStr() << " created"
               << (s.getExpiresAt() ? ", expires " + timeText(s.getExpiresAt()) : std::string(", never expires"))
               << "; the secret above is shown only now\n";
      }
      break;
    }
    case api::Response::TOKENS: {
      std::vector<api::TokenInfo::Reader> list;
      for (auto t : r.getTokens()) list.push_back(t);
      printItems(out, json, false, list, tokenJson, [&](const std::vector<api::TokenInfo::Reader>& items) {
        Table t({"ID", "KIND", "USER", "STATE", "CREATED", "EXPIRES", "USES-LEFT", "LAST-USED", "DESCRIPTION"});
        for (auto k : items)
          t.row({k.getId().cStr(), k.getKind().cStr(), orDash(k.getUser().cStr()), tokenState(k, now),
                 timeText(k.getCreatedAt()), k.getExpiresAt() ? timeText(k.getExpiresAt()) : "never",
                 k.getKind() == "join" ? (k.getUsesLeft() < 0 ? "unlimited" : std::to_string(k.getUsesLeft())) : "-",
                 timeText(k.getLastUsedAt()), orDash(k.getDescription().cStr())});
        t.print(io.out);
      });
      break;
    }
    case api::Response::AUDIT_RECORDS: {
      std::vector<api::AuditRecord::Reader> list;
      for (auto a : r.getAuditRecords()) list.push_back(a);
      printItems(out, json, false, list, auditJson, [&](const std::vector<api::AuditRecord::Reader>& items) {
        Table t({"TIME", "USER", "SOURCE", "REQUEST", "TARGET", "OUTCOME", "MESSAGE"});
        for (auto a : items)
          t.row({timeText(a.getAt()), orDash(a.getUser().cStr()), orDash(a.getSource().cStr()), a.getRequest().cStr(),
                 orDash(a.getTarget().cStr()), a.getOutcome().cStr(), orDash(a.getMessage().cStr())});
        t.print(io.out);
      });
      break;
    }
    default:
      return reportError(global, io, kExitFailed, "unexpected answer from the master");
  }
  if (json) printJson(io, out);
  return kExitOk;
}

// Sets the action of `cmd` to run the request `fill` writes.
template <typename Fill>
void on(CLI::App* cmd, GlobalOptions& global, Streams io, Action& action, Fill fill) {
  cmd->callback([&global, io, &action, fill] {
    action = [&global, io, fill] { return run(global, io, fill); };
  });
}

void addUserCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* user = app.add_subcommand("user", "Manage users and their API tokens (admins; a user their own tokens)");
  user->require_subcommand(1);
  struct UserOptions {
    std::string name, ttl, description;
    bool admin = false;
    int64_t uid = -1, gid = -1;
  };
  auto o = std::make_shared<UserOptions>();
  CLI::App* create = user->add_subcommand("create", "Create a user (--admin: an administrator)");
  create->add_option("name", o->name, "User name (like a queue name)")->required()->type_name("USER");
  create->add_flag("--admin", o->admin, "An administrator: every queue, dataset, node, user and job");
  create->add_option("--uid", o->uid, "The uid the user's host tasks run as (with --gid)");
  create->add_option("--gid", o->gid, "The gid the user's host tasks run as (with --uid)");
  on(create, global, io, action, [o](api::Request::Builder r) {
    auto u = r.initUserCreate();
    u.setName(o->name);
    u.setAdmin(o->admin);
    u.setUid(o->uid);
    u.setGid(o->gid);
    return std::string();
  });
  on(user->add_subcommand("list", "List users"), global, io, action, [](api::Request::Builder r) {
    r.setUserList();
    return std::string();
  });
  CLI::App* del = user->add_subcommand("delete", "Delete a user and revoke their tokens (their jobs stay)");
  del->add_option("name", o->name, "User name")->required()->type_name("USER");
  on(del, global, io, action, [o](api::Request::Builder r) {
    r.setUserDelete(o->name);
    return std::string();
  });

  CLI::App* token = user->add_subcommand("token", "A user's API tokens");
  token->require_subcommand(1);
  CLI::App* tcreate = token->add_subcommand("create", "Create an API token; its secret is printed once");
  tcreate->add_option("name", o->name, "The token's user")->required()->type_name("USER");
  tcreate->add_option("--ttl", o->ttl, "Expire after this long (30d, 12h); default never");
  tcreate->add_option("--description", o->description, "What the token is for");
  on(tcreate, global, io, action, [o](api::Request::Builder r) -> std::string {
    auto ttl = ttlSeconds(o->ttl);
    if (!ttl) return ttl.error();
    auto t = r.initUserTokenCreate();
    t.setUser(o->name);
    t.setTtlSeconds(ttl.value());
    t.setDescription(o->description);
    return "";
  });
  CLI::App* tlist = token->add_subcommand("list", "List a user's API tokens (default: your own)");
  tlist->add_option("name", o->name, "The tokens' user")->type_name("USER");
  on(tlist, global, io, action, [o](api::Request::Builder r) {
    r.setUserTokenList(o->name);
    return std::string();
  });
}

void addTokenCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* token = app.add_subcommand("token", "Join tokens for agents (admins); revoke any token");
  token->require_subcommand(1);
  struct TokenOptions {
    std::string id, ttl, description;
    int32_t uses = 0;
  };
  auto o = std::make_shared<TokenOptions>();
  CLI::App* create = token->add_subcommand("create", "Create a join token for agents; its secret is printed once");
  create->add_option("--ttl", o->ttl, "Expire after this long (default 24h)");
  // 0 on the wire means unlimited: --uses 0 is refused rather than read as that.
  create->add_option("--uses", o->uses, "How many agents may join with it, 1 or more (default unlimited)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            std::string bad = kNonNegative(text);
            if (!bad.empty() && bad.rfind("must be 0 or more", 0) != 0) return bad;  // not a number
            return !bad.empty() || std::stoll(text) == 0
                       ? "must be 1 or more, not " + text + " (leave --uses out for a token without a limit)"
                       : "";
          },
          ""));
  create->add_option("--description", o->description, "What the token is for");
  on(create, global, io, action, [o](api::Request::Builder r) -> std::string {
    auto ttl = ttlSeconds(o->ttl);
    if (!ttl) return ttl.error();
    auto t = r.initJoinTokenCreate();
    t.setTtlSeconds(ttl.value());
    t.setUses(o->uses);
    t.setDescription(o->description);
    return "";
  });
  on(token->add_subcommand("list", "List join tokens"), global, io, action, [](api::Request::Builder r) {
    r.setJoinTokenList();
    return std::string();
  });
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke an API or join token by its id (at once)");
  revoke->add_option("id", o->id, "The token's id (token list, user token list)")->required()->type_name("TOKEN");
  on(revoke, global, io, action, [o](api::Request::Builder r) {
    r.setTokenRevoke(o->id);
    return std::string();
  });
}

// `queue grant|revoke QUEUE USER`, `dataset grant|revoke DATASET USER` (USER may be queue:Q
// for a dataset).
void addGrantCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  struct GrantOptions {
    std::string object, user;
  };
  auto o = std::make_shared<GrantOptions>();
  for (const char* kind : {"queue", "dataset"}) {
    CLI::App* parent = app.get_subcommand(kind);
    bool queue = std::string(kind) == "queue";
    for (bool grant : {true, false}) {
      CLI::App* cmd = parent->add_subcommand(
          grant ? "grant" : "revoke",
          std::string(grant ? "Let a user " : "Take back from a user the right to ") +
              (queue ? "submit jobs to the queue" : "mount the dataset (USER may be queue:QUEUE)"));
      cmd->add_option(kind, o->object, queue ? "Queue name" : "Dataset name")->required()->type_name(queue ? "QUEUE" : "DATASET");
      cmd->add_option("user", o->user, "User name")->required()->type_name("USER");
      on(cmd, global, io, action, [o, queue, grant](api::Request::Builder r) {
        auto g = queue ? (grant ? r.initQueueGrant() : r.initQueueRevoke())
                       : (grant ? r.initDatasetGrant() : r.initDatasetRevoke());
        g.setObject(o->object);
        g.setUser(o->user);
        return std::string();
      });
    }
  }
}

}  // namespace

void addAccessCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  addUserCommands(app, global, io, action);
  addTokenCommands(app, global, io, action);
  addGrantCommands(app, global, io, action);

  on(app.add_subcommand("whoami", "Show who your token says you are"), global, io, action, [](api::Request::Builder r) {
    r.setWhoami();
    return std::string();
  });

  auto node = std::make_shared<std::string>();
  CLI::App* ndel = app.get_subcommand("node")->add_subcommand(
      "delete", "Forget a node that is down or drained and runs nothing (admins); its agent may join again");
  ndel->add_option("name", *node, "Node name")->required()->type_name("NODE");
  on(ndel, global, io, action, [node](api::Request::Builder r) {
    r.setNodeDelete(*node);
    return std::string();
  });

  struct AuditOptions {
    std::string user, since, until;
    int32_t limit = 0;
  };
  auto a = std::make_shared<AuditOptions>();
  CLI::App* audit = app.add_subcommand("audit", "Show the audit trail: who changed what, and every refusal (admins)");
  audit->add_option("--user", a->user, "Only this user's requests (\"\" = unauthenticated ones too)")->type_name("USER");
  audit->add_option("--since", a->since, "From this time: RFC 3339 (2024-05-01T12:00:00Z) or a duration back (2h)");
  audit->add_option("--until", a->until, "Up to this time: RFC 3339 or a duration back");
  audit->add_option("--limit", a->limit, "At most this many, the newest (default 1000)")->check(kNonNegative);
  on(audit, global, io, action, [a](api::Request::Builder r) -> std::string {
    auto since = timeFlag("--since", a->since);
    if (!since) return since.error();
    auto until = timeFlag("--until", a->until);
    if (!until) return until.error();
    auto q = r.initAudit();
    q.setUser(a->user);
    q.setSince(since.value());
    q.setUntil(until.value());
    q.setLimit(a->limit);
    return std::string();
  });
}

}  // namespace yard::ctl
