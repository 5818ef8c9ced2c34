#include "master/jobs/job_view.h"

#include "common/spec/after.h"

namespace yard::master {

void fillJobSummary(api::JobSummary::Builder out, const JobEntry& job) {
  out.setName(job.rec.name);
  out.setQueue(job.rec.queue);
  out.setState(std::string(toText(job.rec.state)));
  out.setReason(job.rec.reason);
  out.setPriority(job.rec.priority);
  out.setSubmittedAt(job.rec.submittedAt);
  out.setStartedAt(job.rec.startedAt);
  out.setFinishedAt(job.rec.finishedAt);
  out.setTasksTotal(static_cast<int32_t>(job.tasks.size()));
  int32_t done = 0;
  for (const auto& t : job.tasks) done += isFinal(t.rec.state);
  out.setTasksDone(done);
  out.setOwner(job.rec.owner);
  out.setHeldBy(job.rec.heldBy);
  std::string after;
  for (auto a : job.spec->job().getAfter())
    after += (after.empty() ? "" : ",") + str(a.getJob()) + ":" + std::string(spec::afterConditionName(a.getCondition()));
  out.setAfter(after);
  out.setAfterPending(job.rec.afterPending);
  out.setRequeues(job.rec.requeues);
  out.setPreemptions(job.rec.preemptions);
  out.setPreemptedBy(job.rec.preemptedBy);
  out.setPreemptedAt(job.rec.preemptedAt);
  if (!job.rec.heldBy.empty()) out.setReason("held by " + job.rec.heldBy + " (yardctl job release " + job.rec.name + ")");
  else if (job.rec.afterPending) out.setReason("waiting for the jobs it runs after (" + after + ")");
  auto member = job.spec->job().getArray().getMember();
  if (member.getArray().size() != 0) {
    out.setArray(member.getArray());
    out.setArrayIndex(member.getIndex());
  }
}

}  // namespace yard::master
