#pragma once
// The JSON objects `yardctl -o json` prints for queues, datasets, nodes, users and replica
// usage, shared with the master's HTTP API (docs/http_api.md): the console reads exactly
// what a script reads from yardctl.

#include <optional>

#include "common/util/json.h"
#include "schema/api.capnp.h"

namespace yard::api_json {

const char* stateText(api::QueueState s);  // "running", "closed", "stopped"
// A whole weight prints as an integer (2, not 2.0).
Json weightJson(double w);
Json listJson(capnp::List<capnp::Text>::Reader list);
Json queueJson(api::Queue::Reader q);
Json datasetJson(api::Dataset::Reader d);
Json nodeJson(api::NodeInfo::Reader n);
// A node's GPU topology (docs/topology.md) from nvidia-smi's matrix text; null when "" or unreadable.
Json topologyJson(const std::string& matrix, bool simulated);
Json labelsJson(capnp::List<schema::Label>::Reader labels);
Json userJson(api::UserInfo::Reader u);
// CPU used as a percentage of the CPU requested (what the elastic autoscaler compares with
// its target); nothing without a sample or a request.
std::optional<double> cpuPercentOfRequest(api::ReplicaUsage::Reader u);
Json replicaUsageJson(api::ReplicaUsage::Reader u);

}  // namespace yard::api_json
