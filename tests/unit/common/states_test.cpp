// The lifecycle vocabulary's text forms (common/lifecycle/states.h): what the store's
// columns and the client API hold, so a change here changes stored data.
#include "common/lifecycle/states.h"

#include <catch2/catch.hpp>

#include <string>

using namespace yard;

TEST_CASE("states: node and queue states are written in lower case and read back", "[states]") {
  CHECK(toText(NodeState::Ready) == "ready");
  CHECK(toText(NodeState::Draining) == "draining");
  CHECK(toText(NodeState::Down) == "down");
  CHECK(toText(QueueState::Running) == "running");
  CHECK(toText(QueueState::Closed) == "closed");
  CHECK(toText(QueueState::Stopped) == "stopped");
  for (NodeState s : {NodeState::Ready, NodeState::Draining, NodeState::Down}) CHECK(parseNodeState(toText(s)) == s);
  for (QueueState s : {QueueState::Running, QueueState::Closed, QueueState::Stopped})
    CHECK(parseQueueState(toText(s)) == s);
  // Only the exact names: "unstable" is shown, never stored; the case matters.
  for (std::string bad : {"unstable", "Ready", "", "down "}) CHECK_FALSE(parseNodeState(bad));
  for (std::string bad : {"Running", "paused", ""}) CHECK_FALSE(parseQueueState(bad));
}
