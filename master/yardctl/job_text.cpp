// How yardctl prints a job as text (job show, job list, job events): tables and lines for
// people. The JSON of the same objects is common/api_json, shared with the HTTP API.
#include "master/yardctl/job_text.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/lifecycle/states.h"
#include "master/yardctl/table.h"
#include "master/yardctl/time_flag.h"

namespace yard::ctl {

std::string timeText(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }

namespace {

std::string percentText(double p) { return std::to_string(std::llround(p)) + "%"; }

// "12s", "4m10s", "2h5m": a span a person reads at a glance.
std::string spanText(int64_t ms) {
  int64_t s = std::max<int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  return std::to_string(s / 3600) + "h" + (s % 3600 / 60 ? std::to_string(s % 3600 / 60) + "m" : "");
}

// One line per elastic task: the counts, what was measured against what, the last decision
// and when the next may come (only a running task is decided on). Times are relative to the
// master's clock (`now`). A finished task: the workers it ended with and its last scale
// change.
std::string elasticText(const std::string& task, api::ElasticInfo::Reader e, const std::string& state, int64_t now) {
  bool running = state == "Running";
  if (state == "Succeeded" || state == "Failed" || state == "Cancelled" || state == "Skipped") {
    std::string line = "Elastic " + task + ": ended with " + std::to_string(e.getCurrent()) +
                       (e.getCurrent() == 1 ? " worker" : " workers") + " (min " + std::to_string(e.getMin()) +
                       ", max " + std::to_string(e.getMax()) + "), last: " +
                       (e.getLastDecision().size() ? std::string(e.getLastDecision().cStr()) : "no scale change");
    if (e.getLastDecisionAt() > 0) line += " (" + spanText(now - e.getLastDecisionAt()) + " ago)";
    return line;
  }
  std::string line = "Elastic " + task + ": " + std::to_string(e.getCurrent()) +
                     (e.getCurrent() == 1 ? " worker" : " workers") + " (desired " + std::to_string(e.getDesired()) +
                     ", min " + std::to_string(e.getMin()) + ", max " + std::to_string(e.getMax()) +
                     (e.getPending() ? ", scale-out pending" : "") + "), ";
  std::string target = "target " + percentText(e.getTargetPercent());
  line += e.getHasUtilisation() ? "cpu " + percentText(e.getUtilisationPercent()) + " of " + target
                                : "cpu not measured yet (" + target + ")";
  line += ", last: " + (e.getLastDecision().size() ? std::string(e.getLastDecision().cStr()) : "none yet");
  if (e.getLastDecisionAt() > 0) line += " (" + spanText(now - e.getLastDecisionAt()) + " ago)";
  // Rounded up: "in 0s" would read as "now" while it is still to come.
  if (running && e.getNextDecisionAt() > 0)
    line += e.getNextDecisionAt() > now ? ", next decision in " + spanText(e.getNextDecisionAt() - now + 999)
                                        : ", next decision due now";
  return line;
}

}  // namespace

void detailText(std::ostream& out, api::JobDetail::Reader d, bool showEnv) {
  auto j = d.getSummary();
  out << "Name:       " << j.getName().cStr() << "\n"
      << "Queue:      " << j.getQueue().cStr() << "\n"
      << "Owner:      " << j.getOwner().cStr() << "\n"
      << "State:      " << j.getState().cStr() << (j.getReason().size() ? " (" + logSafe(j.getReason().cStr()) + ")" : "") << "\n"
      << "Priority:   " << j.getPriority() << "\n"
      << "Submitted:  " << timeText(j.getSubmittedAt()) << "\n"
      << "Started:    " << timeText(j.getStartedAt()) << "\n"
      << "Finished:   " << timeText(j.getFinishedAt()) << "\n";
  if (j.getHeldBy().size()) out << "Held:       by " << j.getHeldBy().cStr() << " (yardctl job release " << j.getName().cStr() << ")\n";
  if (j.getAfter().size())
    out << "After:      " << j.getAfter().cStr() << (j.getAfterPending() ? " (waiting)" : " (met)") << "\n";
  if (j.getPreemptions())
    out << "Preempted:  " << j.getPreemptions() << (j.getPreemptions() == 1 ? " time" : " times") << ", last by "
        << j.getPreemptedBy().cStr() << "\n";
  if (j.getRequeues()) out << "Requeued:   " << j.getRequeues() << (j.getRequeues() == 1 ? " time" : " times") << "\n";
  out << "\nTasks:\n";
  Table tasks({"TASK", "KIND", "STATE", "ATTEMPT", "AFTER", "REASON"});
  for (auto t : d.getTasks()) {
    std::string deps;
    for (auto dep : t.getDependsOn()) deps += (deps.empty() ? "" : ",") + std::string(dep.cStr());
    std::string kind = t.getKind().cStr();
    if (t.getMode().size()) kind += "/" + std::string(t.getMode().cStr());
    tasks.row({t.getName().cStr(), kind, t.getState().cStr(), std::to_string(t.getAttempt()), orDash(deps), orDash(t.getReason().cStr())});
  }
  tasks.print(out);
  bool firstElastic = true;
  for (auto t : d.getTasks()) {
    if (!t.getHasElastic()) continue;
    out << (firstElastic ? "\n" : "")
        << elasticText(t.getName().cStr(), t.getElastic(), t.getState().cStr(), d.getAnsweredAt()) << "\n";
    firstElastic = false;
  }
  // topology: {required: rack}: "Topology:   train required rack, in r2" (docs/topology.md).
  for (auto t : d.getTasks()) {
    if (!t.getTopology().size()) continue;
    std::string in;
    for (auto dom : t.getTopologyDomains()) in += (in.empty() ? ", in " : " and ") + std::string(dom.cStr());
    out << "Topology:   " << t.getName().cStr() << " " << t.getTopology().cStr() << in << "\n";
  }
  bool any = false;
  Table reps({"REPLICA", "ATTEMPT", "STATE", "NODE", "PORT", "DECLARED", "GPUS", "EXIT", "RESTARTS", "REASON"});
  for (auto t : d.getTasks())
    for (auto r : t.getReplicas()) {
      any = true;
      reps.row({std::string(t.getName().cStr()) + "/" + r.getRole().cStr() + "/" + std::to_string(r.getIndex()),
                std::to_string(r.getAttempt()), r.getState().cStr(), orDash(r.getNode().cStr()),
                r.getPort() ? std::to_string(r.getPort()) : "-", orDash(r.getDeclaredPorts().cStr()),
                // Its GPUs and the worst link among them: "0,1 (NV12 pairs)" (docs/topology.md).
                orDash(r.getGpus().cStr()) +
                    (r.getGpuLinks().size() ? " (" + std::string(r.getGpuLinks().cStr()) + " pairs)" : ""),
                (r.getState() == "Exited" ? std::to_string(r.getExitCode()) : "-"), std::to_string(r.getRestarts()),
                orDash(r.getReason().cStr())});
    }
  if (any) {
    out << "\nReplicas:\n";
    reps.print(out);
  }
  // A finished job whose replicas still hold their nodes (cleanup: none, or still stopping).
  std::string state = j.getState().cStr();
  if (jobEnded(state)) {
    int running = 0, stopping = 0;
    for (auto t : d.getTasks())
      for (auto r : t.getReplicas()) {
        running += r.getState() == "Placed" || r.getState() == "Starting" || r.getState() == "Running";
        stopping += r.getState() == "Stopping";
      }
    if (running)
      out << "\nThe job has finished but " << running << (running == 1 ? " replica is" : " replicas are")
          << " still running (cleanup: none); `yardctl job cancel " << j.getName().cStr() << "` stops "
          << (running == 1 ? "it" : "them") << ".\n";
    if (stopping) out << "\n" << stopping << (stopping == 1 ? " replica is" : " replicas are") << " still stopping.\n";
  }
  if (!showEnv) return;
  for (auto t : d.getTasks())
    for (auto r : t.getReplicas()) {
      out << "\nEnvironment of " << t.getName().cStr() << "/" << r.getRole().cStr() << "/" << r.getIndex()
          << " (attempt " << r.getAttempt() << "):\n";
      for (auto e : r.getEnv()) out << "  " << e.getName().cStr() << "=" << logSafe(e.getValue().cStr()) << "\n";
    }
}

// New columns go last: scripts that read the first columns by position keep working.
bool jobEnded(const std::string& state) {
  auto s = parseJobState(state);
  return s && isFinal(*s);
}

std::vector<std::string> jobHeaders() {
  return {"NAME", "QUEUE", "STATE", "TASKS", "PRIORITY", "SUBMITTED", "OWNER", "WAITED", "ELAPSED"};
}

std::vector<std::string> jobRow(api::JobSummary::Reader j, int64_t nowMs) {
  // WAITED: submitted to started (or to its end, or to now, when it never started). ELAPSED:
  // started to its end (or to now). A client clock behind the master's counts as no time.
  int64_t submitted = j.getSubmittedAt(), started = j.getStartedAt();
  int64_t until = j.getFinishedAt() > 0 ? j.getFinishedAt() : nowMs;
  auto span = [](int64_t from, int64_t to) { return std::max<int64_t>(0, to - from); };
  std::string waited = submitted > 0 ? squeueTime(span(submitted, started > 0 ? started : until)) : "-";
  std::string elapsed = started > 0 ? squeueTime(span(started, until)) : "-";
  // A held job is Queued; the table says Held, as squeue's reason would (JobHeldUser).
  std::string state = j.getState().cStr();
  if (j.getHeldBy().size() && state == "Queued") state = "Held";
  return {j.getName().cStr(), j.getQueue().cStr(), state,
          std::to_string(j.getTasksDone()) + "/" + std::to_string(j.getTasksTotal()), std::to_string(j.getPriority()),
          timeText(j.getSubmittedAt()), orDash(j.getOwner().cStr()), waited, elapsed};
}

std::vector<std::string> eventHeaders() { return {"TIME", "TASK", "REPLICA", "ATTEMPT", "EVENT", "REASON"}; }

std::vector<std::string> eventRow(api::Event::Reader e) {
  return {timeText(e.getAt()), orDash(e.getTask().cStr()), orDash(e.getReplica().cStr()),
          std::to_string(e.getAttempt()), e.getType().cStr(), orDash(e.getReason().cStr())};
}

}  // namespace yard::ctl
