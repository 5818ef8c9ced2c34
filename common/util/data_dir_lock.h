#pragma once
// One daemon per data directory: an exclusive flock on a file in it, shared by yard-master
// and yard-agent. Each daemon keeps its own file name and words its own refusal.

#include <functional>
#include <memory>
#include <string>

#include "common/util/result.h"

namespace yard {

// A daemon's data directory is its own: what is in it (the master's state.db holds every
// job's spec and environment, secrets included) is nobody else's to list or read. Creates
// `dir` with `mode` when missing (its parents get the usual modes); an existing one with any
// permission bit outside `allowed` is set to `mode`, as the daemon owns it. Independent of
// the umask. Returns "" when nothing was changed, else a line for the log saying what was
// tightened; fails, naming the fix, when `dir` is not a directory or cannot be created or
// tightened (chmod refused: another user's directory).
Result<std::string> makePrivateDataDir(const std::string& dir, unsigned mode, unsigned allowed);

class DataDirLock {
 public:
  // Words the refusal when another process holds the lock; `holder` is the pid it wrote in
  // the file ("unknown" when it wrote none).
  using BusyMessage = std::function<std::string(const std::string& holder)>;

  // Creates `dir` if needed, takes an exclusive lock on dir/`fileName` (0600) and writes
  // this process's pid in it. The lock is held until this object is destroyed, or the process
  // dies (the kernel drops flocks, so a crash leaves nothing to clean up). Fails with
  // busy(holder) when another process (or another lock in this one) has it, else with what
  // went wrong creating or opening the file.
  static Result<std::unique_ptr<DataDirLock>> acquire(const std::string& dir, const std::string& fileName,
                                                      const BusyMessage& busy);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace yard
