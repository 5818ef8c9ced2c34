#include "master/server/data_dir.h"

namespace yard::master {

Result<std::unique_ptr<DataDirLock>> lockDataDir(const std::string& dir, bool dev,
                                                 const std::function<void(const std::string&)>& log) {
  using R = Result<std::unique_ptr<DataDirLock>>;
  auto own = makePrivateDataDir(dir, 0700, dev ? 0711 : 0700);
  if (!own) return R::fail(own.error());
  if (!own.value().empty()) log(own.value());
  return DataDirLock::acquire(dir, "yard-master.lock", [&dir](const std::string& holder) {
    return "another yard-master (pid " + holder + ") is using the data directory " + dir;
  });
}

}  // namespace yard::master
