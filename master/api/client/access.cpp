// Who may make each client request (the rules in master/access/access.h applied to requests), the
// audit trail, and yardctl user, token, grant, node delete, audit and whoami.
#include <cassert>

#include "master/api/client/client_api.h"
#include "schema/api.capnp.h"

namespace yard::master {
namespace {

// Every container of a task (one per role; container-job's own).
std::vector<schema::Container::Reader> containersOf(schema::Task::Reader t) {
  std::vector<schema::Container::Reader> out;
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) out.push_back(t.getContainerJob().getContainer());
  for (auto r : t.getRoles()) out.push_back(r.getContainer());
  return out;
}

void fillToken(api::TokenInfo::Builder out, const store::TokenRecord& t) {
  out.setId(t.id);
  out.setKind(t.kind);
  out.setUser(t.user);
  out.setCreatedAt(t.createdAt);
  out.setExpiresAt(t.expiresAt);
  out.setUsesLeft(t.usesLeft);
  out.setRevoked(t.revoked);
  out.setDescription(t.description);
  out.setLastUsedAt(t.lastUsedAt);
}

void fillSecret(api::SecretIssued::Builder out, const IssuedToken& t) {
  out.setId(t.id);
  out.setSecret(t.secret);
  out.setExpiresAt(t.expiresAt);
}

}  // namespace

ClientApi::RequestInfo ClientApi::requestInfo(api::Request::Which which) {
  using W = api::Request::Which;
  switch (which) {
    case W::PING: return {"ping", false};
    case W::QUEUE_CREATE: return {"queue.create", true};
    case W::QUEUE_UPDATE: return {"queue.update", true};
    case W::QUEUE_DELETE: return {"queue.delete", true};
    case W::QUEUE_LIST: return {"queue.list", false};
    case W::QUEUE_SHOW: return {"queue.show", false};
    case W::DATASET_CREATE: return {"dataset.create", true};
    case W::DATASET_DELETE: return {"dataset.delete", true};
    case W::DATASET_LIST: return {"dataset.list", false};
    case W::DATASET_SHOW: return {"dataset.show", false};
    case W::JOB_SUBMIT:
    case W::JOB_SUBMIT_ALL: return {"job.submit", true};
    case W::JOB_CANCEL: return {"job.cancel", true};
    case W::JOB_HOLD: return {"job.hold", true};
    case W::JOB_RELEASE: return {"job.release", true};
    case W::JOB_REQUEUE: return {"job.requeue", true};
    case W::JOB_DELETE: return {"job.delete", true};
    case W::JOB_SCALE: return {"job.scale", true};
    case W::JOB_LIST: return {"job.list", false};
    case W::JOB_SHOW: return {"job.show", false};
    case W::JOB_EVENTS: return {"job.events", false};
    case W::JOB_TOP: return {"job.top", false};
    case W::LOGS: return {"job.logs", false};
    // Recorded as it starts (userExec), not before its answer: its stdin may follow at once.
    case W::USER_EXEC: return {"job.exec", false};
    case W::EXEC: return {"exec", false};
    case W::EXEC_INPUT: return {"exec.input", false};
    case W::NODE_LIST: return {"node.list", false};
    case W::NODE_SHOW: return {"node.show", false};
    case W::NODE_TOP: return {"node.top", false};
    case W::NODE_DRAIN: return {"node.drain", true};
    case W::NODE_UNDRAIN: return {"node.undrain", true};
    case W::NODE_DELETE: return {"node.delete", true};
    case W::NODE_LABEL: return {"node.label", true};
    case W::USER_CREATE: return {"user.create", true};
    case W::USER_LIST: return {"user.list", false};
    case W::USER_DELETE: return {"user.delete", true};
    case W::USER_TOKEN_CREATE: return {"user.token.create", true};
    case W::USER_TOKEN_LIST: return {"user.token.list", false};
    case W::TOKEN_REVOKE: return {"token.revoke", true};
    case W::JOIN_TOKEN_CREATE: return {"token.create", true};
    case W::JOIN_TOKEN_LIST: return {"token.list", false};
    case W::QUEUE_GRANT: return {"queue.grant", true};
    case W::QUEUE_REVOKE: return {"queue.revoke", true};
    case W::DATASET_GRANT: return {"dataset.grant", true};
    case W::DATASET_REVOKE: return {"dataset.revoke", true};
    case W::AUDIT: return {"audit", false};
    case W::USAGE: return {"usage", false};
    case W::WHOAMI: return {"whoami", false};
    case W::CLUSTER_STATUS:
    case W::CLUSTER_STATUS_STALE: return {"cluster.status", false};
    case W::CLUSTER_REMOVE: return {"cluster.remove", true};
    case W::EVENT_FEED: return {"events", false};
  }
  return {"unknown", false};
}

