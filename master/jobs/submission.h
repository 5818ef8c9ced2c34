#pragma once
// The checks of a job submission that need the master's state (docs/design.md §2): the
// spec validated again, the name free, the queue open, flavors and datasets known, and
// every task's gang inside the queue's quota. Pure: reads what it is given.

#include <map>
#include <string>

#include "master/catalog/catalog.h"
#include "master/config/config.h"
#include "master/lifecycle/model.h"
#include "master/scheduler/scheduler.h"

namespace yard::master {

// The resources of one replica of `container`: its own, or its flavor's.
sched::Resources replicaResources(const MasterConfig& config, schema::Container::Reader container);

// "" when `spec` may be submitted, else the first refusal, one line for the user.
std::string checkSubmission(schema::Job::Reader spec, const std::map<std::string, JobEntry>& jobs,
                            const Catalog& catalog, const MasterConfig& config);

}  // namespace yard::master
