#pragma once
// The text forms of the store's typed columns: what the record holds typed, the row holds as
// text (states by name, GPU indexes and declared ports as comma lists, labels as JSON). Only the store
// converts; everything above it works with the typed values.
// parse* throw ColumnError on text the store did not write (a damaged or foreign file).

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "master/store/store.h"

namespace yard::store {

struct ColumnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string gpusText(const std::vector<uint32_t>& gpus);  // "0,3"
std::vector<uint32_t> parseGpus(std::string_view text);
std::string declaredPortsText(const std::vector<DeclaredPort>& ports);  // "http=8080/TCP,dns=53/UDP"
std::vector<DeclaredPort> parseDeclaredPorts(std::string_view text);

// nodes.labels: a JSON object of strings on one line, keys sorted
// ({"yard.dev/rack":"r12","zone":"a"}); "" reads as none. `node` names the row in errors.
std::string labelsText(const std::map<std::string, std::string>& labels);
// nodes.removed_labels: label keys as a comma list (a key has no comma)
std::string keysText(const std::set<std::string>& keys);
std::set<std::string> parseKeys(const std::string& text);
// A queue's borrow or lend limit: "cpuMillis memoryBytes gpu", "" = unset.
std::string limitText(const std::optional<QueueRecord::Limit>& limit);
std::optional<QueueRecord::Limit> parseLimit(const std::string& text);
std::map<std::string, std::string> parseLabels(const std::string& node, const std::string& text);

JobState parseJobStateColumn(std::string_view text);
TaskState parseTaskStateColumn(std::string_view text);
std::optional<TaskState> parseTaskEndingColumn(std::string_view text);  // tasks.ending: "" = none
ReplicaState parseReplicaStateColumn(std::string_view text);
EndCause parseEndCauseColumn(std::string_view text);
// nodes.state and queues.state; `name` (the row's node or queue) is named in errors.
NodeState parseNodeStateColumn(const std::string& node, std::string_view text);
QueueState parseQueueStateColumn(const std::string& queue, std::string_view text);

}  // namespace yard::store
