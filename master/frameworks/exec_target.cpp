#include "master/frameworks/exec_target.h"

#include <set>
#include <vector>

#include "master/frameworks/framework.h"

namespace yard::master {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// The task's roles in the spec's order; a container job's one implicit role.
std::vector<std::string> rolesOf(schema::Task::Reader spec) {
  std::vector<std::string> roles;
  for (auto r : spec.getRoles()) roles.push_back(str(r.getName()));
  if (roles.empty())
    for (const auto& slot : frameworks::frameworkFor(spec.getKind()).gang(spec))
      if (roles.empty() || roles.back() != slot.role) roles.push_back(slot.role);
  return roles;
}

std::string notRunning(const std::string& label, const store::ReplicaRecord& r) {
  std::string what = label + " is " + std::string(toText(r.state));
  if (r.state == ReplicaState::Exited) what += " (exit code " + std::to_string(r.exitCode) + ")";
  if (!r.reason.empty() && r.state != ReplicaState::Exited) what += " (" + r.reason + ")";
  what += ", not Running";
  if (r.state == ReplicaState::Placed || r.state == ReplicaState::Starting) what += "; try again once it runs";
  return what;
}

}  // namespace

Result<ExecChoice> chooseExecReplica(const JobEntry& job, const ExecQuery& q,
                                     const std::function<std::string(size_t)>& waitReason) {
  using R = Result<ExecChoice>;
  std::vector<std::string> taskNames;
  for (const auto& t : job.tasks) taskNames.push_back(t.rec.name);
  size_t ti = job.tasks.size();
  if (q.task.empty()) {
    if (job.tasks.size() != 1)
      return R::fail("job " + job.rec.name + " has " + std::to_string(job.tasks.size()) +
                     " tasks; say which with --task (" + joined(taskNames) + ")");
    ti = 0;
  } else {
    for (size_t i = 0; i < job.tasks.size(); ++i)
      if (job.tasks[i].rec.name == q.task) ti = i;
    if (ti == job.tasks.size())
      return R::fail("job " + job.rec.name + " has no task " + q.task + " (its tasks: " + joined(taskNames) + ")");
  }
  const TaskEntry& task = job.tasks[ti];
  std::vector<std::string> roles = rolesOf(job.specTask(ti));
  std::string role = q.role.empty() ? (roles.empty() ? std::string() : roles.front()) : q.role;
  bool known = false;
  for (const auto& r : roles) known = known || r == role;
  if (!known) return R::fail("task " + task.rec.name + " has no role " + role + " (its roles: " + joined(roles) + ")");
  if (q.index < 0) return R::fail("--index must be 0 or more, not " + std::to_string(q.index));
  std::string label = task.rec.name + "/" + role + "/" + std::to_string(q.index);

  const store::ReplicaRecord* newest = nullptr;
  std::set<int32_t> indexes;
  for (const auto& r : task.replicas) {
    if (r.role != role) continue;
    indexes.insert(r.index);
    if (r.index != q.index) continue;
    if (!newest || r.attempt > newest->attempt || (r.attempt == newest->attempt && r.id > newest->id)) newest = &r;
  }
  if (!newest) {
    if (!indexes.empty()) {
      std::vector<std::string> have;
      for (int32_t i : indexes) have.push_back(std::to_string(i));
      return R::fail(label + " does not exist (" + task.rec.name + "/" + role + " has index " + joined(have) + ")");
    }
    std::string state(toText(task.rec.state));
    std::string why = waitReason ? waitReason(ti) : task.rec.reason;
    return R::fail(label + " has not been placed yet (task " + task.rec.name + " is " + state +
                   (why.empty() ? "" : ": " + why) + ")");
  }
  if (newest->state != ReplicaState::Running) return R::fail(notRunning(label, *newest));
  return R::ok(ExecChoice{&task, newest, label});
}

}  // namespace yard::master
