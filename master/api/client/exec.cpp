// Exec sessions relayed to an agent: the exec channel (`exec`, OpenMPI's yard-rsh, token
// checked) and a user's `yardctl exec` (`userExec`, with stdin, a pty and flow control;
// docs/exec.md). Each frame of a session's answer is its own ClientAnswer with the
// request's id.
#include <algorithm>

#include "master/api/client/client_api.h"
#include "master/frameworks/exec_target.h"
#include "common/util/random.h"
#include "schema/api.capnp.h"

namespace yard::master {
namespace {

// A client that stops reading the output it asked for is cut off rather than buffered without
// bound (it reports what it took, so only one that ignores its window gets this far).
constexpr size_t kMaxClientBacklog = 64u << 20;

void sendOutput(const std::shared_ptr<wire::Connection>& conn, uint64_t id, uint8_t which, const std::string& data) {
  ClientAnswer output(conn, id);
  auto o = output.resp.initExecOutput();
  o.setStream(which);
  o.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
  output.send();
}

}  // namespace

void ClientApi::exec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::ExecRequest::Reader q) {
  auto fail = [&](const std::string& why) { ClientAnswer(conn, id).error("exec: " + why); };
  if (!calls_) return fail("this master cannot reach agents");
  const JobEntry* job = jobs_.find(q.getJob());
  const TaskEntry* task = nullptr;
  if (job)
    for (const auto& t : job->tasks)
      if (t.rec.name == q.getTask().cStr()) task = &t;
  // One answer for every identity problem: a caller learns nothing from the difference.
  const std::string refused = "refused: no running replica with that identity and token";
  if (!task) return fail(refused);
  const store::ReplicaRecord* caller = nullptr;
  for (const auto& r : task->replicas)
    if (r.role == q.getRole().cStr() && r.index == q.getIndex() && r.attempt == q.getAttempt() && isLive(r.state))
      caller = &r;
  std::string token;
  if (caller)
    for (const auto& [k, v] : decodeEnv(caller->env))
      if (k == "YARD_EXEC_TOKEN") token = v;
  if (!caller || !tokensEqual(q.getToken().cStr(), token)) return fail(refused);
  conn->markAuthenticated();  // the job's exec token is its credential
  std::string host = q.getHost().cStr();
  const store::ReplicaRecord* target = nullptr;
  std::string hostPort;
  for (const auto& r : task->replicas) {
    if (&r == caller || r.attempt != caller->attempt || r.state != ReplicaState::Running) continue;
    auto n = nodes_.nodes().find(r.node);
    if (n == nodes_.nodes().end() || (n->second.record.address != host && r.node != host)) continue;
    if (!target || (r.role == "worker" && (target->role != "worker" || r.index < target->index))) {
      target = &r;
      hostPort = n->second.record.address + ":" + std::to_string(n->second.record.agentPort);
    }
  }
  if (!target) return fail("no running replica of task " + task->rec.name + " on " + host);
  std::vector<std::string> argv;
  for (auto a : q.getArgv()) argv.emplace_back(a.cStr());
  if (argv.empty()) return fail("argv is empty");
  auto stream = calls_->exec(
      hostPort, target->id, target->attempt, argv,
      [conn, id](uint8_t which, const std::string& data) { sendOutput(conn, id, which, data); },
      [conn, id, hold = conn->holdOpen()](Result<int> r) {  // not idle while the command runs
        ClientAnswer end(conn, id);
        if (!r) return end.error("exec: " + r.error());
        end.resp.setExecExit(r.value());
        end.send();
      });
  conn->onClose([stream] { stream->cancel(); });
}


// One yardctl exec being relayed: the client's request and the agent's stream.
struct ClientApi::UserExec {
  std::shared_ptr<wire::Connection> conn;
  uint64_t id = 0;
  std::string label;  // task/role/index
  bool takesStdin = false;
  uint64_t stdinAhead = 0;  // stdin bytes relayed and not yet reported taken
  std::shared_ptr<AgentCalls::ExecStream> stream;
  std::shared_ptr<void> hold;  // the client's connection is not idle while the command runs
  std::shared_ptr<void> slot;  // one of its user's kMaxExecsPerUser
};

std::shared_ptr<void> ClientApi::UserSlots::take(const std::shared_ptr<UserSlots>& slots, const std::string& user,
                                                 int max, int& held) {
  std::lock_guard<std::mutex> lock(slots->mu);
  int& open = slots->open[user];
  held = open;
  if (open >= max) {
    if (open == 0) slots->open.erase(user);
    return nullptr;
  }
  ++open;
  // A non-null pointer that owns nothing: its deleter gives the slot back.
  static char token;
  return std::shared_ptr<void>(&token, [slots, user](void*) {
    std::lock_guard<std::mutex> l(slots->mu);
    if (--slots->open[user] <= 0) slots->open.erase(user);
  });
}

std::optional<std::string> ClientApi::userExecAllowed(const Caller& caller, const JobEntry& job) const {
  // Admins into every job's replicas, users into their own (docs/security.md).
  return rules::onJob(caller, "exec into", job.rec.name, job.rec.owner);
}

