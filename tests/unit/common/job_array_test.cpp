// Job arrays: which indexes `array:` names, its rules, and yardctl's --array flag.
#include "common/spec/job_array.h"

#include <catch2/catch.hpp>

#include "common/spec/loader.h"
#include "tests/unit/common/spec_test_util.h"

using namespace yard::spec;
using namespace yard::spec::test;

namespace {

std::string withArray(const std::string& array, const std::string& name = "good-job") {
  return "name: " + name + "\narray: " + array +
         "\ntasks:\n  - name: only-task\n    kind: container-job\n    container: " + kC + "\n";
}

std::vector<int32_t> indexesOf(const std::string& array) {
  auto loaded = loadJobSpec(withArray(array));
  REQUIRE(loaded.errors.empty());
  auto r = arrayIndexes(loaded.job().getArray());
  REQUIRE(r);
  return r.value();
}

}  // namespace

TEST_CASE("count and range name the indexes") {
  CHECK(indexesOf("{ count: 3 }") == std::vector<int32_t>{0, 1, 2});
  CHECK(indexesOf("{ range: \"0-8:4\" }") == std::vector<int32_t>{0, 4, 8});
  CHECK(indexesOf("{ range: \"5\" }") == std::vector<int32_t>{5});
  CHECK(indexesOf("{ range: \"7-9,1,3-5:2\" }") == std::vector<int32_t>{1, 3, 5, 7, 8, 9});
  CHECK(indexesOf("{ range: 12 }") == std::vector<int32_t>{12});
  CHECK(indexesOf("{ range: \"0-9999\" }").size() == 10000);
}

TEST_CASE("array rules name the field and the value") {
  CHECK(errorsOf(withArray("{ count: 2, range: \"0-1\" }")) == "array: give count or range, not both\n");
  CHECK(errorsOf(withArray("{ count: 0 }")).empty());  // no array at all
  CHECK(errorsOf(withArray("{ count: 10001 }")) == "array.count: must be 1-10000, got 10001\n");
  CHECK(errorsOf(withArray("{ count: -1 }")) == "array.count: must be 1-10000, got -1\n");
  CHECK(errorsOf(withArray("{ range: \"3-1\" }")) == "array.range: \"3-1\" ends before it starts\n");
  CHECK(errorsOf(withArray("{ range: \"1-3,2\" }")) == "array.range: index 2 appears twice in \"1-3,2\"\n");
  CHECK(errorsOf(withArray("{ range: \"a-b\" }")).find("array.range: \"a-b\" is not a list of A, A-B or A-B:STEP") == 0);
  CHECK(errorsOf(withArray("{ range: \"0-10:0\" }")).find("array.range:") == 0);
  CHECK(errorsOf(withArray("{ range: \"0-2000000\" }")).find("array.range:") == 0);
  CHECK(errorsOf(withArray("{ range: \"0-99999\" }")) ==
        "array.range: \"0-99999\" names more than 10000 indexes (the limit per array)\n");
  CHECK(errorsOf(withArray("{ count: 2, maxRunning: -1 }")) == "array.maxRunning: must be 0 (no limit) or more, got -1\n");
  CHECK(errorsOf(withArray("{ maxRunning: 2 }")) == "array.maxRunning: needs array.count or array.range\n");
  CHECK(errorsOf(withArray("{ count: 2, size: 3 }")).find("array.size:") == 0);
  // Member names are job names: at most 25 characters.
  CHECK(errorsOf(withArray("{ count: 1000 }", "a-twenty-two-char-name")) ==
        "name: \"a-twenty-two-char-name\" is too long for an array: member names such as "
        "\"a-twenty-two-char-name-999\" must be at most 25 characters\n");
  CHECK(errorsOf(withArray("{ count: 1000 }", "a-twenty-char-name-x")).empty());
}

TEST_CASE("member names and the --array flag") {
  CHECK(arrayMemberName("sweep", 7) == "sweep-7");
  auto f = parseArrayFlag("0-999%10");
  REQUIRE(f);
  CHECK(f.value().range == "0-999");
  CHECK(f.value().maxRunning == 10);
  auto g = parseArrayFlag("1,3");
  REQUIRE(g);
  CHECK(g.value().range == "1,3");
  CHECK(g.value().maxRunning == 0);
  CHECK_FALSE(parseArrayFlag("0-9%0"));
  CHECK_FALSE(parseArrayFlag("0-9%x"));
  CHECK_FALSE(parseArrayFlag("%3"));
}
