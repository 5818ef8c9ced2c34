#include "master/api/client/client_api.h"

#include "common/spec/validate.h"
#include "common/wire/list_limits.h"

#include "common/tls/pki.h"

#include "common/util/capnp_text.h"
#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {

void ClientAnswer::send() const {
  if (!audit || audit->recorded) return conn->send(*message);
  audit->recorded = true;
  store::AuditRecord rec = audit->record;
  if (resp.isError()) {
    rec.outcome = "failed";
    rec.message = resp.getError().getMessage().cStr();
  } else {
    rec.outcome = "ok";
    if (resp.isDone()) rec.message = resp.getDone().cStr();
  }
  // Durable before visible: the answer goes once its record has committed.
  audit->access->record(std::move(rec), [conn = conn, message = message] { conn->send(*message); });
}

void ClientApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<api::Request>();
  ClientAnswer a(conn, req.getId());
  if (metrics_) metrics_->observeAnswer(a.message, requestMethod(req));
  // Every list's length first, before anything walks one (a spec's tasks: its own limit).
  static const wire::ListLimits kListLimits{10000, {{"tasks", spec::kMaxTasks}, {"dependsOn", spec::kMaxTasks}}, 1000000};
  if (auto why = wire::checkListLengths(capnp::toDynamic(req), kListLimits); !why.empty())
    return a.error("request refused: " + why);
  switch (req.which()) {
    case api::Request::PING:
      a.resp.setPong(std::string("yard-master ") + kVersion);
      return a.send();
    // The exec channel (yard-rsh in a replica) proves itself with its job's exec token.
    case api::Request::EXEC: return exec(conn, req.getId(), req.getExec());
    // Input to a yardctl exec this connection started: that request was authorized.
    case api::Request::EXEC_INPUT: return execInput(conn, req.getExecInput());
    default: break;
  }
  RequestInfo info = requestInfo(req.which());
  // The HTTP API forwards the browser's address; only the master itself may say so.
  a.source = conn->peer();
  if (req.hasForwardedFor() && conn->peerName() == tls::kMasterName)
    a.source = std::string(req.getForwardedFor().cStr()) + " (http)";
  // The master's own gateway (its certificate, which only the master holds) forwards
  // browsers' requests, logged in or not: its connection is never a stranger's.
  if (conn->peerName() == tls::kMasterName) {
    conn->markAuthenticated();
    conn->leaveAddressCap();  // a connection per log stream, all from the master's address
  }
  auto who = access_.authenticate(view(req.getToken()), a.source);
  if (!who) return refuse(a, "", info.name, requestTarget(req), who.error());
  // A valid token: the connection keeps its place when strangers flood the listener
  // (docs/reliability.md, "Bounded resources per peer").
  conn->markAuthenticated();
  auto caller = std::make_shared<const Caller>(std::move(who).value());
  a.caller = caller;
  if (auto why = authorize(*caller, req)) return refuse(a, caller->user, info.name, requestTarget(req), *why);
  if (info.mutating) {
    a.audit = std::make_shared<ClientAnswer::Audit>();
    a.audit->access = &access_;
    a.audit->record = store::AuditRecord{0, 0, caller->user, caller->source, info.name, requestTarget(req), "", ""};
  }
  switch (req.which()) {
    case api::Request::QUEUE_CREATE:
    case api::Request::QUEUE_UPDATE:
    case api::Request::QUEUE_DELETE:
    case api::Request::QUEUE_LIST:
    case api::Request::QUEUE_SHOW: return handleQueue(req, a);
    case api::Request::DATASET_CREATE:
    case api::Request::DATASET_DELETE:
    case api::Request::DATASET_LIST:
    case api::Request::DATASET_SHOW: return handleDataset(req, a);
    case api::Request::JOB_SUBMIT:
    case api::Request::JOB_SUBMIT_ALL:
    case api::Request::JOB_CANCEL:
    case api::Request::JOB_DELETE:
    case api::Request::JOB_HOLD:
    case api::Request::JOB_RELEASE:
    case api::Request::JOB_REQUEUE:
    case api::Request::JOB_SCALE:
    case api::Request::JOB_LIST:
    case api::Request::JOB_SHOW:
    case api::Request::JOB_EVENTS: return handleJob(req, a);
    case api::Request::NODE_LIST:
    case api::Request::NODE_SHOW:
    case api::Request::NODE_DRAIN:
    case api::Request::NODE_UNDRAIN:
    case api::Request::NODE_LABEL:
    case api::Request::NODE_TOP: return handleNode(req, a);
    case api::Request::NODE_DELETE: return deleteNode(req.getNodeDelete(), a);
    case api::Request::USER_CREATE:
    case api::Request::USER_LIST:
    case api::Request::USER_DELETE:
    case api::Request::USER_TOKEN_CREATE:
    case api::Request::USER_TOKEN_LIST:
    case api::Request::TOKEN_REVOKE:
    case api::Request::JOIN_TOKEN_CREATE:
    case api::Request::JOIN_TOKEN_LIST:
    case api::Request::QUEUE_GRANT:
    case api::Request::QUEUE_REVOKE:
    case api::Request::DATASET_GRANT:
    case api::Request::DATASET_REVOKE:
    case api::Request::WHOAMI: return handleAccess(req, a);
    case api::Request::AUDIT: return auditQuery(req.getAudit(), a);
    // Streams: several frames per request, each its own message.
    case api::Request::LOGS: return logs(conn, req.getId(), req.getLogs(), *caller);
    case api::Request::JOB_TOP: return top(conn, req.getId(), req.getJobTop());
    case api::Request::USER_EXEC: return userExec(conn, req.getId(), req.getUserExec(), *caller);
    case api::Request::EVENT_FEED: return eventFeed(conn, req.getId(), req.getEventFeed(), *caller);
    case api::Request::USAGE: return usage(req.getUsage(), a);
    case api::Request::CLUSTER_STATUS:
    case api::Request::CLUSTER_STATUS_STALE: return clusterStatus(a);  // the leader's view is not stale
    case api::Request::CLUSTER_REMOVE: return clusterRemove(req.getClusterRemove().cStr(), a);
    default: break;  // usage (issue 14's accounting) is answered elsewhere, once it exists
  }
  a.error("this yard-master does not understand that request (a newer yardctl?)");
}

void ClientApi::setResources(schema::Resources::Builder out, int64_t cpuMillis, int64_t memoryBytes, int64_t gpu) {
  out.setCpuMillis(cpuMillis);
  out.setMemoryBytes(memoryBytes);
  out.setGpu(gpu);
}

}  // namespace yard::master
