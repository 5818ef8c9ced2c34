#pragma once
// The master's working copy of a job: its stored rows (job, tasks, replica attempts) and
// the spec it was submitted with. Plain values: the lifecycle policy edits copies of them
// and the job registry commits the copies. No I/O here.

#include <capnp/serialize.h>

#include <memory>
#include <string>
#include <vector>

#include "common/util/capnp_text.h"
#include "master/store/records.h"
#include "schema/job.capnp.h"

namespace yard::master {

// The parsed spec a job was submitted with (kept as the bytes the store holds).
//
// The master reads a job's spec for as long as the job exists, many times a second (every
// tick, heartbeat and pass), so the reader has no traversal limit: capnp's limit is
// cumulative over a reader's life, and a long-lived one would run out and throw, however
// small the job (a 1,000-task job ran out within two minutes, issue 27). These bytes are
// not a peer's: they were checked at submit (size, list lengths, the spec rules, through a
// reader that has the wire's limits) or at load (verify()). The root and the task list are
// read once; specTask(i) is then O(1).
class JobSpec {
 public:
  // Throws kj::Exception when `bytes` is not a readable message (see verify()).
  explicit JobSpec(const std::string& bytes);
  schema::Job::Reader job() const { return job_; }
  capnp::List<schema::Task>::Reader tasks() const { return tasks_; }
  // Walks every pointer of the message once: throws kj::Exception when any part of it is
  // damaged (a stored blob read back at load), so that nothing later trips on it.
  void verify() const;

 private:
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
  schema::Job::Reader job_;
  capnp::List<schema::Task>::Reader tasks_;
};

struct TaskEntry {
  store::TaskRecord rec;
  std::vector<size_t> deps;                    // indexes of the tasks it depends on
  std::vector<store::ReplicaRecord> replicas;  // every attempt's rows (of this life: see history)
  // Rows of the job's earlier lives (before a `yardctl job requeue`): ended replica attempts
  // with an id below rec.historyBefore. Kept in the store; no rule reads them but the next
  // run attempt's number (so attempts stay unique) and the counts people read.
  std::vector<store::ReplicaRecord> history;
};

struct JobEntry {
  store::JobRecord rec;
  std::shared_ptr<JobSpec> spec;
  std::vector<TaskEntry> tasks;  // in spec order
  schema::Task::Reader specTask(size_t i) const { return spec->tasks()[static_cast<unsigned>(i)]; }
};

// The container a replica of `role` runs (the task's only one for a container job).
schema::Container::Reader containerOf(schema::Task::Reader task, const std::string& role);
// "role/index", as events and the CLI name a replica.
std::string replicaName(const store::ReplicaRecord& r);
// The spec's message bytes (what JobRecord::spec holds).
std::string specBytes(schema::Job::Reader spec);
using ::yard::str;  // Cap'n Proto text as a std::string (common/util/capnp_text.h)

}  // namespace yard::master
