// yard-gpu-probe: prints what yard-agent's capacity discovery finds on this host (cores,
// memory, GPUs and where they came from: NVML, nvidia-smi or none), one JSON object. Used to
// check GPU discovery on a GPU machine against nvidia-smi's own answer.
#include <iostream>

#include "agent/node/capacity.h"
#include "common/util/json.h"

int main() {
  auto c = yard::agent::discoverCapacity();
  yard::Json gpus = yard::Json::array();
  for (const auto& g : c.gpus)
    gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"model", g.model}, {"memoryBytes", g.memoryBytes}});
  yard::Json out = {
      {"cpuMillis", c.cpuMillis}, {"memoryBytes", c.memoryBytes}, {"gpuSource", c.gpuSource}, {"gpus", std::move(gpus)}};
  std::cout << yard::jsonText(out) << "\n";
  return 0;
}
