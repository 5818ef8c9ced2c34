#pragma once
// Shared by the yard-shim tests (shim_*_test.cpp): yard-shim run against the real binary
// (YARD_SHIM), one replica's temp dir, and polling helpers. Each test gets its own temp dir and
// kills whatever workload it leaves running.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/shim/files.h"
#include "agent/shim/supervise.h"

namespace shim_test {

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Polls `done` every 10 ms; false if it still does not hold after 5 s.
inline bool eventually(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// True once `pid` has ended: reaped here, gone, or a zombie nobody reaps.
inline bool processGone(pid_t pid) {
  if (::waitpid(pid, nullptr, WNOHANG) == pid) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

inline pid_t parentOf(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat.size()) return 0;
  return static_cast<pid_t>(std::atoi(stat.c_str() + paren + 4));
}

struct Ran {
  int rc = -1;
  std::string out, err;
};

// Runs yard-shim and collects stdout and stderr until both close. A daemonized shim that kept
// the launcher's pipes open would hang the agent reading them; here it fails the test instead.
inline Ran runShim(const std::vector<std::string>& args) {
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  std::vector<char*> argv{const_cast<char*>(YARD_SHIM)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(YARD_SHIM, argv.data());
    ::_exit(126);
  }
  ::close(out[1]);
  ::close(err[1]);
  Ran ran;
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&ran.out, &ran.err};
  int open = 2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (open > 0) ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  INFO("stdout: " << ran.out << "\nstderr: " << ran.err);
  REQUIRE(open == 0);  // stdout and stderr reached EOF in time
  ran.rc = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return ran;
}

// One replica's temp dir: DIR (the state dir the agent would create) and room for mount sources
// and env files beside it. The test process adopts orphans, as an agent may, so a shim whose
// launcher has exited becomes its child and is reaped here rather than left a zombie.
class Replica {
 public:
  Replica() {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    std::string tmpl = (std::filesystem::temp_directory_path() / "yard-shim-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
    dir_ = root_ + "/replica";
    std::filesystem::create_directory(dir_);
  }
  ~Replica() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  Ran run(std::vector<std::string> flags, const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"run", "--dir", dir_};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return runShim(args);
  }
  Ran exec(std::vector<std::string> flags, const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"exec", "--dir", dir_};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return runShim(args);
  }

  std::string envFile(const std::vector<std::string>& entries) const {
    std::string content;
    for (const std::string& e : entries) content += e + '\0';
    writeFile(path("env"), content);
    return path("env");
  }

  pid_t pid() const { return std::atoi(readFile(dir_ + "/pid").c_str()); }
  pid_t shimPid() const { return std::atoi(readFile(dir_ + "/shim.pid").c_str()); }
  std::string output() const { return readFile(dir_ + "/output.log"); }
  std::string status() const {
    bool written = eventually([&] { return exists(dir_ + "/status"); });
    REQUIRE(written);
    return readFile(dir_ + "/status");
  }
  bool outputHas(const std::string& text) const {
    return eventually([&] { return output().find(text) != std::string::npos; });
  }
  bool shimGone() const { return eventually([&] { return processGone(shimPid()); }); }

 private:
  // Kills a workload the test left running (a failed REQUIRE), so nothing outlives the test.
  void stop() const {
    if (!exists(dir_ + "/pid") || exists(dir_ + "/status")) return;
    ::kill(-pid(), SIGKILL);
    eventually([&] { return exists(dir_ + "/status"); });
    eventually([&] { return processGone(shimPid()); });
  }

  std::string root_, dir_;
};

// Lease and stop (docs/shim.md, "Lease and stop"): the agent writes DIR/lease and DIR/stop, both
// "<ms> <ms>" on CLOCK_BOOTTIME; the shim (and the guard) carries them out on its own.
using yard::shim::bootMs;

inline void writeTimes(const std::string& path, int64_t a, int64_t b) {
  REQUIRE(yard::shim::writeFileAtomically(path, std::to_string(a) + " " + std::to_string(b) + "\n") == 0);
}

}  // namespace shim_test
