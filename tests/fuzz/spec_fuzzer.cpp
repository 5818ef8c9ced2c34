// libFuzzer target for the job spec loader: any byte string must load without crashing,
// hanging, throwing or allocating without bound, and every error must say something.
// Built by scripts/fuzz.sh (clang, YARD_FUZZ=ON, ASan + UBSan).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/spec/loader.h"
#include "common/spec/spec_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  // An exception escaping loadJobSpec aborts (libFuzzer reports it as a crash).
  yard::spec::LoadedJob loaded = yard::spec::loadJobSpec(yaml);
  for (const auto& e : loaded.errors) {
    if (e.message.empty()) {
      std::fprintf(stderr, "loadJobSpec returned an error with an empty message (path \"%s\")\n",
                   e.path.c_str());
      std::abort();
    }
  }
  if (loaded.ok()) {
    std::string json = yard::spec::jobToJson(loaded.job());
    if (json.empty()) {
      std::fprintf(stderr, "jobToJson returned nothing for a valid job\n");
      std::abort();
    }
  }
  return 0;
}
