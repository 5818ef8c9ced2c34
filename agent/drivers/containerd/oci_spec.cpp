#include "agent/drivers/containerd/oci_spec.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/util/json.h"

namespace yard::agent {
namespace {

// containerd's and Docker's default capability set, less CAP_NET_RAW and CAP_NET_BIND_SERVICE:
// Docker gives that set a network namespace of its own, but a Yard container shares the host's
// (docs/containerd.md), where a raw socket would read every job's traffic on the node and a
// low port would be the host's.
const char* const kDefaultCaps[] = {"CAP_CHOWN",      "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
                                    "CAP_MKNOD",      "CAP_SETGID",       "CAP_SETUID", "CAP_SETFCAP",
                                    "CAP_SETPCAP",    "CAP_SYS_CHROOT",   "CAP_KILL",   "CAP_AUDIT_WRITE"};

// runc's default spec: kernel interfaces a container must not read or write.
const char* const kMaskedPaths[] = {"/proc/acpi",      "/proc/asound",      "/proc/kcore",   "/proc/keys",
                                    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                                    "/proc/sched_debug", "/proc/scsi",       "/sys/firmware"};
const char* const kReadonlyPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};

// Seccomp: everything is allowed except what lets a process reach the kernel or the host
// beyond its container (a deny list of what Docker's default profile refuses, kept short so
// training stacks, MPI's single-copy transfers and debuggers keep working). EPERM, as
// Docker answers.
const char* const kDeniedSyscalls[] = {
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module", "ioperm",
    "iopl", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
    "move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open",
    "pivot_root", "query_module", "quotactl", "reboot", "request_key", "setns", "settimeofday", "stime",
    "swapoff", "swapon", "sysfs", "_sysctl", "umount", "umount2", "unshare", "uselib", "userfaultfd",
    "ustat", "vm86", "vm86old"};
constexpr uint64_t kCloneNewUser = 0x10000000;

Json seccompJson() {
#if defined(__x86_64__)
  Json architectures = {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"};
#elif defined(__aarch64__)
  Json architectures = {"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"};
#else
  Json architectures = Json::array();
#endif
  Json denied = Json::array();
  for (const char* n : kDeniedSyscalls) denied.push_back(n);
  Json syscalls = Json::array();
  syscalls.push_back({{"names", std::move(denied)}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 1}});
  // New user namespaces (the usual first step of kernel exploits): clone with CLONE_NEWUSER;
  // clone3 hides its flags from seccomp, so it answers ENOSYS and libc falls back to clone.
  Json cloneArg = {{"index", 0}, {"value", kCloneNewUser}, {"valueTwo", kCloneNewUser}, {"op", "SCMP_CMP_MASKED_EQ"}};
  syscalls.push_back({{"names", Json::array({"clone"})},
                      {"action", "SCMP_ACT_ERRNO"},
                      {"errnoRet", 1},
                      {"args", Json::array({std::move(cloneArg)})}});
  syscalls.push_back({{"names", Json::array({"clone3"})}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 38}});
  return {{"defaultAction", "SCMP_ACT_ALLOW"}, {"architectures", std::move(architectures)}, {"syscalls", std::move(syscalls)}};
}


