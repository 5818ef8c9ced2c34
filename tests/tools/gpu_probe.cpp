// yard-gpu-probe: prints what yard-agent's capacity discovery finds on this host (cores,
// memory, GPUs and where they came from: NVML, nvidia-smi or none), one JSON object. Used to
// check GPU discovery on a GPU machine against nvidia-smi's own answer.
#include <iostream>

#include "agent/capacity.h"
#include "common/util/json.h"

int main() {
  auto c = yard::agent::discoverCapacity();
  yard::JsonWriter w;
  w.beginObject().field("cpuMillis", c.cpuMillis).field("memoryBytes", c.memoryBytes).field("gpuSource", c.gpuSource);
  w.key("gpus").beginArray();
  for (const auto& g : c.gpus)
    w.beginObject().field("index", static_cast<int64_t>(g.index)).field("uuid", g.uuid).field("model", g.model)
        .field("memoryBytes", static_cast<uint64_t>(g.memoryBytes)).endObject();
  w.endArray().endObject();
  std::cout << w.str() << "\n";
  return 0;
}
