#include "master/data_dir.h"

namespace yard::master {

Result<std::unique_ptr<DataDirLock>> lockDataDir(const std::string& dir) {
  return DataDirLock::acquire(dir, "yard-master.lock", [&dir](const std::string& holder) {
    return "another yard-master (pid " + holder + ") is using the data directory " + dir;
  });
}

}  // namespace yard::master
