// `yardctl version`: the client's version and, when a master is reachable, the master's.
#include <memory>
#include <string>

#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "master/yardctl/report.h"
#include "yard/version.h"

namespace yard::ctl {

void addVersionCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* cmd = app.add_subcommand("version", "Print yardctl's version and the master's");
  cmd->callback([&global, io, &action] {
    action = [&global, io]() -> int {
      // -o json: {"client": {"version"}, "master": {"version", "address"}}; when the master
      // cannot be asked, "master" is null and "error" says why (exit 1, as in text).
      bool json = jsonOutput(global);
      Json out = {{"client", {{"version", kVersion}}}, {"master", nullptr}};
      if (!json) io.out << "client: yardctl " << kVersion << "\n";
      auto address = masterAddress(global);
      auto resp = address ? callMaster(address.value(), [](api::Request::Builder r) { r.setPing(); })
                          : Result<std::unique_ptr<wire::Frame>>::fail(address.error());
      if (!resp) {
        if (!json) return reportError(global, io, kExitFailed, resp.error());
        out["error"] = errorJson(resp.error());
        printJson(io, out);
        return kExitFailed;
      }
      std::string pong = resp.value()->root<api::Response>().getPong().cStr();
      if (!json) {
        io.out << "master: " << pong << " at " << address.value().address << "\n";
        return kExitOk;
      }
      // The master answers "yard-master 0.1.0"; the object carries the version alone.
      std::string prefix = "yard-master ";
      std::string version = pong.starts_with(prefix) ? pong.substr(prefix.size()) : pong;
      out["master"] = {{"version", version}, {"address", address.value().address}};
      printJson(io, out);
      return kExitOk;
    };
  });
}

}  // namespace yard::ctl
