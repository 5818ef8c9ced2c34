#pragma once
// The lifecycle enums to and from their wire form (schema/lifecycle.capnp): the same
// enumerants in the same order, checked here at compile time. A value from the wire that
// this build does not know (a newer peer) reads as nullopt.

#include <optional>

#include "common/lifecycle/states.h"
#include "schema/lifecycle.capnp.h"

namespace yard {

static_assert(static_cast<int>(schema::ReplicaState::PLACED) == static_cast<int>(ReplicaState::Placed));
static_assert(static_cast<int>(schema::ReplicaState::LOST) == static_cast<int>(ReplicaState::Lost));
static_assert(static_cast<int>(schema::ReplicaState::OOM_KILLED) == static_cast<int>(ReplicaState::OOMKilled));
static_assert(static_cast<int>(schema::EndCause::NONE) == static_cast<int>(EndCause::None));
static_assert(static_cast<int>(schema::EndCause::DEADLINE) == static_cast<int>(EndCause::Deadline));
static_assert(static_cast<int>(schema::EndCause::STOPPED_BY_POLICY) == static_cast<int>(EndCause::StoppedByPolicy));
static_assert(static_cast<int>(schema::EndCause::RESTART_LIMIT) == static_cast<int>(EndCause::RestartLimit));
static_assert(static_cast<int>(schema::EndCause::PREEMPTED) == static_cast<int>(EndCause::Preempted));

inline schema::ReplicaState toWire(ReplicaState s) { return static_cast<schema::ReplicaState>(s); }
inline schema::EndCause toWire(EndCause c) { return static_cast<schema::EndCause>(c); }
inline std::optional<ReplicaState> fromWire(schema::ReplicaState s) {
  if (static_cast<int>(s) > static_cast<int>(ReplicaState::Lost)) return std::nullopt;
  return static_cast<ReplicaState>(s);
}
inline std::optional<EndCause> fromWire(schema::EndCause c) {
  if (static_cast<int>(c) > static_cast<int>(EndCause::Preempted)) return std::nullopt;
  return static_cast<EndCause>(c);
}

}  // namespace yard
