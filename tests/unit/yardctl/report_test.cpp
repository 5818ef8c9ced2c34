// How yardctl reports outcomes (master/yardctl/report.h): with -o json stdout carries JSON
// only, errors included, with the text mode's exit code; without it errors go to stderr.
#include "master/yardctl/report.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <vector>

#include "master/yardctl/cluster_text.h"
#include "master/yardctl/table.h"

using namespace yard::ctl;

namespace {

struct Captured {
  std::ostringstream out, err;
  Streams io() { return {out, err}; }
};

GlobalOptions withOutput(const char* output) {
  GlobalOptions g;
  g.output = output;
  return g;
}

}  // namespace

TEST_CASE("an error prints as yardctl: MESSAGE on stderr without -o json", "[yardctl]") {
  Captured c;
  CHECK(reportError(withOutput(""), c.io(), kExitUsage, "--cpu: \"lots\" is not a cpu quantity") == kExitUsage);
  CHECK(c.out.str().empty());
  CHECK(c.err.str() == "yardctl: --cpu: \"lots\" is not a cpu quantity\n");
}

TEST_CASE("an error with -o json is one object on stdout, the exit code kept", "[yardctl]") {
  Captured c;
  CHECK(reportError(withOutput("json"), c.io(), kExitFailed, "queue team-z does not exist") == kExitFailed);
  CHECK(c.err.str().empty());
  CHECK(c.out.str() == "{\n  \"error\": {\n    \"message\": \"queue team-z does not exist\"\n  }\n}\n");
  Captured line;
  reportError(withOutput("json"), line.io(), kExitFailed, "lost the connection", JsonStyle::kLine);
  CHECK(line.out.str() == "{\"error\":{\"message\":\"lost the connection\"}}\n");
}

TEST_CASE("a field error keeps its path: in JSON as path, in text before the message", "[yardctl]") {
  yard::spec::SpecError e{"tasks[0].container.mounts[0].dataset", "dataset x does not exist"};
  Captured json;
  reportFieldError(withOutput("json"), json.io(), kExitFailed, e);
  CHECK(json.out.str().find(R"("path": "tasks[0].container.mounts[0].dataset")") != std::string::npos);
  Captured text;
  reportFieldError(withOutput(""), text.io(), kExitFailed, e);
  CHECK(text.err.str() == "yardctl: tasks[0].container.mounts[0].dataset: dataset x does not exist\n");
}

TEST_CASE("an invalid spec lists every error - error is the first of them", "[yardctl]") {
  yard::spec::SpecErrors errors = {{"name", "\"ab\" must be 4-25 characters"}, {"", "line 3: bad YAML"}};
  yard::Json j = invalidSpecJson("bad.yaml", errors);
  CHECK(j["error"] == yard::Json{{"message", "\"ab\" must be 4-25 characters"}, {"path", "name"}});
  CHECK(j["errors"].size() == 2);
  CHECK(j["errors"][1] == yard::Json{{"message", "line 3: bad YAML"}});  // no field: no "path"
  CHECK(j["errors"][0] == yard::Json{{"path", "name"}, {"message", "\"ab\" must be 4-25 characters"}});
  CHECK(j["file"] == "bad.yaml");
  Captured text;
  CHECK(reportInvalidSpec(withOutput(""), text.io(), "bad.yaml", errors) == kExitFailed);
  CHECK(text.err.str() == "INVALID bad.yaml\n  name: \"ab\" must be 4-25 characters\n  line 3: bad YAML\n");
}

TEST_CASE("a master's refusal is split at a leading field path, and only there", "[yardctl]") {
  struct Case {
    const char* message;
    const char* path;
    const char* rest;
  };
  for (const Case& c : std::vector<Case>{
           {"tasks[0].roles.master.container.mounts[0].dataset: dataset imagenet does not exist",
            "tasks[0].roles.master.container.mounts[0].dataset", "dataset imagenet does not exist"},
           {"name: \"ab\" must be 4-25 characters", "name", "\"ab\" must be 4-25 characters"},
           {"queue team-a quota is too small for task train: needs gpu=16", "", nullptr},
           {"cannot reach the master at 127.0.0.1:1: Connection refused", "", nullptr},
           {"--cpu: -1 must be 0 or more", "", nullptr},
           {"tasks[x].name: bad", "", nullptr},
           {"tasks[0]: bad", "tasks[0]", "bad"},
           {"job x does not exist", "", nullptr},
       }) {
    auto e = splitFieldPath(c.message);
    CHECK(e.path == c.path);
    CHECK(e.message == (c.rest ? c.rest : c.message));
  }
}

