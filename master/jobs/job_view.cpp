#include "master/jobs/job_view.h"

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
  auto member = job.spec->job().getArray().getMember();
  if (member.getArray().size() != 0) {
    out.setArray(member.getArray());
    out.setArrayIndex(member.getIndex());
  }
}

}  // namespace yard::master
