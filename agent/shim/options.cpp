#include "agent/shim/options.h"

#include <string_view>

namespace yard::shim {

namespace {

std::vector<std::string> splitColons(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t colon = s.find(':', start);
    parts.push_back(s.substr(start, colon - start));
    if (colon == std::string::npos) return parts;
    start = colon + 1;
  }
}

// Sets `slot` from a flag that may be given once.
std::optional<std::string> setOnce(std::optional<std::string>& slot, std::string_view flag,
                                   const std::string& value) {
  if (slot) return std::string(flag) + " given twice ('" + *slot + "' and '" + value + "')";
  slot = value;
  return std::nullopt;
}

}  // namespace

const char* usage() {
  return "usage: yard-shim run --dir DIR [--env-file FILE] [--cgroup-procs FILE]...\n"
         "                     [--mount SRC:DST[:ro|:rw]]... [--workdir PATH] [--user UID:GID]\n"
         "                     -- ARGV...\n"
         "       yard-shim exec --dir DIR [--env-file FILE] [--cgroup-procs FILE]...\n"
         "                      [--workdir PATH] [--env NAME=VALUE]... [--tty] [--user UID:GID]\n"
         "                      -- ARGV...\n"
         "       yard-shim guard --dir DIR --pid PID [--cgroup-procs FILE]...\n";
}

Result<ShimOptions::User> parseUser(const std::string& value) {
  using R = Result<ShimOptions::User>;
  auto id = [](const std::string& s) -> std::optional<uint32_t> {
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    unsigned long long v = std::stoull(s);
    if (v >= 4294967295ULL) return std::nullopt;  // (uid_t)-1 means "leave unchanged" to setuid
    return static_cast<uint32_t>(v);
  };
  size_t colon = value.find(':');
  if (colon == std::string::npos) return R::fail("--user '" + value + "': expected UID:GID (numbers)");
  auto uid = id(value.substr(0, colon)), gid = id(value.substr(colon + 1));
  if (!uid) return R::fail("--user '" + value + "': the uid must be a number below 4294967295");
  if (!gid) return R::fail("--user '" + value + "': the gid must be a number below 4294967295");
  return R::ok(ShimOptions::User{*uid, *gid});
}

Result<BindMount> parseMount(const std::string& value) {
  auto fail = [&](const std::string& why) {
    return Result<BindMount>::fail("--mount '" + value + "': " + why);
  };
  std::vector<std::string> parts = splitColons(value);
  if (parts.size() < 2 || parts.size() > 3) return fail("expected SRC:DST[:ro|:rw]");
  BindMount m{parts[0], parts[1], false};
  if (m.source.empty() || m.source[0] != '/') return fail("SRC must be an absolute path");
  if (m.target.empty() || m.target[0] != '/') return fail("DST must be an absolute path");
  if (parts.size() == 3) {
    if (parts[2] == "ro") {
      m.readOnly = true;
    } else if (parts[2] != "rw") {
      return fail("mode must be ro or rw, not '" + parts[2] + "'");
    }
  }
  return Result<BindMount>::ok(m);
}

Result<ShimOptions> parseShimArgs(int argc, char** argv) {
  using R = Result<ShimOptions>;
  ShimOptions o;
  if (argc < 2) return R::fail("missing command (run, exec or guard)");
  std::string_view command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") return R::ok(o);
  if (command == "run") {
    o.mode = Mode::kRun;
  } else if (command == "exec") {
    o.mode = Mode::kExec;
  } else if (command == "guard") {
    o.mode = Mode::kGuard;
  } else {
    return R::fail("unknown command '" + std::string(command) + "' (expected run, exec or guard)");
  }

  std::optional<std::string> dir;
  int i = 2;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") {
      o.mode = Mode::kHelp;
      return R::ok(o);
    }
    if (arg == "--tty") {
      if (o.mode != Mode::kExec) return R::fail("--tty is only for exec");
      o.tty = true;
      continue;
    }
    // Accept both `--flag value` and `--flag=value`.
    std::string flag = arg, value;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) return R::fail(flag + " needs a value");
      value = argv[++i];
    } else {
      return R::fail("unexpected argument '" + arg + "' (put the command after --)");
    }
    if (value.empty()) return R::fail(flag + " needs a non-empty value");

    std::optional<std::string> err;
    if (flag == "--dir") {
      err = setOnce(dir, flag, value);
    } else if (flag == "--pid" && o.mode == Mode::kGuard) {
      if (o.pid != 0) return R::fail("--pid given twice");
      if (value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos || std::stoi(value) <= 0)
        return R::fail("--pid must be a process id > 0, not '" + value + "'");
      o.pid = std::stoi(value);
    } else if (flag == "--cgroup-procs") {
      o.cgroupProcs.push_back(value);
    } else if (o.mode == Mode::kGuard) {
      return R::fail("unknown option '" + flag + "' for guard (it takes --dir, --pid and --cgroup-procs)");
    } else if (flag == "--env-file") {
      err = setOnce(o.envFile, flag, value);
    } else if (flag == "--workdir") {
      err = setOnce(o.workdir, flag, value);
    } else if (flag == "--env" && o.mode == Mode::kExec) {
      size_t eqAt = value.find('=');
      if (eqAt == std::string::npos || eqAt == 0)
        return R::fail("--env '" + value + "': expected NAME=VALUE");
      o.env.push_back(value);
    } else if (flag == "--env") {
      return R::fail("--env is only for exec (run takes --env-file)");
    } else if (flag == "--user") {
      if (o.user) return R::fail("--user given twice");
      Result<ShimOptions::User> u = parseUser(value);
      if (!u) return R::fail(u.error());
      o.user = u.value();
    } else if (flag == "--mount" && o.mode == Mode::kRun) {
      Result<BindMount> m = parseMount(value);
      if (!m) return R::fail(m.error());
      o.mounts.push_back(std::move(m).value());
    } else if (flag == "--mount") {
      return R::fail("--mount is only for run (exec joins the workload's mounts)");
    } else {
      return R::fail("unknown option '" + flag + "'");
    }
    if (err) return R::fail(*err);
  }
  if (!dir) return R::fail("--dir is required");
  o.dir = *dir;
  if (o.mode == Mode::kGuard) {
    // guard watches a process someone else started: nothing to run.
    if (i < argc) return R::fail("guard takes no command ('--' given)");
    if (o.pid == 0) return R::fail("--pid is required for guard");
    return R::ok(std::move(o));
  }
  if (i >= argc) return R::fail("missing '-- ARGV...' (the command to run)");
  for (++i; i < argc; ++i) o.argv.emplace_back(argv[i]);
  if (o.argv.empty()) return R::fail("nothing to run after '--'");
  if (o.argv[0].empty()) return R::fail("ARGV[0] is empty");
  return R::ok(std::move(o));
}

}  // namespace yard::shim
