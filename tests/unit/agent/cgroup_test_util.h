#pragma once
// Shared by the agent/cgroup tests (cgroup_*_test.cpp): real cgroups on this machine under a
// parent "yard-test-<pid>". The real tests need root and usable cgroup controllers; without them
// they WARN "SKIPPED: ..." and return. Every real test cleans up through TestParent, even when a
// REQUIRE fails: it kills what it forked, destroys every child group and removes the parent.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/cgroup/cgroup.h"
#include "agent/cgroup/cgroup_text.h"

namespace cgroup_test {

using namespace yard::agent;

constexpr int64_t kMiB = 1024 * 1024;

inline std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Why the real tests cannot run here, or "" when they can.
inline std::string skipReason() {
  if (::geteuid() != 0)
    return "real cgroup tests need root (running as uid " + std::to_string(::geteuid()) + ")";
  auto layout = chooseCgroupLayout(parseCgroupMounts(readText("/proc/self/mountinfo")));
  if (!layout) return "no usable cgroups: " + layout.error();
  if (layout.value().version == CgroupVersion::V2) {
    std::string root = layout.value().mounts.front().second;
    auto missing = missingControllers(readText(root + "/cgroup.controllers"),
                                      cgroupControllers(CgroupVersion::V2));
    if (!missing.empty()) return "cgroup v2 at " + root + " lacks controllers it needs";
  }
  return "";
}

// Async-signal-safe helpers for forked children (no allocation after fork).
inline void writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

inline void writeNumber(int fd, int64_t value) {
  char digits[24];
  char* end = std::to_chars(digits, digits + sizeof digits - 1, value).ptr;  // 20 digits fit
  *end++ = '\n';
  writeAll(fd, digits, static_cast<size_t>(end - digits));
}

// The child's way in, as yard-shim does it: its own pid into every cgroup.procs.
inline void joinThroughProcsFiles(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ::_exit(90);
    writeNumber(fd, ::getpid());
    ::close(fd);
  }
}

inline void burnCpu(std::chrono::milliseconds amount) {
  timespec used{};
  volatile uint64_t counter = 0;
  do {
    for (int i = 0; i < 100000; ++i) counter = counter + 1;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  } while (used.tv_sec * 1000 + used.tv_nsec / 1000000 < amount.count());
}

// A pipe the child reports on: one line per number.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
  // The next number the child wrote; -1 after `timeout` or when the child closed the pipe.
  int64_t next(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd ready{read, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) return -1;
      char c;
      if (::read(read, &c, 1) != 1) return -1;
      if (c == '\n') return std::strtoll(line.c_str(), nullptr, 10);
      line.push_back(c);
    }
  }
};

// The parent group of one test: "yard-test-<pid>".
class TestParent {
 public:
  // WARNs "SKIPPED: ..." and returns null when the machine cannot run real cgroup tests.
  static std::unique_ptr<TestParent> openOrSkip() {
    if (std::string reason = skipReason(); !reason.empty()) {
      WARN("SKIPPED: " << reason);
      return nullptr;
    }
    std::string name = "yard-test-" + std::to_string(::getpid());
    auto opened = Cgroups::open(name);
    INFO(opened.error());
    REQUIRE(opened.isOk());
    return std::unique_ptr<TestParent>(new TestParent(std::move(opened).value(), name));
  }

  ~TestParent() {
    if (finished_) return;
    for (pid_t pid : forked_) ::kill(pid, SIGKILL);
    for (pid_t pid : forked_) ::waitpid(pid, nullptr, 0);
    for (const auto& child : cgroups_->children()) cgroups_->destroy(child);
    cgroups_->removeParent();
    reapOrphans();
  }

  Cgroups& cgroups() { return *cgroups_; }
  const std::string& name() const { return name_; }

  // Forks a child that runs `body` and exits 0 (the body may exec or _exit itself).
  pid_t fork(const std::function<void()>& body) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Catch2's fatal-signal handlers would print a test report from the child and exit.
      for (int sig : {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGILL, SIGFPE, SIGBUS})
        ::signal(sig, SIG_DFL);
      body();
      ::_exit(0);
    }
    forked_.push_back(pid);
    return pid;
  }

  // The wait status of `pid`, or nullopt when it has not exited within `timeout`.
  std::optional<int> waitFor(pid_t pid, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        forked_.erase(std::remove(forked_.begin(), forked_.end(), pid), forked_.end());
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  // A control file of group `group` as the kernel reports it, trailing newline removed.
  std::string control(const std::string& group, const std::string& controller,
                      const std::string& file) const {
    for (const auto& [name, mount] : cgroups_->layout().mounts) {
      if (name == controller)
        return trimmed(readText(mount + "/" + name_ + "/" + group + "/" + file));
    }
    FAIL("controller " << controller << " not in the layout");
    return {};
  }

  // Directories named after the parent under ANY cgroup mount (not only those Yard uses).
  std::vector<std::string> leftovers() const {
    std::vector<std::string> found;
    for (const auto& mount : parseCgroupMounts(readText("/proc/self/mountinfo"))) {
      std::string dir = mount.path + "/" + name_;
      if (std::filesystem::exists(dir)) found.push_back(dir);
    }
    return found;
  }

  // Whether every thread of `pid` is in `group` in every hierarchy Yard uses.
  bool allThreadsIn(pid_t pid, const std::string& group) const {
    const std::string want = "/" + name_ + "/" + group;
    int threads = 0;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      ++threads;
      std::istringstream lines(readText(task.path().string() + "/cgroup"));
      for (const auto& [controller, mount] : cgroups_->layout().mounts) {
        (void)mount;
        bool in = false;
        lines.clear();
        lines.seekg(0);
        for (std::string line; std::getline(lines, line);) {
          // "ID:controller[,controller]:path" (v1) or "0::path" (v2)
          auto first = line.find(':'), second = line.find(':', first + 1);
          std::string list = "," + line.substr(first + 1, second - first - 1) + ",";
          bool matches = cgroups_->version() == CgroupVersion::V2
                             ? list == ",,"
                             : list.find("," + controller + ",") != std::string::npos;
          if (matches) in = line.substr(second + 1) == want;
        }
        if (!in) return false;
      }
    }
    return threads > 0;
  }

  // Destroys every child group, removes the parent and checks nothing is left anywhere.
  void finish() {
    for (const auto& child : cgroups_->children()) {
      auto destroyed = cgroups_->destroy(child);
      INFO(destroyed.error());
      CHECK(destroyed.isOk());
    }
    auto removed = cgroups_->removeParent();
    INFO(removed.error());
    CHECK(removed.isOk());
    CHECK(leftovers().empty());
    for (pid_t pid : forked_) ::waitpid(pid, nullptr, 0);  // all killed by destroy
    forked_.clear();
    reapOrphans();
    finished_ = true;
  }

 private:
  TestParent(std::unique_ptr<Cgroups> cgroups, std::string name)
      : cgroups_(std::move(cgroups)), name_(std::move(name)) {}

  // Grandchildren re-parented to this process (the tests that fork them make it a subreaper).
  static void reapOrphans() {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  std::unique_ptr<Cgroups> cgroups_;
  std::string name_;
  std::vector<pid_t> forked_;
  bool finished_ = false;
};

inline int64_t cpuNanos(Cgroups& cgroups, const std::string& group) {
  auto usage = cgroups.usage(group);
  INFO(usage.error());
  REQUIRE(usage.isOk());
  return usage.value().cpuNanos;
}

inline bool contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

}  // namespace cgroup_test
