// yard-gpu-probe: prints what yard-agent's capacity discovery finds on this host (cores,
// memory, GPUs and where they came from: NVML, nvidia-smi or none, and their topology as the
// agent reads it: docs/topology.md), one JSON object. Used to check GPU discovery on a GPU
// machine against nvidia-smi's own answer.
#include <iostream>

#include "agent/node/capacity.h"
#include "common/topology/gpu_topology.h"
#include "common/util/json.h"

// The matrix as the master reads it: null when there is none or it does not read.
yard::Json topologyOf(const std::string& matrix) {
  auto p = yard::topology::parseNvidiaSmiTopo(matrix);
  if (!p.topology) return matrix.empty() ? yard::Json(nullptr) : yard::Json{{"error", p.error}, {"text", matrix}};
  const auto& t = *p.topology;
  return {{"gpus", t.gpus}, {"links", yard::topology::linkMatrix(t)}, {"numa", t.numa}, {"cpus", t.cpus}};
}

int main() {
  auto c = yard::agent::discoverCapacity();
  yard::Json gpus = yard::Json::array();
  for (const auto& g : c.gpus)
    gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"model", g.model}, {"memoryBytes", g.memoryBytes}});
  yard::Json out = {
      {"cpuMillis", c.cpuMillis}, {"memoryBytes", c.memoryBytes}, {"gpuSource", c.gpuSource}, {"gpus", std::move(gpus)},
      {"topology", topologyOf(c.gpuTopology)}, {"topologySource", c.topologySource}};
  std::cout << yard::jsonText(out) << "\n";
  return 0;
}
