#pragma once
// One problem found in a job spec: where it is (a path such as
// `tasks[1].roles.worker.container.ports[0].name`) and what rule it breaks, with the value.

#include <string>
#include <vector>

namespace yard::spec {

struct SpecError {
  std::string path;     // empty for whole-file problems (size, YAML syntax)
  std::string message;

  // "<path>: <message>", or just the message when there is no path.
  std::string str() const { return path.empty() ? message : path + ": " + message; }
};

using SpecErrors = std::vector<SpecError>;

}  // namespace yard::spec
