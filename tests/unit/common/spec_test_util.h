#pragma once
// Helpers for table-driven spec tests.

#include <string>

#include "common/spec/loader.h"

namespace yard::spec::test {

// A valid container, for splicing into specs.
inline const std::string kC = "{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls }";

// A job named good-job whose tasks list is `tasks` (YAML list items, already indented).
inline std::string job(const std::string& tasks) { return "name: good-job\ntasks:\n" + tasks; }

// One container-job task whose container is `container`.
inline std::string cjob(const std::string& container, const std::string& extra = "") {
  return job("  - name: only-task\n    kind: container-job\n" + extra + "    container: " + container + "\n");
}

// All errors of loading `yaml`, one per line.
inline std::string errorsOf(const std::string& yaml) {
  std::string out;
  for (const auto& e : loadJobSpec(yaml).errors) out += e.str() + "\n";
  return out;
}

}  // namespace yard::spec::test
