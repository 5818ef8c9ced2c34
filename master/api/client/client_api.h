#pragma once
// The client API: decodes each api::Request frame, does what it asks, answers with an
// api::Response carrying the same id (possibly later, once a change is durable, or once a
// read on the read thread is done). Runs on the io thread.
//
// handle() only dispatches: one handler per resource, each in its own file —
// catalog.cpp (queues, datasets), jobs.cpp (jobs and their events),
// nodes.cpp (nodes), logs.cpp (logs, top), exec.cpp (the
// exec channel and yardctl exec), access.cpp (users, tokens, grants, audit, and
// who may make each request).
//
// Every request but `ping` (and the exec channel, which has its own per-job token) carries an
// API token: handle() authenticates it, authorizes the request (rules in master/access/access.h) and
// records refusals and changes in the audit trail before answering (docs/security.md).

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/wire/address_list.h"
#include "common/wire/answer.h"
#include "common/wire/server.h"
#include "master/access/access.h"
#include "master/api/agent/agent_calls.h"
#include "master/api/client/cluster_ops.h"
#include "master/catalog/catalog.h"
#include "master/commit/read_thread.h"
#include "schema/api.capnp.h"
#include "master/config/config.h"
#include "master/jobs/registry.h"
#include "master/logs/log_archive.h"
#include "master/metrics/metrics.h"
#include "master/nodes/nodes.h"

namespace yard::master {

class EventFeed;

// How the client API writes a refusal: one Error line written for the user.
struct ClientApiError {
  void operator()(api::Response::Builder resp, const std::string& why) const {
    resp.initError().setMessage(wire::notLeaderWhenLeadLost(why));
  }
};

// The answer to one client request (wire::Answer's interface), with two additions: who asked
// (`caller`, set once authenticated), and, for a request the audit trail records, the record
// to store before the answer goes out: send() stores it (outcome from the response: ok or
// failed) and sends once it has committed. Copies share the message and the record.
struct ClientAnswer {
  struct Audit {
    Access* access = nullptr;
    store::AuditRecord record;
    bool recorded = false;
  };
  ClientAnswer(std::shared_ptr<wire::Connection> to, uint64_t id) : conn(std::move(to)) { resp.setId(id); }

  void send() const;
  void setError(const std::string& why) const { ClientApiError{}(resp, why); }
  void error(const std::string& why) const {
    setError(why);
    send();
  }
  // Sends from the connection's io thread (see wire::Answer::post).
  void post() && {
    auto executor = conn->executor();
    asio::post(executor, [a = std::move(*this)] { a.send(); });
  }

  std::shared_ptr<wire::Connection> conn;
  std::shared_ptr<capnp::MallocMessageBuilder> message = std::make_shared<capnp::MallocMessageBuilder>();
  mutable api::Response::Builder resp = message->initRoot<api::Response>();
  std::shared_ptr<const Caller> caller;  // null only for ping and the exec channel
  std::string source;                    // the peer's address for the audit trail (set by handle())
  // A submission writes the record in its own transaction and marks it recorded (jobs.cpp:
  // one commit per submission). TODO(perf): other mutating requests still commit it after the
  // change it describes, a second commit each (docs/benchmarks.md, "TLS and tokens").
  std::shared_ptr<Audit> audit;          // null: not recorded
};

// Parts a client API may go without (tests): each one left out turns its part off, as said.
struct ClientApiParts {
  AgentCalls* calls = nullptr;          // how `logs` and `exec` reach agents; without it they are refused
  LogArchiveService* archive = nullptr;  // where `logs` finds the output of replicas no agent holds
  MasterMetrics* metrics = nullptr;      // counts requests by method and outcome, times answers
  const ClusterOps* cluster = nullptr;   // several masters (docs/ha.md); without it: a single master
  EventFeed* feed = nullptr;             // eventFeed streams it (feed.cpp); without it they are refused
};

class ClientApi {
 public:
  using Clock = JobRegistry::Clock;  // unix ms
  using Parts = ClientApiParts;
  // The master's wall clock: the clock the job registry stamps the autoscaler's times with.
  static int64_t wallClockMs() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  }

