#pragma once
// yardctl's command wiring. Each command group registers its subcommands on the app and
// sets an action; the action's return value is the process exit code:
// 0 ok, 1 refused or failed, 2 usage error.

#include <CLI/CLI.hpp>

#include <functional>
#include <iosfwd>
#include <string>

namespace yard::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// A whole number 0 or more. CLI11's NonNegativeNumber names its range with DBL_MAX printed
// out in full; this says the rule and the value.
inline const CLI::Validator kNonNegative(
    [](std::string& text) -> std::string {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(text, &used);
      } catch (const std::out_of_range&) {
        return "\"" + text.substr(0, 80) + "\" is too large";
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != text.size()) return "\"" + text.substr(0, 80) + "\" is not a whole number";
      if (v < 0) return "must be 0 or more, not " + text;
      return "";
    },
    "");

struct GlobalOptions {
  std::string master;   // --master, default $YARD_MASTER, then the config file (client.h)
  std::string token;    // --token, default $YARD_TOKEN, then the config file
  std::string ca;       // --ca (the cluster CA's PEM file), default $YARD_CA, then the config file
  std::string output;   // -o: "" (table) or "json"
  std::string requestId;  // --request-id: the id a change carries ("" = a new random one)
  // What is wrong with $YARD_MASTER when `master` came from it ("" = fine or not from it):
  // reported by the commands that reach a master, so that validate or completion still run.
  std::string masterEnvError;
};

struct Streams {
  std::ostream& out;
  std::ostream& err;
};

// The action chosen by the parsed command line; set by a subcommand's callback.
using Action = std::function<int()>;

void addValidateCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
void addVersionCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
void addCatalogCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
void addJobCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// REQUIRES: after addJobCommands (adds `job top` and `node top`).
void addLogsCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// `exec JOB -- CMD...`: a command in a running replica (exec_cmd.cpp, docs/exec.md).
void addExecCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// `usage [--by user|queue|job] [--since T] [--until T]` (usage_cmd.cpp, docs/security.md).
void addUsageCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// `user`, `token`, `whoami`, `audit`, `queue grant|revoke`, `dataset grant|revoke` and
// `node delete` (access_cmd.cpp, docs/security.md). REQUIRES: after addCatalogCommands and
// addJobCommands (it adds to `queue`, `dataset` and `node`).
void addAccessCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// `cluster status|remove` (cluster_cmd.cpp, docs/ha.md).
void addClusterCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);
// `completion bash|zsh` and the hidden `__complete KIND`; the script is generated from the
// whole tree when it runs, so every command registered (before or after) is in it.
void addCompletionCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action);

}  // namespace yard::ctl
