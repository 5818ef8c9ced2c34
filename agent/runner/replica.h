#pragma once
// One replica attempt as the agent holds it: its key, the spec the master placed it with,
// and the directory that keeps it across agent restarts (the spec, the shim's files, logs).

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/util/result.h"
#include "schema/agent.capnp.h"

namespace yard::agent {

// The PATH a replica gets when neither its spec nor its image sets one.
inline constexpr const char* kDefaultPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct ReplicaKey {
  int64_t id = 0;
  int32_t attempt = 0;
  // "<id>-<attempt>": the replica's directory and cgroup name.
  std::string name() const { return std::to_string(id) + "-" + std::to_string(attempt); }
  auto operator<=>(const ReplicaKey&) const = default;
};

struct HostMount {
  std::string hostPath, path;
  bool readOnly = true;
};

struct ReplicaSpec {
  std::string job, task, role;
  int32_t index = 0;
  std::string image;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
  std::string gpus;
  std::vector<HostMount> mounts;
  std::vector<std::string> postStart, preStop;
  std::string workingDir;
  uint32_t stopGraceMs = 10000;
  std::vector<std::pair<std::string, std::string>> files;  // name, content
  bool vm = false;  // run under the node's VM runtime (a `type: vm` job)
  // Who a host replica runs as (the job owner's mapped uid/gid); -1 = not mapped: the agent's
  // own user, as before users existed. Containers keep their image's user (docs/security.md).
  int64_t runAsUid = -1, runAsGid = -1;
  std::string owner;  // the job owner's user name
  // The cpuset binding the agent chose from its GPU topology (docs/topology.md): its GPUs'
  // NUMA node CPUs and memory nodes; "" = not bound.
  std::string cpus, mems;
  // task/role/index, for log lines.
  std::string label() const { return task + "/" + role + "/" + std::to_string(index); }
};

// The directory of a replica its process may write in, `${YARD_WORK_DIR}` in env values: for a
// host replica run as its owner DIR/work (HostDriver makes it the user's, 0700; DIR itself is
// root's, 0711), else DIR (the agent's user's, which such a replica runs as). Scratch files that
// must not be shared with other replicas of the machine go there (OpenMPI's shared-memory
// segments: docs/wiring.md).
std::string replicaWorkDir(const ReplicaSpec& spec, const std::string& dir);
inline constexpr const char* kOwnedWorkDir = "work";

ReplicaSpec specFrom(agentapi::ReplicaSpec::Reader in);
void specTo(const ReplicaSpec& in, agentapi::ReplicaSpec::Builder out);
// The spec as the bytes kept in the replica's directory, and back.
std::string encodeSpec(const ReplicaSpec& spec);
Result<ReplicaSpec> decodeSpec(const std::string& bytes);

// Writes `data` to `path` atomically with respect to crashes of processes (temp file + rename;
// no fsync: nothing here has to survive a power loss, which also ends the replicas). The file
// is created 0600 (replica files hold users' secrets, docs/security.md) unless `mode` says
// otherwise. Links are never followed: not at `path`, nor at the temporary file beside it.
// The shim's writeFileAtomically (agent/shim/files.h) does it; this names the path on failure.
Result<bool> writeFileAtomic(const std::string& path, const std::string& data, mode_t mode = 0600);
// The file's contents, or nullopt-like failure when it cannot be read.
Result<std::string> readFile(const std::string& path);

}  // namespace yard::agent
