#include "common/spec/kinds.h"

#include <algorithm>

namespace yard::spec {
namespace {

using schema::TaskKind;
using schema::TaskMode;

// The success rules say what master/frameworks/<kind>.cpp's `succeeded` does; docs/master.md
// ("Elastic scaling") has the elastic rule and its 30 s.

std::vector<KindDescriptor> makeKinds() {
  std::vector<KindDescriptor> k;
  k.push_back({TaskKind::CONTAINER_JOB, "container-job", "Container-Job", false,
               {"completions", "parallelism", "timeout", "retries", "restartPolicy", "container"},
               {{TaskMode::NONE, "", true, false, {}, "", "", "", "completions runs have exited 0"}}});
  k.push_back({TaskKind::PYTORCH, "pytorch", "PyTorch", true,
               {"mode", "roles", "advanced", "elastic", "nprocPerNode"},
               {{TaskMode::MASTER_WORKER, "master-worker", true, false,
                 {{"master", true, 1, 1}, {"worker", false, 0, kUnbounded}},
                 "", "", "", "the master replica exits 0"},
                {TaskMode::ELASTIC, "elastic", false, true,
                 {{"worker", true, 1, kUnbounded}},
                 "", "", "", "a worker exits 0 before any failed; the others get 30 s"}}});
  k.push_back({TaskKind::TENSORFLOW, "tensorflow", "TensorFlow", true,
               {"roles", "advanced", "evaluatorInCluster"},
               {{TaskMode::NONE, "", true, false,
                 {{"ps", false, 1, kUnbounded},
                  {"chief", false, 1, 1, "ps"},
                  {"worker", true, 1, kUnbounded},
                  {"evaluator", false, 1, 1}},
                 "",
                 "a chief needs a ps role: worker[+evaluator], ps+worker[+evaluator] or "
                 "ps+chief+worker[+evaluator]",
                 "worker[+evaluator], ps+worker[+evaluator], ps+chief+worker[+evaluator]",
                 "the chief exits 0, or worker 0 when there is no chief"}}});
  k.push_back({TaskKind::PADDLE, "paddle", "PaddlePaddle", true,
               {"mode", "roles", "advanced", "elastic"},
               {{TaskMode::PS, "ps", false, false,
                 {{"server", true, 1, kUnbounded}, {"trainer", true, 1, kUnbounded}},
                 "server", "", "", "every trainer exits 0"},
                {TaskMode::COLLECTIVE, "collective", true, false,
                 {{"trainer", true, 1, kUnbounded}},
                 "", "", "", "every trainer exits 0"},
                {TaskMode::ELASTIC, "elastic", false, true,
                 {{"trainer", true, 1, kUnbounded}},
                 "", "", "", "a trainer exits 0 before any failed; the others get 30 s"}}});
  k.push_back({TaskKind::OPENMPI, "openmpi", "OpenMPI", true,
               {"roles", "advanced", "slotsPerWorker"},
               {{TaskMode::NONE, "", true, false,
                 {{"launcher", true, 1, 1}, {"worker", true, 1, kUnbounded}},
                 "", "", "", "the launcher exits 0"}}});
  return k;
}

// The console palette's order.
constexpr TaskKind kPalette[] = {TaskKind::OPENMPI, TaskKind::TENSORFLOW, TaskKind::PYTORCH, TaskKind::PADDLE,
                                 TaskKind::CONTAINER_JOB};

}  // namespace

const RoleRule* ModeDescriptor::role(std::string_view n) const {
  for (const auto& r : roles)
    if (n == r.name) return &r;
  return nullptr;
}

bool KindDescriptor::takes(std::string_view field) const {
  return std::any_of(fields.begin(), fields.end(), [&](const char* f) { return field == f; });
}

const ModeDescriptor& KindDescriptor::defaultMode() const {
  for (const auto& m : modes)
    if (m.isDefault) return m;
  return modes.front();
}

const ModeDescriptor* KindDescriptor::findMode(schema::TaskMode mode) const {
  for (const auto& m : modes)
    if (m.mode == mode) return &m;
  return nullptr;
}

const ModeDescriptor& KindDescriptor::rulesFor(schema::TaskMode mode) const {
  const ModeDescriptor* m = findMode(mode);
  return m ? *m : defaultMode();
}

const std::vector<KindDescriptor>& kindDescriptors() {
  static const std::vector<KindDescriptor> kinds = makeKinds();
  return kinds;
}

std::vector<const KindDescriptor*> paletteKinds() {
  std::vector<const KindDescriptor*> out;
  for (TaskKind k : kPalette) out.push_back(findKind(k));
  return out;
}

const KindDescriptor* findKind(schema::TaskKind kind) {
  for (const auto& k : kindDescriptors())
    if (k.kind == kind) return &k;
  return nullptr;
}

const KindDescriptor* findKind(std::string_view name) {
  for (const auto& k : kindDescriptors())
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace yard::spec
