// `yardctl cluster status` and `yardctl cluster remove NAME` (docs/ha.md): the masters of a
// highly available cluster, as the leader sees them.
#include <memory>
#include <string>
#include <vector>

#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/cluster_text.h"
#include "master/yardctl/report.h"
#include "master/yardctl/client.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"

namespace yard::ctl {
namespace {

Json memberJson(api::ClusterMember::Reader m) {
  return {{"name", m.getName().cStr()},
          {"raftId", std::to_string(m.getRaftId())},
          {"raftAddress", m.getRaftAddress().cStr()},
          {"clientAddress", m.getClientAddress().cStr()},
          {"agentAddress", m.getAgentAddress().cStr()},
          {"role", m.getRole().cStr()},
          {"voter", m.getVoter().cStr()},
          {"term", m.getTerm()},
          {"appliedIndex", m.getAppliedIndex()},
          {"lastContactMs", m.getLastContactMs()},
          {"version", m.getVersion().cStr()},
          {"schemaVersion", m.getSchemaVersion()}};
}

std::string dash(const std::string& s) { return s.empty() ? "-" : s; }

// "0.9.0 (schema 16)"; "-" for a member that did not say (unreachable, or older than the call).
std::string versionText(api::ClusterMember::Reader m) {
  std::string v = m.getVersion().cStr();
  if (v.empty()) return "-";
  return m.getSchemaVersion() == 0 ? v : v + " (schema " + std::to_string(m.getSchemaVersion()) + ")";
}

// `stale`: asked of whichever master answers first, leader or not (docs/ha.md, "When no
// master leads"), instead of the leader.
int status(GlobalOptions& global, Streams io, bool stale) {
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  if (stale) req.setClusterStatusStale();
  else req.setClusterStatus();
  auto frame = sendRequest(address.value(), message);
  if (!frame) {
    std::string why = frame.error();
    // No leader answered (an election, or too few masters for one): any of several masters can
    // still say what it sees. A refusal of the token is the same everywhere.
    if (!stale && address.value().address.find(',') != std::string::npos && why.rfind("not authenticated", 0) != 0)
      why += " (`yardctl cluster status --stale` asks whichever master answers, leader or not)";
    return reportError(global, io, kExitFailed, why);
  }
  auto r = frame.value()->root<api::Response>();
  if (!r.isCluster()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  auto c = r.getCluster();
  if (jsonOutput(global)) {
    Json members = Json::array();
    for (auto m : c.getMembers()) members.push_back(memberJson(m));
    printJson(io, Json{{"single", c.getSingle()}, {"term", c.getTerm()}, {"commitIndex", c.getCommitIndex()},
                       {"answeredBy", c.getAnsweredBy().cStr()}, {"stale", c.getStale()}, {"members", members}});
    return kExitOk;
  }
  Table t({"NAME", "ROLE", "RAFT", "CLIENT", "AGENT", "TERM", "APPLIED", "MEMBERSHIP", "LAST-CONTACT", "VERSION"});
  std::vector<MemberVersion> versions;
  for (auto m : c.getMembers())
    t.row({dash(m.getName().cStr()), m.getRole().cStr(), dash(m.getRaftAddress().cStr()), dash(m.getClientAddress().cStr()),
           dash(m.getAgentAddress().cStr()), std::to_string(m.getTerm()), std::to_string(m.getAppliedIndex()),
           m.getVoter().cStr(), m.getLastContactMs() < 0 ? "-" : std::to_string(m.getLastContactMs()) + "ms",
           versionText(m)});
  for (auto m : c.getMembers()) versions.push_back({m.getRole().cStr(), m.getVersion().cStr()});
  t.print(io.out);
  if (auto note = mixedVersionNote(versions); !note.empty()) io.out << note << "\n";
  if (c.getSingle()) io.out << "(a single master: no raft_listen)\n";
  if (c.getStale()) {
    bool led = false;
    for (auto m : c.getMembers()) led = led || std::string(m.getRole().cStr()) == "leader";
    io.out << "(as " << dash(c.getAnsweredBy().cStr()) << " sees them, in its term " << c.getTerm()
           << ": it does not lead" << (led ? "" : ", and no member that answered leads") << ")\n";
  }
  return kExitOk;
}

int remove(GlobalOptions& global, Streams io, const std::string& who) {
  int exitCode = kExitOk;
  auto frame = request(global, io, [&who](api::Request::Builder r) {
    r.setClusterRemove(who);
    return std::string();
  }, exitCode);
  if (!frame) return exitCode;
  auto r = frame->root<api::Response>();
  if (!r.isDone()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (jsonOutput(global)) printJson(io, Json{{"result", r.getDone().cStr()}});
  else io.out << r.getDone().cStr() << "\n";
  return kExitOk;
}

}  // namespace

void addClusterCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* cluster = app.add_subcommand("cluster", "The masters of a highly available cluster (docs/ha.md)");
  cluster->require_subcommand(1);
  auto stale = std::make_shared<bool>(false);
  CLI::App* st = cluster->add_subcommand("status", "List the masters: role, term, applied index, addresses");
  st->add_flag("--stale", *stale,
               "Ask whichever master answers, not only the leader: works while no master leads (its own view)");
  st->callback([&global, io, &action, stale] { action = [&global, io, stale] { return status(global, io, *stale); }; });
  auto who = std::make_shared<std::string>();
  CLI::App* rm = cluster->add_subcommand("remove", "Take a master out of the cluster (admins); stop it first");
  rm->add_option("name", *who, "The master's name, raft id or raft address")->required()->type_name("MASTER");
  rm->callback([&global, io, &action, who] { action = [&global, io, who] { return remove(global, io, *who); }; });
}

}  // namespace yard::ctl
