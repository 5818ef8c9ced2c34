// yardctl: the admin and user CLI. main only wires the command groups together.
#include <openssl/ssl.h>
#include <cstdlib>
#include <iostream>

#include "common/util/request_id.h"
#include "common/wire/address_list.h"
#include "common/wire/server.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/report.h"
#include "yard/version.h"

namespace {

// --master and $YARD_MASTER: one HOST:PORT or a comma-separated list of them (HOST an IP
// address or a host name, resolved when dialled); "" when fine, else what is wrong (the
// caller names the flag or the variable).
std::string checkMasterList(const std::string& list) {
  auto addresses = yard::wire::splitAddressList(list);
  if (addresses.empty()) return "must be HOST:PORT or a comma-separated list of them, not \"" + list + "\"";
  for (const auto& a : addresses)
    if (auto hp = yard::wire::splitHostPort(a); !hp)
      return (addresses.size() > 1 ? "\"" + list + "\": " : std::string()) + hp.error() +
             " (an IP address or a host name, and a port)";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace yard::ctl;
  // Each command is a process of its own, so OpenSSL's set-up and tear-down are a large part
  // of it: its legacy cipher-name table is not built (TLS 1.3 fetches ciphers from the
  // provider; the digests' names stay, certificate verification looks them up), the system's
  // openssl.cnf is not read (yardctl speaks TLS 1.3 to its own cluster's CA only) and nothing
  // is freed at exit. Its error texts still load (OpenSSL loads them at its first
  // initialisation or never, so they cannot wait for an error). docs/benchmarks.md, "A fast CLI".
  OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  CLI::App app{"yardctl: submit and inspect Yard jobs, queues, datasets and nodes"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--master, -o) may follow the subcommand, kubectl-style
  app.set_version_flag("--version", std::string("yardctl ") + yard::kVersion);
  GlobalOptions global;
  if (const char* env = std::getenv("YARD_MASTER")) global.master = env;
  CLI::Option* masterFlag =
      app.add_option("--master", global.master, "Master client address HOST:PORT, or several: HOST:PORT,HOST:PORT (default $YARD_MASTER)")
          ->check(checkMasterList);
  if (const char* env = std::getenv("YARD_TOKEN")) global.token = env;
  app.add_option("--token", global.token, "API token (default $YARD_TOKEN, or token in ~/.config/yard/config.toml)");
  if (const char* env = std::getenv("YARD_CA")) global.ca = env;
  app.add_option("--ca", global.ca, "The cluster CA certificate, to verify the master (default $YARD_CA, or ca in "
                                    "~/.config/yard/config.toml; the master's <data-dir>/ca.pem)");
  app.add_option("-o,--output", global.output, "Output format: json (default: human tables)")
      ->check(CLI::IsMember({"json", "table"}));
  app.add_option("--request-id", global.requestId,
                 "The request id a change carries (up to 64 hex digits and '-', e.g. a UUID): a script that "
                 "sends the same change again with the same id gets the first answer, made once "
                 "(default: a new id per run)")
      ->type_name("ID")
      ->check([](const std::string& id) -> std::string {
        if (yard::isRequestId(id)) return "";
        return "must be 1 to 64 hex digits and '-', not \"" + id.substr(0, 80) + "\"";
      });

  Streams io{std::cout, std::cerr};
  Action action;
  addValidateCommand(app, global, io, action);
  addVersionCommand(app, global, io, action);
  addCatalogCommands(app, global, io, action);
  addJobCommands(app, global, io, action);
  addLogsCommands(app, global, io, action);
  addExecCommand(app, global, io, action);
  addAccessCommands(app, global, io, action);
  addUsageCommand(app, global, io, action);
  addClusterCommands(app, global, io, action);
  addCompletionCommands(app, global, io, action);

  // -o json is read from argv before parsing, so that a usage error is JSON too (report.h).
  bool json = argvWantsJson(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    if (!json) return app.exit(e);
    printJson(io, {{"client", {{"version", yard::kVersion}}}});
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // `yardctl --bogus` fails CLI11's "a subcommand is required" before its unknown-argument
    // check: name the argument that was not understood instead.
    std::string what = e.what();
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      const std::string first = app.remaining().front();
      what = first.rfind("-", 0) == 0 ? "unknown flag " + first : "unknown command \"" + first + "\"";
    }
    if (!json) {  // as every other error: "yardctl: <message>" (docs/yardctl.md)
      io.err << "yardctl: " << what << "\nRun with --help for more information.\n";
      return kExitUsage;
    }
    global.output = "json";
    return reportError(global, io, kExitUsage, what);
  }
  // $YARD_MASTER is checked as the flag is, and named when it is the one at fault.
  if (masterFlag->count() == 0 && std::getenv("YARD_MASTER") != nullptr && !global.master.empty())
    if (std::string bad = checkMasterList(global.master); !bad.empty()) global.masterEnvError = "YARD_MASTER: " + bad;
  if (global.output == "table") global.output.clear();
  return action ? action() : kExitUsage;
}