  // REQUIRES: `store` and the io_context the connections run on stay open until stop() (or
  // the destructor) has run: the read thread reads the store and posts answers to that
  // io_context until then. `now` must be the clock `jobs` runs on: job show sends it with
  // the autoscaler's times so that yardctl can say "12s ago" whatever the client's clock.
  ClientApi(const MasterConfig& config, Catalog& catalog, JobRegistry& jobs, store::Store& store, NodeRegistry& nodes,
            Access& access, Parts parts = {}, Clock now = wallClockMs)
      : config_(config), catalog_(catalog), jobs_(jobs), store_(store), nodes_(nodes), access_(access),
        now_(std::move(now)), calls_(parts.calls), archive_(parts.archive), metrics_(parts.metrics),
        cluster_(parts.cluster), feed_(parts.feed) {}
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);
  // Waits for the read in progress and drops the queued ones (their clients get no answer).
  // For shutdown: call after the io loop stops and before the store closes.
  void stop() { reads_.stop(); }

 private:
  struct LogFilter {
    std::string job, task, role;
    int32_t index = -1, attempt = -1;
  };
  struct LogTarget {
    std::string label;  // task/role/index
    std::string hostPort;  // empty: read from the log archive only
    int64_t jobId = 0;
    int64_t replicaId = 0;
    int32_t attempt = 0;
  };
  // One `yardctl logs` request being answered from one or more agents' streams.
  struct Relay {
    std::shared_ptr<wire::Connection> conn;
    uint64_t id = 0;
    std::vector<LogTarget> targets;
    std::vector<std::shared_ptr<AgentCalls::LogStream>> streams;
    size_t next = 0, open = 0;
    std::string problems;
    bool follow = false;
    int64_t tail = -1;
    int64_t sinceMs = 0;  // --since: output written from then on (0 = all)
    bool over = false;
    std::shared_ptr<void> hold;  // the client's connection is not idle while this lasts
    std::shared_ptr<void> followSlot;  // `logs -f`: one of its user's kMaxFollowsPerUser
    // `logs -f` of a job: replicas that start later (later tasks, runs, attempts) join the
    // relay, which ends only once the job has ended and nothing of it runs.
    bool watching = false;
    LogFilter watch;
    std::set<std::pair<int64_t, int32_t>> seen;  // replica id, attempt
  };
  // The relay's targets among `job`'s replicas: the newest attempt of each role/index that
  // matches and has started (every attempt when `everyAttempt`). `problems` gets the ones no
  // agent or archive can serve.
  void logTargets(const JobEntry& job, const LogFilter& f, std::vector<LogTarget>& out, std::string& problems,
                  bool everyAttempt = false) const;
  // Every second while following a job: adds its newly started replicas, ends when it has.
  void watchLogs(const std::shared_ptr<Relay>& relay);

  // Authentication, authorization and audit (access.cpp). The request's name in
  // the audit trail ("job.submit"), whether it changes anything, and what it names.
  struct RequestInfo {
    const char* name;
    bool mutating;
  };
  static RequestInfo requestInfo(api::Request::Which which);
  static std::string requestTarget(api::Request::Reader req);
  // nullopt when `caller` may make `req`, else the refusal.
  std::optional<std::string> authorize(const Caller& caller, api::Request::Reader req) const;
  std::optional<std::string> authorizeSubmit(const Caller& caller, schema::Job::Reader spec) const;
  // job (or job array) `name`: the refusal when one of its jobs is not the caller's.
  std::optional<std::string> authorizeJob(const Caller& caller, const std::string& verb, const std::string& name) const;
  // Records a refusal, then answers it.
  void refuse(const ClientAnswer& a, const std::string& user, const std::string& request, const std::string& target,
              const std::string& why);
  void handleAccess(api::Request::Reader req, const ClientAnswer& a);
  void fillUser(api::UserInfo::Builder out, const store::UserRecord& u) const;
  void auditQuery(api::AuditQuery::Reader q, ClientAnswer a);
  void deleteNode(const std::string& name, const ClientAnswer& a);
  // cluster.cpp: the masters (docs/ha.md).
  void clusterStatus(ClientAnswer a);
  void clusterRemove(const std::string& who, ClientAnswer a);
  // yardctl usage (usage.cpp): per-job usage rows from the store, on the read thread.
  void usage(api::UsageQuery::Reader query, ClientAnswer a);

  // One handler per resource. REQUIRES: `req` is a request about that resource.
  void handleQueue(api::Request::Reader req, const ClientAnswer& a);
  void handleDataset(api::Request::Reader req, const ClientAnswer& a);
  void handleJob(api::Request::Reader req, const ClientAnswer& a);
  // A change sent with a request id already on record (docs/ha.md, "Retries and request
  // ids"). Returns true when `a` is answered: refused when the id is another user's or was
  // given to another change than `request` (e.g. "job cancel long"), else answered by `made`
  // as a resend. False when the id is not on record.
  bool resendAnswered(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                      const std::function<void(const store::Store::RequestRecord&)>& made);
  // A create (queue, dataset, user) with a request id (docs/ha.md, "Retries and request ids"):
  // made once. Returns true when `a` is answered already: the id is malformed, or is on
  // record (resendAnswered; `made` then answers as the create did). Else sets `also` to
  // record the id, `request` and `what` with the create, in its transaction, and wraps `reply`
  // so that a refusal while the id is recorded (a resend that queued behind its first send)
  // answers as made.
  bool createOnce(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                  const std::string& what, const std::function<void(const store::Store::RequestRecord&)>& made,
                  std::function<void(store::Tx&)>& also, std::function<void(Result<bool>)>& reply);
  // A token create (API or join; `request` says which) made once per request id: `create` is
  // handed the answer and the token's origin (its id chosen here, the request's record to
  // write with it).
  void createTokenOnce(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                       const std::function<void(Result<IssuedToken>)>& answer,
                       const std::function<void(std::function<void(Result<IssuedToken>)>, Access::Origin)>& create);
  void handleNode(api::Request::Reader req, const ClientAnswer& a);

  // Commits dataset `rec` (its path already checked and resolved) and answers with it.
  void createDataset(const store::DatasetRecord& rec, const ClientAnswer& a, const std::string& requestId);
  void updateQueue(api::QueueUpdate::Reader update, const ClientAnswer& a);
  // Once a change to queue `name` commits: the queue as it now is.
  Catalog::Reply answerQueue(const ClientAnswer& a, const std::string& name);
  void listJobs(api::JobFilter::Reader filter, const ClientAnswer& a);
  void events(const std::string& jobName, ClientAnswer a);
  // A queue or node as the client sees it: its record and what jobs hold of it now.
  // What every queue's share reads, made once per answer: `queue list` is then linear in the
  // queues and nodes, not quadratic.
  struct ShareContext {
    sched::Resources ready;                                        // Ready nodes' capacity
    std::map<std::string, double> past;                            // fair share's past shares
    std::map<std::string, sched::QueueView> views;                 // by queue
    std::map<std::string, std::vector<sched::QueueView>> cohorts;  // members, by cohort
  };
  ShareContext shareContext() const;
  void fillQueue(api::Queue::Builder out, const store::QueueRecord& q, const ShareContext& shares) const;
  sched::QueueView shareView(const store::QueueRecord& q) const;  // its quota, usage and cohort
  void fillNode(api::NodeInfo::Builder out, const NodeInfo& n, bool withUsage) const;

  void logs(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::LogsQuery::Reader query, const Caller& caller);
  void startNextLog(const std::shared_ptr<Relay>& relay);
  void top(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& job);
  // The event feed from `after` on, filtered to what `caller` may see (feed.cpp), until the
  // connection closes.
  void eventFeed(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::EventFeedRequest::Reader req,
                 const Caller& caller);
  void exec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::ExecRequest::Reader request);
  // yardctl exec (exec.cpp, docs/exec.md): sessions by connection and request id,
  // for the execInput frames that name them.
  struct UserExec;
  void userExec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::UserExecRequest::Reader request,
                const Caller& caller);
  void execInput(const std::shared_ptr<wire::Connection>& conn, api::ExecInput::Reader input);
  // The one place that decides whether the client on `from` may run commands in `job`'s
  // replicas; nullopt = allowed, else why not.
  std::optional<std::string> userExecAllowed(const Caller& caller, const JobEntry& job) const;
  std::map<std::pair<const wire::Connection*, uint64_t>, std::shared_ptr<UserExec>> userExecs_;

  // The completion of a change the catalog or the nodes commit: the error, or `fill` and
  // the answer.
  template <typename Fill>
  static auto afterCommit(const ClientAnswer& a, Fill fill) {
    return [a, fill](Result<bool> r) {
      if (!r) return a.error(r.error());
      fill();
      a.send();
    };
  }
  static void setResources(schema::Resources::Builder out, int64_t cpuMillis, int64_t memoryBytes, int64_t gpu);

  const MasterConfig& config_;
  Catalog& catalog_;
  JobRegistry& jobs_;
  store::Store& store_;
  NodeRegistry& nodes_;
  Access& access_;
  Clock now_;
  AgentCalls* calls_ = nullptr;
  LogArchiveService* archive_ = nullptr;
  // Long-lived streams open per user: a `logs -f` holds a connection to an agent per replica,
  // an exec one to its replica's agent; one user's many would fill the agents' places (512 per
  // address, all of them the master's) for everyone (logs.cpp, exec.cpp).
  struct UserSlots {
    std::mutex mu;
    std::map<std::string, int> open;
    // A slot of `user`'s, given back when the returned pointer's last copy goes (on whichever
    // thread); null when the user already holds `max`, with `held` set to how many.
    static std::shared_ptr<void> take(const std::shared_ptr<UserSlots>& slots, const std::string& user, int max,
                                      int& held);
  };
  std::shared_ptr<UserSlots> follows_ = std::make_shared<UserSlots>();
  static constexpr int kMaxFollowsPerUser = 32;
  std::shared_ptr<UserSlots> execs_ = std::make_shared<UserSlots>();
  static constexpr int kMaxExecsPerUser = 32;
  MasterMetrics* metrics_ = nullptr;
  const ClusterOps* cluster_ = nullptr;
  // cluster status and remove run on threads of their own (they ask each member, up to a
  // second or two): at most kMaxClusterCallsPerUser at once for one user and kMaxClusterCalls
  // in all; more are told to try again (cluster.cpp). One user cannot take them all.
  static constexpr int kMaxClusterCalls = 8, kMaxClusterCallsPerUser = 2;
  struct ClusterCalls {
    std::mutex mu;
    std::map<std::string, int> byUser;  // guarded by mu
    int total = 0;                      // guarded by mu
  };
  std::shared_ptr<ClusterCalls> clusterCalls_ = std::make_shared<ClusterCalls>();
  // Runs `work` on a thread of its own within that bound; false (and `a` answered) if not.
  bool onClusterThread(ClientAnswer& a, const char* what, std::function<void(ClientAnswer)> work);
  EventFeed* feed_ = nullptr;
  ReadThread reads_;  // last: joined before the members its reads use are destroyed
};

}  // namespace yard::master
