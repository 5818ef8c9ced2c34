// The runner's state machines against a recording driver and a fake clock: convergence,
// the stop sequence (preStop, SIGTERM, grace, SIGKILL), postStart failure, OOM and removal,
// and re-adoption from disk after a restart.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/runner/runner.h"

using namespace yard::agent;
using yard::Result;
namespace fs = std::filesystem;

namespace {

struct FakeExec : ExecHandle {
  std::optional<int> result;
  bool killed = false;
  std::optional<int> poll() override { return result; }
  void kill() override { killed = true; }
};

struct FakeDriver : Driver {
  std::map<ReplicaKey, DriverStatus> status;
  std::vector<std::string> calls;
  std::vector<FakeExec*> execs;
  std::string name() const override { return "fake"; }
  Result<bool> start(const ReplicaKey& k, const ReplicaSpec&, const std::string&) override {
    calls.push_back("start " + k.name());
    status[k] = DriverStatus{};
    return Result<bool>::ok(true);
  }
  DriverStatus inspect(const ReplicaKey& k, const std::string&) override { return status[k]; }
  void signal(const ReplicaKey& k, const std::string&, int sig) override {
    calls.push_back("signal " + k.name() + " " + std::to_string(sig));
  }
  Result<std::unique_ptr<ExecHandle>> exec(const ReplicaKey& k, const std::string&, const std::vector<std::string>& argv,
                                           int, int) override {
    calls.push_back("exec " + k.name() + " " + argv[0]);
    auto e = std::make_unique<FakeExec>();
    execs.push_back(e.get());
    return Result<std::unique_ptr<ExecHandle>>::ok(std::move(e));
  }
  Result<ReplicaUsage> stats(const ReplicaKey&) override { return Result<ReplicaUsage>::ok(ReplicaUsage{}); }
  void destroy(const ReplicaKey& k, const std::string&) override { calls.push_back("destroy " + k.name()); }
  bool carriesStops = false;  // like the host driver's shim
  bool stopAt(const ReplicaKey& k, const std::string&, int64_t termAt, int64_t killAt) override {
    calls.push_back("stopAt " + k.name() + " " + std::to_string(termAt) + " " + std::to_string(killAt));
    return carriesStops;
  }
  DriverStatus recover(const ReplicaKey& k, const ReplicaSpec&, const std::string&) override {
    calls.push_back("recover " + k.name());
    return status[k];
  }
  void set(const ReplicaKey& k, DriverStatus::Phase p, int code = 0, bool oom = false) {
    DriverStatus s;
    s.phase = p;
    s.exitCode = code;
    s.oomKilled = oom;
    status[k] = s;
  }
  bool called(const std::string& c) const { return std::find(calls.begin(), calls.end(), c) != calls.end(); }
};

struct Fixture {
  std::string dir;
  FakeDriver driver;
  int64_t now = 1000;
  std::unique_ptr<Runner> runner;
  int changes = 0;
  Fixture() {
    char tmpl[] = "/tmp/yard-runner-XXXXXX";
    dir = mkdtemp(tmpl);
    make();
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  void make() {
    runner = std::make_unique<Runner>(Runner::Options{dir, true, "/usr/lib/yard"}, &driver, nullptr, [this] { return now; }, nullptr);
    runner->onChange = [this] { changes++; };
  }
  static ReplicaSpec spec() {
    ReplicaSpec s;
    s.job = "j";
    s.task = "t";
    s.role = "worker";
    s.image = "host";
    s.argv = {"sleep", "1"};
    s.memoryBytes = 64 << 20;
    s.stopGraceMs = 1000;
    return s;
  }
  void want(std::vector<DesiredReplica> d) { runner->converge(d); }
  std::string state(const ReplicaKey& k) {
    for (const auto& r : runner->reports())
      if (r.key == k) return std::string(toText(r.state));
    return "absent";
  }
  ReplicaReport report(const ReplicaKey& k) {
    for (const auto& r : runner->reports())
      if (r.key == k) return r;
    FAIL("no report");
    return {};
  }
};

DesiredReplica run(ReplicaKey k, ReplicaSpec s = Fixture::spec()) { return {k, true, s}; }

}  // namespace

TEST_CASE("runner: starts what is wanted once, reports Starting, Running, Exited") {
  Fixture f;
  ReplicaKey k{7, 0};
  f.want({run(k)});
  CHECK(f.driver.called("start 7-0"));
  CHECK(f.state(k) == "Starting");
  CHECK(std::filesystem::exists(f.dir + "/replicas/7-0/spec"));
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  CHECK(f.state(k) == "Running");
  f.driver.set(k, DriverStatus::Phase::Exited, 3);
  f.runner->tick();
  CHECK(f.state(k) == "Exited");
  CHECK(f.report(k).exitCode == 3);
  CHECK(f.driver.called("destroy 7-0"));
  // Still wanted by a stale answer: an ended attempt is never started again.
  f.driver.calls.clear();
  f.want({run(k)});
  CHECK_FALSE(f.driver.called("start 7-0"));
  CHECK(f.state(k) == "Exited");
}

TEST_CASE("runner: a stop runs preStop, then SIGTERM, then SIGKILL after the grace period") {
  Fixture f;
  ReplicaKey k{1, 2};
  auto s = Fixture::spec();
  s.preStop = {"sh", "-c", "touch /ckpt/stop"};
  f.want({run(k, s)});
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.want({{k, false, std::nullopt}});  // the master ended it (cancel)
  f.runner->tick();
  CHECK(f.driver.called("exec 1-2 sh"));
  CHECK_FALSE(f.driver.called("signal 1-2 15"));
  f.driver.execs.back()->result = 0;
  f.runner->tick();
  CHECK(f.driver.called("signal 1-2 15"));
  CHECK_FALSE(f.driver.called("signal 1-2 9"));
  f.now += 1001;
  f.runner->tick();
  CHECK(f.driver.called("signal 1-2 9"));
  f.driver.set(k, DriverStatus::Phase::Exited, 137);
  f.runner->tick();
  CHECK(f.state(k) == "Killed");
  CHECK(f.report(k).reason == "stopped: the master ended this attempt");
  // Kept (logs) while listed; removed with its directory once no longer listed.
  CHECK(std::filesystem::exists(f.dir + "/replicas/1-2"));
  f.want({});
  f.runner->tick();
  CHECK(f.state(k) == "absent");
  CHECK_FALSE(std::filesystem::exists(f.dir + "/replicas/1-2"));
}

TEST_CASE("runner: a preStop that overruns the grace period does not delay SIGTERM for ever") {
  Fixture f;
  ReplicaKey k{1, 0};
  auto s = Fixture::spec();
  s.preStop = {"sleep", "100"};
  f.want({run(k, s)});
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.want({});
  f.runner->tick();
  f.now += 1001;
  f.runner->tick();
  CHECK(f.driver.called("signal 1-0 15"));
}

TEST_CASE("runner: a failing postStart fails the replica - Running only after postStart succeeds") {
  Fixture f;
  ReplicaKey ok{1, 0}, bad{2, 0};
  auto s = Fixture::spec();
  s.postStart = {"true"};
  f.want({run(ok, s), run(bad, s)});
  f.driver.set(ok, DriverStatus::Phase::Running);
  f.driver.set(bad, DriverStatus::Phase::Running);
  f.runner->tick();
  CHECK(f.state(ok) == "Starting");
  f.driver.execs[0]->result = 0;
  f.driver.execs[1]->result = 4;
  f.runner->tick();
  CHECK(f.state(ok) == "Running");
  CHECK(f.driver.called("signal 2-0 9"));
  f.driver.set(bad, DriverStatus::Phase::Exited, 137);
  f.runner->tick();
  CHECK(f.state(bad) == "Killed");
  CHECK(f.report(bad).reason == "agent: postStart hook exited 4");
}

TEST_CASE("runner: a postStart killed as its workload ends on its own leaves the workload's end to decide") {
  Fixture f;
  ReplicaKey quick{1, 0}, stuck{2, 0};
  auto s = Fixture::spec();
  s.postStart = {"true"};
  f.want({run(quick, s), run(stuck, s)});
  f.driver.set(quick, DriverStatus::Phase::Running);
  f.driver.set(stuck, DriverStatus::Phase::Running);
  f.runner->tick();
  // yard-shim swept the workload's processes, the hook among them: SIGKILL, 128 + 9.
  f.driver.execs[0]->result = 137;
  f.driver.execs[1]->result = 137;
  f.runner->tick();
  CHECK_FALSE(f.driver.called("signal 1-0 9"));
  CHECK_FALSE(f.driver.called("signal 2-0 9"));
  // The workload's own exit is recorded a moment later: it decides.
  f.driver.set(quick, DriverStatus::Phase::Exited, 0);
  f.now += 200;
  f.runner->tick();
  CHECK(f.state(quick) == "Exited");
  CHECK(f.report(quick).exitCode == 0);
  CHECK(f.report(quick).reason.empty());
  // A workload still running a second later: the hook failed.
  f.now += 1000;
  f.runner->tick();
  CHECK(f.driver.called("signal 2-0 9"));
  f.driver.set(stuck, DriverStatus::Phase::Exited, 137);
  f.runner->tick();
  CHECK(f.state(stuck) == "Killed");
  CHECK(f.report(stuck).reason == "agent: postStart hook exited 137");
}

TEST_CASE("runner: OOM, lost processes and refused host tasks are reported as such") {
  Fixture f;
  ReplicaKey oom{1, 0}, lost{2, 0};
  f.want({run(oom), run(lost)});
  f.driver.set(oom, DriverStatus::Phase::Exited, 137, true);
  f.driver.set(lost, DriverStatus::Phase::Lost);
  f.runner->tick();
  CHECK(f.state(oom) == "OOMKilled");
  CHECK(f.report(oom).reason == "memory limit of 64Mi exceeded");
  CHECK(f.state(lost) == "Lost");

  Fixture g;
  g.runner = std::make_unique<Runner>(Runner::Options{g.dir, false, ""}, &g.driver, nullptr, [&g] { return g.now; }, nullptr);
  ReplicaKey k{3, 0};
  g.want({run(k)});
  CHECK(g.state(k) == "Exited");
  CHECK(g.report(k).exitCode == 127);
  CHECK(g.report(k).reason == "agent: this node does not allow host tasks (image: host)");
  ReplicaKey c{4, 0};
  auto img = Fixture::spec();
  img.image = "registry.local/busybox:1";
  g.want({run(c, img)});
  CHECK(g.report(c).reason == "agent: this node has no container runtime for image registry.local/busybox:1");
}

TEST_CASE("runner: a restarted agent re-adopts what runs and remembers what it was stopping") {
  Fixture f;
  ReplicaKey running{1, 0}, stopping{2, 0}, done{3, 1};
  f.want({run(running), run(stopping), run(done)});
  for (auto k : {running, stopping, done}) f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.want({run(running), {stopping, false, std::nullopt}, run(done)});
  f.runner->tick();  // stopping: SIGTERM sent
  // The agent dies; meanwhile `stopping` ends from the SIGTERM and `done` exits on its own.
  f.driver.set(stopping, DriverStatus::Phase::Exited, 143);
  f.driver.set(done, DriverStatus::Phase::Exited, 0);
  f.driver.calls.clear();
  f.make();
  f.runner->recover();
  CHECK(f.driver.called("recover 1-0"));
  CHECK_FALSE(f.driver.called("start 1-0"));
  CHECK(f.state(running) == "Running");
  CHECK(f.state(stopping) == "Killed");
  CHECK(f.state(done) == "Exited");
  CHECK(f.report(done).exitCode == 0);
  f.want({run(running), {stopping, false, std::nullopt}, {done, false, std::nullopt}});
  CHECK_FALSE(f.driver.called("start 1-0"));
}

TEST_CASE("runner: the driver carries the stop out - preStop and SIGTERM share the grace, SIGKILL is the backstop") {
  Fixture f;
  f.driver.carriesStops = true;
  ReplicaKey k{1, 0};
  auto s = Fixture::spec();
  s.preStop = {"sh", "-c", "touch /ckpt/stop"};
  f.want({run(k, s)});
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.want({{k, false, std::nullopt}});
  f.runner->tick();  // t=1000: preStop runs; SIGTERM waits for it, SIGKILL at 2000 whatever happens
  CHECK(f.driver.called("exec 1-0 sh"));
  CHECK(f.driver.called("stopAt 1-0 2000 2000"));
  f.now = 1400;
  f.driver.execs.back()->result = 0;
  f.runner->tick();
  CHECK(f.driver.called("stopAt 1-0 1400 2000"));  // preStop ended: SIGTERM now
  CHECK_FALSE(f.driver.called("signal 1-0 15"));   // the driver sends it, not the runner
  f.now = 2500;
  f.runner->tick();
  CHECK_FALSE(f.driver.called("signal 1-0 9"));  // the driver's SIGKILL was due at 2000...
  f.now = 3000;
  f.runner->tick();
  CHECK(f.driver.called("signal 1-0 9"));  // ...and the runner's backstop follows a second later
}

TEST_CASE("runner: a replica whose lease runs out is fenced, reported Killed (NodeLost) and never started again") {
  Fixture f;
  ReplicaKey k{5, 0}, late{6, 0};
  f.runner->renewLeases({5000, 300, 4000});  // an answer to a request sent at t=1000
  f.want({run(k)});
  CHECK(yard::agent::readFile(f.dir + "/replicas/5-0/lease").value() == "5000 300\n");  // before the start
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.now = 3000;
  f.runner->renewLeases({6000, 300, 4000});
  CHECK(yard::agent::readFile(f.dir + "/replicas/5-0/lease").value() == "6000 300\n");
  f.now = 5999;
  f.runner->tick();
  CHECK_FALSE(f.driver.called("signal 5-0 15"));
  f.now = 6000;
  f.runner->tick();
  CHECK(f.driver.called("signal 5-0 15"));
  CHECK_FALSE(f.driver.called("signal 5-0 9"));
  f.now = 6300;  // the lease's grace, not the replica's 1 s stop grace
  f.runner->tick();
  CHECK(f.driver.called("signal 5-0 9"));
  // A late answer does not bring a fenced replica back.
  f.runner->renewLeases({9000, 300, 4000});
  CHECK(yard::agent::readFile(f.dir + "/replicas/5-0/lease").value() == "6000 300\n");
  f.driver.set(k, DriverStatus::Phase::Exited, 137);
  f.runner->tick();
  CHECK(f.state(k) == "Killed");
  CHECK(f.report(k).cause == yard::EndCause::NodeLost);
  CHECK(f.report(k).reason == "fenced: no answer from the master for 4s");
  f.driver.calls.clear();
  f.want({run(k), run(late)});
  CHECK_FALSE(f.driver.called("start 5-0"));
  CHECK(f.driver.called("start 6-0"));  // a new attempt runs as usual
  CHECK(yard::agent::readFile(f.dir + "/replicas/6-0/lease").value() == "9000 300\n");
}

TEST_CASE("runner: a restarted agent knows the leases from disk and fences what outlived its lease") {
  Fixture f;
  ReplicaKey k{1, 0};
  f.runner->renewLeases({3000, 500, 2000});
  f.want({run(k)});
  f.driver.set(k, DriverStatus::Phase::Running);
  f.runner->tick();
  f.make();  // the agent restarts, and reaches no master
  f.runner->recover();
  CHECK(f.state(k) == "Running");
  f.now = 3000;
  f.runner->tick();
  CHECK(f.driver.called("signal 1-0 15"));
  f.make();  // and again, mid-stop: still fenced, then reported as such
  f.runner->recover();
  f.driver.set(k, DriverStatus::Phase::Exited, 143);
  f.runner->tick();
  CHECK(f.state(k) == "Killed");
  CHECK(f.report(k).cause == yard::EndCause::NodeLost);
  CHECK_THAT(f.report(k).reason, Catch::StartsWith("fenced: no answer from the master"));
}

TEST_CASE("runner: a replica its shim fenced is Killed (NodeLost) - an empty lease removes the lease files") {
  Fixture f;
  ReplicaKey k{1, 0}, other{2, 0};
  f.runner->renewLeases({9000, 500, 2000});
  f.want({run(k), run(other)});
  f.driver.set(k, DriverStatus::Phase::Running);
  f.driver.set(other, DriverStatus::Phase::Running);
  f.runner->tick();
  DriverStatus fenced;
  fenced.phase = DriverStatus::Phase::Exited;
  fenced.signal = 9;
  fenced.exitCode = 137;
  fenced.cause = yard::EndCause::NodeLost;
  fenced.reason = "fenced by yard-shim: lease expired at 9000";
  f.driver.status[k] = fenced;
  f.runner->tick();
  CHECK(f.state(k) == "Killed");
  CHECK(f.report(k).cause == yard::EndCause::NodeLost);
  CHECK(f.report(k).reason == "fenced by yard-shim: lease expired at 9000");
  f.runner->renewLeases({});  // a master that does not fence
  CHECK_FALSE(std::filesystem::exists(f.dir + "/replicas/2-0/lease"));
  f.now = 20000;
  f.runner->tick();
  CHECK(f.state(other) == "Running");
}

TEST_CASE("runner: stopAll stops every replica - anyLive says when all have ended") {
  Fixture f;
  ReplicaKey a{1, 0}, b{2, 0};
  f.want({run(a), run(b)});
  f.driver.set(a, DriverStatus::Phase::Running);
  f.driver.set(b, DriverStatus::Phase::Exited, 0);
  f.runner->tick();
  CHECK(f.runner->anyLive());
  CHECK(f.runner->longestStopGraceMs() == 1000);
  f.runner->stopAll("stopped: yard-agent is exiting");
  f.runner->tick();
  CHECK(f.driver.called("signal 1-0 15"));
  f.driver.set(a, DriverStatus::Phase::Exited, 143);
  f.runner->tick();
  CHECK_FALSE(f.runner->anyLive());
  CHECK(f.state(a) == "Killed");
  CHECK(f.report(a).reason == "stopped: yard-agent is exiting");
  CHECK(f.state(b) == "Exited");
}

TEST_CASE("replica files: an atomic write follows no link - at its name or at its temporary file") {
  // A host replica's user owns DIR/work, where the agent (root) writes the preemption notice:
  // links put there must not lead the write to another file (docs/security.md).
  char tmpl[] = "/tmp/yard-atomic-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string victim = dir + "/victim";
  {
    std::ofstream(victim) << "root's secret\n";
  }
  ::chmod(victim.c_str(), 0600);
  auto contents = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  fs::create_symlink(victim, dir + "/notice.tmp");  // the temporary file's name
  REQUIRE(yard::agent::writeFileAtomic(dir + "/notice", "YARD_PREEMPTED=1\n", 0644));
  CHECK(contents(victim) == "root's secret\n");
  CHECK(contents(dir + "/notice") == "YARD_PREEMPTED=1\n");
  CHECK_FALSE(fs::is_symlink(dir + "/notice"));
  CHECK((fs::status(dir + "/notice").permissions() & fs::perms::all) == static_cast<fs::perms>(0644));
  CHECK((fs::status(victim).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  fs::remove(dir + "/notice");
  fs::create_symlink(victim, dir + "/notice");  // the name itself: the link is replaced
  REQUIRE(yard::agent::writeFileAtomic(dir + "/notice", "again\n"));
  CHECK(contents(victim) == "root's secret\n");
  CHECK_FALSE(fs::is_symlink(dir + "/notice"));
  CHECK(contents(dir + "/notice") == "again\n");
  CHECK((fs::status(dir + "/notice").permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  fs::remove_all(dir);
}
