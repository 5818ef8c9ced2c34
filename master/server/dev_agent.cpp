#include "master/server/dev_agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

namespace yard::master {

Result<std::unique_ptr<DevAgent>> DevAgent::start(const std::string& agentApi, const std::string& token,
                                                  const std::string& caFile, const std::string& dataDir,
                                                  mode_t agentUmask) {
  using R = Result<std::unique_ptr<DevAgent>>;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return R::fail("--dev: cannot find this program's path: " + ec.message());
  std::string agent = (self.parent_path() / "yard-agent").string();
  if (access(agent.c_str(), X_OK) != 0) return R::fail("--dev: " + agent + " is missing; build yard-agent next to yard-master");
  std::filesystem::create_directories(dataDir, ec);
  // One cgroup parent per state directory: two dev clusters on one machine (a demo next to a
  // test run) must not see each other's replica groups as leftovers.
  auto dir = std::filesystem::weakly_canonical(dataDir, ec).string();
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016zx", std::hash<std::string>{}(dir));
  // The token goes in a file only root reads, not on a command line every user can see.
  std::string config = dataDir + "/agent.toml";
  {
    int fd = ::open(config.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return R::fail("--dev: cannot write " + config);
    ::fchmod(fd, 0600);
    std::string ca = std::filesystem::absolute(caFile, ec).string();
    std::string text = "token = \"" + token + "\"\nca = \"" + ca + "\"\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok) return R::fail("--dev: cannot write " + config);
  }
  std::vector<std::string> args = {agent, "--config", config, "--master", agentApi, "--name", "dev",
                                   "--address", "127.0.0.1", "--data-dir", dataDir, "--allow-host-tasks",
                                   "--cgroup-parent", std::string("yard/dev-") + suffix, "--stop-replicas-on-exit"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return R::fail("--dev: fork failed");
  if (pid == 0) {
    // The agent's output goes to the master's stderr, next to the master's own log. It must
    // not inherit the master's sockets or lock, and it ends with the master, also a master
    // killed with SIGKILL; it stops its replicas first (--stop-replicas-on-exit).
    dup2(STDERR_FILENO, STDOUT_FILENO);
    close_range(3, ~0u, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) _exit(1);  // the master is already gone
    ::umask(agentUmask);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return R::ok(std::make_unique<DevAgent>(pid));
}

void DevAgent::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace yard::master