Result<uint32_t> parseId(const std::string& s, const std::string& what, const std::string& user) {
  if (s.empty() || s.size() > 10 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Result<uint32_t>::fail("image user \"" + user + "\": the " + what +
                                  " must be numeric (user names are not looked up in the image)");
  uint64_t v = std::stoull(s);
  if (v > 0xffffffffu) return Result<uint32_t>::fail("image user \"" + user + "\": " + what + " out of range");
  return Result<uint32_t>::ok(static_cast<uint32_t>(v));
}

Json processJson(const OciProcess& p) {
  Json caps = Json::array();
  for (const char* c : kDefaultCaps) caps.push_back(c);
  return {{"terminal", false},
          {"user", {{"uid", p.uid}, {"gid", p.gid}}},
          {"args", p.argv},
          {"env", p.env},
          {"cwd", p.cwd},
          {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
          // No rlimits: the process inherits containerd's (as under Docker), which a systemd
          // unit sets (LimitNOFILE); raising them here fails once capabilities are dropped.
          {"noNewPrivileges", true}};
}

Json mountJson(const std::string& dest, const std::string& type, const std::string& source,
               const std::vector<std::string>& options) {
  return {{"destination", dest}, {"type", type}, {"source", source}, {"options", options}};
}

}  // namespace

Result<OciProcess> containerProcess(const ReplicaSpec& spec, const ImageDefaults& image) {
  using R = Result<OciProcess>;
  OciProcess p;
  if (!spec.argv.empty()) {
    p.argv = spec.argv;
  } else {
    p.argv = image.entrypoint;
    p.argv.insert(p.argv.end(), image.cmd.begin(), image.cmd.end());
  }
  if (p.argv.empty()) return R::fail("command: the task gives none and image " + spec.image + " has no entrypoint or cmd");
  // The image's variables, then the replica's overriding by name, in a stable order.
  std::vector<std::string> order;
  std::map<std::string, std::string> values;
  auto set = [&](const std::string& name, const std::string& value) {
    if (!values.count(name)) order.push_back(name);
    values[name] = value;
  };
  for (const auto& e : image.env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    set(e.substr(0, eq), e.substr(eq + 1));
  }
  for (const auto& [k, v] : spec.env) set(k, v);
  if (!values.count("PATH")) p.env.push_back(kDefaultPathEnv);
  for (const auto& name : order) p.env.push_back(name + "=" + values[name]);
  p.cwd = !spec.workingDir.empty() ? spec.workingDir : !image.workingDir.empty() ? image.workingDir : "/";
  if (p.cwd.front() != '/') return R::fail("workingDir: \"" + p.cwd + "\" must be an absolute path");
  if (!image.user.empty()) {
    size_t colon = image.user.find(':');
    auto uid = parseId(image.user.substr(0, colon), "uid", image.user);
    if (!uid) return R::fail(uid.error());
    p.uid = uid.value();
    if (colon != std::string::npos) {
      auto gid = parseId(image.user.substr(colon + 1), "gid", image.user);
      if (!gid) return R::fail(gid.error());
      p.gid = gid.value();
    }
  }
  return R::ok(std::move(p));
}

std::string ociSpecJson(const ReplicaSpec& spec, const OciProcess& process, const OciOptions& options) {
  // /dev/shm: PyTorch's data loaders and NCCL pass tensors through it; Docker's 64 MiB is a
  // known trap. It is tmpfs, so what is used counts against the replica's memory limit.
  int64_t shm = std::max<int64_t>(64ll << 20, spec.memoryBytes / 2);
  Json mounts = {
      mountJson("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      mountJson("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      mountJson("/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}),
      mountJson("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=" + std::to_string(shm)}),
      mountJson("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      mountJson("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
      mountJson("/run", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"})};
  for (const auto& m : options.extraMounts)
    mounts.push_back(mountJson(m.path, "bind", m.hostPath, {"rbind", "rprivate", m.readOnly ? "ro" : "rw"}));
  for (const auto& m : spec.mounts)
    mounts.push_back(mountJson(m.path, "bind", m.hostPath, {"rbind", "rprivate", "nosuid", "nodev", m.readOnly ? "ro" : "rw"}));

  // No network namespace: replicas use the host's network (ports come from the scheduler).
  Json namespaces = Json::array();
  for (const char* ns : {"pid", "ipc", "uts", "mount"}) namespaces.push_back({{"type", ns}});
  // Limits are already on the group (the agent wrote them, as for host replicas); only the
  // device list is the spec's: nothing but runc's defaults and the assigned GPUs.
  Json devices = Json::array(), allowed = Json::array();
  allowed.push_back({{"allow", false}, {"access", "rwm"}});
  for (const auto& d : options.devices) {
    std::string type(1, d.type);
    devices.push_back({{"path", d.path},
                       {"type", type},
                       {"major", d.major},
                       {"minor", d.minor},
                       {"fileMode", 0666},
                       {"uid", 0},
                       {"gid", 0}});
    allowed.push_back({{"allow", true}, {"type", type}, {"major", d.major}, {"minor", d.minor}, {"access", "rwm"}});
  }
  Json linuxPart = {{"namespaces", std::move(namespaces)},
                {"devices", std::move(devices)},
                {"resources", {{"devices", std::move(allowed)}}}};
  // Its GPUs' NUMA node (docs/topology.md): runc writes the container's cpuset.
  if (!spec.cpus.empty()) {
    linuxPart["resources"]["cpu"] = {{"cpus", spec.cpus}};
    if (!spec.mems.empty()) linuxPart["resources"]["cpu"]["mems"] = spec.mems;
  }
  if (!options.cgroupsPath.empty()) linuxPart["cgroupsPath"] = options.cgroupsPath;
  linuxPart["seccomp"] = seccompJson();
  linuxPart["maskedPaths"] = kMaskedPaths;
  linuxPart["readonlyPaths"] = kReadonlyPaths;

  Json out = {{"ociVersion", "1.0.2-dev"},
              {"process", processJson(process)},
              {"root", {{"path", "rootfs"}, {"readonly", false}}},
              {"mounts", std::move(mounts)},
              {"linux", std::move(linuxPart)}};
  return jsonLine(out);
}

std::string ociProcessJson(const OciProcess& base, const std::vector<std::string>& argv) {
  OciProcess p = base;
  p.argv = argv;
  return jsonLine(processJson(p));
}

std::string gpuDeviceMinors(const std::string& gpus, const std::string& uuids, const std::string& procRoot) {
  std::map<std::string, std::string> minorOf;  // UUID -> minor
  std::error_code ec;
  for (const auto& gpu : std::filesystem::directory_iterator(procRoot + "/driver/nvidia/gpus", ec)) {
    std::ifstream in(gpu.path() / "information");
    std::string line, uuid, minor;
    while (std::getline(in, line)) {
      auto value = [&](const char* key) {
        std::string v = line.substr(line.find(':') + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return line.rfind(key, 0) == 0 ? v : std::string();
      };
      if (auto u = value("GPU UUID:"); !u.empty()) uuid = u;
      if (auto m = value("Device Minor:"); !m.empty()) minor = m;
    }
    if (!uuid.empty() && !minor.empty()) minorOf[uuid] = minor;
  }
  std::vector<std::string> ids;
  std::stringstream u(uuids);
  for (std::string id; std::getline(u, id, ',');) ids.push_back(id);
  std::string out;
  std::stringstream g(gpus);
  size_t i = 0;
  for (std::string index; std::getline(g, index, ','); ++i) {
    auto it = i < ids.size() ? minorOf.find(ids[i]) : minorOf.end();
    out += (out.empty() ? "" : ",") + (it != minorOf.end() ? it->second : index);
  }
  return out;
}

Result<std::vector<DeviceNode>> gpuDevices(const std::string& gpus, const std::string& devRoot) {
  using R = Result<std::vector<DeviceNode>>;
  std::vector<DeviceNode> out;
  if (gpus.empty()) return R::ok(out);
  auto node = [&](const std::string& name, bool required) -> std::string {
    std::string path = devRoot + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
      return required ? "GPU device " + path + " is missing or not a character device" : "";
    out.push_back({"/dev/" + name, 'c', static_cast<int64_t>(major(st.st_rdev)), static_cast<int64_t>(minor(st.st_rdev))});
    return "";
  };
  std::vector<std::string> indexes;
  std::stringstream list(gpus);
  for (std::string index; std::getline(list, index, ',');) {
    if (index.empty() || !std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return R::fail("gpus: \"" + gpus + "\" must be a comma list of GPU indexes");
    indexes.push_back(index);
  }
  for (const auto& index : indexes)
    if (auto why = node("nvidia" + index, true); !why.empty()) return R::fail(why);
  for (const char* ctl : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) node(ctl, false);
  return R::ok(std::move(out));
}

}  // namespace yard::agent
