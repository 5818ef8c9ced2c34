// The log shipper's cut: a log longer than the archive's bound is sent as its last
// maxBytes after a marker line that says how much was dropped.
#include <catch2/catch.hpp>

#include "agent/link/log_shipper.h"

using namespace yard::agent;

TEST_CASE("a log within the bound is shipped whole", "[log_shipper]") {
  auto p = planShipment(100, 100);
  CHECK(p.from == 0);
  CHECK(p.marker.empty());
  CHECK(planShipment(0, 100).marker.empty());
}

TEST_CASE("a longer log keeps its last bytes after a marker", "[log_shipper]") {
  auto p = planShipment(15u << 20, 10u << 20);
  CHECK(p.from == 5u << 20);
  CHECK(p.marker == "[… 5242880 bytes dropped …]\n");
}
