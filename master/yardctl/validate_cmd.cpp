// `yardctl validate FILE...`: load and validate job specs without a master.
#include <iostream>
#include <memory>
#include <vector>

#include "common/spec/loader.h"
#include "common/spec/spec_json.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/report.h"

namespace yard::ctl {

void addValidateCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check job spec files against every rule; -o json prints the normalised spec");
  cmd->add_option("files", *files, "Job spec files (YAML)")->required()->type_name("FILE");
  cmd->callback([&global, io, files, &action] {
    action = [&global, io, files]() -> int {
      bool json = jsonOutput(global);
      bool allValid = true;
      Json out = Json::array();  // one entry per file; a single file prints as its entry alone
      if (auto missing = reportMissingFile(global, io, *files)) return *missing;
      for (const std::string& f : *files) {
        spec::LoadedJob loaded = spec::loadJobSpecFile(f);
        if (loaded.ok()) {
          if (json) out.push_back(spec::jobJson(loaded.job()));
          else io.out << "OK " << f << "\n";
          continue;
        }
        allValid = false;
        if (json) {
          out.push_back(invalidSpecJson(f, loaded.errors));
        } else {
          io.out << "INVALID " << f << " (" << loaded.errors.size()
                 << (loaded.errors.size() == 1 ? " error)\n" : " errors)\n");
          for (const auto& e : loaded.errors) io.out << "  " << e.str() << "\n";
        }
      }
      if (json) printJson(io, files->size() > 1 ? out : out.at(0));
      return allValid ? kExitOk : kExitFailed;
    };
  });
}

}  // namespace yard::ctl
