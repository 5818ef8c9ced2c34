// `yardctl validate FILE...`: load and validate job specs without a master.
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "common/spec/loader.h"
#include "common/spec/spec_json.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"

namespace yard::ctl {

void addValidateCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check job spec files against every rule; -o json prints the normalised spec");
  cmd->add_option("files", *files, "Job spec files (YAML)")->required();
  cmd->callback([&global, io, files, &action] {
    action = [&global, io, files]() -> int {
      bool json = global.output == "json";
      bool allValid = true;
      JsonWriter w;
      if (json && files->size() > 1) w.beginArray();
      for (const std::string& f : *files) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(f, ec)) {
          io.err << "yardctl validate: " << f << ": no such file\n";
          return kExitUsage;
        }
      }
      for (const std::string& f : *files) {
        spec::LoadedJob loaded = spec::loadJobSpecFile(f);
        if (loaded.ok()) {
          if (json) spec::writeJobJson(w, loaded.job());
          else io.out << "OK " << f << "\n";
          continue;
        }
        allValid = false;
        if (json) {
          w.beginObject().field("file", f).key("errors").beginArray();
          for (const auto& e : loaded.errors)
            w.beginObject().field("path", e.path).field("message", e.message).endObject();
          w.endArray().endObject();
        } else {
          io.out << "INVALID " << f << " (" << loaded.errors.size()
                 << (loaded.errors.size() == 1 ? " error)\n" : " errors)\n");
          for (const auto& e : loaded.errors) io.out << "  " << e.str() << "\n";
        }
      }
      if (json) {
        if (files->size() > 1) w.endArray();
        io.out << w.str() << "\n";
      }
      return allValid ? kExitOk : kExitFailed;
    };
  });
}

}  // namespace yard::ctl
