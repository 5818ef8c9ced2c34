// yardctl usage (docs/security.md, "Usage accounting"): the per-job rows the job registry
// stores (master/access/usage_ledger.h), read on the read thread and summed by user, queue or job.
// Users see their own jobs' rows only; admins everyone's (or one user's).
#include <map>

#include "master/api/client/client_api.h"

namespace yard::master {
namespace {

struct Sum {
  std::string user, queue;
  int64_t jobs = 0;
  double core = 0, memory = 0, gpu = 0, wall = 0;
};

void answerUsage(store::Store& store, const store::UsageQuery& q, const std::string& by, const ClientAnswer& a) {
  auto rows = store.usage(q);
  if (!rows) return a.setError(rows.error());
  std::map<std::string, Sum> sums;  // by key, so rows come out sorted
  for (const auto& r : rows.value()) {
    // Jobs by name: a name reused after a delete is another job, told apart by its id.
    std::string key = by == "user" ? r.owner : by == "queue" ? r.queue : r.job + "#" + std::to_string(r.jobId);
    Sum& s = sums[key];
    s.jobs += 1;
    s.core += r.coreSeconds;
    s.memory += r.memoryGibSeconds;
    s.gpu += r.gpuSeconds;
    if (r.endedAt > r.startedAt && r.startedAt > 0) s.wall += static_cast<double>(r.endedAt - r.startedAt) / 1000.0;
    s.user = r.owner;
    s.queue = r.queue;
  }
  auto out = a.resp.initUsageRows(static_cast<unsigned>(sums.size()));
  unsigned i = 0;
  for (const auto& [key, s] : sums) {
    auto row = out[i++];
    row.setKey(by == "job" ? key.substr(0, key.rfind('#')) : key);
    row.setJobs(s.jobs);
    row.setCoreSeconds(s.core);
    row.setMemoryGibSeconds(s.memory);
    row.setGpuSeconds(s.gpu);
    row.setWallSeconds(s.wall);
    if (by != "queue") row.setUser(s.user);
    if (by != "user") row.setQueue(s.queue);
  }
}

}  // namespace

void ClientApi::usage(api::UsageQuery::Reader query, ClientAnswer a) {
  std::string by = query.getBy();
  if (by.empty()) by = "user";
  if (by != "user" && by != "queue" && by != "job")
    return a.error("usage --by: \"" + by + "\" must be user, queue or job");
  store::UsageQuery q;
  q.since = query.getSince();
  q.until = query.getUntil();
  if (q.since < 0 || q.until < 0) return a.error("usage: --since and --until must be times after 1970");
  if (q.until > 0 && q.until < q.since) return a.error("usage: --until is before --since");
  q.owner = query.getUser();
  // Users see their own rows only, whatever they asked for; admins anyone's.
  if (!a.caller) return a.error("usage: not authenticated");
  if (!a.caller->admin) {
    if (!q.owner.empty() && q.owner != a.caller->user)
      return a.error("user " + a.caller->user + " may not see the usage of user " + q.owner + ": only their own");
    q.owner = a.caller->user;
  }
  reads_.run([&store = store_, q, by, a = std::move(a)]() mutable {
    answerUsage(store, q, by, a);
    std::move(a).post();
  });
}

}  // namespace yard::master
