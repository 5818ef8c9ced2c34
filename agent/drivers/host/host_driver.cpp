#include "agent/drivers/host/host_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/shim/setup.h"

namespace yard::agent {
namespace {

std::string firstLine(const std::string& s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

pid_t readPid(const std::string& path) {
  auto text = readFile(path);
  if (!text) return 0;
  try {
    return static_cast<pid_t>(std::stol(text.value()));
  } catch (...) {
    return 0;
  }
}

// The shim of `dir`, if that pid still is it: after a reboot or a long time the pid may
// belong to anything, and the agent signals these pids as root.
bool shimAlive(const std::string& dir, pid_t shim) {
  if (shim <= 0) return false;
  auto cmdline = readFile("/proc/" + std::to_string(shim) + "/cmdline");
  if (!cmdline) return false;
  const std::string& c = cmdline.value();
  return c.find("yard-shim") != std::string::npos && c.find(std::string(1, '\0') + dir + std::string(1, '\0')) != std::string::npos;
}

// The workload's pid (its process group) while it is still the shim's child, else 0.
pid_t liveWorkload(const std::string& dir) {
  if (std::filesystem::exists(dir + "/status")) return 0;
  pid_t shim = readPid(dir + "/shim.pid"), pid = readPid(dir + "/pid");
  if (pid <= 0 || !shimAlive(dir, shim)) return 0;
  auto stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  // Field 4 (ppid) follows the parenthesised command name, which may itself hold spaces.
  size_t close = stat.value().rfind(')');
  if (close == std::string::npos) return 0;
  int ppid = 0;
  if (std::sscanf(stat.value().c_str() + close + 1, " %*c %d", &ppid) != 1 || ppid != shim) return 0;
  return pid;
}

class ChildExec : public ExecHandle {
 public:
  // `session`: the child leads a session (spawnSession), and kill() ends its process group.
  explicit ChildExec(pid_t pid, bool session = false) : pid_(pid), session_(session) {}
  ~ChildExec() override {
    if (!done_) {
      kill();
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::optional<int> poll() override {
    if (done_) return code_;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return std::nullopt;
    done_ = true;
    code_ = r < 0 ? 127 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return code_;
  }
  void kill() override {
    if (done_) return;
    // The group first: its members are the command's descendants (while unreaped, the
    // child's pid cannot be reused, so the group is still its own).
    if (session_) ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_;
  bool session_;
  bool done_ = false;
  int code_ = 0;
};

}  // namespace

namespace {

// fork + exec of `argv` with stdin `in`, stdout `out`, stderr `err` (-1: /dev/null for in
// and out, `out` for err), nothing else open and no signal blocked; with `session`, in a
// session of its own, `in` its controlling terminal when `tty`.
Result<pid_t> spawn(const std::vector<std::string>& argv, int inFd, int outFd, int errFd, bool session, bool tty) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid < 0) {
    if (devnull >= 0) ::close(devnull);
    return Result<pid_t>::fail(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (session) ::setsid();
    if (tty && ::ioctl(inFd, TIOCSCTTY, 0) != 0) _exit(127);
    int in = inFd >= 0 ? inFd : devnull;
    int out = outFd >= 0 ? outFd : devnull;
    int err = errFd >= 0 ? errFd : out;
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close_range(3, ~0u, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  return Result<pid_t>::ok(pid);
}

}  // namespace

Result<pid_t> spawnProcess(const std::vector<std::string>& argv, int outFd, int errFd) {
  return spawn(argv, -1, outFd, errFd, false, false);
}

Result<pid_t> spawnSession(const std::vector<std::string>& argv, const ExecAttach& io) {
  return spawn(argv, io.inFd, io.outFd, io.errFd, true, io.tty);
}

std::unique_ptr<ExecHandle> childExec(pid_t pid, bool session) { return std::make_unique<ChildExec>(pid, session); }

std::vector<std::string> HostDriver::cgroupArgs(const ReplicaKey& key) const {
  std::vector<std::string> out;
  if (!cgroups_) return out;
  for (const auto& f : cgroups_->procsFiles(key.name())) {
    out.push_back("--cgroup-procs");
    out.push_back(f);
  }
  return out;
}

std::string hostWorkdir(const ReplicaSpec& spec, const std::string& dir) {
  if (!spec.workingDir.empty()) return spec.workingDir;
  return replicaWorkDir(spec, dir);
}

std::vector<std::string> HostDriver::userArgs(const ReplicaKey& key) const {
  auto it = runAs_.find(key);
  if (it == runAs_.end()) return {};
  return {"--user", std::to_string(it->second.uid) + ":" + std::to_string(it->second.gid)};
}

Result<bool> HostDriver::prepareOwnedDir(const ReplicaSpec& spec, const std::string& dir) {
  using R = Result<bool>;
  auto uid = static_cast<uid_t>(spec.runAsUid);
  auto gid = static_cast<gid_t>(spec.runAsGid);
  // The user reaches DIR by its path (HOME, ${YARD_REPLICA_DIR}/hostfile): every directory
  // above it must let them through. Say which one does not, rather than fail in the shim.
  for (std::filesystem::path p = std::filesystem::path(dir).parent_path(); ; p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return R::fail("stat " + p.string() + ": " + std::strerror(errno));
    bool through = (st.st_mode & S_IXOTH) || (st.st_uid == uid && (st.st_mode & S_IXUSR)) ||
                   (st.st_gid == gid && (st.st_mode & S_IXGRP)) || uid == 0;
    if (!through) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return R::fail(p.string() + " (mode " + mode + ") does not let uid " + std::to_string(uid) +
                     " through to its replica's directory: host replicas that run as their owner need the agent's "
                     "data directory and those above it searchable by others (chmod o+x; docs/security.md)");
    }
    if (p == p.parent_path()) break;
  }
  if (::chmod(dir.c_str(), 0711) != 0) return R::fail("chmod " + dir + ": " + std::strerror(errno));
  std::string work = dir + "/" + kOwnedWorkDir;
  if (::mkdir(work.c_str(), 0700) != 0 && errno != EEXIST) return R::fail("mkdir " + work + ": " + std::strerror(errno));
  // lchown: nothing in DIR is the user's to point elsewhere yet, but never follow a link as root.
  if (::lchown(work.c_str(), uid, gid) != 0 || ::chmod(work.c_str(), 0700) != 0)
    return R::fail("chown " + work + ": " + std::strerror(errno));
  for (const auto& [name, content] : spec.files) {
    std::string path = dir + "/" + name;
    if (::lchown(path.c_str(), uid, gid) != 0) return R::fail("chown " + path + ": " + std::strerror(errno));
  }
  return R::ok(true);
}

Result<bool> HostDriver::start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  using R = Result<bool>;
  if (spec.runAsUid >= 0) {
    // -1 means "unchanged" to setuid/setgid: a uid without its gid would run with root's group.
    if (spec.runAsGid < 0 || spec.runAsUid >= 4294967295LL || spec.runAsGid >= 4294967295LL)
      return R::fail("run as uid " + std::to_string(spec.runAsUid) + " gid " + std::to_string(spec.runAsGid) +
                     ": both must be set and below 4294967295");
    if (auto made = prepareOwnedDir(spec, dir); !made) return R::fail("replica directory: " + made.error());
    runAs_[key] = {spec.runAsUid, spec.runAsGid, hostWorkdir(spec, dir)};
  }
  if (cgroups_) {
    CgroupLimits limits;
    limits.cpuMillis = spec.cpuMillis;
    limits.memoryBytes = spec.memoryBytes;
    limits.pids = 4096;  // a fork bomb stays inside its replica
    limits.cpus = spec.cpus;  // its GPUs' NUMA node (docs/topology.md)
    limits.mems = spec.mems;
    auto made = cgroups_->create(key.name(), limits);
    if (!made) return R::fail("cgroup: " + made.error());
  }
  // The environment file the shim hands to the workload verbatim: NAME=value, NUL-separated.
  // A host process also gets what a login would give it when the spec does not say: a
  // standard PATH (Python finds sys.executable through it) and HOME (the replica's own
  // directory, so caches stay with the replica).
  std::string env;
  bool hasPath = false, hasHome = false;
  for (const auto& [k, v] : spec.env) {
    env += k + "=" + v + std::string(1, '\0');
    hasPath = hasPath || k == "PATH";
    hasHome = hasHome || k == "HOME";
  }
  if (!hasPath) env += std::string(kDefaultPathEnv) + '\0';
  if (!hasHome) env += "HOME=" + replicaWorkDir(spec, dir) + std::string(1, '\0');
  if (auto w = writeFileAtomic(dir + "/env", env); !w) return R::fail(w.error());
  for (const auto& m : spec.mounts) mountTargets_[key].push_back(m.path);
  std::vector<std::string> argv = {shim_, "run", "--dir", dir, "--env-file", dir + "/env"};
  for (auto& a : cgroupArgs(key)) argv.push_back(a);
  for (const auto& m : spec.mounts) {
    argv.push_back("--mount");
    argv.push_back(m.hostPath + ":" + m.path + (m.readOnly ? ":ro" : ":rw"));
  }
  argv.push_back("--workdir");
  argv.push_back(hostWorkdir(spec, dir));
  for (auto& a : userArgs(key)) argv.push_back(a);
  argv.push_back("--");
  for (const auto& a : spec.argv) argv.push_back(a);
  // The launcher reports setup failures on stderr; keep them next to the replica's output.
  int out = ::open((dir + "/launch.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto pid = spawnProcess(argv, out);
  if (out >= 0) ::close(out);
  if (!pid) return R::fail(pid.error());
  launchers_[key] = pid.value();
  return R::ok(true);
}

namespace {

// How a path appears in /proc/PID/mountinfo: space, tab, newline and backslash as \ooo.
std::string mountinfoEscape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\%03o", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// Whether `path`, or a path below it, is a mount point in any other mount namespace of this
// host: another agent's replica on the same machine, or anything else. Removing a directory
// that is a mount point elsewhere would silently detach that mount (Linux >= 3.18).
bool mountedInAnotherNamespace(const std::string& path) {
  namespace fs = std::filesystem;
  std::string self;
  std::error_code ec;
  self = fs::read_symlink("/proc/self/ns/mnt", ec).string();
  std::set<std::string> seen = {self};
  std::string want = mountinfoEscape(path);
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string pid = entry.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string ns = fs::read_symlink(entry.path() / "ns" / "mnt", ec).string();
    if (ec || !seen.insert(ns).second) continue;
    std::ifstream info(entry.path() / "mountinfo");
    for (std::string line; std::getline(info, line);) {
      std::istringstream fields(line);
      std::string id, parent, dev, root, point;
      fields >> id >> parent >> dev >> root >> point;
      if (point == want || point.rfind(want + "/", 0) == 0) return true;
    }
  }
  return false;
}

}  // namespace

void HostDriver::removeUnusedMountpoints() {
  if (createdMountpoints_.empty()) return;
  // Reverse order visits "/a/b" before "/a": a directory's children sort after it.
  for (auto it = createdMountpoints_.rbegin(); it != createdMountpoints_.rend();) {
    const std::string& path = *it;
    bool inUse = false;
    for (const auto& [key, targets] : mountTargets_)  // this node's replicas, even mid-start
      for (const auto& t : targets) inUse = inUse || t == path || t.rfind(path + "/", 0) == 0;
    if (inUse || mountedInAnotherNamespace(path)) {
      ++it;
      continue;
    }
    // Only what is still as the shim left it: an empty directory, an empty file. Anything
    // else now holds someone's data and stays.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) ::rmdir(path.c_str());
      else if (S_ISREG(st.st_mode) && st.st_size == 0) ::unlink(path.c_str());
    }
    it = std::make_reverse_iterator(createdMountpoints_.erase(std::next(it).base()));
  }
}

DriverStatus HostDriver::finished(const ReplicaKey& key, const std::string& dir, const std::string& status) {
  DriverStatus s;
  s.phase = DriverStatus::Phase::Exited;
  std::string line = firstLine(status);
  if (line.rfind("exited ", 0) == 0) {
    s.exitCode = std::atoi(line.c_str() + 7);
  } else if (line.rfind("signaled ", 0) == 0) {
    s.signal = std::atoi(line.c_str() + 9);
    s.exitCode = 128 + s.signal;
  } else {
    // "failed <step>: ..." — it never ran; 127 like a shell that cannot run a command.
    s.exitCode = 127;
    s.cause = EndCause::AgentFailure;
    s.reason = line.empty() ? "the replica could not be started" : line;
  }
  // The shim stopped it on its own because its lease ran out (the agent was dead or cut off).
  if (auto fenced = readFile(dir + "/fenced"); fenced && s.reason.empty()) {
    s.cause = EndCause::NodeLost;
    s.reason = "fenced by yard-shim: " + firstLine(fenced.value());
  }
  if (cgroups_ && s.reason.empty()) {
    auto u = cgroups_->usage(key.name());
    if (u && u.value().oomKills > 0 && (s.signal == SIGKILL || s.exitCode != 0)) s.oomKilled = true;
  }
  return s;
}

DriverStatus HostDriver::inspect(const ReplicaKey& key, const std::string& dir) {
  auto launcher = launchers_.find(key);
  if (launcher != launchers_.end()) {
    int status = 0;
    pid_t r = ::waitpid(launcher->second, &status, WNOHANG);
    if (r == 0) return DriverStatus{};  // still starting
    launchers_.erase(launcher);
    bool ok = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      auto st = readFile(dir + "/status");
      if (st && !st.value().empty()) return finished(key, dir, st.value());
      auto why = readFile(dir + "/launch.log");
      DriverStatus s;
      s.phase = DriverStatus::Phase::Exited;
      s.exitCode = 127;
      s.cause = EndCause::AgentFailure;
      s.reason = "yard-shim could not start it: " + firstLine(why ? why.value() : std::string("no message"));
      return s;
    }
  }
  if (auto st = readFile(dir + "/status"); st && !st.value().empty()) return finished(key, dir, st.value());
  if (shimAlive(dir, readPid(dir + "/shim.pid"))) {
    DriverStatus s;
    s.phase = DriverStatus::Phase::Running;
    return s;
  }
  // The shim writes the status before it exits; check once more in case it just did.
  if (auto st = readFile(dir + "/status"); st && !st.value().empty()) return finished(key, dir, st.value());
  DriverStatus s;
  s.phase = DriverStatus::Phase::Lost;
  s.cause = EndCause::AgentFailure;
  s.reason = "agent: yard-shim is gone and left no exit status";
  return s;
}

bool HostDriver::stopAt(const ReplicaKey&, const std::string& dir, int64_t termAtMs, int64_t killAtMs) {
  pid_t shim = readPid(dir + "/shim.pid");
  if (std::filesystem::exists(dir + "/status") || !shimAlive(dir, shim)) return false;
  // The shim only ever moves its times earlier, so a rewrite cannot postpone a stop.
  if (!writeFileAtomic(dir + "/stop", std::to_string(termAtMs) + " " + std::to_string(killAtMs) + "\n")) return false;
  ::kill(shim, SIGUSR1);  // "DIR/stop changed"; without it the shim still sees it within 1 s
  return true;
}

void HostDriver::signal(const ReplicaKey& key, const std::string& dir, int sig) {
  pid_t pid = liveWorkload(dir);
  if (pid > 0) ::kill(-pid, sig);  // the workload leads its own process group
  if (sig == SIGKILL && cgroups_) cgroups_->signalAll(key.name(), SIGKILL);
}

Result<std::unique_ptr<ExecHandle>> HostDriver::exec(const ReplicaKey& key, const std::string& dir,
                                                     const std::vector<std::string>& argv, int outFd, int errFd) {
  using R = Result<std::unique_ptr<ExecHandle>>;
  std::vector<std::string> args = {shim_, "exec", "--dir", dir, "--env-file", dir + "/env"};
  for (auto& a : cgroupArgs(key)) args.push_back(a);
  for (auto& a : userArgs(key)) args.push_back(a);
  // A hook of a replica run as its owner runs where its workload does: the agent's own
  // working directory may be one the user cannot enter.
  if (auto it = runAs_.find(key); it != runAs_.end()) {
    args.push_back("--workdir");
    args.push_back(it->second.workdir);
  }
  args.push_back("--");
  for (const auto& a : argv) args.push_back(a);
  if (outFd >= 0) {
    auto pid = spawnProcess(args, outFd, errFd >= 0 ? errFd : outFd);
    if (!pid) return R::fail(pid.error());
    return R::ok(std::make_unique<ChildExec>(pid.value()));
  }
  int out = ::open((dir + "/output.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  auto pid = spawnProcess(args, out);
  if (out >= 0) ::close(out);
  if (!pid) return R::fail(pid.error());
  return R::ok(std::make_unique<ChildExec>(pid.value()));
}

Result<std::unique_ptr<ExecHandle>> HostDriver::execAttached(const ReplicaKey& key, const std::string& dir,
                                                             const std::vector<std::string>& argv,
                                                             const ExecAttach& io) {
  using R = Result<std::unique_ptr<ExecHandle>>;
  // The working directory the workload started in (the shim's --workdir of `run`).
  auto spec = readFile(dir + "/spec");
  if (!spec) return R::fail("the replica's spec is unreadable: " + spec.error());
  auto decoded = decodeSpec(spec.value());
  if (!decoded) return R::fail("the replica's spec is unreadable: " + decoded.error());
  std::string workdir = hostWorkdir(decoded.value(), dir);
  std::vector<std::string> args = {shim_, "exec", "--dir", dir, "--env-file", dir + "/env", "--workdir", workdir};
  for (auto& a : cgroupArgs(key)) args.push_back(a);
  for (auto& a : userArgs(key)) args.push_back(a);
  for (const auto& e : io.env) {
    args.push_back("--env");
    args.push_back(e);
  }
  if (io.tty) args.push_back("--tty");
  args.push_back("--");
  for (const auto& a : argv) args.push_back(a);
  auto pid = spawnSession(args, io);
  if (!pid) return R::fail(pid.error());
  return R::ok(childExec(pid.value(), true));
}

Result<ReplicaUsage> HostDriver::stats(const ReplicaKey& key) {
  if (!cgroups_) return Result<ReplicaUsage>::fail("no cgroups");
  auto u = cgroups_->usage(key.name());
  if (!u) return Result<ReplicaUsage>::fail(u.error());
  return Result<ReplicaUsage>::ok(ReplicaUsage{u.value().cpuNanos, u.value().memoryBytes});
}

void HostDriver::destroy(const ReplicaKey& key, const std::string& dir) {
  auto launcher = launchers_.find(key);
  if (launcher != launchers_.end()) {
    ::kill(launcher->second, SIGKILL);
    ::waitpid(launcher->second, nullptr, 0);
    launchers_.erase(launcher);
  }
  signal(key, dir, SIGKILL);
  // Never block the agent for long: a process in uninterruptible sleep dies when its I/O
  // ends; sweep() retries until then.
  if (cgroups_ && !cgroups_->destroy(key.name(), std::chrono::milliseconds(100))) leftover_.insert(key.name());
  // Its processes are gone (or going: a mount namespace still held is seen and waited for).
  mountTargets_.erase(key);
  runAs_.erase(key);
  if (auto created = readFile(dir + "/" + shim::kCreatedMountpointsFile)) {
    std::istringstream lines(created.value());
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line[0] == '/') createdMountpoints_.insert(line);
  }
  removeUnusedMountpoints();
}

void HostDriver::sweep() {
  // Mount points another namespace still used: try again every few seconds.
  auto now = std::chrono::steady_clock::now();
  if (!createdMountpoints_.empty() && now >= nextMountpointSweep_) {
    nextMountpointSweep_ = now + std::chrono::seconds(3);
    removeUnusedMountpoints();
  }
  for (auto it = leftover_.begin(); it != leftover_.end();)
    it = cgroups_->destroy(*it, std::chrono::milliseconds(10)) ? leftover_.erase(it) : std::next(it);
}

DriverStatus HostDriver::recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  for (const auto& m : spec.mounts) mountTargets_[key].push_back(m.path);
  if (spec.runAsUid >= 0 && spec.runAsGid >= 0) runAs_[key] = {spec.runAsUid, spec.runAsGid, hostWorkdir(spec, dir)};
  // Nothing to re-attach for a host process: the shim holds it; its files tell its state.
  if (!std::filesystem::exists(dir + "/pid") && !std::filesystem::exists(dir + "/status")) {
    if (shimAlive(dir, readPid(dir + "/shim.pid"))) return DriverStatus{};  // the launcher was interrupted mid-start
    DriverStatus s;
    s.phase = DriverStatus::Phase::Lost;
    s.cause = EndCause::AgentFailure;
    s.reason = "agent: restarted while starting it; it never ran";
    return s;
  }
  return inspect(key, dir);
}

}  // namespace yard::agent
