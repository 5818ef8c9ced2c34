// yardctl cluster status | remove (docs/ha.md): the masters' raft group, through ClusterOps.
#include <system_error>
#include <thread>

#include "master/api/client/client_api.h"
#include "master/api/client/cluster_info.h"
#include "master/store/schema.h"
#include "yard/version.h"

namespace yard::master {

void fillClusterInfo(api::ClusterInfo::Builder c, const ClusterView& view, bool stale) {
  c.setTerm(view.term);
  c.setCommitIndex(view.commitIndex);
  c.setAnsweredBy(view.answeredBy);
  c.setStale(stale);
  auto list = c.initMembers(static_cast<unsigned>(view.members.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const ClusterMemberView& v = view.members[i];
    list[i].setName(v.name);
    list[i].setRaftId(v.raftId);
    list[i].setRaftAddress(v.raftAddress);
    list[i].setClientAddress(v.clientAddress);
    list[i].setAgentAddress(v.agentAddress);
    list[i].setRole(v.role);
    list[i].setVoter(v.voter);
    list[i].setTerm(v.term);
    list[i].setAppliedIndex(v.appliedIndex);
    list[i].setLastContactMs(v.lastContactMs);
    list[i].setVersion(v.version);
    list[i].setSchemaVersion(v.schemaVersion);
  }
}

void ClientApi::clusterStatus(ClientAnswer a) {
  if (!cluster_ || !cluster_->status) {
    // One master without raft: itself, the leader of nothing else.
    auto c = a.resp.initCluster();
    c.setSingle(true);
    auto m = c.initMembers(1)[0];
    std::string name = config_.name.empty() ? "yard-master" : config_.name;  // --name, if given
    m.setName(name);
    m.setClientAddress(config_.advertise.empty() ? config_.listen : config_.advertise);
    m.setAgentAddress(config_.agentListen);
    m.setRole("leader");
    m.setVoter("voter");
    m.setLastContactMs(0);
    m.setVersion(kVersion);
    m.setSchemaVersion(static_cast<uint32_t>(store::schema::currentVersion()));
    c.setAnsweredBy(name);
    return a.send();
  }
  const ClusterOps* ops = cluster_;
  onClusterThread(a, "cluster status", [ops](ClientAnswer later) {
    auto view = ops->status();
    if (!view) later.setError(view.error());
    else fillClusterInfo(later.resp.initCluster(), view.value(), /*stale=*/false);  // the leader's own view
    std::move(later).post();
  });
}

bool ClientApi::onClusterThread(ClientAnswer& a, const char* what, std::function<void(ClientAnswer)> work) {
  std::shared_ptr<ClusterCalls> calls = clusterCalls_;
  std::string user = a.caller ? a.caller->user : "";
  auto end = [calls, user] {
    std::lock_guard<std::mutex> lock(calls->mu);
    calls->total--;
    if (--calls->byUser[user] <= 0) calls->byUser.erase(user);
  };
  {
    std::lock_guard<std::mutex> lock(calls->mu);
    int mine = calls->byUser.count(user) ? calls->byUser[user] : 0;
    if (mine >= kMaxClusterCallsPerUser || calls->total >= kMaxClusterCalls) {
      std::string why = mine >= kMaxClusterCallsPerUser
                            ? std::to_string(mine) + " of " + (user.empty() ? std::string("yours") : user + "'s")
                            : std::to_string(calls->total);
      a.error(std::string(what) + ": this master is answering " + why + " cluster requests already; try again");
      return false;
    }
    calls->byUser[user]++;
    calls->total++;
  }
  try {
    std::thread([end, work = std::move(work), a]() mutable {
      work(std::move(a));
      end();
    }).detach();
  } catch (const std::system_error& e) {  // out of threads: a refusal, not an abort
    end();
    a.error(std::string(what) + ": cannot start a thread: " + e.what() + "; try again");
    return false;
  }
  return true;
}

void ClientApi::clusterRemove(const std::string& who, ClientAnswer a) {
  if (!cluster_ || !cluster_->remove)
    return a.error("cluster remove: this is a single master (no raft_listen): there is no other master to remove");
  if (who.empty()) return a.error("cluster remove: name the master (its name, raft id or raft address)");
  const ClusterOps* ops = cluster_;
  onClusterThread(a, "cluster remove", [ops, who](ClientAnswer later) {
    auto done = ops->remove(who);
    if (!done) {
      later.setError("cluster remove " + who + ": " + done.error());
    } else {
      later.resp.setDone(done.value());
    }
    std::move(later).post();
  });
}

}  // namespace yard::master
