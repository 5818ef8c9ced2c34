#pragma once
// The master's data directory and its instance lock: one yard-master per directory.

#include <functional>
#include <memory>
#include <string>

#include "common/util/data_dir_lock.h"

namespace yard::master {

// Makes `dir` the master's own and locks dir/yard-master.lock for as long as the result lives.
// The directory is created 0700; an existing one that others may read is set to 0700 and
// `log` says so. `dev`: a dev cluster's agent keeps its replicas below it, and a host replica
// run as a mapped user passes through on its way to its own directory, so search bits
// (0711) are let be. Fails with a message naming the directory and the holder's pid when
// another master has it, or naming the fix when the directory cannot be made private.
Result<std::unique_ptr<DataDirLock>> lockDataDir(const std::string& dir, bool dev,
                                                 const std::function<void(const std::string&)>& log);

}  // namespace yard::master
