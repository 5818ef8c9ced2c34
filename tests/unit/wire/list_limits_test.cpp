// wire::checkListLengths: every list's length is checked against its cap before any of its
// elements is read, nested lists included, with the path in the answer.
#include <catch2/catch.hpp>

#include <capnp/message.h>

#include "common/wire/list_limits.h"
#include "schema/job.capnp.h"

using namespace yard;

TEST_CASE("list lengths: caps per field, nested paths, and specs within them pass", "[wire][limits]") {
  capnp::MallocMessageBuilder m;
  auto job = m.initRoot<schema::Job>();
  job.setName("some-job");
  auto tasks = job.initTasks(3);
  tasks[1].setName("second");
  tasks[1].initDependsOn(2);
  auto roles = tasks[2].initRoles(1);
  roles[0].getContainer().initEnv(5);
  wire::ListLimits limits{10, {{"tasks", 3}}, 1000};
  CHECK(wire::checkListLengths(capnp::toDynamic(job.asReader()), limits) == "");

  limits.byField["tasks"] = 2;
  CHECK(wire::checkListLengths(capnp::toDynamic(job.asReader()), limits) ==
        "tasks: 3 elements, more than the limit of 2");
  limits.byField["tasks"] = 3;
  limits.maxElements = 2;  // env has 5, dependsOn 2
  CHECK(wire::checkListLengths(capnp::toDynamic(job.asReader()), limits) ==
        "tasks[2].roles[0].container.env: 5 elements, more than the limit of 2");
  limits.maxElements = 10;
  limits.maxVisited = 3;  // the three tasks are visited, then the role: one too many
  CHECK(wire::checkListLengths(capnp::toDynamic(job.asReader()), limits) ==
        "tasks[2].roles: more than 3 list elements in one message");
}
