// The agent's metrics from a real Runner driven by a fake driver and a fake clock (replicas by
// state and driver, per-replica usage, restarts and OOM kills, start latency), and the GPU
// families from NVML stood in for by fake entry points, so the GPU path runs without a GPU.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "agent/node/gpu_stats.h"
#include "agent/node/metrics.h"
#include "agent/daemon/collectors.h"
#include "agent/runner/runner.h"
#include "common/metrics/exposition.h"

using namespace yard;
using namespace yard::agent;

namespace {

struct FakeDriver : Driver {
  std::map<ReplicaKey, DriverStatus> status;
  std::map<ReplicaKey, ReplicaUsage> usage;
  std::string name() const override { return "host"; }
  Result<bool> start(const ReplicaKey& k, const ReplicaSpec&, const std::string&) override {
    status[k] = DriverStatus{};
    return Result<bool>::ok(true);
  }
  DriverStatus inspect(const ReplicaKey& k, const std::string&) override { return status[k]; }
  void signal(const ReplicaKey&, const std::string&, int) override {}
  Result<std::unique_ptr<ExecHandle>> exec(const ReplicaKey&, const std::string&, const std::vector<std::string>&, int,
                                           int) override {
    return Result<std::unique_ptr<ExecHandle>>::fail("no exec here");
  }
  Result<ReplicaUsage> stats(const ReplicaKey& k) override { return Result<ReplicaUsage>::ok(usage[k]); }
  void destroy(const ReplicaKey&, const std::string&) override {}
  DriverStatus recover(const ReplicaKey& k, const ReplicaSpec&, const std::string&) override { return status[k]; }
};

ReplicaSpec spec(int32_t index) {
  ReplicaSpec s;
  s.job = "train-job";
  s.task = "train";
  s.role = "worker";
  s.index = index;
  s.image = "host";
  s.argv = {"sleep", "1"};
  s.memoryBytes = 256 << 20;
  return s;
}

// The value of the sample line `series` (`name{labels}`) in `text`, or -1.
double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// A fake NVML: two GPUs; GPU 1 cannot say its utilisation.
int fakeInits = 0, fakeShutdowns = 0;
int fakeInit() { return ++fakeInits, 0; }
int fakeShutdown() { return ++fakeShutdowns, 0; }
int fakeCount(unsigned* n) { return *n = 2, 0; }
int fakeHandle(unsigned i, void** dev) { return *dev = reinterpret_cast<void*>(uintptr_t(i + 1)), 0; }
int fakeUuid(void* dev, char* buf, unsigned len) {
  snprintf(buf, len, "GPU-fake-%d", int(reinterpret_cast<uintptr_t>(dev)) - 1);
  return 0;
}
int fakeUtilization(void* dev, NvmlCalls::Utilization* u) {
  if (reinterpret_cast<uintptr_t>(dev) == 2) return 3;  // NVML_ERROR_NOT_SUPPORTED
  u->gpu = 87;
  u->memory = 40;
  return 0;
}
int fakeMemory(void*, NvmlCalls::Memory* m) {
  m->total = 80ull << 30;
  m->used = 20ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int failingInit() { return 9; }  // NVML_ERROR_DRIVER_NOT_LOADED

NvmlCalls fakeNvml() {
  NvmlCalls c;
  c.init = fakeInit;
  c.shutdown = fakeShutdown;
  c.count = fakeCount;
  c.handle = fakeHandle;
  c.uuid = fakeUuid;
  c.utilization = fakeUtilization;
  c.memory = fakeMemory;
  return c;
}

}  // namespace

TEST_CASE("agent metrics: replicas by state and driver, usage per replica, starts, restarts, OOM kills") {
  char tmpl[] = "/tmp/yard-agent-metrics-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  FakeDriver driver;
  int64_t now = 10'000;
  Runner runner(Runner::Options{dir, true, "/usr/lib/yard"}, &driver, nullptr, [&now] { return now; }, nullptr);
  metrics::Registry registry;
  AgentMetrics m(registry);
  runner.metrics = &m;
  addAgentCollectors(registry, runner, {"host", "containerd"}, 0, nullptr);

  ReplicaKey a{1, 0}, b{2, 3};  // b is worker 1's fourth attempt
  runner.converge({{a, true, spec(0)}, {b, true, spec(1)}});
  std::string text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_replicas{driver=\"host\",state=\"Starting\"}") == 2);
  CHECK(valueOf(text, "yard_replicas{driver=\"containerd\",state=\"Running\"}") == 0);  // zeros for every driver
  CHECK(valueOf(text, "yard_replica_starts_total{driver=\"host\"}") == 2);