TEST_CASE("-o json is found in argv before parsing, in each spelling", "[yardctl]") {
  auto wants = [](std::vector<const char*> args) {
    args.insert(args.begin(), "yardctl");
    return argvWantsJson(static_cast<int>(args.size()), args.data());
  };
  CHECK(wants({"-o", "json", "job", "list"}));
  CHECK(wants({"job", "list", "-o", "json"}));
  CHECK(wants({"job", "list", "--output", "json"}));
  CHECK(wants({"job", "list", "--output=json"}));
  CHECK(wants({"job", "list", "-ojson"}));
  CHECK_FALSE(wants({"job", "list"}));
  CHECK_FALSE(wants({"-o", "table", "job", "list"}));
  CHECK_FALSE(wants({"-o", "json", "-o", "table", "job"}));  // the last one wins, as when parsed
  CHECK_FALSE(wants({"exec", "j", "--", "cmd", "-o", "json"}));  // the remote command's own
  CHECK_FALSE(wants({"job", "list", "-o"}));
}

TEST_CASE("a stream's rows line up with the first table's columns", "[yardctl]") {
  Table t({"NAME", "STATE"});
  t.row({"a-job", "Running"});
  auto widths = t.widths();
  CHECK(widths == std::vector<size_t>{5, 7});
  CHECK(Table::line({"b", "Queued"}, widths) == "b      Queued");
  CHECK(Table::line({"a-longer-name", "Queued"}, widths) == "a-longer-name  Queued");
  std::ostringstream out;
  t.print(out, {8, 7});
  CHECK(out.str() == "NAME      STATE\na-job     Running\n");
}

TEST_CASE("a table shows a control character in a cell escaped - a newline cannot forge a row", "[yardctl]") {
  Table t({"TIME", "TARGET", "OUTCOME"});
  t.row({"21:59", "zz\n2026-12-05 21:59:00Z  alice  job.delete", "ok"});
  t.row({"22:00", "\x1b[2Jred", "ok"});
  std::ostringstream out;
  t.print(out);
  CHECK(out.str() ==
        "TIME   TARGET                                       OUTCOME\n"
        "21:59  zz\\n2026-12-05 21:59:00Z  alice  job.delete  ok\n"
        "22:00  \\x1b[2Jred                                   ok\n");
  // A stream's later rows (job events -f, job list --watch) too.
  CHECK(Table::line({"a\rb", "c"}, {4, 1}) == "a\\rb  c");
}

TEST_CASE("cluster status notes masters that run different versions", "[yardctl][ha]") {
  CHECK(mixedVersionNote({{"leader", "0.2.0"}, {"follower", "0.2.0"}, {"follower", "0.2.0"}}).empty());
  // an unreachable member says nothing of its version: no note for it
  CHECK(mixedVersionNote({{"leader", "0.2.0"}, {"follower", "0.2.0"}, {"unreachable", ""}}).empty());
  CHECK_THAT(mixedVersionNote({{"leader", "0.2.0"}, {"follower", "0.1.0"}, {"follower", "0.2.0"}}),
             Catch::Contains("upgrade the followers first, the leader last"));
  // a member older than the version question answers none: that is a difference too
  CHECK_FALSE(mixedVersionNote({{"follower", ""}, {"leader", "0.2.0"}}).empty());
  CHECK(mixedVersionNote({{"leader", "0.1.0"}}).empty());
}

TEST_CASE("cluster status --stale without a leader notes versions only when the members that answered differ",
          "[yardctl][ha]") {
  // a follower's own view while no master leads: the others unreachable, one candidate
  CHECK(mixedVersionNote({{"unreachable", ""}, {"candidate", "0.2.0"}, {"unreachable", ""}}).empty());
  CHECK(mixedVersionNote({{"follower", "0.2.0"}, {"candidate", "0.2.0"}}).empty());
  CHECK_FALSE(mixedVersionNote({{"follower", "0.1.0"}, {"candidate", "0.2.0"}}).empty());
  CHECK(mixedVersionNote({{"unreachable", ""}, {"unreachable", ""}}).empty());
}
