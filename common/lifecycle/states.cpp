#include "common/lifecycle/states.h"

#include <array>

namespace yard {
namespace {

constexpr std::array<std::string_view, 8> kReplica = {"Placed", "Starting",  "Running", "Exited",
                                                      "Killed", "OOMKilled", "Lost",    "Stopping"};
constexpr std::array<std::string_view, 9> kTask = {"Waiting", "Queued",    "Starting", "Running", "Succeeded",
                                                   "Failed",  "Cancelled", "Skipped",  "Stopping"};
constexpr std::array<std::string_view, 7> kJob = {"Queued",    "Running",    "Succeeded", "Failed",
                                                  "Cancelled", "Cancelling", "Skipped"};
constexpr std::array<std::string_view, 12> kCause = {"",           "Exited",          "Signal",
                                                     "OOMKilled",  "DeadlineExceeded", "ImagePullFailed",
                                                     "AgentFailure", "NodeLost",       "StoppedByUser",
                                                     "StoppedByPolicy", "RestartLimitExceeded", "Preempted"};

constexpr std::array<std::string_view, 3> kNode = {"ready", "draining", "down"};
constexpr std::array<std::string_view, 3> kQueue = {"running", "closed", "stopped"};

template <typename E, size_t N>
std::optional<E> parse(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace

bool isLive(ReplicaState s) { return isActive(s) || s == ReplicaState::Stopping; }
bool isActive(ReplicaState s) {
  return s == ReplicaState::Placed || s == ReplicaState::Starting || s == ReplicaState::Running;
}
bool isFinal(TaskState s) {
  return s == TaskState::Succeeded || s == TaskState::Failed || s == TaskState::Cancelled || s == TaskState::Skipped;
}
bool isFinal(JobState s) {
  return s == JobState::Succeeded || s == JobState::Failed || s == JobState::Cancelled || s == JobState::Skipped;
}

bool endedInFailure(ReplicaState s, EndCause cause, int32_t exitCode) {
  if (isLive(s)) return false;
  switch (cause) {
    case EndCause::None: return s == ReplicaState::OOMKilled || s == ReplicaState::Lost || (s == ReplicaState::Exited && exitCode != 0);
    case EndCause::Exited: return exitCode != 0;
    case EndCause::StoppedByUser:
    case EndCause::StoppedByPolicy:
    case EndCause::Preempted: return false;
    default: return true;
  }
}

std::string_view toText(ReplicaState s) { return kReplica.at(static_cast<size_t>(s)); }
std::string_view toText(TaskState s) { return kTask.at(static_cast<size_t>(s)); }
std::string_view toText(JobState s) { return kJob.at(static_cast<size_t>(s)); }
std::string_view toText(EndCause c) { return kCause.at(static_cast<size_t>(c)); }
std::string_view toText(NodeState s) { return kNode.at(static_cast<size_t>(s)); }
std::string_view toText(QueueState s) { return kQueue.at(static_cast<size_t>(s)); }
std::optional<ReplicaState> parseReplicaState(std::string_view s) { return parse<ReplicaState>(kReplica, s); }
std::optional<TaskState> parseTaskState(std::string_view s) { return parse<TaskState>(kTask, s); }
std::optional<JobState> parseJobState(std::string_view s) { return parse<JobState>(kJob, s); }
std::optional<EndCause> parseEndCause(std::string_view s) { return parse<EndCause>(kCause, s); }
std::optional<NodeState> parseNodeState(std::string_view s) { return parse<NodeState>(kNode, s); }
std::optional<QueueState> parseQueueState(std::string_view s) { return parse<QueueState>(kQueue, s); }

}  // namespace yard
