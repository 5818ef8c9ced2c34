#!/usr/bin/env bash
# The Debian packages, for real, on this (disposable, root) machine: scripts/package.sh builds
# them from the build tree; their contents, modes, conffiles and Depends are checked; they are
# installed with dpkg -i; the units pass systemd-analyze verify; a master and an agent run from
# the installed files as the units run them (systemd is not PID 1 here), a job's replica runs,
# and an upgrade (dpkg -i of a newer revision, then restarting both daemons) keeps the
# database, the admin's config and the running replica; remove keeps state, purge deletes it.
#
# usage: package_test.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when not root, when yard packages or /etc/yard or /var/lib/yard already
# exist (a real installation is never touched), or when systemd runs as PID 1 (the postinst
# would start real services).
set -u
src=$1
build=$2
tmp=$(mktemp -d /tmp/yard-pkgtest-XXXXXX)
chmod 0755 "$tmp"
tag="pkgtest$$"
fails=0
pids=()
created_user=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
say() { echo "--- $*"; }
skip() { echo "SKIPPED: $*"; rm -rf "$tmp"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i on this machine)"
# One run at a time on this machine, whichever ctest started it (RESOURCE_LOCK only orders the
# tests of one ctest run): a second run waits here for the first to finish and clean up.
exec 9>/run/lock/yard-package-test.lock
flock -w 150 9 || skip "another package test holds /run/lock/yard-package-test.lock"
[ -d /run/systemd/system ] && skip "systemd is PID 1 here: installing would start real services"
for p in yard-master yard-agent yardctl; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed && skip "$p is installed on this machine"
done
[ -e /etc/yard ] || [ -e /var/lib/yard ] && skip "/etc/yard or /var/lib/yard exists: a real installation"
getent passwd yard >/dev/null || created_user=1

# dpkg LOG ARGS...: dpkg, waiting up to 2 minutes while something else (apt) holds its lock.
dpkg_run() {
  local log=$1; shift
  for _ in $(seq 120); do
    dpkg "$@" </dev/null >"$log" 2>&1 && return 0
    grep -q 'lock was locked by another process' "$log" || return 1
    sleep 1
  done
  return 1
}