void ClientApi::userExec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::UserExecRequest::Reader q,
                         const Caller& caller) {
  // Recorded as it starts or fails, without holding it back for the commit: stdin frames may
  // follow the request at once, and they need the session to exist.
  store::AuditRecord rec{0, 0, caller.user, caller.source, "job.exec", str(q.getJob()), "", ""};
  auto fail = [&](const std::string& why) {
    rec.outcome = "failed";
    rec.message = why;
    access_.record(rec, {});
    ClientAnswer(conn, id).error(why);
  };
  std::vector<std::string> argv;
  for (auto a : q.getArgv()) argv.emplace_back(a.cStr());
  if (argv.empty() || argv[0].empty()) return fail("exec: no command to run (put it after --)");
  const JobEntry* job = jobs_.find(q.getJob());
  if (!job) return fail("job " + str(q.getJob()) + " does not exist");
  if (auto refused = userExecAllowed(caller, *job)) return fail(*refused);
  auto choice = chooseExecReplica(*job, ExecQuery{str(q.getTask()), str(q.getRole()), q.getIndex()},
                                  [&](size_t task) { return jobs_.taskReason(*job, task); });
  if (!choice) return fail(choice.error());
  const ExecChoice& c = choice.value();
  auto n = nodes_.nodes().find(c.replica->node);
  if (n == nodes_.nodes().end() || n->second.record.agentPort == 0 || n->second.record.state == NodeState::Down)
    return fail(c.label + " runs on node " + c.replica->node + ", whose agent cannot be reached now");
  if (!calls_) return fail("exec: this master cannot reach agents");
  if (userExecs_.count({conn.get(), id})) return fail("exec: request id " + std::to_string(id) + " is already in use");
  int held = 0;
  std::shared_ptr<void> slot = UserSlots::take(execs_, caller.user, kMaxExecsPerUser, held);
  if (!slot)
    return fail("user " + caller.user + " runs " + std::to_string(held) +
                " exec sessions at once, the most one user may: end one first");
  std::string hostPort = n->second.record.address + ":" + std::to_string(n->second.record.agentPort);
  rec.outcome = "ok";
  rec.message = "exec " + argv[0] + " in " + c.label;
  access_.record(rec, {});

  AgentCalls::UserExecSpec spec;
  spec.argv = std::move(argv);
  spec.stdin = q.getStdin();
  spec.tty = q.getTty();
  spec.rows = q.getRows();
  spec.cols = q.getCols();
  spec.term = str(q.getTerm());
  spec.outputWindow = api::EXEC_OUTPUT_WINDOW;
  auto session = std::make_shared<UserExec>();
  session->conn = conn;
  session->id = id;
  session->label = c.label;
  session->takesStdin = spec.stdin;
  session->hold = conn->holdOpen();
  session->slot = std::move(slot);
  std::weak_ptr<UserExec> weak = session;
  auto key = std::make_pair(conn.get(), id);
  session->stream = calls_->userExec(
      hostPort, c.replica->id, c.replica->attempt, spec,
      [conn, id](uint8_t which, const std::string& data) {
        if (conn->pendingBytes() > kMaxClientBacklog) return conn->close("exec output reader fell 64 MiB behind");
        sendOutput(conn, id, which, data);
      },
      [conn, id, weak](uint64_t taken) {
        if (auto s = weak.lock()) s->stdinAhead -= std::min(taken, s->stdinAhead);
        ClientAnswer a(conn, id);
        a.resp.setExecInputTaken(taken);
        a.send();
      },
      [this, conn, id, key, label = c.label](Result<int> r) {
        userExecs_.erase(key);  // drops the hold with the session
        ClientAnswer end(conn, id);
        if (!r) {
          std::string why = r.error();
          if (why.rfind("exec: ", 0) == 0) why.erase(0, 6);  // the agent's prefix; ours says it
          return end.error("exec in " + label + ": " + why);
        }
        end.resp.setExecExit(r.value());
        end.send();
      });
  userExecs_[key] = session;
  // Closing the connection kills the command (the agent kills it when its call closes).
  conn->onClose([this, weak, key] {
    if (auto s = weak.lock()) s->stream->cancel();
    userExecs_.erase(key);
  });
}

void ClientApi::execInput(const std::shared_ptr<wire::Connection>& conn, api::ExecInput::Reader in) {
  auto it = userExecs_.find({conn.get(), in.getExec()});
  if (it == userExecs_.end()) return;  // it has ended: what was meant for it is dropped
  std::shared_ptr<UserExec> s = it->second;
  // A client that breaks the protocol ends its exec (and the command) with the reason.
  auto refuse = [&](const std::string& why) {
    userExecs_.erase(it);
    s->stream->cancel();
    ClientAnswer(conn, s->id).error("exec in " + s->label + ": " + why);
  };
  switch (in.which()) {
    case api::ExecInput::DATA: {
      auto d = in.getData();
      if (!s->takesStdin) return refuse("stdin sent to a command started without -i");
      if (d.size() > api::EXEC_INPUT_FRAME_BYTES)
        return refuse("a stdin frame of " + std::to_string(d.size()) + " bytes; at most " +
                      std::to_string(api::EXEC_INPUT_FRAME_BYTES) + " per frame");
      s->stdinAhead += d.size();
      if (s->stdinAhead > api::EXEC_INPUT_WINDOW)
        return refuse("stdin ran " + std::to_string(s->stdinAhead) + " bytes ahead of the command; the window is " +
                      std::to_string(api::EXEC_INPUT_WINDOW));
      return s->stream->input(std::string(reinterpret_cast<const char*>(d.begin()), d.size()));
    }
    case api::ExecInput::CLOSE_STDIN: return s->stream->closeStdin();
    case api::ExecInput::RESIZE: return s->stream->resize(in.getResize().getRows(), in.getResize().getCols());
    case api::ExecInput::OUTPUT_TAKEN: return s->stream->outputTaken(in.getOutputTaken());
  }
}

}  // namespace yard::master
