// Images for the containerd driver: references, finding an image in containerd's store,
// pulling it with ctr (registry credentials through a hosts directory), the pull metrics.
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/drivers/containerd/containerd_internal.h"
#include "agent/drivers/host/host_driver.h"
#include "agent/node/metrics.h"

namespace yard::agent {

using namespace containerd_detail;

namespace {

namespace fs = std::filesystem;

bool refChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == '-' || c == '/' || c == ':' || c == '@' || std::isupper(static_cast<unsigned char>(c));
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool insecure(const ContainerdOptions& options, const std::string& host) {
  return std::find(options.insecureRegistries.begin(), options.insecureRegistries.end(), host) !=
         options.insecureRegistries.end();
}

// `ctr images pull` of `ref`, over plain HTTP or with credentials where the options say so.
std::vector<std::string> pullArgv(const ContainerdOptions& options, const std::string& hostsDir, const std::string& ref) {
  std::string host = registryHost(ref);
  std::vector<std::string> argv = {options.ctr, "--address", options.socket, "--namespace", options.ns,
                                   "images", "pull", "--snapshotter", options.snapshotter};
  if (insecure(options, host)) argv.push_back("--plain-http");
  if (options.registryAuth.count(host)) {
    argv.push_back("--hosts-dir");
    argv.push_back(hostsDir);
  }
  argv.push_back(ref);
  return argv;
}

// Why a pull failed: ctr's last line in its log, else how `ctr` ended (its wait status).
std::string pullFailure(const std::string& ctr, const std::string& logPath, int status) {
  auto log = readFile(logPath);
  std::string why = lastLine(log ? log.value() : "");
  if (why.rfind("ctr: ", 0) == 0) why = why.substr(5);
  if (why.empty())
    why = WIFSIGNALED(status) ? ctr + " was killed by signal " + std::to_string(WTERMSIG(status))
                              : ctr + " exited " + std::to_string(WEXITSTATUS(status));
  return why;
}

// Reports one pull to the metrics (agent/node/metrics.h) when it goes out of scope: "failed"
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

namespace containerd_detail {

std::string lastLine(const std::string& text) {
  std::string line, last;
  std::stringstream in(text);
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

Result<bool> writeRegistryHosts(const ContainerdOptions& options, const std::string& dir) {
  // Credentials go to ctr through a hosts directory only root can read, never on its command
  // line (which every user of the host can see). Rewritten at every start, so credentials
  // removed from the config do not stay on disk.
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (options.registryAuth.empty()) return Result<bool>::ok(true);
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  for (const auto& [host, auth] : options.registryAuth) {
    std::string url = (insecure(options, host) ? "http://" : "https://") + host;
    fs::create_directories(dir + "/" + host, ec);
    std::string toml = "server = \"" + url + "\"\n\n[host.\"" + url + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n" +
                       "  [host.\"" + url + "\".header]\n    Authorization = \"Basic " +
                       base64(auth.username + ":" + auth.password) + "\"\n";
    if (auto w = writeFileAtomic(dir + "/" + host + "/hosts.toml", toml); !w) return w;
  }
  return Result<bool>::ok(true);
}

}  // namespace containerd_detail

std::string ContainerdDriver::hostsDir() { return options_.stateDir + "/registries"; }

StartFailure ContainerdDriver::findImage(Launch& l) {
  auto ref = normalizeImageRef(l.spec.image);
  if (!ref) return StartFailure::imagePull(ref.error());
  l.ref = ref.value();
  auto image = patiently([&] { return client_->image(options_.ns, l.ref); }, l.cancel);
  if (!image) return StartFailure::agent(image.error());
  if (!image.value()) {
    auto pulled = pull(l.ref, l.dir, l.cancel, false);
    if (l.cancel) return cancelled();
    if (!pulled) return StartFailure::imagePull(l.ref + ": " + pulled.error());
    image = client_->image(options_.ns, l.ref);
    if (!image) return StartFailure::agent(image.error());
    if (!image.value()) return StartFailure::imagePull(l.ref + " is not in containerd's store after the pull");
  }
  l.image = *image.value();
  return StartFailure::none();
}

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
  std::string logPath = dir + "/" + kPullLog;
  PullTimer timed{options_.metrics};
  int out = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto pid = spawnProcess(pullArgv(options_, hostsDir(), ref), out);
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
  return R::fail(pullFailure(options_.ctr, logPath, status));
}

}  // namespace yard::agent
