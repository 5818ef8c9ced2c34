#!/usr/bin/env bash
# yardctl exec (docs/exec.md) end to end: a master and an agent with host replicas. The
# command's exit code becomes yardctl's; stdout and stderr arrive apart; -i passes stdin
# (EOF too, and megabytes both ways through the flow-control windows); -t runs it on a pty
# of the size and TERM of ours, resized on SIGWINCH, with ^C reaching it and our terminal
# restored after; it sees the replica's environment and working directory; the replica is
# chosen like kubectl chooses a container, and a wrong or not-running one is exit 1 with a
# message naming task/role/index; killing yardctl kills the command and what it started.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1
wait_nodes 1

mkdir -p "$tmp/work"
cat >"$tmp/main.yaml" <<YAML
name: ex-main
tasks:
  - name: main
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, resources: { cpu: 100m, memory: 64Mi }, command: sleep, args: "600", workingDir: $tmp/work, env: [ { name: FOO, value: bar } ] } }
      worker: { replicas: 2, container: *c }
YAML
cat >"$tmp/two.yaml" <<YAML
name: ex-two
tasks:
  - name: alpha
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep, args: "600" }
  - name: beta
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep, args: "600" }
YAML
cat >"$tmp/done.yaml" <<YAML
name: ex-done
tasks:
  - name: once
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" }
YAML
for f in main two done; do submit "$tmp/$f.yaml"; done

ctl() { timeout 60 "$bin/yardctl" "$@"; }
# wait_exec JOB ARGS...: until `yardctl exec JOB ARGS -- true` works (the replica runs).
wait_exec() {
  for _ in $(seq 150); do ctl exec "$@" -- true >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "exec $* never worked: $(ctl exec "$@" -- true 2>&1)"
}
wait_exec ex-main
wait_exec ex-main --role worker --index 1
wait_exec ex-two --task alpha
wait_job ex-done Succeeded 30

say "the command's exit code is yardctl's; stdout and stderr arrive apart"
ctl exec ex-main -- sh -c 'exit 7'
rc=$?
[ "$rc" = 7 ] || fail "exit 7 gave $rc"
ctl exec ex-main -- sh -c 'kill -TERM $$'
rc=$?
[ "$rc" = $((128 + 15)) ] || fail "a command killed by SIGTERM gave $rc, want 143"
ctl exec ex-main -- no-such-program-yard 2>"$tmp/e"
rc=$?
[ "$rc" = 127 ] || fail "a command that cannot start gave $rc, want 127 ($(cat "$tmp/e"))"
ctl exec ex-main -- sh -c 'echo to-out; echo to-err >&2' >"$tmp/o" 2>"$tmp/e"
[ "$(cat "$tmp/o")" = to-out ] || fail "stdout: $(cat "$tmp/o")"
[ "$(cat "$tmp/e")" = to-err ] || fail "stderr: $(cat "$tmp/e")"

