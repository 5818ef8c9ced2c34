// The containerd driver's start worker (start() runs it on a thread of its own): the image,
// the OCI spec, the container and its snapshot, its task, and the guard beside it.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent/drivers/containerd/containerd_internal.h"
#include "agent/drivers/host/host_driver.h"
#include "agent/shim/no_follow.h"

namespace yard::agent {

using namespace containerd_detail;

namespace {

namespace fs = std::filesystem;
using containerd::Client;

bool failed(const StartFailure& f) { return f.cause != EndCause::None; }

// Only the assigned GPUs' device nodes exist in the container, so CUDA numbers them 0..n-1
// there; NVIDIA_VISIBLE_DEVICES keeps naming them for an NVIDIA runtime hook.
void renumberCudaDevices(const std::string& gpus, std::vector<std::string>& env) {
  std::string visible;
  size_t n = static_cast<size_t>(std::count(gpus.begin(), gpus.end(), ',')) + 1;
  for (size_t i = 0; i < n; ++i) visible += (i ? "," : "") + std::to_string(i);
  for (auto& e : env)
    if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) e = "CUDA_VISIBLE_DEVICES=" + visible;
}

}  // namespace

StartFailure ContainerdDriver::startWorker(ReplicaKey key, ReplicaSpec spec, std::string dir,
                                          const std::atomic<bool>& cancel) {
  Launch l(std::move(key), std::move(spec), std::move(dir), cancel);
  if (auto f = findImage(l); failed(f)) return f;
  if (cancel) return cancelled();
  l.runtime = l.spec.vm ? options_.vmRuntime : options_.runtime;
  if (l.runtime.empty()) return StartFailure::agent("this node has no VM runtime for a type: vm job");
  if (auto f = writeSpec(l); failed(f)) return f;
  if (auto f = createContainer(l); failed(f)) return f;
  if (cancel) return cancelled();
  if (auto f = startTask(l); failed(f)) return f;
  if (auto w = writeFileAtomic(l.dir + "/" + kContainerFile, l.id); !w) return StartFailure::agent(w.error());
  return StartFailure::none();
}

StartFailure ContainerdDriver::writeSpec(Launch& l) {
  const auto& config = l.image;
  auto made = containerProcess(l.spec, {config.env, config.entrypoint, config.cmd, config.workingDir, config.user});
  if (!made) return StartFailure::agent(made.error());
  OciProcess process = std::move(made).value();
  OciOptions oci;
  if (cgroups_) oci.cgroupsPath = "/" + cgroups_->parent() + "/" + l.key.name();
  std::string uuids;
  for (const auto& [name, value] : l.spec.env)
    if (name == "NVIDIA_VISIBLE_DEVICES") uuids = value;
  auto devices = gpuDevices(gpuDeviceMinors(l.spec.gpus, uuids, options_.procRoot), options_.devRoot);
  if (!devices) return StartFailure::agent(devices.error());
  oci.devices = devices.value();
  if (!l.spec.gpus.empty()) renumberCudaDevices(l.spec.gpus, process.env);
  // The host's network: its names and resolver too (what `ctr run --net-host` does).
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf"})
    if (fs::exists(f)) oci.extraMounts.push_back({f, f, true});
  l.specJson = ociSpecJson(l.spec, process, oci);
  if (auto w = writeFileAtomic(l.dir + "/" + kExecBaseFile, encodeExecBase(process)); !w)
    return StartFailure::agent(w.error());
  if (auto w = writeFileAtomic(l.dir + "/config.json", l.specJson); !w) return StartFailure::agent(w.error());
  return StartFailure::none();
}