std::string ClientApi::requestTarget(api::Request::Reader req) {
  using W = api::Request::Which;
  auto grant = [](api::Grant::Reader g, const char* dir) { return str(g.getObject()) + dir + str(g.getUser()); };
  switch (req.which()) {
    case W::QUEUE_CREATE: return str(req.getQueueCreate().getName());
    case W::QUEUE_UPDATE: return str(req.getQueueUpdate().getName());
    case W::QUEUE_DELETE: return str(req.getQueueDelete());
    case W::QUEUE_SHOW: return str(req.getQueueShow());
    case W::DATASET_CREATE: return str(req.getDatasetCreate().getName());
    case W::DATASET_DELETE: return str(req.getDatasetDelete());
    case W::DATASET_SHOW: return str(req.getDatasetShow());
    case W::JOB_SUBMIT: return str(req.getJobSubmit().getName());
    case W::JOB_SUBMIT_ALL: {
      std::string names;
      for (auto s : req.getJobSubmitAll()) names += (names.empty() ? "" : ",") + str(s.getName());
      return names;
    }
    case W::JOB_CANCEL: return str(req.getJobCancel());
    case W::JOB_HOLD: return str(req.getJobHold());
    case W::JOB_RELEASE: return str(req.getJobRelease());
    case W::JOB_REQUEUE: return str(req.getJobRequeue());
    case W::JOB_DELETE: return str(req.getJobDelete());
    case W::JOB_SCALE: return str(req.getJobScale().getJob()) + "/" + str(req.getJobScale().getTask());
    case W::JOB_SHOW: return str(req.getJobShow());
    case W::JOB_EVENTS: return str(req.getJobEvents());
    case W::JOB_TOP: return str(req.getJobTop());
    case W::LOGS: return str(req.getLogs().getJob());
    case W::USER_EXEC: return str(req.getUserExec().getJob());
    case W::NODE_SHOW: return str(req.getNodeShow());
    case W::NODE_DRAIN: return str(req.getNodeDrain());
    case W::NODE_UNDRAIN: return str(req.getNodeUndrain());
    case W::NODE_DELETE: return str(req.getNodeDelete());
    case W::CLUSTER_REMOVE: return str(req.getClusterRemove());
    case W::EVENT_FEED: return str(req.getEventFeed().getJob());
    case W::NODE_LABEL: return str(req.getNodeLabel().getNode());
    case W::USER_CREATE: return str(req.getUserCreate().getName());
    case W::USER_DELETE: return str(req.getUserDelete());
    case W::USER_TOKEN_CREATE: return str(req.getUserTokenCreate().getUser());
    case W::USER_TOKEN_LIST: return str(req.getUserTokenList());
    case W::TOKEN_REVOKE: return str(req.getTokenRevoke());
    case W::QUEUE_GRANT:
    case W::DATASET_GRANT: return grant(req.isQueueGrant() ? req.getQueueGrant() : req.getDatasetGrant(), " to ");
    case W::QUEUE_REVOKE:
    case W::DATASET_REVOKE: return grant(req.isQueueRevoke() ? req.getQueueRevoke() : req.getDatasetRevoke(), " from ");
    default: return "";
  }
}

