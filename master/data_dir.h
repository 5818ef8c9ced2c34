#pragma once
// The master's data directory and its instance lock: one yard-master per directory.

#include <memory>
#include <string>

#include "common/util/data_dir_lock.h"

namespace yard::master {

// Creates `dir` if needed and locks dir/yard-master.lock for as long as the result lives.
// Fails with a message naming the directory and the holder's pid when another master has it.
Result<std::unique_ptr<DataDirLock>> lockDataDir(const std::string& dir);

}  // namespace yard::master