StartFailure ContainerdDriver::createContainer(Launch& l) {
  l.id = containerId(l.key);
  Client::ContainerSpec c;
  c.id = l.id;
  c.image = l.ref;
  c.runtime = l.runtime;
  c.snapshotter = options_.snapshotter;
  c.snapshotKey = l.id;
  c.ociSpecJson = l.specJson;
  c.labels = {{"yard.node", options_.node}, {"yard.replica", l.key.name()}, {"yard.job", l.spec.job},
              {"yard.task", l.spec.task}};
  // The container first: it references the snapshot, which keeps containerd's garbage
  // collector off it once prepared.
  auto created = patiently([&] { return client_->createContainer(options_.ns, c); }, l.cancel);
  if (!created) return StartFailure::agent(created.error());
  auto prepare = [&] { return client_->prepareSnapshot(options_.ns, options_.snapshotter, l.id, l.image.chainId); };
  auto mounts = patiently(prepare, l.cancel);
  if (!mounts && mounts.error().find("(gRPC code 5)") != std::string::npos) {
    // The image is registered but its root is not unpacked (a pull was interrupted while
    // unpacking): pull again, which unpacks what is missing.
    if (log) log("replica " + l.key.name() + ": " + l.ref + " has no unpacked root (" + mounts.error() + "): pulling it again");
    auto pulled = pull(l.ref, l.dir, l.cancel, true);
    if (l.cancel) return cancelled();
    if (!pulled) return StartFailure::imagePull(l.ref + ": " + pulled.error());
    mounts = patiently(prepare, l.cancel);
  }
  if (!mounts) return StartFailure::agent(mounts.error());
  l.rootfs = std::move(mounts).value();
  return StartFailure::none();
}

StartFailure ContainerdDriver::startTask(Launch& l) {
  // runc mounts the datasets when the task is created, following links as it resolves their
  // paths: refuse one with a symbolic link in its path now, as yard-shim does for host
  // replicas (docs/security.md, "Dataset roots"). Only the moments between this check and
  // runc's mount remain for a swap.
  for (const auto& m : l.spec.mounts)
    if (auto why = shim::checkNoFollow(m.hostPath); !why.empty())
      return StartFailure::agent("mount on " + m.path + ": " + why);
  std::string log = "file://" + l.dir + "/output.log";
  auto task = patiently([&] { return client_->createTask(options_.ns, l.id, l.rootfs, {log, log}); }, l.cancel);
  if (!task) return StartFailure::agent(task.error());
  if (l.cancel) return cancelled();
  auto started = patiently([&] { return client_->start(options_.ns, l.id); }, l.cancel);
  if (!started) return StartFailure::agent(started.error());
  if (options_.shim.empty()) return StartFailure::none();
  auto guarded = startGuard(l.key, l.dir, started.value());
  if (guarded) return StartFailure::none();
  // A container that already ended needs no guard (its pid may be another process's by now,
  // which the guard refuses). Unguarded, a running one would outlive a dead agent's lease
  // (two copies of a rank once the master re-places it): it does not run at all.
  auto p = client_->process(options_.ns, l.id);
  if (!p || !p.value() || p.value()->status != Status::Stopped) {
    client_->kill(options_.ns, l.id, SIGKILL, true);
    return StartFailure::agent("yard-shim guard: " + guarded.error());
  }
  return StartFailure::none();
}

Result<bool> ContainerdDriver::startGuard(const ReplicaKey& key, const std::string& dir, uint32_t pid) {
  using R = Result<bool>;
  std::vector<std::string> argv = {options_.shim, "guard", "--dir", dir, "--pid", std::to_string(pid)};
  if (cgroups_)
    for (const auto& f : cgroups_->procsFiles(key.name())) {
      argv.push_back("--cgroup-procs");
      argv.push_back(f);
    }
  std::string logPath = dir + "/" + kGuardLog;
  int out = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto launcher = spawnProcess(argv, out);
  if (out >= 0) ::close(out);
  if (!launcher) return R::fail(launcher.error());
  // The launcher exits as soon as the guard runs (milliseconds); bounded all the same.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(launcher.value(), &status, WNOHANG);
    if (r == launcher.value()) break;
    if (r < 0) return R::fail(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(launcher.value(), SIGKILL);
      ::waitpid(launcher.value(), nullptr, 0);
      return R::fail("it did not start within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return R::ok(true);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return R::ok(false);  // it has already ended
  auto text = readFile(logPath);
  std::string why = lastLine(text ? text.value() : "");
  return R::fail(why.empty() ? options_.shim + " guard exited " + std::to_string(WEXITSTATUS(status)) : why);
}

}  // namespace yard::agent
