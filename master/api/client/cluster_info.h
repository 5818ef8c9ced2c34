#pragma once
// The `cluster` answer (schema/api.capnp ClusterInfo) from a ClusterView: the leader's client
// API and a follower's answer to `cluster status --stale` fill it alike (docs/ha.md).

#include "master/api/client/cluster_ops.h"
#include "schema/api.capnp.h"

namespace yard::master {

// `stale`: the view is a master's that does not lead (its term, commit index and contacts).
void fillClusterInfo(api::ClusterInfo::Builder c, const ClusterView& view, bool stale);

}  // namespace yard::master
