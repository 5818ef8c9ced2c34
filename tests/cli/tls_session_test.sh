#!/usr/bin/env bash
# yardctl's TLS session cache (docs/cli.md, "TLS sessions"): the first command against a master
# makes a full handshake and keeps its session under $XDG_CACHE_HOME/yard (directory 0700, file
# 0600); the next command resumes it, so the file is left as it is (only a full handshake
# writes one); a damaged or foreign session file costs a full handshake, never a failure; a
# master with another CA at the same address gets a file of its own; an unwritable cache is
# no error. Usage: tls_session_test.sh BIN_DIR
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
export XDG_CACHE_HOME="$tmp/cache"
start_master
stamp() { stat -c '%i %Y.%y' "$1"; }

expect 0 'default' -- queue list
files=("$XDG_CACHE_HOME"/yard/tls-session-*)
[ "${#files[@]}" -eq 1 ] && [ -f "${files[0]}" ] || fail "one session file after the first command: ${files[*]}"
f=${files[0]}
[ "$(stat -c %a "$XDG_CACHE_HOME/yard")" = 700 ] || fail "cache directory mode $(stat -c %a "$XDG_CACHE_HOME/yard"), want 700"
[ "$(stat -c %a "$f")" = 600 ] || fail "session file mode $(stat -c %a "$f"), want 600"

# Resumed: the session is offered and accepted, so nothing is written.
before=$(stamp "$f")
sleep 1.1
for _ in 1 2 3; do expect 0 'default' -- queue list; done
[ "$(stamp "$f")" = "$before" ] || fail "the session file was rewritten by resumed commands: $before -> $(stamp "$f")"

# Damaged: a full handshake, a new session written, and the command works.
printf 'not a session' >"$f"
expect 0 'default' -- queue list
[ "$(stat -c %s "$f")" -gt 100 ] || fail "a damaged session file was not replaced: $(stat -c %s "$f") bytes"
[ "$(stat -c %a "$f")" = 600 ] || fail "replaced session file mode $(stat -c %a "$f"), want 600"

# Another master with its own CA: its own file, and each master's commands still work.
saved_master=$YARD_MASTER saved_ca=$YARD_CA saved_token=$YARD_TOKEN
mv "$tmp/out" "$tmp/out1"
tmp_data=$tmp/data2
"$bin/yard-master" --data-dir "$tmp_data" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >"$tmp/out" 2>>"$tmp/err" &
pids+=("$!")
for _ in $(seq 100); do grep -q '^agents ' "$tmp/out" && break; sleep 0.1; done
YARD_MASTER=$(sed -n 's/^listening //p' "$tmp/out") YARD_CA=$tmp_data/ca.pem YARD_TOKEN=$(cat "$tmp_data/admin.token") \
  expect 0 'default' -- queue list
n=$(ls "$XDG_CACHE_HOME"/yard/tls-session-* | wc -l)
[ "$n" -eq 2 ] || fail "two masters: $n session files, want 2"
YARD_MASTER=$saved_master YARD_CA=$saved_ca YARD_TOKEN=$saved_token expect 0 'default' -- queue list

# A cache that cannot be written is no error.
chmod 000 "$XDG_CACHE_HOME/yard"
XDG_CACHE_HOME=/proc/nonexistent expect 0 'default' -- queue list
chmod 700 "$XDG_CACHE_HOME/yard"
finish tls_session
