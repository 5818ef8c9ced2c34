#pragma once
// The master's data directory and its instance lock: one yard-master per directory.

#include <memory>
#include <string>

#include "common/util/result.h"

namespace yard::master {

class DataDirLock {
 public:
  // Creates `dir` if needed and takes an exclusive lock on dir/yard-master.lock, which is
  // held until this object is destroyed (or the process dies: the kernel drops flocks).
  // Fails with a message naming the directory and the holder's pid when another master has it.
  static Result<std::unique_ptr<DataDirLock>> acquire(const std::string& dir);
  ~DataDirLock();
  explicit DataDirLock(int fd) : fd_(fd) {}
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  int fd_;
};

}  // namespace yard::master
