// exec for the containerd driver: a hook's command through containerd's Tasks.Exec, and a
// user's `yardctl exec` through `runc exec` (docs/exec.md, "Containers").
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "agent/drivers/containerd/containerd_internal.h"
#include "agent/drivers/host/host_driver.h"

namespace yard::agent {

using namespace containerd_detail;

namespace {

using containerd::Client;

// A process run in a container with Tasks.Exec. Its output reaches the caller's descriptors
// through FIFOs the shim writes and `cat` pumps read (the shim opens paths, not descriptors).
class ContainerExec : public ExecHandle {
 public:
  ContainerExec(Client* client, std::string ns, std::string id, std::string execId, std::vector<pid_t> pumps,
                std::vector<std::string> fifos)
      : client_(client), ns_(std::move(ns)), id_(std::move(id)), execId_(std::move(execId)),
        pumps_(std::move(pumps)), fifos_(std::move(fifos)) {}
  ~ContainerExec() override {
    if (!code_) {
      // containerd deletes only a stopped process: give the kill a moment (what is left is
      // deleted with the task).
      client_->kill(ns_, id_, SIGKILL, false, execId_);
      for (int i = 0; i < 10; ++i) {
        auto p = client_->process(ns_, id_, execId_);
        if (!p || !p.value() || p.value()->status == Status::Stopped) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      client_->deleteProcess(ns_, id_, execId_);
    }
    for (pid_t p : pumps_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    for (const auto& f : fifos_) ::unlink(f.c_str());
  }
  std::optional<int> poll() override {
    if (!code_) {
      auto p = client_->process(ns_, id_, execId_);
      if (!p) return std::nullopt;  // containerd did not answer: ask again next time
      if (p.value() && p.value()->status != Status::Stopped) return std::nullopt;
      code_ = p.value() ? static_cast<int>(p.value()->exitStatus) : 137;
      client_->deleteProcess(ns_, id_, execId_);
      drainUntil_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    // All output is through once the pumps have read the FIFOs to their end.
    for (auto it = pumps_.begin(); it != pumps_.end();) {
      pid_t r = ::waitpid(*it, nullptr, WNOHANG);
      if (r == 0 && std::chrono::steady_clock::now() > drainUntil_) {
        ::kill(*it, SIGKILL);  // a daemonized child still holds the output open
        ::waitpid(*it, nullptr, 0);
        r = *it;
      }
      it = r != 0 ? pumps_.erase(it) : std::next(it);
    }
    if (!pumps_.empty()) return std::nullopt;
    for (const auto& f : fifos_) ::unlink(f.c_str());
    fifos_.clear();
    return code_;
  }
  void kill() override {
    if (!code_) client_->kill(ns_, id_, SIGKILL, false, execId_);
  }

 private:
  Client* client_;
  std::string ns_, id_, execId_;
  std::vector<pid_t> pumps_;
  std::vector<std::string> fifos_;
  std::optional<int> code_;
  std::chrono::steady_clock::time_point drainUntil_;
};

constexpr const char* kRuncRuntime = "io.containerd.runc.v2";

// `runc exec` of a user's command (yardctl exec): runc is our child and the leader of
// its session; the command is runc's child, its host pid in `pidFile` once started.
class RuncExec : public ExecHandle {
 public:
  RuncExec(pid_t runc, std::string pidFile) : runc_(runc), pidFile_(std::move(pidFile)) {}
  ~RuncExec() override {
    if (!code_) {
      kill();
      ::waitpid(runc_, nullptr, 0);
    }
    ::unlink(pidFile_.c_str());
  }
  std::optional<int> poll() override {
    if (code_) return code_;
    int status = 0;
    pid_t r = ::waitpid(runc_, &status, WNOHANG);
    if (r == 0) return std::nullopt;
    code_ = r < 0 ? 127 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // runc writes the pid file once the command has started: a failure without one is runc
    // saying it could not start it (its message is on the command's stderr), 127 as elsewhere.
    if (*code_ != 0 && commandPid() <= 0) code_ = 127;
    return code_;
  }
  void kill() override {
    if (code_) return;
    // The command first, with its process group: runc makes it the leader of a session of its
    // own inside the container, so what it started goes too. Only while it is still runc's
    // child (runc is not reaped yet, so that pid cannot be a stranger's).
    pid_t pid = commandPid();
    if (pid > 0 && parentOf(pid) == runc_) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
    ::kill(-runc_, SIGKILL);
    ::kill(runc_, SIGKILL);
  }

 private:
  pid_t commandPid() const {
    auto text = readFile(pidFile_);
    return text ? static_cast<pid_t>(std::atoi(text.value().c_str())) : 0;
  }
  static pid_t parentOf(pid_t pid) {
    auto stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return 0;
    size_t close = stat.value().rfind(')');
    int ppid = 0;
    if (close == std::string::npos || std::sscanf(stat.value().c_str() + close + 1, " %*c %d", &ppid) != 1) return 0;
    return ppid;
  }
  pid_t runc_;
  std::string pidFile_;
  std::optional<int> code_;
};

}  // namespace

namespace containerd_detail {

std::string encodeExecBase(const OciProcess& p) {
  std::string out = std::to_string(p.uid) + " " + std::to_string(p.gid) + "\n" + p.cwd + "\n";
  for (const auto& e : p.env) out += e + std::string(1, '\0');
  return out;
}

Result<OciProcess> decodeExecBase(const std::string& text) {
  OciProcess p;
  size_t nl1 = text.find('\n');
  size_t nl2 = nl1 == std::string::npos ? nl1 : text.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) return Result<OciProcess>::fail("exec-base: malformed");
  std::stringstream ids(text.substr(0, nl1));
  ids >> p.uid >> p.gid;
  p.cwd = text.substr(nl1 + 1, nl2 - nl1 - 1);
  std::string env = text.substr(nl2 + 1);
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    p.env.push_back(env.substr(at, end - at));
    at = end + 1;
  }
  return Result<OciProcess>::ok(std::move(p));
}

}  // namespace containerd_detail

Result<std::unique_ptr<ExecHandle>> ContainerdDriver::exec(const ReplicaKey& key, const std::string& dir,
                                                           const std::vector<std::string>& argv, int outFd, int errFd) {
  using R = Result<std::unique_ptr<ExecHandle>>;
  if (starting_.count(key)) return R::fail("the container is still starting");
  auto text = readFile(dir + "/" + kExecBaseFile);
  if (!text) return R::fail("the container's process is not known: " + text.error());
  auto base = decodeExecBase(text.value());
  if (!base) return R::fail(base.error());
  std::string id = containerId(key);
  std::string execId = "exec" + std::to_string(++execSeq_) + "-" + std::to_string(::getpid());
  Client::Stdio io;
  std::vector<pid_t> pumps;
  std::vector<std::string> fifos;
  auto undo = [&](const std::string& why) {
    for (pid_t p : pumps) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    for (const auto& f : fifos) ::unlink(f.c_str());
    return R::fail(why);
  };
  if (outFd < 0) {
    io.out = io.err = "file://" + dir + "/output.log";
  } else {
    for (int fd : {outFd, errFd}) {
      if (fd < 0 || (fd == errFd && errFd == outFd)) continue;
      std::string fifo = dir + "/" + execId + (fd == outFd ? ".out" : ".err");
      if (::mkfifo(fifo.c_str(), 0600) != 0) return undo("mkfifo " + fifo + ": " + std::strerror(errno));
      fifos.push_back(fifo);
      auto pid = spawnProcess({"/bin/cat", fifo}, fd);
      if (!pid) return undo(pid.error());
      pumps.push_back(pid.value());
    }
    io.out = fifos.front();
    io.err = fifos.back();
  }
  if (auto e = client_->exec(options_.ns, id, execId, ociProcessJson(base.value(), argv), io); !e) return undo(e.error());
  if (auto s = client_->start(options_.ns, id, execId); !s) {
    client_->deleteProcess(options_.ns, id, execId);
    return undo(s.error());
  }
  return R::ok(std::make_unique<ContainerExec>(client_.get(), options_.ns, id, execId, std::move(pumps), std::move(fifos)));
}

Result<std::unique_ptr<ExecHandle>> ContainerdDriver::execAttached(const ReplicaKey& key, const std::string& dir,
                                                                   const std::vector<std::string>& argv,
                                                                   const ExecAttach& io) {
  using R = Result<std::unique_ptr<ExecHandle>>;
  if (starting_.count(key)) return R::fail("the container is still starting");
  auto spec = readFile(dir + "/spec");
  auto decoded = spec ? decodeSpec(spec.value()) : Result<ReplicaSpec>::fail(spec.error());
  if (!decoded) return R::fail("the replica's spec is unreadable: " + decoded.error());
  std::string runtime = decoded.value().vm ? options_.vmRuntime : options_.runtime;
  if (runtime != kRuncRuntime) {
    // Tasks.Exec, as for hooks: no stdin, no console, and a kill ends the command only.
    if (!io.tty && io.inFd < 0) return exec(key, dir, argv, io.outFd, io.errFd >= 0 ? io.errFd : io.outFd);
    return R::fail("-i and -t reach a container through runc, and this one runs under " + runtime +
                   "; run the command without -i and -t");
  }
  std::string pidFile = dir + "/exec" + std::to_string(++execSeq_) + "-" + std::to_string(::getpid()) + ".pid";
  std::string root = options_.runcRoot.empty() ? "/run/containerd/runc/" + options_.ns : options_.runcRoot;
  std::vector<std::string> args = {options_.runc, "--root", root, "exec", "--pid-file", pidFile};
  if (io.tty) args.push_back("--tty");
  for (const auto& e : io.env) {
    args.push_back("--env");
    args.push_back(e);
  }
  args.push_back(containerId(key));
  for (const auto& a : argv) args.push_back(a);
  auto pid = spawnSession(args, io);
  if (!pid) return R::fail(pid.error());
  return R::ok(std::make_unique<RuncExec>(pid.value(), pidFile));
}

}  // namespace yard::agent