std::optional<std::string> ClientApi::authorizeJob(const Caller& caller, const std::string& verb,
                                                   const std::string& name) const {
  if (caller.admin) return std::nullopt;
  if (const JobEntry* job = jobs_.find(name)) return rules::onJob(caller, verb, name, job->rec.owner);
  // A job array: every member must be the caller's.
  for (const auto& member : jobs_.arrayMembers(name)) {
    const JobEntry* job = jobs_.find(member);
    if (job && job->rec.owner != caller.user)
      return "user " + caller.user + " may not " + verb + " job array " + name + ": its job " + member + " belongs to " +
             job->rec.owner;
  }
  return std::nullopt;  // unknown: the handler says so
}

std::optional<std::string> ClientApi::authorizeSubmit(const Caller& caller, schema::Job::Reader spec) const {
  if (caller.admin) return std::nullopt;  // admins submit anywhere, host tasks and datasets included
  std::string queue = str(spec.getQueue());
  if (auto why = rules::submitTo(caller, queue, access_.queueGranted(queue, caller.user))) return why;
  auto q = catalog_.queues().find(queue);
  bool hostAllowed = q != catalog_.queues().end() && q->second.allowHostTasks;
  for (auto t : spec.getTasks())
    for (auto c : containersOf(t)) {
      if (c.getImage() == "host")
        if (auto why = rules::hostTask(caller, queue, hostAllowed)) return why;
      for (auto m : c.getMounts()) {
        std::string ds = str(m.getDataset());
        if (auto why = rules::mountDataset(caller, ds, queue, access_.datasetGranted(ds, caller.user),
                                           access_.datasetGranted(ds, "queue:" + queue)))
          return why;
      }
    }
  return std::nullopt;
}

std::optional<std::string> ClientApi::authorize(const Caller& c, api::Request::Reader req) const {
  using W = api::Request::Which;
  switch (req.which()) {
    case W::QUEUE_CREATE: return rules::adminOnly(c, "create queues");
    case W::QUEUE_UPDATE: return rules::adminOnly(c, "change queues");
    case W::QUEUE_DELETE: return rules::adminOnly(c, "delete queues");
    case W::QUEUE_GRANT: return rules::adminOnly(c, "grant queues");
    case W::QUEUE_REVOKE: return rules::adminOnly(c, "revoke queue grants");
    case W::DATASET_CREATE: return rules::adminOnly(c, "create datasets");
    case W::DATASET_DELETE: return rules::adminOnly(c, "delete datasets");
    case W::DATASET_GRANT: return rules::adminOnly(c, "grant datasets");
    case W::DATASET_REVOKE: return rules::adminOnly(c, "revoke dataset grants");
    case W::NODE_DRAIN: return rules::adminOnly(c, "drain nodes");
    case W::NODE_UNDRAIN: return rules::adminOnly(c, "undrain nodes");
    case W::NODE_DELETE: return rules::adminOnly(c, "delete nodes");
    case W::CLUSTER_REMOVE: return rules::adminOnly(c, "remove masters");
    case W::NODE_LABEL: return rules::adminOnly(c, "label nodes");
    case W::USER_CREATE: return rules::adminOnly(c, "create users");
    case W::USER_LIST: return rules::adminOnly(c, "list users");
    case W::USER_DELETE: return rules::adminOnly(c, "delete users");
    case W::JOIN_TOKEN_CREATE: return rules::adminOnly(c, "create join tokens");
    case W::JOIN_TOKEN_LIST: return rules::adminOnly(c, "list join tokens");
    case W::AUDIT: return rules::adminOnly(c, "read the audit trail");
    case W::USER_TOKEN_CREATE: return rules::userTokens(c, "create", str(req.getUserTokenCreate().getUser()));
    case W::USER_TOKEN_LIST: {
      std::string user = str(req.getUserTokenList());
      return rules::userTokens(c, "list", user.empty() ? c.user : user);
    }
    case W::TOKEN_REVOKE: {
      const store::TokenRecord* t = access_.token(str(req.getTokenRevoke()));
      if (!t) return std::nullopt;  // the handler says it does not exist
      if (t->kind == "join") return rules::adminOnly(c, "revoke join tokens");
      return rules::userTokens(c, "revoke", t->user);
    }
    case W::JOB_SUBMIT: return authorizeSubmit(c, req.getJobSubmit());
    case W::JOB_SUBMIT_ALL:
      for (auto spec : req.getJobSubmitAll())
        if (auto why = authorizeSubmit(c, spec)) return why;
      return std::nullopt;
    case W::JOB_CANCEL: return authorizeJob(c, "cancel", str(req.getJobCancel()));
    case W::JOB_HOLD: return authorizeJob(c, "hold", str(req.getJobHold()));
    case W::JOB_RELEASE: return authorizeJob(c, "release", str(req.getJobRelease()));
    case W::JOB_REQUEUE: return authorizeJob(c, "requeue", str(req.getJobRequeue()));
    case W::JOB_DELETE: return authorizeJob(c, "delete", str(req.getJobDelete()));
    case W::JOB_SCALE: return authorizeJob(c, "scale", str(req.getJobScale().getJob()));
    case W::JOB_SHOW: return authorizeJob(c, "see", str(req.getJobShow()));
    case W::JOB_EVENTS: return authorizeJob(c, "see the events of", str(req.getJobEvents()));
    case W::JOB_TOP: return authorizeJob(c, "see the usage of", str(req.getJobTop()));
    case W::LOGS: return authorizeJob(c, "read the logs of", str(req.getLogs().getJob()));
    case W::USER_EXEC: return authorizeJob(c, "exec into", str(req.getUserExec().getJob()));
    case W::EVENT_FEED: {  // the whole feed is filtered to what the caller may see
      std::string job = str(req.getEventFeed().getJob());
      return job.empty() ? std::nullopt : authorizeJob(c, "see", job);
    }
    case W::JOB_LIST: return rules::listJobs(c, req.getJobList().getAll(), str(req.getJobList().getOwner()));
    // Reading queues, datasets and nodes, whoami, and usage (which answers users with their own).
    default: return std::nullopt;
  }
}

