// Every example in configs/examples is a valid spec.
#include <catch2/catch.hpp>

#include <filesystem>

#include "common/spec/loader.h"

TEST_CASE("every example spec is valid", "[examples]") {
  namespace fs = std::filesystem;
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(YARD_SOURCE_DIR) / "configs" / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    auto loaded = yard::spec::loadJobSpecFile(entry.path().string());
    std::string errors;
    for (const auto& e : loaded.errors) errors += e.str() + "\n";
    INFO(entry.path().string() << "\n" << errors);
    CHECK(loaded.ok());
  }
  CHECK(count >= 11);
}
