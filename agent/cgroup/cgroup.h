#pragma once
// One cgroup per replica under a per-agent parent group, on cgroup v1 or v2 (detected at run time
// from /proc/self/mountinfo). This is the only module that includes <libcgroup.h>; see
// docs/cgroups.md for the layout, the kernel files used on each version and where libcgroup 2.0.2
// is bypassed.
//
// Group names: a child `name` is one path component of letters, digits, '-' and '_' (kernel
// interface files all contain a dot, so a dot-free name can never collide with one). The parent
// is a relative path of such components ("yard", "yard/agent-a"), relative to the root of every
// hierarchy.
//
// Not thread-safe: one owner thread calls it. destroy() and removeParent() block (up to ~2 s
// each) while processes die, so that owner is not the io thread. libcgroup keeps a
// process-wide mount table that open() refreshes.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/util/result.h"

namespace yard::agent {

enum class CgroupVersion { V1, V2 };

struct CgroupLimits {
  int64_t cpuMillis = 0;    // 0 = no limit; otherwise at least 10 (1 ms of quota per 100 ms)
  int64_t memoryBytes = 0;  // 0 = no limit; no swap beyond it (memsw / swap.max)
  int64_t pids = 0;         // 0 = no limit
  // cpuset (docs/topology.md): CPU and memory-node lists ("0-15,32-47", "0"); "" = not bound.
  // Only what the parent's cpuset allows is kept (a simulated topology may name CPUs the host
  // does not have); nothing left of a list: that list is not bound.
  std::string cpus = {}, mems = {};
  bool operator==(const CgroupLimits&) const = default;
};

struct CgroupUsage {
  int64_t cpuNanos = 0;     // cumulative CPU time of the group
  int64_t memoryBytes = 0;  // current usage (v1: usage_in_bytes minus total_inactive_file;
                            // v2: memory.current minus inactive_file)
  int64_t oomKills = 0;     // processes the kernel OOM-killed in this group (v1 memory.oom_control
                            // "oom_kill"; v2 memory.events "oom_kill")
  bool operator==(const CgroupUsage&) const = default;
};

// The kernel layout Cgroups works on: which version, and the mount point of each controller
// used (v1: cpu, cpuacct, memory, pids, co-mounted ones sharing a path; v2: cpu, memory, pids,
// all at the unified mount). Built by chooseCgroupLayout() in cgroup_text.h.
struct CgroupLayout {
  CgroupVersion version = CgroupVersion::V2;
  std::vector<std::pair<std::string, std::string>> mounts;  // (controller, mount point)
  // Mount points of every other cgroup hierarchy (v1: devices, freezer, cpuset, name=systemd,
  // the hybrid host's cgroup2 mount, ...). Yard sets no limit there, but runc creates a
  // container's group in each of them, so destroy() and removeParent() remove the group there
  // too and children() lists what is there.
  std::vector<std::string> others;
  bool operator==(const CgroupLayout&) const = default;
};

class Cgroups {
 public:
  // Opens (creating when missing) the parent group `parent`, a relative path such as "yard" or
  // "yard/agent-a", in every controller used (v1: cpu, cpuacct, memory, pids; v2: enables
  // +cpu +memory +pids in cgroup.subtree_control from the root down to the parent). Fails with
  // a message naming what is missing (not root, controller not mounted, libcgroup init failure).
  static Result<std::unique_ptr<Cgroups>> open(const std::string& parent);

  CgroupVersion version() const { return layout_.version; }
  const CgroupLayout& layout() const { return layout_; }
  const std::string& parent() const { return parent_; }

  // Creates the child group `name` with `limits`; idempotent: an existing group gets the new
  // limits. Returns true when the group was created, false when it existed.
  // v1: cpu.cfs_period_us=100000 + cpu.cfs_quota_us=millis*100, memory.limit_in_bytes and
  // memory.memsw.limit_in_bytes (when that file exists) = memoryBytes, pids.max;
  // v2: cpu.max "<quota> 100000", memory.max, memory.swap.max=0 (when present), pids.max.
  // Fails without creating anything when the name or the limits are invalid; a group this call
  // created is removed again when a limit cannot be written.
  Result<bool> create(const std::string& name, const CgroupLimits& limits);

  // The cpuset `name` is bound to (cpuset.cpus and cpuset.mems), {"", ""} when it is not.
  std::pair<std::string, std::string> cpuset(const std::string& name) const;

  // The cgroup.procs files (one per v1 hierarchy used, the cpuset one too when the group is
  // bound; one on v2) a process writes its own pid into to join `name`. yard-shim does this in the child before exec, so a workload never runs
  // outside its group. Paths are returned even when the group does not exist.
  std::vector<std::string> procsFiles(const std::string& name) const;

  // Moves the running process `pid`, all its threads, into `name` (libcgroup
  // cgroup_attach_task_pid; on v1 completed through cgroup.procs, see cgroup.cpp).
  Result<bool> attach(const std::string& name, pid_t pid);

  // Fails when the group does not exist.
  Result<CgroupUsage> usage(const std::string& name) const;

  // The processes in `name` or in any group below it, ascending; empty when it does not exist.
  std::vector<pid_t> pids(const std::string& name) const;

  // Sends `sig` to every process pids() lists.
  void signalAll(const std::string& name, int sig);

  // SIGKILLs what is left (cgroup.kill on v2), waits (bounded, ~2 s) until the group is empty,
  // then removes it and any group below it in every hierarchy, the layout's `others` included
  // (where runc made a container's group). Returns true when it removed the
  // group, false when it was already gone.
  // `wait` bounds how long it blocks (the agent passes a short one and retries later).
  Result<bool> destroy(const std::string& name, std::chrono::milliseconds wait = std::chrono::seconds(2));

  // Names of the existing child groups under the parent in any hierarchy (`others` included),
  // ascending (the agent uses it to find leftovers after a restart; tests to check leaks).
  std::vector<std::string> children() const;

  // Removes the parent group itself when it has no children and no processes (tests, agent
  // shutdown of a temporary parent). Only the last path component is removed. Returns true
  // when it removed it, false when it was already gone.
  Result<bool> removeParent();

 private:
  Cgroups(CgroupLayout layout, std::string parent);
  Result<bool> makeParent();
  // Binds `group` to cpus/mems (CgroupLimits). v1: in the cpuset hierarchy, making the groups
  // down to it with their parent's cpus and mems; v2: +cpuset enabled down to its parent.
  Result<bool> bindCpuset(const std::string& group, const CgroupLimits& limits);
  std::string cpusetDir(const std::string& group) const;  // "" when no cpuset hierarchy

  CgroupLayout layout_;
  std::string parent_;
};

}  // namespace yard::agent