kill_replicas() {
  for f in /var/lib/yard/agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for f in /var/lib/yard/agent/replicas/*/shim.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
}
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  kill_replicas
  sleep 0.2
  for d in /sys/fs/cgroup/*/yard/"$tag" /sys/fs/cgroup/yard/"$tag"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  dpkg_run "$tmp/dpkg-cleanup.log" --purge yard-master yard-agent yardctl
  rm -rf /etc/yard /var/lib/yard
  [ "$created_user" = 1 ] && getent passwd yard >/dev/null && userdel yard 2>/dev/null
  getent group yard >/dev/null && [ "$created_user" = 1 ] && groupdel yard 2>/dev/null
  if [ "$fails" -gt 0 ]; then
    for f in "$tmp"/*.err "$tmp"/*.log; do [ -f "$f" ] && { echo "=== $f"; tail -30 "$f"; }; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# mode_of PATH: "owner:group octal-mode"
mode_of() { stat -c '%U:%G %a' "$1" 2>/dev/null; }
expect_mode() {  # expect_mode PATH "owner:group mode"
  local got; got=$(mode_of "$1")
  [ "$got" = "$2" ] || fail "$1: ${got:-missing}, want $2"
}

say "scripts/package.sh builds three packages from the build tree (revisions 1 and 2)"
arch=$(dpkg --print-architecture)
"$src/scripts/package.sh" --no-build --build-dir "$build" --out "$tmp/r1" >"$tmp/package1.log" 2>&1 || fail "package.sh: $(tail -5 "$tmp/package1.log")"
"$src/scripts/package.sh" --no-build --build-dir "$build" --release 2 --out "$tmp/r2" >"$tmp/package2.log" 2>&1 || fail "package.sh --release 2"
mapfile -t debs <"$tmp/package1.log"
[ "${#debs[@]}" -eq 3 ] || { fail "package.sh printed ${#debs[@]} packages: ${debs[*]}"; exit 1; }
version=$(basename "${debs[0]}" | sed -n 's/^yard-master_\(.*\)-1_.*\.deb$/\1/p')
[ -n "$version" ] || { fail "first package is not yard-master_<version>-1: ${debs[0]}"; exit 1; }
deb() { echo "$tmp/r$2/${1}_${version}-$2_${arch}.deb"; }
for p in yard-master yard-agent yardctl; do
  for r in 1 2; do [ -f "$(deb $p $r)" ] || fail "no $(deb $p $r)"; done
done
[ "$fails" -eq 0 ] || exit 1
for f in "$tmp"/r1/*; do case "$f" in *.deb) ;; *) fail "package.sh left $f behind" ;; esac; done

say "contents, modes, conffiles and Depends"
# The web console's files (hashed names) are checked apart: index.html and some script.
contents() { dpkg-deb -c "$1" | awk '$6 !~ /\/$/ && $6 !~ /^\.\/usr\/share\/yard\/console\// {print $1, $2, $6}' | sort; }
check_contents() {  # check_contents DEB "EXPECTED LINES"
  local got; got=$(contents "$1")
  [ "$got" = "$(echo "$2" | sort)" ] || fail "$(basename "$1") files:
$got
want:
$2"
}
check_contents "$(deb yard-master 1)" "-rw------- root/root ./etc/yard/master.toml
-rw-r--r-- root/root ./lib/systemd/system/yard-master.service
-rwxr-xr-x root/root ./usr/bin/yard-master
-rw-r--r-- root/root ./usr/share/doc/yard-master/operations.md"
console=$(dpkg-deb -c "$(deb yard-master 1)" | awk '{print $1, $2, $6}' | grep ' ./usr/share/yard/console/')
echo "$console" | grep -q '^-rw-r--r-- root/root ./usr/share/yard/console/index.html$' ||
  fail "yard-master has no web console (usr/share/yard/console/index.html): $console"
echo "$console" | grep -q '^-rw-r--r-- root/root ./usr/share/yard/console/assets/.*\.js$' ||
  fail "yard-master's web console has no script: $console"
check_contents "$(deb yard-agent 1)" "-rw------- root/root ./etc/yard/agent.toml
-rw-r--r-- root/root ./lib/systemd/system/yard-agent.service
-rwxr-xr-x root/root ./usr/bin/yard-agent
-rwxr-xr-x root/root ./usr/bin/yard-rsh
-rwxr-xr-x root/root ./usr/bin/yard-shim
-rw-r--r-- root/root ./usr/share/doc/yard-agent/operations.md"
check_contents "$(deb yardctl 1)" "-rwxr-xr-x root/root ./usr/bin/yardctl"
field() { dpkg-deb -f "$1" "$2"; }
[ "$(dpkg-deb -I "$(deb yard-master 1)" conffiles)" = /etc/yard/master.toml ] || fail "yard-master conffiles: $(dpkg-deb -I "$(deb yard-master 1)" conffiles)"
[ "$(dpkg-deb -I "$(deb yard-agent 1)" conffiles)" = /etc/yard/agent.toml ] || fail "yard-agent conffiles"
dpkg-deb -I "$(deb yardctl 1)" conffiles >/dev/null 2>&1 && fail "yardctl has conffiles"
for dep in adduser libsqlite3-0 libcapnp-0.9.2 libyaml-cpp0.7; do
  field "$(deb yard-master 1)" Depends | grep -q "$dep" || fail "yard-master Depends lacks $dep: $(field "$(deb yard-master 1)" Depends)"
done
for dep in libcgroup2 libgrpc++1.51 libcapnp-0.9.2; do
  field "$(deb yard-agent 1)" Depends | grep -q "$dep" || fail "yard-agent Depends lacks $dep: $(field "$(deb yard-agent 1)" Depends)"
done
[ "$(field "$(deb yard-agent 1)" Recommends)" = "containerd, runc" ] || fail "yard-agent Recommends: $(field "$(deb yard-agent 1)" Recommends)"
# yardctl links Cap'n Proto, kj, yaml-cpp and libstdc++ into itself (master/yardctl/CMakeLists.txt:
# a command is mostly process start); OpenSSL and libc stay shared.
ctl_deps=$(field "$(deb yardctl 1)" Depends)
echo "$ctl_deps" | grep -q libssl3 || fail "yardctl Depends lacks libssl3: $ctl_deps"
echo "$ctl_deps" | grep -qE "libcapnp|libyaml-cpp|libstdc" && fail "yardctl Depends on a library it links statically: $ctl_deps"
[ "$(field "$(deb yard-agent 2)" Version)" = "$version-2" ] || fail "revision 2 version: $(field "$(deb yard-agent 2)" Version)"
for p in yard-master yard-agent; do
  for s in postinst prerm postrm; do
    dpkg-deb -I "$(deb $p 1)" | grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +\* +$s " || fail "$p: no executable $s"
  done
done
# The packaged configs admit no agent with the examples' well-known token.
dpkg-deb --fsys-tarfile "$(deb yard-master 1)" | tar -xO ./etc/yard/master.toml | grep -qx 'join_token = ""' ||
  fail "packaged master.toml does not have join_token = \"\""
dpkg-deb --fsys-tarfile "$(deb yard-agent 1)" | tar -xO ./etc/yard/agent.toml | grep -qx 'token = ""' ||
  fail "packaged agent.toml does not have token = \"\""
dpkg-deb --fsys-tarfile "$(deb yard-agent 1)" | tar -xO ./etc/yard/agent.toml | grep -q 'change-me' &&
  fail "packaged agent.toml still says change-me"

say "dpkg -i: files, modes, the yard user, conffiles, units"
dpkg_run "$tmp/dpkg-install.log" -i "$(deb yard-master 1)" "$(deb yard-agent 1)" "$(deb yardctl 1)" ||
  { fail "dpkg -i: $(tail -5 "$tmp/dpkg-install.log")"; exit 1; }
for b in yard-master yard-agent yard-shim yard-rsh yardctl; do expect_mode "/usr/bin/$b" "root:root 755"; done
getent passwd yard | grep -q ':/usr/sbin/nologin$' || fail "no yard system user with a nologin shell: $(getent passwd yard)"
expect_mode /etc/yard "root:root 755"
expect_mode /etc/yard/master.toml "root:yard 640"
expect_mode /etc/yard/agent.toml "root:root 600"
expect_mode /var/lib/yard "root:root 755"
expect_mode /var/lib/yard/master "yard:yard 700"
expect_mode /var/lib/yard/agent "root:root 711"  # searchable: host replicas run as their owner
expect_mode /lib/systemd/system/yard-master.service "root:root 644"
expect_mode /lib/systemd/system/yard-agent.service "root:root 644"
# systemd sets StateDirectoryMode at every start: 0700 would shut host replicas run as their
# owner out of their own directories (the agent's data directory is 0711, docs/security.md).
grep -qx 'StateDirectoryMode=0711' /lib/systemd/system/yard-agent.service || fail "yard-agent.service: StateDirectoryMode is not 0711"
dpkg-query -W -f='${Conffiles}\n' yard-master | grep -q '/etc/yard/master.toml' || fail "dpkg does not list master.toml as a conffile"
dpkg-query -W -f='${Conffiles}\n' yard-agent | grep -q '/etc/yard/agent.toml' || fail "dpkg does not list agent.toml as a conffile"
[ -L /etc/systemd/system/multi-user.target.wants/yard-master.service ] || fail "yard-master.service is not enabled"
[ -e /etc/systemd/system/multi-user.target.wants/yard-agent.service ] && fail "yard-agent.service was enabled before it is configured"
# The installed units, against the installed binaries (no systemd as PID 1 needed).
out=$(systemd-analyze verify /lib/systemd/system/yard-master.service /lib/systemd/system/yard-agent.service 2>&1) ||
  fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify had something to say: $out"
out=$(systemd-analyze security --offline=true --threshold=20 /lib/systemd/system/yard-master.service 2>&1) ||
  fail "yard-master.service exposure over 2.0: $(echo "$out" | tail -1)"
grep -qx 'KillMode=process' /lib/systemd/system/yard-agent.service || fail "yard-agent.service lacks KillMode=process"
# As shipped, the agent's config has no token: it cannot join, refuses to start and says why,
# with exit 2, which the unit's RestartPreventExitStatus=2 does not restart (docs/operations.md).
out=$(timeout 5 /usr/bin/yard-agent --config /etc/yard/agent.toml 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q 'no join token' || fail "agent with the packaged config: exit $rc, $out"

say "a master (as user yard) and an agent from the installed files, a job's replica running"
client=$(free_port); agents=$(free_port)
set_key() {  # set_key FILE KEY VALUE: replace KEY's line, or add it before the first table
  if grep -q "^$2 = " "$1"; then sed -i "s|^$2 = .*|$2 = $3|" "$1"; else sed -i "1i $2 = $3" "$1"; fi
}
set_key /etc/yard/master.toml listen "\"127.0.0.1:$client\""
set_key /etc/yard/master.toml agent_listen "\"127.0.0.1:$agents\""
set_key /etc/yard/master.toml join_token '"pkg-token"'
set_key /etc/yard/agent.toml master "\"127.0.0.1:$agents\""
set_key /etc/yard/agent.toml token '"pkg-token"'
set_key /etc/yard/agent.toml ca '"/var/lib/yard/master/ca.pem"'  # same host: the master's own file
set_key /etc/yard/agent.toml name '"pkg-node"'
set_key /etc/yard/agent.toml allow_host_tasks true
set_key /etc/yard/agent.toml port_range '"32200-32299"'
set_key /etc/yard/agent.toml cgroup_parent "\"yard/$tag\""
# /metrics (when built in) off: its default ports may be taken by other daemons here.
/usr/bin/yard-master --help | grep -q -- --metrics-listen && set_key /etc/yard/master.toml metrics_listen '""'
/usr/bin/yard-agent --help | grep -q -- --metrics-listen && set_key /etc/yard/agent.toml metrics_listen '""'
export YARD_MASTER=127.0.0.1:$client YARD_CA=/var/lib/yard/master/ca.pem
start_daemons() {  # as the units' ExecStart= (and User=yard for the master)
  setpriv --reuid=yard --regid=yard --init-groups --no-new-privs /usr/bin/yard-master --config /etc/yard/master.toml >/dev/null 2>>"$tmp/master.err" &
  master_pid=$!
  pids+=("$master_pid")
  for _ in $(seq 100); do [ -s /var/lib/yard/master/admin.token ] && break; sleep 0.1; done  # the CA too
  YARD_TOKEN=$(cat /var/lib/yard/master/admin.token)
  export YARD_TOKEN
  /usr/bin/yard-agent --config /etc/yard/agent.toml >/dev/null 2>>"$tmp/agent.err" &
  agent_pid=$!
  pids+=("$agent_pid")
  for _ in $(seq 100); do
    /usr/bin/yardctl node list 2>/dev/null | grep -q 'pkg-node .*ready' && return 0
    sleep 0.1
  done
  fail "node pkg-node not ready: $(/usr/bin/yardctl node list 2>&1)"
  exit 1
}
start_daemons
[ "$(stat -c %U /var/lib/yard/master/state.db 2>/dev/null)" = yard ] || fail "state.db is not the yard user's: $(mode_of /var/lib/yard/master/state.db)"
cat >"$tmp/job.yaml" <<YAML
name: pkg-upgrade
tasks:
  - name: sleeper
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: sh -c
      args: "'echo \$\$ > $tmp/replica.pid; echo started; while [ ! -f $tmp/replica.go ]; do sleep 0.1; done; echo finishing'"
YAML
/usr/bin/yardctl job submit "$tmp/job.yaml" >/dev/null 2>"$tmp/submit.err" || fail "submit: $(cat "$tmp/submit.err")"
jshow() { /usr/bin/yardctl job show pkg-upgrade -o json | /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
for _ in $(seq 100); do [ -s "$tmp/replica.pid" ] && [ "$(jshow 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
replica=$(cat "$tmp/replica.pid" 2>/dev/null)
[ -n "$replica" ] && kill -0 "$replica" || { fail "the replica did not start: $(/usr/bin/yardctl job show pkg-upgrade 2>&1)"; exit 1; }
db_inode=$(stat -c %i /var/lib/yard/master/state.db)

say "upgrade: dpkg -i revision 2, then the daemons restart as systemd restarts them"
dpkg_run "$tmp/dpkg-upgrade.log" -i "$(deb yard-master 2)" "$(deb yard-agent 2)" "$(deb yardctl 2)" ||
  fail "dpkg -i (upgrade): $(tail -5 "$tmp/dpkg-upgrade.log")"
for p in yard-master yard-agent yardctl; do
  [ "$(dpkg-query -W -f='${Version}' $p)" = "$version-2" ] || fail "$p not upgraded: $(dpkg-query -W -f='${Version}' $p)"
done
grep -qx 'join_token = "pkg-token"' /etc/yard/master.toml || fail "the upgrade replaced the admin's master.toml"
grep -qx 'token = "pkg-token"' /etc/yard/agent.toml || fail "the upgrade replaced the admin's agent.toml"
for f in /etc/yard/*; do case "$f" in *.toml) ;; *) fail "the upgrade left $f (a conffile prompt?)" ;; esac; done
expect_mode /etc/yard/master.toml "root:yard 640"
expect_mode /var/lib/yard/master "yard:yard 700"
[ "$(stat -c %i /var/lib/yard/master/state.db 2>/dev/null)" = "$db_inode" ] || fail "state.db was replaced or removed by the upgrade"
kill -0 "$replica" || fail "the replica died in the upgrade"
# systemctl restart: SIGTERM to each daemon's main process only (the agent's KillMode=process).
kill -TERM "$agent_pid" "$master_pid"
wait "$agent_pid"; rc_agent=$?
wait "$master_pid"; rc_master=$?
[ "$rc_agent" = 0 ] && [ "$rc_master" = 0 ] || fail "daemons exited $rc_agent (agent), $rc_master (master) on SIGTERM"
kill -0 "$replica" || fail "the replica died with its agent"
start_daemons
for _ in $(seq 100); do grep -q 're-adopted sleeper' "$tmp/agent.err" && break; sleep 0.1; done
grep -q 're-adopted sleeper/.* attempt 0: Running' "$tmp/agent.err" || fail "the new agent did not re-adopt the replica: $(tail -5 "$tmp/agent.err")"
kill -0 "$replica" || fail "the replica is gone after the restart"
[ "$(jshow 'j["job"]["state"]')" = Running ] || fail "job after the upgrade: $(jshow 'j["job"]["state"]')"
touch "$tmp/replica.go"
state=""
for _ in $(seq 200); do state=$(jshow 'j["job"]["state"]' 2>/dev/null); [ "$state" = Succeeded ] && break; sleep 0.1; done
[ "$state" = Succeeded ] || fail "job after the upgrade ended $state, want Succeeded"
[ "$(jshow 'j["tasks"][0]["attempt"]')" = 0 ] || fail "the replica was restarted by the upgrade"
out=$(/usr/bin/yardctl logs pkg-upgrade 2>&1)
[ "$(echo "$out" | grep -c started)" = 1 ] && echo "$out" | grep -q finishing || fail "logs across the upgrade: $out"

say "remove keeps state and config; purge deletes them"
kill -TERM "$agent_pid" "$master_pid"
wait "$agent_pid" "$master_pid"
dpkg_run "$tmp/dpkg-remove.log" -r yard-master yard-agent yardctl || fail "dpkg -r: $(tail -5 "$tmp/dpkg-remove.log")"
[ -f /var/lib/yard/master/state.db ] || fail "dpkg -r deleted state.db"
[ -f /etc/yard/master.toml ] || fail "dpkg -r deleted master.toml"
[ -e /usr/bin/yard-master ] && fail "dpkg -r left /usr/bin/yard-master"
dpkg_run "$tmp/dpkg-purge.log" --purge yard-master yard-agent yardctl || fail "dpkg --purge: $(tail -5 "$tmp/dpkg-purge.log")"
for f in /etc/yard /var/lib/yard /lib/systemd/system/yard-master.service /lib/systemd/system/yard-agent.service \
         /etc/systemd/system/multi-user.target.wants/yard-master.service /usr/bin/yard-agent /usr/bin/yardctl; do
  [ -e "$f" ] || [ -L "$f" ] && fail "$f is left after purge"
done
for p in yard-master yard-agent yardctl; do
  status=$(dpkg-query -W -f='${db:Status-Status}' $p 2>/dev/null)
  [ -z "$status" ] || [ "$status" = not-installed ] || fail "$p after purge: $status"
done

[ "$fails" -eq 0 ] && echo "packaging.package: all checks passed"
exit $((fails > 0))