void ClientApi::refuse(const ClientAnswer& a, const std::string& user, const std::string& request,
                       const std::string& target, const std::string& why) {
  store::AuditRecord rec{0, 0, user, a.source.empty() ? a.conn->peer() : a.source, request, target, "refused", why};
  access_.record(std::move(rec), [a, why] { a.error(why); });  // `a` has no audit of its own yet
}

void ClientApi::fillUser(api::UserInfo::Builder out, const store::UserRecord& u) const {
  out.setName(u.name);
  out.setAdmin(u.admin);
  out.setUid(u.uid);
  out.setGid(u.gid);
  out.setCreatedAt(u.createdAt);
  out.setTokens(access_.liveTokens(u.name));
}

// A token create with a request id: its token's id is chosen first and recorded with the
// request; a resend finds that id and is answered with the same secret, derived again
// (Access::issuedAgain), so that a create whose answer was lost makes one token, not two.
void ClientApi::createTokenOnce(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                                const std::function<void(Result<IssuedToken>)>& answer,
                                const std::function<void(std::function<void(Result<IssuedToken>)>, Access::Origin)>& create) {
  Access::Origin origin{access_.newTokenId(), requestId, a.caller->user, {}};
  std::function<void(Result<bool>)> reply = [answer](Result<bool> r) {
    if (!r) answer(Result<IssuedToken>::fail(r.error()));
  };
  auto made = [this, a, requestId, answer](const store::Store::RequestRecord& rec) {
    // The record's answer: "token ID created". A record written before schema version 16
    // names no request, so its answer is checked here.
    const std::string& text = rec.answer;
    if (!text.starts_with("token ") || !text.ends_with(" created"))
      return a.error("requestId " + requestId + ": was given to another change (\"" + text + "\"), not a token create");
    answer(access_.issuedAgain(text.substr(6, text.size() - 6 - 8), requestId, a.caller->user));
  };
  if (createOnce(requestId, request, a, "token " + origin.tokenId + " created", made, origin.also, reply)) return;
  create(
      [answer, reply](Result<IssuedToken> r) {
        if (r) return answer(std::move(r));
        reply(Result<bool>::fail(r.error()));  // a concurrent send of the same request may have made it
      },
      std::move(origin));
}

