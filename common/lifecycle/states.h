#pragma once
// The lifecycle vocabulary shared by the master, the agents and the store: the states of
// jobs, tasks and replica attempts, and why a replica attempt ended. Decisions read these
// enums, never a message; text exists only at the edges (the store's columns, the CLI, the
// client API), through toText / parse* below. The wire (schema/lifecycle.capnp) carries the
// same enumerants in the same order (checked where they are converted).
//
//   replica attempt:  Placed -> Starting -> Running -> Exited | Killed | OOMKilled | Lost
//                     (forward only; any live state may end directly)
//                     Placed/Starting/Running -> Stopping -> Killed (Yard stops it: the
//                     attempt keeps its resources until its agent reports the process gone)
//   task:             Waiting -> Queued -> Starting -> Running -> Succeeded | Failed
//                     Waiting -> Skipped;  any unfinished -> Cancelled;
//                     Starting/Running -> Queued (whole-gang restart, attempt + 1)
//                     any unfinished -> Stopping -> Succeeded | Failed | Cancelled (its
//                     outcome is decided; it is recorded once its stopped replicas are gone)
//   job:              Queued -> Running -> Succeeded | Failed | Cancelled
//                     Queued/Running -> Cancelling -> Cancelled (until its replicas are gone)
//                     Queued -> Skipped (it runs after a job whose end did not meet its
//                     `after` condition: docs/habits.md)
//                     Running/Succeeded/Failed/Cancelled -> Queued (yardctl job requeue)
//
// Stopping and Cancelling exist only on the master; they are appended so the wire's order
// (schema/lifecycle.capnp) stays the same as the first seven replica states.
//
//   node:             Ready <-> Draining (the admin's drain flag); Ready/Draining -> Down (no
//                     heartbeat); Down -> Ready | Draining (it beats again). "unstable" is no
//                     state: it is how a Ready node whose agent keeps registering is shown.
//   queue:            Running | Closed | Stopped, set by the admin, any to any.
//
// Node and queue states are written in lower case ("ready", "closed"): the store's columns,
// the CLI and the client API have always spelt them so. The scheduler uses these same enums
// (master/scheduler/scheduler.h); it includes this header and links nothing for it.

#include <cstdint>
#include <optional>
#include <string_view>

namespace yard {

enum class ReplicaState : uint8_t { Placed, Starting, Running, Exited, Killed, OOMKilled, Lost, Stopping };
enum class TaskState : uint8_t { Waiting, Queued, Starting, Running, Succeeded, Failed, Cancelled, Skipped, Stopping };
enum class JobState : uint8_t { Queued, Running, Succeeded, Failed, Cancelled, Cancelling, Skipped };
enum class NodeState : uint8_t { Ready, Draining, Down };
// Running: accepts and dispatches; Closed: rejects new jobs, dispatches what it has;
// Stopped: rejects new jobs and dispatches nothing (running work continues in both).
enum class QueueState : uint8_t { Running, Closed, Stopped };

// Why a replica attempt ended (None while it lives). Who decided is part of the cause:
// the process itself (Exited, Signal, OOMKilled), its node (AgentFailure, ImagePullFailed,
// NodeLost) or Yard (Deadline, StoppedByUser, StoppedByPolicy).
enum class EndCause : uint8_t {
  None,
  Exited,           // the process exited by itself; the code says how (0 = success)
  Signal,           // a signal Yard did not send ended it (exit code 128 + signal)
  OOMKilled,        // the kernel's OOM killer, at the replica's memory limit
  Deadline,         // the task's maxLifetime or a container-job run's timeout passed
  ImagePullFailed,  // the image could not be pulled; it never ran
  AgentFailure,     // the agent could not start or keep it (setup failure, lost runtime)
  NodeLost,         // its node stopped beating
  StoppedByUser,    // job cancel or delete
  StoppedByPolicy,  // gang restart, cleanup at task end, a failed task stopping its peers
  RestartLimit,     // the launcher restarted its workers more often than allowed (torchrun's
                    // worker group, counted by the agent: docs/wiring.md); a failure
  Preempted,        // stopped to make room for another job (docs/scheduler.md, "Preemption");
                    // not a failure: the job is requeued
};

bool isLive(ReplicaState s);    // holds resources on its node (Stopping included)
bool isActive(ReplicaState s);  // live and not being stopped: part of the running workload
bool isFinal(TaskState s);
bool isFinal(JobState s);
// A replica attempt that ended as a failure of its task (not success, not stopped by Yard
// on purpose): what counts against `retries` and restarts gangs.
bool endedInFailure(ReplicaState s, EndCause cause, int32_t exitCode);

std::string_view toText(ReplicaState s);
std::string_view toText(TaskState s);
std::string_view toText(JobState s);
std::string_view toText(EndCause c);  // "" for None
std::string_view toText(NodeState s);   // ready | draining | down
std::string_view toText(QueueState s);  // running | closed | stopped
std::optional<ReplicaState> parseReplicaState(std::string_view s);
std::optional<TaskState> parseTaskState(std::string_view s);
std::optional<JobState> parseJobState(std::string_view s);
std::optional<EndCause> parseEndCause(std::string_view s);
std::optional<NodeState> parseNodeState(std::string_view s);
std::optional<QueueState> parseQueueState(std::string_view s);

}  // namespace yard
