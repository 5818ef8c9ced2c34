#include "agent/drivers/containerd/containerd_driver.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/containerd/client.h"
#include "agent/drivers/host/host_driver.h"
#include "agent/node/metrics.h"
#include "agent/shim/no_follow.h"

namespace yard::agent {
namespace {

namespace fs = std::filesystem;
using containerd::Client;
using Status = Client::Process::Status;

// Files in a replica's directory (next to the spec and output.log).
constexpr const char* kContainerFile = "container";   // written once the task has started
constexpr const char* kExecBaseFile = "exec-base";    // the main process's uid, gid, cwd, env
constexpr const char* kPullLog = "pull.log";          // ctr's output of the pull
// `yard-shim guard` beside each running container (docs/shim.md): its pid, the launcher's
// stderr, and what it writes when the lease ran out and it fenced the container.
constexpr const char* kGuardPidFile = "guard.pid";
constexpr const char* kGuardLog = "guard.log";
constexpr const char* kFencedFile = "fenced";
// How it ended ("<exit code> <signal> <oom 0|1> <cause>\n<reason>"), kept because the container
// itself is deleted as soon as it has ended: a restarted agent still reports it right.
constexpr const char* kExitFile = "exit";

void saveExit(const std::string& dir, const DriverStatus& s) {
  std::string cause(toText(s.cause));
  writeFileAtomic(dir + "/" + kExitFile, std::to_string(s.exitCode) + " " + std::to_string(s.signal) + " " +
                                              (s.oomKilled ? "1" : "0") + " " + (cause.empty() ? "-" : cause) +
                                              "\n" + s.reason);
}

std::optional<DriverStatus> loadExit(const std::string& dir) {
  auto text = readFile(dir + "/" + kExitFile);
  if (!text) return std::nullopt;
  DriverStatus s;
  s.phase = DriverStatus::Phase::Exited;
  int oom = 0;
  std::string cause;
  std::stringstream in(text.value().substr(0, text.value().find('\n')));
  in >> s.exitCode >> s.signal >> oom >> cause;  // files from before the cause have none
  s.oomKilled = oom != 0;
  s.cause = parseEndCause(cause).value_or(EndCause::None);
  size_t nl = text.value().find('\n');
  if (nl != std::string::npos) s.reason = text.value().substr(nl + 1);
  return s;
}

std::string lastLine(const std::string& text) {
  std::string line, last;
  std::stringstream in(text);
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// The guard of `dir`, while that pid still is it (after a reboot a pid may be anything, and the
// agent signals it as root); 0 when none runs.
pid_t liveGuard(const std::string& dir) {
  auto text = readFile(dir + "/" + kGuardPidFile);
  if (!text) return 0;
  pid_t pid = static_cast<pid_t>(std::atoi(text.value().c_str()));
  if (pid <= 0) return 0;
  auto cmdline = readFile("/proc/" + std::to_string(pid) + "/cmdline");  // empty for a zombie
  if (!cmdline) return 0;
  const std::string nul(1, '\0'), &c = cmdline.value();
  bool guard = c.find("yard-shim" + nul + "guard" + nul) != std::string::npos &&
               c.find(nul + dir + nul) != std::string::npos;
  return guard ? pid : 0;
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// The main process's identity and environment, kept so exec processes (hooks, the exec
// channel) get the same after an agent restart: "uid gid\ncwd\n" then NUL-separated env.
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

// A start that failed: it never ran.
DriverStatus notStarted(const StartFailure& f) {
  DriverStatus s;
  s.phase = DriverStatus::Phase::Exited;
  s.exitCode = 127;
  s.cause = f.cause;
  s.reason = f.reason;
  return s;
}

DriverStatus lost(const std::string& why) {
  DriverStatus s;
  s.phase = DriverStatus::Phase::Lost;
  s.cause = EndCause::AgentFailure;
  s.reason = "agent: " + why;
  return s;
}

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

bool refChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == '-' || c == '/' || c == ':' || c == '@' || std::isupper(static_cast<unsigned char>(c));
}

}  // namespace

Result<std::string> normalizeImageRef(const std::string& ref) {
  using R = Result<std::string>;
  auto bad = [&](const std::string& rule) { return R::fail("image \"" + ref + "\": " + rule); };
  if (ref.empty()) return bad("must not be empty");
  if (ref.size() > 255) return bad("must be at most 255 characters");
  for (char c : ref)
    if (!refChar(c))
      return bad(std::string("may hold only letters, digits and . _ - / : @, not ") +
                 (std::isprint(static_cast<unsigned char>(c)) ? "'" + std::string(1, c) + "'" : "a control character"));
  if (ref.front() == '-' || ref.front() == '.' || ref.front() == ':' || ref.front() == '@')
    return bad("must start with a letter or digit");
  std::string name = ref, digest;
  if (size_t at = ref.find('@'); at != std::string::npos) {
    name = ref.substr(0, at);
    digest = ref.substr(at);
    if (digest.rfind("@sha256:", 0) != 0 || digest.size() != 8 + 64) return bad("a digest must be @sha256:<64 hex digits>");
  }
  if (name.empty() || name.front() == '/' || name.back() == '/' || name.find("//") != std::string::npos)
    return bad("must be [REGISTRY/]PATH[:TAG][@DIGEST]");
  size_t slash = name.find('/');
  std::string first = slash == std::string::npos ? "" : name.substr(0, slash);
  bool hasRegistry = !first.empty() && (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                                        first == "localhost");
  std::string registry = hasRegistry ? first : "docker.io";
  std::string path = hasRegistry ? name.substr(slash + 1) : name;
  size_t lastSlash = path.rfind('/');
  size_t colon = path.find(':', lastSlash == std::string::npos ? 0 : lastSlash);
  std::string repo = colon == std::string::npos ? path : path.substr(0, colon);
  std::string tag = colon == std::string::npos ? "" : path.substr(colon + 1);
  if (repo.empty()) return bad("names no repository");
  for (char c : repo)
    if (std::isupper(static_cast<unsigned char>(c)) || c == ':' || c == '@') return bad("the repository must be lowercase");
  if (colon != std::string::npos && (tag.empty() || tag.size() > 128 || tag.find('/') != std::string::npos))
    return bad("a tag must be 1-128 characters after ':'");
  if (registry == "docker.io" && repo.find('/') == std::string::npos) repo = "library/" + repo;
  if (tag.empty() && digest.empty()) tag = "latest";
  return R::ok(registry + "/" + repo + (tag.empty() ? "" : ":" + tag) + digest);
}

std::string registryHost(const std::string& normalizedRef) { return normalizedRef.substr(0, normalizedRef.find('/')); }

ContainerdDriver::ContainerdDriver(ContainerdOptions options, Cgroups* cgroups, std::unique_ptr<containerd::Client> client)
    : options_(std::move(options)), cgroups_(cgroups), client_(std::move(client)) {}

ContainerdDriver::~ContainerdDriver() {
  ContainerdDriver::shutdown();  // again is harmless: nothing is left to wait for
}

void ContainerdDriver::recoverAll(const std::set<std::string>& held, std::function<void()> wake, Log log) {
  if (log) this->log = [log](const std::string& line) { log("containerd: " + line); };
  for (const auto& note : recoverNotes_)
    if (this->log) this->log(note);
  recoverNotes_.clear();
  removeLeftovers(held, log);
  onStarted = std::move(wake);
  watchEvents();
}

void ContainerdDriver::shutdown() {
  for (auto& [key, st] : starting_) *st.cancel = true;
  for (auto& [key, st] : starting_) st.done.wait();  // workers use this object
  if (events_.joinable()) {
    client_->stopWatching();
    events_.join();
  }
}

void ContainerdDriver::watchEvents() {
  if (events_.joinable()) return;
  // Only exits matter: the runner polls every task each tick anyway; this makes an exit news
  // at once (a DAG's next task starts without waiting for the tick).
  events_ = std::thread([this] {
    client_->watch("topic==\"/tasks/exit\",namespace==" + options_.ns, [this](const std::string&) {
      if (onStarted) onStarted();
    });
  });
}

Result<std::unique_ptr<ContainerdDriver>> ContainerdDriver::open(ContainerdOptions options, Cgroups* cgroups) {
  using R = Result<std::unique_ptr<ContainerdDriver>>;
  auto client = containerd::Client::connect(options.socket);
  if (!client) return R::fail(client.error());
  auto version = client.value()->version();
  if (!version) return R::fail(version.error());
  auto made = client.value()->ensureNamespace(options.ns);
  if (!made) return R::fail(made.error());
  std::unique_ptr<ContainerdDriver> d(new ContainerdDriver(std::move(options), cgroups, std::move(client).value()));
  d->version_ = version.value();
  // open() runs on the thread that becomes the agent's io thread: its calls (state polls,
  // signals, removals, exec) give up after 2 s; start workers keep the 10 s default.
  containerd::Client::setCallTimeoutOfThisThread(std::chrono::seconds(2));
  if (::access(d->options_.ctr.c_str(), X_OK) != 0)
    return R::fail(d->options_.ctr + " (containerd's ctr, which pulls images) is not installed");
  // Credentials go to ctr through a hosts directory only root can read, never on its command
  // line (which every user of the host can see). Rewritten at every start, so credentials
  // removed from the config do not stay on disk.
  std::error_code ec;
  fs::remove_all(d->hostsDir(), ec);
  if (!d->options_.registryAuth.empty()) {
    std::string dir = d->hostsDir();
    fs::create_directories(dir, ec);
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    for (const auto& [host, auth] : d->options_.registryAuth) {
      bool plain = std::find(d->options_.insecureRegistries.begin(), d->options_.insecureRegistries.end(), host) !=
                   d->options_.insecureRegistries.end();
      std::string url = (plain ? "http://" : "https://") + host;
      fs::create_directories(dir + "/" + host, ec);
      std::string toml = "server = \"" + url + "\"\n\n[host.\"" + url + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n" +
                         "  [host.\"" + url + "\".header]\n    Authorization = \"Basic " +
                         base64(auth.username + ":" + auth.password) + "\"\n";
      if (auto w = writeFileAtomic(dir + "/" + host + "/hosts.toml", toml); !w) return R::fail(w.error());
    }
  }
  return R::ok(std::move(d));
}

std::string ContainerdDriver::hostsDir() { return options_.stateDir + "/registries"; }

std::string ContainerdDriver::containerId(const ReplicaKey& key) const {
  // containerd ids are [A-Za-z0-9]+ joined by single . _ -; the node's name keeps agents
  // that share one containerd apart.
  std::string node;
  for (char c : options_.node) {
    bool alnum = std::isalnum(static_cast<unsigned char>(c));
    if (alnum) node += c;
    else if (!node.empty() && node.back() != '-') node += '-';
    if (node.size() >= 40) break;
  }
  while (!node.empty() && node.back() == '-') node.pop_back();
  return (node.empty() ? "node" : node) + "-" + key.name();
}

namespace {

// Reports one pull to the metrics (agent/metrics.h) when it goes out of scope: "failed"
// unless the pull set another outcome.
struct PullTimer {
  AgentMetrics* metrics;
  const char* outcome = "failed";
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~PullTimer() {
    if (metrics) metrics->observePull(outcome, std::chrono::steady_clock::now() - start);
  }
};

}  // namespace

Result<bool> ContainerdDriver::pull(const std::string& ref, const std::string& dir, const std::atomic<bool>& cancel,
                                    bool force) {
  using R = Result<bool>;
  std::shared_ptr<std::mutex> lock;
  {
    std::lock_guard<std::mutex> g(pullMu_);
    auto& l = pullLocks_[ref];
    if (!l) l = std::make_shared<std::mutex>();
    lock = l;
  }
  std::lock_guard<std::mutex> one(*lock);  // a second replica of the image waits, then finds it
  if (!force) {
    auto have = client_->image(options_.ns, ref);
    if (have && have.value()) return R::ok(true);
  }
  std::string host = registryHost(ref);
  std::vector<std::string> argv = {options_.ctr, "--address", options_.socket, "--namespace", options_.ns,
                                   "images", "pull", "--snapshotter", options_.snapshotter};
  if (std::find(options_.insecureRegistries.begin(), options_.insecureRegistries.end(), host) !=
      options_.insecureRegistries.end())
    argv.push_back("--plain-http");
  if (options_.registryAuth.count(host)) {
    argv.push_back("--hosts-dir");
    argv.push_back(hostsDir());
  }
  argv.push_back(ref);
  std::string logPath = dir + "/" + kPullLog;
  PullTimer timed{options_.metrics};
  int out = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto pid = spawnProcess(argv, out);
  if (out >= 0) ::close(out);
  if (!pid) return R::fail(pid.error());
  // Bounded: a registry that accepts and never answers must not hold the replica forever.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(25);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid.value(), &status, WNOHANG);
    if (r == pid.value() || r < 0) break;
    bool late = std::chrono::steady_clock::now() > deadline;
    if (late || cancel) {
      ::kill(pid.value(), SIGKILL);
      ::waitpid(pid.value(), &status, 0);
      if (!late) timed.outcome = "cancelled";
      return R::fail(late ? "the pull of " + ref + " did not finish within 25 minutes" : "stopped while pulling");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    timed.outcome = "ok";
    return R::ok(true);
  }
  auto log = readFile(logPath);
  std::string why = lastLine(log ? log.value() : "");
  if (why.rfind("ctr: ", 0) == 0) why = why.substr(5);
  if (why.empty())
    why = WIFSIGNALED(status) ? options_.ctr + " was killed by signal " + std::to_string(WTERMSIG(status))
                              : options_.ctr + " exited " + std::to_string(WEXITSTATUS(status));
  return R::fail(why);
}

namespace {

// Runs a containerd call again while containerd does not answer (it restarts in seconds),
// for up to a minute or until the start is cancelled.
template <typename F>
auto patiently(F call, const std::atomic<bool>& cancel) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (;;) {
    auto r = call();
    if (r || !containerd::unreachable(r.error()) || cancel || std::chrono::steady_clock::now() > deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

StartFailure ContainerdDriver::startWorker(ReplicaKey key, ReplicaSpec spec, std::string dir,
                                          const std::atomic<bool>& cancel) {
  const StartFailure kCancelled = StartFailure::agent("stopped while starting");
  auto ref = normalizeImageRef(spec.image);
  if (!ref) return StartFailure::imagePull(ref.error());
  auto image = patiently([&] { return client_->image(options_.ns, ref.value()); }, cancel);
  if (!image) return StartFailure::agent(image.error());
  if (!image.value()) {
    auto pulled = pull(ref.value(), dir, cancel, false);
    if (cancel) return kCancelled;
    if (!pulled) return StartFailure::imagePull(ref.value() + ": " + pulled.error());
    image = client_->image(options_.ns, ref.value());
    if (!image) return StartFailure::agent(image.error());
    if (!image.value()) return StartFailure::imagePull(ref.value() + " is not in containerd's store after the pull");
  }
  if (cancel) return kCancelled;
  const auto& config = *image.value();
  std::string runtime = spec.vm ? options_.vmRuntime : options_.runtime;
  if (runtime.empty()) return StartFailure::agent("this node has no VM runtime for a type: vm job");
  auto made = containerProcess(spec, {config.env, config.entrypoint, config.cmd, config.workingDir, config.user});
  if (!made) return StartFailure::agent(made.error());
  OciProcess process = std::move(made).value();
  OciOptions oci;
  if (cgroups_) oci.cgroupsPath = "/" + cgroups_->parent() + "/" + key.name();
  std::string uuids;
  for (const auto& [name, value] : spec.env)
    if (name == "NVIDIA_VISIBLE_DEVICES") uuids = value;
  auto devices = gpuDevices(gpuDeviceMinors(spec.gpus, uuids, options_.procRoot), options_.devRoot);
  if (!devices) return StartFailure::agent(devices.error());
  oci.devices = devices.value();
  if (!spec.gpus.empty()) {
    // Only the assigned GPUs' device nodes exist in the container, so CUDA numbers them
    // 0..n-1 there; NVIDIA_VISIBLE_DEVICES keeps naming them for an NVIDIA runtime hook.
    std::string visible;
    size_t n = static_cast<size_t>(std::count(spec.gpus.begin(), spec.gpus.end(), ',')) + 1;
    for (size_t i = 0; i < n; ++i) visible += (i ? "," : "") + std::to_string(i);
    for (auto& e : process.env)
      if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) e = "CUDA_VISIBLE_DEVICES=" + visible;
  }
  // The host's network: its names and resolver too (what `ctr run --net-host` does).
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf"})
    if (fs::exists(f)) oci.extraMounts.push_back({f, f, true});
  std::string specJson = ociSpecJson(spec, process, oci);
  if (auto w = writeFileAtomic(dir + "/" + kExecBaseFile, encodeExecBase(process)); !w) return StartFailure::agent(w.error());
  if (auto w = writeFileAtomic(dir + "/config.json", specJson); !w) return StartFailure::agent(w.error());
  std::string id = containerId(key);
  Client::ContainerSpec c;
  c.id = id;
  c.image = ref.value();
  c.runtime = runtime;
  c.snapshotter = options_.snapshotter;
  c.snapshotKey = id;
  c.ociSpecJson = specJson;
  c.labels = {{"yard.node", options_.node}, {"yard.replica", key.name()}, {"yard.job", spec.job}, {"yard.task", spec.task}};
  // The container first: it references the snapshot, which keeps containerd's garbage
  // collector off it once prepared.
  auto created = patiently([&] { return client_->createContainer(options_.ns, c); }, cancel);
  if (!created) return StartFailure::agent(created.error());
  auto prepare = [&] { return client_->prepareSnapshot(options_.ns, options_.snapshotter, id, config.chainId); };
  auto mounts = patiently(prepare, cancel);
  if (!mounts && mounts.error().find("(gRPC code 5)") != std::string::npos) {
    // The image is registered but its root is not unpacked (a pull was interrupted while
    // unpacking): pull again, which unpacks what is missing.
    auto pulled = pull(ref.value(), dir, cancel, true);
    if (cancel) return kCancelled;
    if (!pulled) return StartFailure::imagePull(ref.value() + ": " + pulled.error());
    mounts = patiently(prepare, cancel);
  }
  if (!mounts) return StartFailure::agent(mounts.error());
  if (cancel) return kCancelled;
  // runc mounts the datasets when the task is created, following links as it resolves their
  // paths: refuse one with a symbolic link in its path now, as yard-shim does for host
  // replicas (docs/security.md, "Dataset roots"). Only the moments between this check and
  // runc's mount remain for a swap.
  for (const auto& m : spec.mounts)
    if (auto why = shim::checkNoFollow(m.hostPath); !why.empty())
      return StartFailure::agent("mount on " + m.path + ": " + why);
  std::string log = "file://" + dir + "/output.log";
  auto task = patiently([&] { return client_->createTask(options_.ns, id, mounts.value(), {log, log}); }, cancel);
  if (!task) return StartFailure::agent(task.error());
  if (cancel) return kCancelled;
  auto started = patiently([&] { return client_->start(options_.ns, id); }, cancel);
  if (!started) return StartFailure::agent(started.error());
  if (!options_.shim.empty()) {
    auto guarded = startGuard(key, dir, started.value());
    if (!guarded) {
      // A container that already ended needs no guard (its pid may be another process's by
      // now, which the guard refuses). Unguarded, a running one would outlive a dead agent's
      // lease (two copies of a rank once the master re-places it): it does not run at all.
      auto p = client_->process(options_.ns, id);
      if (!p || !p.value() || p.value()->status != Status::Stopped) {
        client_->kill(options_.ns, id, SIGKILL, true);
        return StartFailure::agent("yard-shim guard: " + guarded.error());
      }
    }
  }
  if (auto w = writeFileAtomic(dir + "/" + kContainerFile, id); !w) return StartFailure::agent(w.error());
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

bool ContainerdDriver::stopAt(const ReplicaKey& key, const std::string& dir, int64_t termAtMs, int64_t killAtMs) {
  if (starting_.count(key)) return false;
  pid_t guard = liveGuard(dir);
  if (guard <= 0) return false;
  // The guard only ever moves its times earlier, so a rewrite cannot postpone a stop.
  if (!writeFileAtomic(dir + "/stop", std::to_string(termAtMs) + " " + std::to_string(killAtMs) + "\n")) return false;
  ::kill(guard, SIGUSR1);  // "DIR/stop changed"; without it the guard still sees it within 1 s
  return true;
}

Result<bool> ContainerdDriver::start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  using R = Result<bool>;
  if (cgroups_) {
    // The CPU quota comes once the container runs: runc's own setup (a Go program) runs in
    // the container's group, and under a small quota it alone took ~0.5 s. Memory and pids
    // are limited from the start.
    auto made = cgroups_->create(key.name(), limitsOf(spec, false));
    if (!made) return R::fail("cgroup: " + made.error());
  }
  limits_[key] = limitsOf(spec, true);
  Start& st = starting_[key];
  st.cancel = std::make_shared<std::atomic<bool>>(false);
  auto result = std::make_shared<std::promise<StartFailure>>();
  st.result = result->get_future();
  st.done = std::async(std::launch::async, [this, key, spec, dir, cancel = st.cancel, result] {
    // runc create and start (a VM runtime boots a VM) may take long on a busy host.
    containerd::Client::setCallTimeoutOfThisThread(std::chrono::seconds(60));
    result->set_value(startWorker(key, spec, dir, *cancel));
    if (onStarted) onStarted();  // after the result is there, so the tick it causes sees it
  });
  return R::ok(true);
}

CgroupLimits ContainerdDriver::limitsOf(const ReplicaSpec& spec, bool withCpu) {
  CgroupLimits limits;
  limits.cpuMillis = withCpu ? spec.cpuMillis : 0;
  limits.memoryBytes = spec.memoryBytes;
  limits.pids = 4096;  // a fork bomb stays inside its replica
  return limits;
}

void ContainerdDriver::applyCpuQuota(const ReplicaKey& key) {
  auto it = limits_.find(key);
  if (it == limits_.end()) return;
  CgroupLimits limits = it->second;
  limits_.erase(it);
  if (!cgroups_ || limits.cpuMillis <= 0) return;
  auto made = cgroups_->create(key.name(), limits);  // the group exists: its CPU quota is added
  if (!made && log) log("cgroup " + key.name() + ": the CPU quota was not applied: " + made.error());
}

bool ContainerdDriver::reachable() const { return std::chrono::steady_clock::now() >= quietUntil_; }

template <typename T>
const Result<T>& ContainerdDriver::noted(const Result<T>& r) {
  if (r || !containerd::unreachable(r.error())) {
    backoff_ = std::chrono::milliseconds(0);
    return r;
  }
  // containerd does not answer: leave it alone for a while (0.5 s doubling to 15 s) instead
  // of waiting on it for every replica at every tick.
  backoff_ = std::min<std::chrono::milliseconds>(backoff_.count() ? backoff_ * 2 : std::chrono::milliseconds(500),
                                                 std::chrono::seconds(15));
  quietUntil_ = std::chrono::steady_clock::now() + backoff_;
  if (log) log(r.error() + "; trying again in " + std::to_string(backoff_.count()) + " ms");
  return r;
}

DriverStatus ContainerdDriver::statusOf(const ReplicaKey& key, const std::string& dir) {
  auto last = lastSeen_.find(key);
  if (!reachable()) {
    DriverStatus s;
    s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
    return s;
  }
  auto p = noted(client_->process(options_.ns, containerId(key)));
  if (!p) {
    // containerd is restarting or overloaded; its shims still hold the containers.
    DriverStatus s;
    s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
    return s;
  }
  if (!p.value()) return lost("containerd has no task for it any more");
  const auto& proc = *p.value();
  DriverStatus s;
  switch (proc.status) {
    case Status::Created: s.phase = DriverStatus::Phase::Starting; break;
    case Status::Running:
    case Status::Paused: s.phase = DriverStatus::Phase::Running; break;
    case Status::Stopped: {
      s.phase = DriverStatus::Phase::Exited;
      s.exitCode = static_cast<int>(proc.exitStatus);
      if (s.exitCode > 128 && s.exitCode < 128 + 65) s.signal = s.exitCode - 128;
      if (auto fenced = readFile(dir + "/" + kFencedFile)) {
        // Its guard stopped it on its own: the lease ran out (the agent was dead or cut off).
        s.cause = EndCause::NodeLost;
        std::string line = fenced.value().substr(0, fenced.value().find('\n'));
        s.reason = "fenced by yard-shim guard: " + line;
      } else if (cgroups_) {
        auto u = cgroups_->usage(key.name());
        if (u && u.value().oomKills > 0 && s.exitCode != 0) s.oomKilled = true;
      }
      saveExit(dir, s);
      break;
    }
    case Status::Unknown:
      s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
      break;
  }
  lastSeen_[key] = s.phase;
  return s;
}

DriverStatus ContainerdDriver::inspect(const ReplicaKey& key, const std::string& dir) {
  auto it = starting_.find(key);
  if (it != starting_.end()) {
    if (it->second.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return DriverStatus{};
    StartFailure why = it->second.result.get();
    starting_.erase(it);  // waits the moment the worker needs to return
    if (why.cause != EndCause::None) {
      DriverStatus s = notStarted(why);
      saveExit(dir, s);
      return s;
    }
    applyCpuQuota(key);
  }
  return statusOf(key, dir);
}

void ContainerdDriver::signal(const ReplicaKey& key, const std::string&, int sig) {
  if (starting_.count(key)) return;  // not running yet; destroy() ends it once its start is done
  // Every process of the container, as the host driver signals the replica's process group
  // (a shell as PID 1 of a pid namespace ignores SIGTERM; its children do not).
  if (!reachable()) {
    pendingSignal_[key] = sig;
    return;
  }
  auto sent = noted(client_->kill(options_.ns, containerId(key), sig, true));
  if (sent) {
    pendingSignal_.erase(key);
    return;
  }
  // containerd is restarting: the signal goes again at the next sweep.
  if (log && !pendingSignal_.count(key)) log("signal " + std::to_string(sig) + " to " + containerId(key) + ": " + sent.error());
  pendingSignal_[key] = sig;
}

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

Result<ReplicaUsage> ContainerdDriver::stats(const ReplicaKey& key) {
  // Tasks.Metrics: containerd reads the container's cgroup, which is the replica's own group
  // (runc joined the container to it). While containerd does not answer, the agent reads the
  // group itself: the same counters.
  if (reachable()) {
    auto m = noted(client_->metrics(options_.ns, containerId(key)));
    if (m && m.value()) return Result<ReplicaUsage>::ok(ReplicaUsage{m.value()->cpuNanos, m.value()->memoryBytes});
  }
  if (!cgroups_) return Result<ReplicaUsage>::fail("no cgroups");
  auto u = cgroups_->usage(key.name());
  if (!u) return Result<ReplicaUsage>::fail(u.error());
  return Result<ReplicaUsage>::ok(ReplicaUsage{u.value().cpuNanos, u.value().memoryBytes});
}

bool ContainerdDriver::release(const ReplicaKey& key) {
  std::string id = containerId(key);
  if (!reachable()) return false;
  auto p = noted(client_->process(options_.ns, id));
  if (!p) return false;  // containerd does not answer: later
  if (p.value() && p.value()->status != Status::Stopped && p.value()->status != Status::Created) {
    client_->kill(options_.ns, id, SIGKILL, true);
    for (int i = 0; i < 10; ++i) {  // at most ~100 ms on the io thread; sweep() retries
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      p = client_->process(options_.ns, id);
      if (!p || !p.value() || p.value()->status == Status::Stopped) break;
    }
    if (!p || (p.value() && p.value()->status != Status::Stopped)) return false;
  }
  auto step = [&](const Result<bool>& r) {
    if (!r && log && !leftover_.count(key)) log(r.error() + " (retrying)");
    return r.isOk();
  };
  if (!step(client_->deleteTask(options_.ns, id))) return false;
  if (!step(client_->deleteContainer(options_.ns, id))) return false;
  if (!step(client_->removeSnapshot(options_.ns, options_.snapshotter, id))) return false;
  if (cgroups_ && !cgroups_->destroy(key.name(), std::chrono::milliseconds(100))) return false;
  return true;
}

void ContainerdDriver::destroy(const ReplicaKey& key, const std::string&) {
  lastSeen_.erase(key);
  pendingSignal_.erase(key);
  limits_.erase(key);
  if (auto it = starting_.find(key); it != starting_.end()) {
    *it->second.cancel = true;  // the worker stops at its next step (a pull is killed)
    destroyAfterStart_.insert(key);
    return;
  }
  if (!release(key)) leftover_.insert(key);
}

void ContainerdDriver::sweep() {
  if (!reachable()) return;
  for (auto it = pendingSignal_.begin(); it != pendingSignal_.end() && reachable();) {
    auto sent = noted(client_->kill(options_.ns, containerId(it->first), it->second, true));
    it = sent ? pendingSignal_.erase(it) : std::next(it);
  }
  for (auto it = destroyAfterStart_.begin(); it != destroyAfterStart_.end();) {
    auto s = starting_.find(*it);
    if (s != starting_.end()) {
      if (s->second.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      starting_.erase(s);
    }
    if (!release(*it)) leftover_.insert(*it);
    it = destroyAfterStart_.erase(it);
  }
  for (auto it = leftover_.begin(); it != leftover_.end();) it = release(*it) ? leftover_.erase(it) : std::next(it);
}

DriverStatus ContainerdDriver::recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  // The runc shim kept the container (running or with its exit status) while the agent was
  // away; only a start the agent did not see finish is not trusted.
  if (auto ended = loadExit(dir)) return *ended;
  if (!fs::exists(dir + "/" + kContainerFile)) return lost("restarted while starting it; it never ran");
  limits_[key] = limitsOf(spec, true);  // in case the agent stopped before it added the CPU quota
  applyCpuQuota(key);
  auto p = client_->process(options_.ns, containerId(key));
  if (p && !p.value()) return lost("containerd has no task for it any more");
  // Its guard outlives the agent; one that is gone (a host reboot kills the container too, so
  // rarely) is replaced, so the container is never without one while it runs.
  if (p && !options_.shim.empty() && p.value()->status != Status::Stopped && !liveGuard(dir)) {
    auto guarded = startGuard(key, dir, p.value()->pid);
    if (!guarded)
      recoverNotes_.push_back("no guard for " + containerId(key) + " (the agent alone can stop it): " + guarded.error());
    else if (guarded.value())
      recoverNotes_.push_back("started a new guard for " + containerId(key));
  }
  return statusOf(key, dir);
}

void ContainerdDriver::removeLeftovers(const std::set<std::string>& held, const Log& log) {
  auto ids = client_->containers(options_.ns, "labels.\"yard.node\"==\"" + options_.node + "\"");
  if (!ids) {
    if (log) log("containerd: " + ids.error());
    return;
  }
  std::string prefix = containerId(ReplicaKey{});
  prefix = prefix.substr(0, prefix.size() - 3);  // without "0-0"
  for (const auto& id : ids.value()) {
    if (id.rfind(prefix, 0) != 0) continue;
    std::string name = id.substr(prefix.size());
    if (held.count(name)) continue;
    ReplicaKey key;
    try {
      size_t dash = name.find('-');
      key.id = std::stoll(name.substr(0, dash));
      key.attempt = std::stoi(name.substr(dash + 1));
    } catch (...) {
      continue;
    }
    if (log) log("removing leftover container " + id);
    if (!release(key)) leftover_.insert(key);
  }
}

}  // namespace yard::agent