say "the replica's environment and working directory; the first role and index 0 by default"
out=$(ctl exec ex-main --role worker --index 1 -- sh -c 'echo $YARD_ROLE $YARD_REPLICA_INDEX $FOO; pwd')
[ "$out" = "worker 1 bar
$tmp/work" ] || fail "worker 1 sees: $out"
out=$(ctl exec ex-main -- sh -c 'echo $YARD_ROLE $YARD_REPLICA_INDEX')
[ "$out" = "master 0" ] || fail "the default replica is: $out"
out=$(ctl exec ex-two --task beta -- sh -c 'echo $YARD_TASK $YARD_ROLE')
[ "$out" = "beta run" ] || fail "a container job's replica: $out"

say "-i passes stdin and its end; without -i stdin is /dev/null"
out=$(echo hi | ctl exec -i ex-main -- cat)
[ "$out" = hi ] || fail "echo hi | exec -i cat: '$out'"
out=$(echo hi | ctl exec ex-main -- sh -c 'cat; echo end')
[ "$out" = end ] || fail "without -i the command read: '$out'"
head -c 3000000 /dev/urandom >"$tmp/in.bin"
ctl exec -i ex-main -- cat <"$tmp/in.bin" >"$tmp/out.bin"
cmp -s "$tmp/in.bin" "$tmp/out.bin" || fail "3 MB through cat came back as $(wc -c <"$tmp/out.bin") bytes, not the same"
# 40 MB of stdin and nothing back but its count: over a thousand stdin frames, none of
# which is answered on its own (the master must keep reading them).
out=$(head -c 40000000 /dev/zero | timeout 60 "$bin/yardctl" exec -i ex-main -- wc -c 2>"$tmp/in40.err")
[ "$out" = 40000000 ] || fail "40 MB of stdin: the command counted '$out'; yardctl said: $(cat "$tmp/in40.err")"
out=$(ctl exec ex-main -- head -c 30000000 /dev/zero 2>"$tmp/big.err" | wc -c; echo "rc ${PIPESTATUS[0]}")
[ "$out" = "30000000
rc 0" ] || fail "30 MB of output arrived as $(echo $out) (bytes, then yardctl's exit code); yardctl said: $(cat "$tmp/big.err")"
# A slow reader parks the agent's stdout reader on the 1 MiB output window. The command
# widens its stdout pipe to 1 MiB, so it writes the rest and exits while the reader is
# parked; stderr then ends too, and the session must outlive that wait: the rest of the
# output and the exit code still come when the reader catches up.
out=$(timeout 30 "$bin/yardctl" exec ex-main -- python3 -c 'import fcntl, sys
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
sys.stdout.buffer.write(bytes(2000000))' 2>"$tmp/slow.err" | { sleep 3; wc -c; }; echo "rc ${PIPESTATUS[0]}")
[ "$out" = "2000000
rc 0" ] || fail "2 MB read slowly arrived as $(echo $out) (bytes, then yardctl's exit code); yardctl said: $(cat "$tmp/slow.err")"
# The command reads a little stdin, writes 2 MB, then reads the rest: the agent must keep
# reading its output while stdin waits (neither side may block the other).
out=$(head -c 1000000 /dev/urandom | ctl exec -i ex-main -- sh -c 'dd bs=1000 count=10 iflag=fullblock of=/dev/null 2>/dev/null; head -c 2000000 /dev/zero; wc -c' | tr -d '\0')
[ "$out" = 990000 ] || fail "output between stdin reads: the command counted '$out' bytes of stdin"

say "-t: a pty of our size and TERM, resized with ours; ^C reaches the command; our terminal comes back"
cat >"$tmp/pty_drive.py" <<'PY'
# Runs yardctl on a pty of 33x101 with TERM=xterm-yard and plays a scenario; prints what
# went wrong (nothing when all is well) and exits with yardctl's exit code.
import fcntl, os, re, select, struct, subprocess, sys, termios, time
def winsize(fd, rows, cols): fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
scenario, cmd = sys.argv[1], sys.argv[2:]
m, s = os.openpty()
winsize(s, 33, 101)
before = termios.tcgetattr(s)
p = subprocess.Popen(cmd, stdin=s, stdout=s, stderr=s, start_new_session=True,
                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0), env=dict(os.environ, TERM="xterm-yard"))
out = b""
def pump(until=None, secs=20):
    global out
    end = time.time() + secs
    while time.time() < end and not (until and re.search(until, out)):
        if p.poll() is not None and not select.select([m], [], [], 0)[0]: break
        if select.select([m], [], [], 0.1)[0]: out += os.read(m, 65536)
    return until is None or re.search(until, out) is not None
def need(pattern, what):
    if not pump(pattern): print("%s: no %r in %r" % (what, pattern, out)); sys.exit(100)
if scenario == "size":
    need(rb"TERM=xterm-yard", "tty, size and TERM")
    if not re.search(rb"^/dev/pts/\d+\r?$", out, re.M): print("tty printed: %r" % out)
    if not re.search(rb"^33 101\r?$", out, re.M): print("stty size printed: %r" % out)
elif scenario == "interactive":
    need(rb"[$#] ", "a prompt")
    os.write(m, b"echo hello-$((6*7))\n")
    need(rb"hello-42", "the command's answer")
    winsize(s, 44, 120)  # the kernel sends yardctl SIGWINCH; it sends the new size along
    time.sleep(0.5)
    os.write(m, b"stty size\n")
    need(rb"44 120", "the new size")
    os.write(m, b"exit 4\n")
elif scenario == "interrupt":
    need(rb"ready", "the command's start")
    os.write(m, b"\x03")  # raw mode: ^C is a byte for the command's terminal, not a signal here
    need(rb"got-int", "SIGINT in the command")
elif scenario == "terminated":
    need(rb"[$#] ", "a prompt")
    p.terminate()  # yardctl restores our terminal, then dies of the signal
pump(secs=20)
code = p.wait(timeout=20)
if termios.tcgetattr(s) != before: print("our terminal was not restored: %r != %r" % (termios.tcgetattr(s), before))
sys.exit(128 - code if code < 0 else code)
PY
drive() { /usr/bin/python3 "$tmp/pty_drive.py" "$@" >"$tmp/drive.out" 2>&1; }
drive size "$bin/yardctl" exec -t ex-main -- sh -c 'tty; stty size; echo TERM=$TERM; exit 5'
rc=$?
[ "$rc" = 5 ] || fail "exec -t: exit $rc, want 5"
[ -s "$tmp/drive.out" ] && fail "exec -t: $(cat "$tmp/drive.out")"
drive interactive "$bin/yardctl" exec -it ex-main -- sh
rc=$?
[ "$rc" = 4 ] || fail "exec -it sh: exit $rc, want 4"
[ -s "$tmp/drive.out" ] && fail "exec -it sh: $(cat "$tmp/drive.out")"
drive interrupt "$bin/yardctl" exec -it ex-main -- sh -c 'trap "echo got-int; exit 9" INT; echo ready; while :; do sleep 0.1; done'
rc=$?
[ "$rc" = 9 ] || fail "exec -it with ^C: exit $rc, want 9"
[ -s "$tmp/drive.out" ] && fail "exec -it with ^C: $(cat "$tmp/drive.out")"

drive terminated "$bin/yardctl" exec -it ex-main -- sh
rc=$?
[ "$rc" = $((128 + 15)) ] || fail "exec -it killed by SIGTERM: exit $rc, want 143"
[ -s "$tmp/drive.out" ] && fail "exec -it killed by SIGTERM: $(cat "$tmp/drive.out")"

say "a wrong or not-running replica is exit 1 and named; a missing command is a usage error"
# expect_refusal WANT-TEXT ARGS...: yardctl exec ARGS exits 1 saying WANT-TEXT.
expect_refusal() {
  local want=$1 rc
  shift
  ctl exec "$@" >/dev/null 2>"$tmp/e"
  rc=$?
  [ "$rc" = 1 ] || fail "exec $*: exit $rc, want 1"
  grep -qF -- "$want" "$tmp/e" || fail "exec $*: said '$(cat "$tmp/e")', want '$want'"
}
expect_refusal "job ex-two has 2 tasks; say which with --task (alpha, beta)" ex-two -- true
expect_refusal "job ex-main has no task nope (its tasks: main)" ex-main --task nope -- true
expect_refusal "task main has no role boss (its roles: master, worker)" ex-main --role boss -- true
expect_refusal "main/worker/5 does not exist (main/worker has index 0, 1)" ex-main --role worker --index 5 -- true
expect_refusal "once/run/0 is Exited (exit code 0), not Running" ex-done -- true
expect_refusal "job nope-job does not exist" nope-job -- true
ctl exec ex-main >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "exec without a command: exit $rc, want 2"
ctl exec ex-main -- >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "exec with nothing after --: exit $rc, want 2"

say "killing yardctl kills the command and what it started"
"$bin/yardctl" exec ex-main -- sh -c 'sleep 3141 & sleep 3142; :' &
ctl_pid=$!
for _ in $(seq 100); do [ "$(pgrep -fc '^sleep 314[12]$')" = 2 ] && break; sleep 0.1; done
[ "$(pgrep -fc '^sleep 314[12]$')" = 2 ] || fail "the exec'd commands did not start: $(pgrep -fa '^sleep 314')"
kill -9 "$ctl_pid"
wait "$ctl_pid" 2>/dev/null
for _ in $(seq 100); do [ "$(pgrep -fc '^sleep 314[12]$')" = 0 ] && break; sleep 0.1; done
left=$(pgrep -fa '^sleep 314[12]$')
[ -z "$left" ] || { fail "still running after yardctl was killed: $left"; for p in $(pgrep -f "^sleep 314[12]$"); do kill -9 "$p"; done; }

say "a closed stdout ends yardctl and the command"
n=$(ctl exec ex-main -- sh -c 'while :; do echo yard-endless; done' | head -2 | wc -l)
[ "$n" = 2 ] || fail "exec | head -2 printed $n lines"
for _ in $(seq 50); do pgrep -f '^sh -c while :; do echo yard-endless' >/dev/null || break; sleep 0.1; done
left=$(pgrep -fa '^sh -c while :; do echo yard-endless')
[ -z "$left" ] || { fail "the command outlived a closed stdout: $left"; for p in $(pgrep -f '^sh -c while :; do echo yard-endless'); do kill -9 "$p"; done; }

say "one user runs at most 32 exec sessions at once; one ended gives its place back"
# Each session holds a connection from the master to the node's agent; one user's many
# would have filled the agent's places and shut everyone else's exec and logs out.
sessions=()
for i in $(seq 32); do
  "$bin/yardctl" exec ex-two --task beta -- sh -c "echo held; sleep 600" >"$tmp/x$i.out" 2>&1 &
  sessions+=("$!")
  pids+=("$!")
done
for _ in $(seq 150); do [ "$(cat "$tmp"/x*.out | grep -c '^held')" -ge 32 ] && break; sleep 0.2; done
[ "$(cat "$tmp"/x*.out | grep -c '^held')" -ge 32 ] || fail "32 exec sessions did not all start: $(cat "$tmp"/x*.out | sort | uniq -c)"
out=$(ctl exec ex-two --task beta -- true 2>&1) && fail "a 33rd exec was accepted: $out"
echo "$out" | grep -q 'runs 32 exec sessions at once, the most one user may' || fail "the 33rd exec said: $out"
# logs are not execs: they still reach the node
ctl logs ex-main >/dev/null 2>&1 || fail "logs while 32 execs run: $(ctl logs ex-main 2>&1)"
kill "${sessions[0]}"; wait "${sessions[0]}" 2>/dev/null
ok=""
for _ in $(seq 50); do
  ctl exec ex-two --task beta -- true >/dev/null 2>&1 && { ok=1; break; }
  sleep 0.2
done
[ -n "$ok" ] || fail "no exec place came back after a session ended: $(ctl exec ex-two --task beta -- true 2>&1)"
for p in "${sessions[@]:1}"; do kill "$p" 2>/dev/null; done
for p in "${sessions[@]:1}"; do wait "$p" 2>/dev/null; done
for _ in $(seq 100); do pgrep -f '^sh -c echo held; sleep 600' >/dev/null || break; sleep 0.1; done

say "the replicas are untouched by all of it"
ctl exec ex-main -- true || fail "the replica no longer runs"
ctl job cancel ex-main >/dev/null
ctl job cancel ex-two >/dev/null
finish exec_test