void ClientApi::handleAccess(api::Request::Reader req, const ClientAnswer& a) {
  using W = api::Request::Which;
  const Caller& caller = *a.caller;
  auto secretAnswer = [a](Result<IssuedToken> r) {
    if (!r) return a.error(r.error());
    fillSecret(a.resp.initSecret(), r.value());
    // The audit trail gets the id, never the secret.
    if (a.audit) a.audit->record.message = "token " + r.value().id + " created";
    a.send();
  };
  auto grantDone = [a](std::string done) { return afterCommit(a, [a, done] { a.resp.setDone(done); }); };
  switch (req.which()) {
    case W::WHOAMI: {
      const store::UserRecord* u = access_.user(caller.user);
      if (!u) return a.error("user " + caller.user + " does not exist any more");
      fillUser(a.resp.initUser(), *u);
      return a.send();
    }
    case W::USER_CREATE: {
      auto in = req.getUserCreate();
      store::UserRecord u{str(in.getName()), in.getAdmin(), in.getUid(), in.getGid(), 0};
      auto answer = [this, a](const std::string& name) {
        return afterCommit(a, [this, a, name] { fillUser(a.resp.initUser(), *access_.user(name)); });
      };
      Access::Reply reply = answer(u.name);
      std::function<void(store::Tx&)> also;
      auto made = [this, a, answer, name = u.name](const store::Store::RequestRecord&) {
        if (!access_.user(name)) return a.error("user " + name + " was created by this request, and deleted since");
        answer(name)(Result<bool>::ok(true));
      };
      if (createOnce(str(req.getRequestId()), "user create " + u.name, a, "user " + u.name + " created", made, also,
                     reply))
        return;
      return access_.createUser(u, reply, also);
    }
    case W::USER_LIST: {
      auto list = a.resp.initUsers(static_cast<unsigned>(access_.users().size()));
      unsigned i = 0;
      for (const auto& [name, u] : access_.users()) fillUser(list[i++], u);
      return a.send();
    }
    case W::USER_DELETE: {
      std::string name = str(req.getUserDelete());
      return access_.deleteUser(name, grantDone("user " + name + " deleted; its tokens are revoked"));
    }
    case W::USER_TOKEN_CREATE: {
      auto in = req.getUserTokenCreate();
      std::string user = str(in.getUser());
      if (user.empty()) user = caller.user;
      if (in.getTtlSeconds() < 0) return a.error("--ttl: must be 0 (never expires) or more");
      auto create = [this, user, ttl = in.getTtlSeconds() * 1000, description = str(in.getDescription())](
                        std::function<void(Result<IssuedToken>)> done, Access::Origin origin) {
        access_.createApiToken(user, ttl, description, std::move(done), std::move(origin));
      };
      return createTokenOnce(str(req.getRequestId()), "user token create " + user, a, secretAnswer, create);
    }
    case W::JOIN_TOKEN_CREATE: {
      auto in = req.getJoinTokenCreate();
      if (in.getTtlSeconds() < 0) return a.error("--ttl: must be more than 0");
      auto create = [this, ttl = in.getTtlSeconds() * 1000, uses = in.getUses(), description = str(in.getDescription())](
                        std::function<void(Result<IssuedToken>)> done, Access::Origin origin) {
        access_.createJoinToken(ttl, uses, description, std::move(done), std::move(origin));
      };
      return createTokenOnce(str(req.getRequestId()), "join token create", a, secretAnswer, create);
    }
    case W::USER_TOKEN_LIST:
    case W::JOIN_TOKEN_LIST: {
      std::vector<store::TokenRecord> list;
      if (req.isJoinTokenList()) {
        list = access_.tokensOf("join", "");
      } else {
        std::string user = str(req.getUserTokenList());
        if (user.empty()) user = caller.user;
        if (!access_.user(user)) return a.error("user " + user + " does not exist");
        list = access_.tokensOf("api", user);
      }
      auto out = a.resp.initTokens(static_cast<unsigned>(list.size()));
      for (unsigned i = 0; i < out.size(); ++i) fillToken(out[i], list[i]);
      return a.send();
    }
    case W::TOKEN_REVOKE: {
      std::string id = str(req.getTokenRevoke());
      return access_.revokeToken(id, grantDone("token " + id + " revoked"));
    }
    case W::QUEUE_GRANT:
    case W::QUEUE_REVOKE: {
      auto g = req.isQueueGrant() ? req.getQueueGrant() : req.getQueueRevoke();
      store::GrantRecord rec{str(g.getObject()), str(g.getUser())};
      if (!catalog_.queues().count(rec.object)) return a.error("queue " + rec.object + " does not exist");
      if (req.isQueueRevoke())
        return access_.revoke(store::GrantTable::Queue, rec,
                              grantDone("queue " + rec.object + " revoked from user " + rec.user));
      return access_.grant(store::GrantTable::Queue, rec, grantDone("queue " + rec.object + " granted to user " + rec.user));
    }
    case W::DATASET_GRANT:
    case W::DATASET_REVOKE: {
      auto g = req.isDatasetGrant() ? req.getDatasetGrant() : req.getDatasetRevoke();
      store::GrantRecord rec{str(g.getObject()), str(g.getUser())};
      if (!catalog_.datasets().count(rec.object)) return a.error("dataset " + rec.object + " does not exist");
      std::string who = rec.user.rfind("queue:", 0) == 0 ? "queue " + rec.user.substr(6) : "user " + rec.user;
      if (rec.user.rfind("queue:", 0) == 0 && !catalog_.queues().count(rec.user.substr(6)))
        return a.error("queue " + rec.user.substr(6) + " does not exist");
      if (req.isDatasetRevoke())
        return access_.revoke(store::GrantTable::Dataset, rec, grantDone("dataset " + rec.object + " revoked from " + who));
      return access_.grant(store::GrantTable::Dataset, rec, grantDone("dataset " + rec.object + " granted to " + who));
    }
    default: break;
  }
  assert(false && "handleAccess: not an access request");
}

