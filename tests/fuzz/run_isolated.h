#pragma once
// Shared by the fuzz corpus tests (corpus_test.cpp, frame_corpus_test.cpp): one input's work in
// a child process with bounded memory and time.

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

namespace yard::fuzz {

// Runs `body` in a child process limited to `maxBytes` of address space (not under ASan,
// which reserves terabytes) and `maxSeconds`, so that a reproducer of a known hang or
// memory blow-up fails the test instead of taking the machine down. `body` returns "" when
// all went well, else what went wrong. Returns "" or what happened to the child.
inline std::string runIsolated(const std::function<std::string()>& body, size_t maxBytes, unsigned maxSeconds) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__)
    rlimit limit{maxBytes, maxBytes};
    setrlimit(RLIMIT_AS, &limit);
#else
    (void)maxBytes;
#endif
    alarm(maxSeconds);
    std::string problem;
    try {
      problem = body();
    } catch (const std::exception& e) {
      problem = std::string("threw ") + e.what();
    } catch (...) {
      problem = "threw something that is not a std::exception";
    }
    if (!problem.empty() && write(fds[1], problem.data(), std::min<size_t>(problem.size(), 4096)) < 0) {
    }
    _exit(problem.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string message;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) message.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "failed: " + message;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) return "did not finish within " + std::to_string(maxSeconds) + " s";
    return "was killed by signal " + std::to_string(sig);
  }
  return "ended oddly";
}

}  // namespace yard::fuzz