  now += 1500;  // both run 1.5 s after their start
  driver.status[a].phase = DriverStatus::Phase::Running;
  driver.status[b].phase = DriverStatus::Phase::Running;
  driver.usage[a] = {4'000'000'000, 100 << 20};  // 4 s of CPU so far, 100 MiB
  runner.tick();  // Running
  runner.tick();  // sampled
  text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_replicas{driver=\"host\",state=\"Running\"}") == 2);
  CHECK(valueOf(text, "yard_replica_start_duration_seconds_count{driver=\"host\"}") == 2);
  CHECK(valueOf(text, "yard_replica_start_duration_seconds_sum{driver=\"host\"}") == Approx(3.0));
  CHECK(valueOf(text, "yard_replica_start_duration_seconds_bucket{driver=\"host\",le=\"1\"}") == 0);
  CHECK(valueOf(text, "yard_replica_start_duration_seconds_bucket{driver=\"host\",le=\"2.5\"}") == 2);
  std::string w0 = "{job=\"train-job\",task=\"train\",role=\"worker\",index=\"0\"}";
  std::string w1 = "{job=\"train-job\",task=\"train\",role=\"worker\",index=\"1\"}";
  CHECK(valueOf(text, "yard_replica_cpu_seconds_total" + w0) == 4);
  CHECK(valueOf(text, "yard_replica_memory_bytes" + w0) == 100 << 20);
  CHECK(valueOf(text, "yard_replica_memory_limit_bytes" + w0) == 256 << 20);
  CHECK(valueOf(text, "yard_replica_restarts" + w0) == 0);
  CHECK(valueOf(text, "yard_replica_restarts" + w1) == 3);

  driver.status[a] = DriverStatus{DriverStatus::Phase::Exited, 137, 9, true, EndCause::None, ""};  // OOM killed
  runner.tick();
  text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_replica_oom_kills_total{driver=\"host\"}") == 1);
  CHECK(valueOf(text, "yard_replica_oom_killed_attempts" + w0) == 1);
  CHECK(valueOf(text, "yard_replicas{driver=\"host\",state=\"OOMKilled\"}") == 1);
  CHECK(valueOf(text, "yard_replica_memory_bytes" + w0) == -1);  // ended: no usage any more
  CHECK(valueOf(text, "yard_replica_restarts" + w0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GPU metrics from NVML, with NVML stood in for: utilisation and memory per GPU") {
  fakeInits = fakeShutdowns = 0;
  std::string why;
  {
    auto gpus = GpuStats::open(fakeNvml(), nullptr, &why);
    REQUIRE(gpus);
    CHECK(fakeInits == 1);
    auto samples = gpus->sample();
    REQUIRE(samples.size() == 2);
    CHECK(samples[0].uuid == "GPU-fake-0");
    CHECK(*samples[0].utilisation == Approx(0.87));
    CHECK_FALSE(samples[1].utilisation.has_value());
    CHECK(*samples[1].memoryUsedBytes == 20ull << 30);

    metrics::Registry registry;
    char tmpl[] = "/tmp/yard-agent-metrics-XXXXXX";
    std::string dir = mkdtemp(tmpl);
    Runner runner(Runner::Options{dir, true, ""}, nullptr, nullptr, [] { return int64_t{0}; }, nullptr);
    addAgentCollectors(registry, runner, {"host"}, 2, gpus.get());
    std::string text = metrics::render(registry.collect());
    CHECK(valueOf(text, "yard_gpus") == 2);
    CHECK(valueOf(text, "yard_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-fake-0\"}") == Approx(0.87));
    CHECK(valueOf(text, "yard_gpu_utilization_ratio{gpu=\"1\",uuid=\"GPU-fake-1\"}") == -1);  // not supported: absent
    CHECK(valueOf(text, "yard_gpu_memory_used_bytes{gpu=\"1\",uuid=\"GPU-fake-1\"}") == double(20ull << 30));
    CHECK(valueOf(text, "yard_gpu_memory_total_bytes{gpu=\"0\",uuid=\"GPU-fake-0\"}") == double(80ull << 30));
    std::filesystem::remove_all(dir);
  }
  CHECK(fakeShutdowns == 1);  // NVML is shut down with the monitor

  NvmlCalls broken = fakeNvml();
  broken.init = failingInit;
  CHECK_FALSE(GpuStats::open(broken, nullptr, &why));
  CHECK_THAT(why, Catch::Contains("nvmlInit failed"));
  NvmlCalls partial = fakeNvml();
  partial.utilization = nullptr;
  CHECK_FALSE(GpuStats::open(partial, nullptr, &why));
  CHECK_THAT(why, Catch::Contains("entry point"));
}

TEST_CASE("without a GPU or NVML: GPU count 0 and no per-GPU families") {
  metrics::Registry registry;
  char tmpl[] = "/tmp/yard-agent-metrics-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  Runner runner(Runner::Options{dir, true, ""}, nullptr, nullptr, [] { return int64_t{0}; }, nullptr);
  addAgentCollectors(registry, runner, {"host"}, 0, nullptr);
  std::string text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_gpus") == 0);
  CHECK_THAT(text, !Catch::Contains("yard_gpu_utilization_ratio"));
  // On this machine: the real loader either finds NVML or says why not; it never crashes.
  std::string why;
  auto real = GpuStats::openNvml(&why);
  CHECK((real != nullptr || !why.empty()));
  std::filesystem::remove_all(dir);
}
