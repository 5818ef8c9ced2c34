// Host replicas run as their owner (docs/security.md, "Host replicas run as their owner"): the
// real runner, host driver and yard-shim (no cgroups) start replicas as root would in an agent,
// one with the owner's uid/gid 65534 and one unmapped, and the test checks what each process
// is and what it can read.
#include <catch2/catch.hpp>

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/drivers/host/host_driver.h"
#include "agent/runner/runner.h"

using namespace yard::agent;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t bootMs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

struct Agent {
  std::string data;
  HostDriver host{YARD_SHIM, nullptr};
  std::unique_ptr<Runner> runner;
  Agent() {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);  // shims become ours to reap, as in an agent
    char tmpl[] = "/tmp/yard-runas-XXXXXX";
    data = mkdtemp(tmpl);
    ::chmod(data.c_str(), 0755);  // an agent's data directory: /var/lib/yard/agent is 0755
    runner = std::make_unique<Runner>(Runner::Options{data, true, "/usr/lib/yard"}, &host, nullptr, bootMs, nullptr);
    runner->recover();
  }
  ~Agent() {
    runner->stopAll("test over");
    for (int i = 0; i < 100 && runner->anyLive(); ++i) {
      runner->tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::filesystem::remove_all(data);
  }
  std::string dir(const ReplicaKey& k) const { return data + "/replicas/" + k.name(); }
  // Ticks until `k` has ended (or 10 s); its report.
  ReplicaReport waitEnded(const ReplicaKey& k) {
    for (int i = 0; i < 200; ++i) {
      runner->tick();
      for (const auto& r : runner->reports())
        if (r.key == k && (r.state == yard::ReplicaState::Exited || r.state == yard::ReplicaState::Killed ||
                           r.state == yard::ReplicaState::Lost))
          return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("replica " << k.name() << " did not end");
    return {};
  }
  bool waitOutput(const ReplicaKey& k, const std::string& text) {
    for (int i = 0; i < 200; ++i) {
      runner->tick();
      if (slurp(dir(k) + "/output.log").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

ReplicaSpec hostSpec(std::vector<std::string> argv) {
  ReplicaSpec s;
  s.job = "j";
  s.task = "t";
  s.role = "run";
  s.image = "host";
  s.argv = std::move(argv);
  s.stopGraceMs = 1000;
  return s;
}

}  // namespace

TEST_CASE("host replica: runs as its owner's uid/gid, with its own files, and cannot read another replica's") {
  if (::geteuid() != 0) {
    WARN("skipped: running as another user needs root");
    return;
  }
  Agent agent;
  // A replica of someone else (unmapped: the agent's own user), holding a secret in its env.
  ReplicaKey other{1, 0};
  ReplicaSpec otherSpec = hostSpec({"sleep", "30"});
  otherSpec.env = {{"SECRET", "other-secret"}};
  agent.runner->converge({{other, true, otherSpec}});
  for (int i = 0; i < 100 && !std::filesystem::exists(agent.dir(other) + "/pid"); ++i) {
    agent.runner->tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  ReplicaKey mine{2, 0};
  ReplicaSpec spec = hostSpec(
      {"/bin/sh", "-c",
       "id -u; id -g; echo home=$HOME; pwd; cat $YARD_REPLICA_DIR/hostfile; echo mine > mine.txt && echo wrote;"
       "cat " + agent.dir(other) + "/env 2>/dev/null || echo no-env;"
       "ls " + agent.dir(other) + " 2>/dev/null || echo no-list;"
       "cat " + agent.dir(other) + "/output.log 2>/dev/null || echo no-log;"
       "cat $YARD_REPLICA_DIR/env 2>/dev/null || echo no-own-env;"
       "ls $YARD_REPLICA_DIR 2>/dev/null || echo no-own-list"});
  spec.env = {{"YARD_REPLICA_DIR", "${YARD_REPLICA_DIR}"}};
  spec.files = {{"hostfile", "node-1 slots=1\n"}};
  spec.runAsUid = 65534;
  spec.runAsGid = 65534;
  spec.owner = "nobody";
  agent.runner->converge({{other, true, otherSpec}, {mine, true, spec}});
  ReplicaReport r = agent.waitEnded(mine);
  std::string dir = agent.dir(mine);
  std::string out = slurp(dir + "/output.log");
  INFO(out << slurp(dir + "/launch.log") << r.reason);
  CHECK(r.state == yard::ReplicaState::Exited);
  CHECK(r.exitCode == 0);
  CHECK(out == "65534\n65534\nhome=" + dir + "/work\n" + dir + "/work\nnode-1 slots=1\nwrote\n"
               "no-env\nno-list\nno-log\nno-own-env\nno-own-list\n");

  // What the replica owns, and what it does not.
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 0777) == 0711);
  REQUIRE(::stat((dir + "/work").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((dir + "/work/mine.txt").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  for (const char* f : {"output.log", "hostfile"}) {
    REQUIRE(::stat((dir + "/" + f).c_str(), &st) == 0);
    CHECK(st.st_uid == 65534);
    CHECK((st.st_mode & 0777) == 0600);
  }
  for (const char* f : {"env", "spec", "launch.log", "pid", "status"}) {
    INFO(f);
    REQUIRE(::stat((dir + "/" + f).c_str(), &st) == 0);
    CHECK(st.st_uid == 0);
    CHECK((st.st_mode & 0077) == 0);
  }
  // The unmapped replica kept today's behaviour: root's directory, 0700, its HOME there.
  REQUIRE(::stat(agent.dir(other).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("host replica: hooks and exec run as the owner too") {
  if (::geteuid() != 0) {
    WARN("skipped: running as another user needs root");
    return;
  }
  Agent agent;
  ReplicaKey k{3, 0};
  ReplicaSpec spec = hostSpec({"sleep", "30"});
  spec.postStart = {"/bin/sh", "-c", "echo poststart=$(id -u) in $(pwd)"};
  spec.runAsUid = 65534;
  spec.runAsGid = 65534;
  agent.runner->converge({{k, true, spec}});
  REQUIRE(agent.waitOutput(k, "poststart=65534 in " + agent.dir(k) + "/work\n"));
  auto target = agent.runner->execTarget(k);
  for (int i = 0; i < 100 && !target; ++i) {
    agent.runner->tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    target = agent.runner->execTarget(k);
  }
  REQUIRE(target);
  int pipeFds[2];
  REQUIRE(::pipe(pipeFds) == 0);
  ExecAttach io;
  io.outFd = pipeFds[1];
  auto h = target->driver->execAttached(k, target->dir, {"/bin/sh", "-c", "id -u; pwd"}, io);
  ::close(pipeFds[1]);
  REQUIRE(h);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(pipeFds[0]);
  CHECK(got == "65534\n" + agent.dir(k) + "/work\n");
}

TEST_CASE("host replica: a uid without a gid is refused with the reason") {
  Agent agent;
  ReplicaKey k{4, 0};
  ReplicaSpec spec = hostSpec({"true"});
  spec.runAsUid = 1000;
  agent.runner->converge({{k, true, spec}});
  ReplicaReport r = agent.waitEnded(k);
  CHECK(r.state == yard::ReplicaState::Exited);
  CHECK(r.exitCode == 127);
  CHECK_THAT(r.reason, Catch::Contains("run as uid 1000 gid -1: both must be set"));
}

TEST_CASE("host replica: a data directory its owner cannot pass through fails it with the directory named") {
  if (::geteuid() != 0) {
    WARN("skipped: running as another user needs root");
    return;
  }
  Agent agent;
  ::chmod(agent.data.c_str(), 0700);
  ReplicaKey k{5, 0};
  ReplicaSpec spec = hostSpec({"true"});
  spec.runAsUid = 65534;
  spec.runAsGid = 65534;
  agent.runner->converge({{k, true, spec}});
  ReplicaReport r = agent.waitEnded(k);
  CHECK(r.exitCode == 127);
  CHECK_THAT(r.reason, Catch::Contains(agent.data + " (mode 0700) does not let uid 65534 through"));
}

TEST_CASE("host replica: who it runs as survives in the spec on disk (what a restarted agent reads)") {
  ReplicaSpec spec = hostSpec({"true"});
  auto unmapped = decodeSpec(encodeSpec(spec));
  REQUIRE(unmapped);
  CHECK(unmapped.value().runAsUid == -1);
  CHECK(unmapped.value().runAsGid == -1);
  spec.runAsUid = 1001;
  spec.runAsGid = 100;
  spec.owner = "alice";
  auto mapped = decodeSpec(encodeSpec(spec));
  REQUIRE(mapped);
  CHECK(mapped.value().runAsUid == 1001);
  CHECK(mapped.value().runAsGid == 100);
  CHECK(mapped.value().owner == "alice");
}

TEST_CASE("host replica: ${YARD_WORK_DIR} is a directory its user may write (OpenMPI's shared-memory segments)") {
  if (::geteuid() != 0) {
    WARN("skipped: running as another user needs root");
    return;
  }
  Agent agent;
  // What the master gives OpenMPI's host workers (master/frameworks/openmpi.cpp): ranks run as
  // the job's owner create their vader segments there. It was ${YARD_REPLICA_DIR}, root's
  // 0711 directory: "open(2) Permission denied" for every job not run as root.
  const std::string script =
      "echo dir=$OMPI_MCA_btl_vader_backing_directory;"
      "touch $OMPI_MCA_btl_vader_backing_directory/vader_segment.node.1.0 && echo segment-ok;"
      "touch $YARD_REPLICA_DIR/vader_segment.node.1.0 2>/dev/null && echo replica-dir-writable || "
      "echo replica-dir-not-writable";
  ReplicaSpec spec = hostSpec({"/bin/sh", "-c", script});
  spec.env = {{"OMPI_MCA_btl_vader_backing_directory", "${YARD_WORK_DIR}"}, {"YARD_REPLICA_DIR", "${YARD_REPLICA_DIR}"}};
  ReplicaSpec owned = spec;
  owned.runAsUid = 65534;
  owned.runAsGid = 65534;
  ReplicaKey mine{6, 0}, unmapped{7, 0};
  agent.runner->converge({{mine, true, owned}, {unmapped, true, spec}});

  ReplicaReport r = agent.waitEnded(mine);
  std::string out = slurp(agent.dir(mine) + "/output.log");
  INFO(out << slurp(agent.dir(mine) + "/launch.log") << r.reason);
  CHECK(r.exitCode == 0);
  CHECK(out == "dir=" + agent.dir(mine) + "/work\nsegment-ok\nreplica-dir-not-writable\n");
  struct stat st {};
  REQUIRE(::stat((agent.dir(mine) + "/work/vader_segment.node.1.0").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);

  // Unmapped, it runs as the agent's user, who owns the replica's directory: that is the place.
  ReplicaReport u = agent.waitEnded(unmapped);
  std::string outU = slurp(agent.dir(unmapped) + "/output.log");
  INFO(outU << u.reason);
  CHECK(u.exitCode == 0);
  CHECK(outU == "dir=" + agent.dir(unmapped) + "\nsegment-ok\nreplica-dir-writable\n");
}
