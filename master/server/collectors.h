#pragma once
// The master's state on /metrics, computed from the registries when it is scraped (the
// events are counted through MasterMetrics, master/metrics/metrics.h; docs/operations.md,
// "Metrics", lists every family).
//
// REQUIRES: the collectors run on the io thread (the /metrics handler does).

#include <cstdint>
#include <functional>

#include "common/metrics/registry.h"

namespace yard::store {
class Store;
}

namespace yard::master {

class Catalog;
class JobRegistry;
class NodeRegistry;

// Registers the collectors of the master's state. `nowMs` is the registries' clock (unix ms).
void addMasterCollectors(metrics::Registry& registry, const JobRegistry& jobs, const NodeRegistry& nodes,
                         const Catalog& catalog, const store::Store& store, std::function<int64_t()> nowMs);

}  // namespace yard::master
