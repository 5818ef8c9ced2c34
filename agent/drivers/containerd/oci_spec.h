#pragma once
// The OCI runtime spec of a container replica (docs/containerd.md): runc's and containerd's
// safe defaults (pid, ipc, uts and mount namespaces; the host's network; the default
// capability set; no-new-privileges; masked and read-only kernel paths; a deny-all device
// list; a seccomp filter refusing kernel-reaching syscalls and new user namespaces), the replica's argv, environment and working directory over the image's, dataset bind
// mounts with read-only honoured, GPU device nodes, and the cgroup the agent made for it.
// Pure functions: what runs is decided here and unit-tested without containerd.

#include <cstdint>
#include <string>
#include <vector>

#include "agent/runner/replica.h"
#include "common/util/result.h"

namespace yard::agent {

// What the image says about running it (its config), as far as a container needs it.
struct ImageDefaults {
  std::vector<std::string> env, entrypoint, cmd;
  std::string workingDir, user;
};

// A device node to give the container (a GPU, /dev/nvidiactl, ...).
struct DeviceNode {
  std::string path;
  char type = 'c';
  int64_t major = 0, minor = 0;
};

struct OciOptions {
  std::string cgroupsPath;             // "/yard/node-a/12-0": the replica's group (made by the agent)
  std::vector<DeviceNode> devices;     // the GPUs assigned, plus the NVIDIA control nodes
  std::vector<HostMount> extraMounts;  // e.g. the host's /etc/hosts and /etc/resolv.conf (host network)
};

// The process a container runs: argv, env, cwd and uid/gid after the image's defaults.
struct OciProcess {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value
  std::string cwd;
  uint32_t uid = 0, gid = 0;
};

// The replica's command over the image's: a task's command replaces the image's entrypoint
// and cmd (Kubernetes' `command`); the image's environment comes first and the replica's
// (docs/wiring.md, then the user's) overrides it by name; the working dir is the task's, else
// the image's, else "/". Errors name what is wrong (no command at all, a non-numeric user).
Result<OciProcess> containerProcess(const ReplicaSpec& spec, const ImageDefaults& image);

// The whole runtime spec (JSON) for `process`.
std::string ociSpecJson(const ReplicaSpec& spec, const OciProcess& process, const OciOptions& options);
// The spec of an exec process (a hook, the exec channel) in that container: same
// environment, user and capabilities as its main process.
std::string ociProcessJson(const OciProcess& base, const std::vector<std::string>& argv);

// The /dev/nvidia<N> numbers of GPUs `gpus` (the node's indexes, "0,2") whose UUIDs are
// `uuids` (the same order, comma-separated, as in NVIDIA_VISIBLE_DEVICES): the driver's
// "Device Minor" of each UUID in <procRoot>/driver/nvidia/gpus/*/information, since NVIDIA
// does not promise that a GPU's index is its minor number. An index stands when its UUID is
// not listed there. Returns the same comma-list shape as `gpus`.
std::string gpuDeviceMinors(const std::string& gpus, const std::string& uuids, const std::string& procRoot = "/proc");

// The device nodes for GPUs `gpus` ("0,2", device minor numbers): /dev/nvidia<i> for each, plus the control nodes
// that exist (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia-modeset).
// `devRoot` is "/dev" except in tests. Missing GPU nodes are an error naming the path.
Result<std::vector<DeviceNode>> gpuDevices(const std::string& gpus, const std::string& devRoot = "/dev");

}  // namespace yard::agent
