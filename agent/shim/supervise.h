#pragma once
// The shim's wait for its workload, and the stop it carries out without the agent: the stop the
// agent asks for in DIR/stop, and the lease the agent renews in DIR/lease (docs/shim.md, "Lease
// and stop"). Whatever happens to the agent, a workload whose lease ran out, or whose stop time
// came, is stopped: SIGTERM to its process group, then SIGKILL to the group and to every process
// left in its cgroups.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/shim/options.h"

namespace yard::shim {

// CLOCK_BOOTTIME in milliseconds: the clock of DIR/lease and DIR/stop. It keeps counting while
// the machine is suspended, so a lease cannot outlive its time by a suspend.
int64_t bootMs();

// Parses the one line of DIR/lease or DIR/stop: two integers >= 0 separated by a space, an
// optional newline after. nullopt when it is anything else.
std::optional<std::pair<int64_t, int64_t>> parseTimePair(const std::string& text);

// The cgroup.procs files beside each `--cgroup-procs` file: what lists the replica's processes.
std::vector<std::string> cgroupProcsLists(const std::vector<std::string>& procsFiles);

// SIGKILLs every process listed in `lists` (never the caller), reaps the caller's ended
// children, and repeats until the lists are empty or about `boundMs` has passed. Returns how
// many processes the last round still found.
size_t killCgroupProcesses(const std::vector<std::string>& lists, int64_t boundMs);

// Waits for `workload` to end while carrying out DIR/stop and DIR/lease, and reaps (ignoring)
// the reparented descendants the shim inherits as a subreaper. Once the workload has ended,
// kills what is left in its cgroups. Returns the workload's wait status, or nullopt when it is
// somehow not the shim's child any more (errno set).
// REQUIRES: SIGCHLD and SIGUSR1 are blocked in the calling thread (the agent's SIGUSR1 says
// "DIR/stop changed"; sigtimedwait takes both).
std::optional<int> superviseWorkload(const ShimOptions& o, pid_t workload);

// `yard-shim guard`: the same lease and stop for a process the caller did not start (a
// container's init, whose parent is containerd's shim), open as `pidfd` (pidfd_open of o.pid).
// SIGTERM goes to it through the pidfd and to every process in its cgroups; SIGKILL likewise.
// Writes DIR/fenced when the lease runs out. Returns once the process has ended (and what was
// left in its cgroups is killed); it cannot know the exit status, which is its parent's.
// REQUIRES: SIGUSR1 is blocked in the calling thread (it is taken through a signalfd).
void guardProcess(const ShimOptions& o, int pidfd);

// pidfd_open(pid, 0): a descriptor that names this process and no later one with its number
// (close-on-exec); -1 with errno set (ESRCH: no such process).
int pidfdOpen(pid_t pid);

// Whether `pid` is listed in one of the cgroup.procs files `lists`.
bool listsProcess(const std::vector<std::string>& lists, pid_t pid);

}  // namespace yard::shim