// On the read thread, like job events: the audit trail lives only in SQLite.
void ClientApi::auditQuery(api::AuditQuery::Reader q, ClientAnswer a) {
  store::AuditQuery query;
  query.user = str(q.getUser());
  query.since = q.getSince();
  query.until = q.getUntil();
  query.limit = q.getLimit() > 0 ? static_cast<size_t>(q.getLimit()) : 1000;
  reads_.run([&store = store_, query, a = std::move(a)]() mutable {
    auto records = store.audit(query);
    if (!records) {
      a.setError("cannot read the audit trail: " + records.error());
    } else {
      auto out = a.resp.initAuditRecords(static_cast<unsigned>(records.value().size()));
      for (unsigned i = 0; i < out.size(); ++i) {
        const auto& r = records.value()[i];
        out[i].setAt(r.at);
        out[i].setUser(r.user);
        out[i].setSource(r.source);
        out[i].setRequest(r.request);
        out[i].setTarget(r.target);
        out[i].setOutcome(r.outcome);
        out[i].setMessage(r.message);
      }
    }
    std::move(a).post();
  });
}

void ClientApi::deleteNode(const std::string& name, const ClientAnswer& a) {
  nodes_.remove(
      name, [this, name] { return static_cast<int64_t>(jobs_.nodeUsage(name).second); },
      afterCommit(a, [a, name] { a.resp.setDone("node " + name + " deleted; an agent that joins as " + name + " again re-creates it"); }));
}

}  // namespace yard::master
