#pragma once
// The yard-shim command line, parsed and validated. docs/shim.md is the contract the agent is
// written against; this is its only parser.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::shim {

enum class Mode { kRun, kExec, kGuard, kHelp };

struct BindMount {
  std::string source;  // absolute path on the host
  std::string target;  // absolute path inside the workload's mount namespace
  bool readOnly = false;
};

struct ShimOptions {
  Mode mode = Mode::kHelp;
  std::string dir;                       // the replica's state directory; must exist
  std::optional<std::string> envFile;    // NUL-separated KEY=VALUE; none = empty environment
  std::vector<std::string> cgroupProcs;  // cgroup.procs files to join, in order
  std::vector<BindMount> mounts;         // run only; exec reuses the workload's namespace
  std::optional<std::string> workdir;
  std::vector<std::string> env;          // exec only: NAME=value set over the env file's (--env)
  bool tty = false;                      // exec only: stdin is the command's controlling terminal (--tty)
  std::vector<std::string> argv;         // what to run; never empty (run, exec); none for guard
  int pid = 0;                           // guard only: the process to watch (> 0)
  // run and exec: who the workload (or command) runs as (--user UID:GID): setgroups({gid}),
  // setgid, setuid before exec. None = the caller's own (root for the agent).
  struct User {
    uint32_t uid = 0, gid = 0;
  };
  std::optional<User> user;
};

// Parses argv of `yard-shim run|exec|guard ...`. Fails with a message naming the flag and value;
// the caller prints it with usage() and exits 2. Checks only the syntax: whether files exist is
// left to the step that uses them, so it is reported like any other setup failure.
Result<ShimOptions> parseShimArgs(int argc, char** argv);

// Parses one --user value, `UID:GID` (decimal, each below 4294967295: -1 means "none" to the
// kernel's set*id calls).
Result<ShimOptions::User> parseUser(const std::string& value);

// Parses one --mount value, `SRC:DST[:ro|:rw]` (both paths absolute; rw by default).
Result<BindMount> parseMount(const std::string& value);

const char* usage();

}  // namespace yard::shim
