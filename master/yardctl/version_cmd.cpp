// `yardctl version`: the client's version and, when a master is reachable, the master's.
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "yard/version.h"

namespace yard::ctl {

Result<std::string> masterAddress(const std::string& flag) {
  if (!flag.empty()) return Result<std::string>::ok(flag);
  return Result<std::string>::fail("no master address: pass --master HOST:PORT or set YARD_MASTER");
}

void addVersionCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* cmd = app.add_subcommand("version", "Print yardctl's version and the master's");
  cmd->callback([&global, io, &action] {
    action = [&global, io]() -> int {
      io.out << "client: yardctl " << kVersion << "\n";
      auto address = masterAddress(global.master);
      if (!address) {
        io.err << "yardctl: " << address.error() << "\n";
        return kExitFailed;
      }
      auto resp = callMaster(address.value(), [](api::Request::Builder r) { r.setPing(); });
      if (!resp) {
        io.err << "yardctl: " << resp.error() << "\n";
        return kExitFailed;
      }
      io.out << "master: " << resp.value()->root<api::Response>().getPong().cStr() << " at "
             << address.value() << "\n";
      return kExitOk;
    };
  });
}

}  // namespace yard::ctl
