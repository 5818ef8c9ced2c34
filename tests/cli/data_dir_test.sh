#!/usr/bin/env bash
# The daemons' data directories are their own (docs/security.md, "Data directories"): a
# master makes its directory 0700 and every file in it 0600 (but the certificates), tightens a
# directory others may read and says so; an agent keeps its 0711. An existing empty state.db
# is refused, never taken for a new cluster. A join is refused names register refuses.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
umask 022  # a login shell's: what the master writes must not depend on its caller's umask

mode() { stat -c %a "$1"; }
stop_master() {
  kill -TERM "$master"
  wait "$master" 2>/dev/null
}

# --- a fresh data directory
start_master --join-token s3cret
[ "$(mode "$tmp/data")" = 700 ] || fail "a new data directory has mode $(mode "$tmp/data"), want 700"
for f in state.db state.db-wal state.db-shm admin.token yard-master.lock ca.key master.key; do
  [ -f "$tmp/data/$f" ] || { fail "no $f in the data directory"; continue; }
  [ "$(mode "$tmp/data/$f")" = 600 ] || fail "$f has mode $(mode "$tmp/data/$f"), want 600"
done
loose=$(find "$tmp/data" -mindepth 1 \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 ! -name ca.pem ! -name master.pem \))
[ -z "$loose" ] || fail "open to others in a new data directory: $(ls -ld $loose)"

# --- an agent's existing directory open to others is tightened to 0711; a name register
# would refuse is refused at join, before a certificate is signed
mkdir -m 0755 "$tmp/agent"
YARD_JOIN_TOKEN=s3cret timeout 20 "$bin/yard-agent" --master "$agents" --ca "$tmp/data/ca.pem" --name PN1 \
  --address 127.0.0.1 --data-dir "$tmp/agent" --cgroup-parent "yard/datadir$$" >/dev/null 2>"$tmp/agent.err"
rc=$?
[ $rc -eq 1 ] || fail "an agent named PN1: exit $rc, want 1"
[ "$(mode "$tmp/agent")" = 711 ] || fail "the agent left its data directory at $(mode "$tmp/agent"), want 711"
grep -q "data directory $tmp/agent had mode 0755, which let other users read what is in it: set it to 0711" \
  "$tmp/agent.err" || fail "the agent did not say it tightened its directory: $(cat "$tmp/agent.err")"
grep -qF "the master refused the join: join: node name \"PN1\" must use only lowercase letters" "$tmp/agent.err" ||
  fail "an agent named PN1: $(cat "$tmp/agent.err")"
[ -e "$tmp/agent/tls/node.pem" ] && fail "an agent named PN1 got a certificate"

# --- no certificate and no join token: a configuration error (exit 2, which the unit's
# RestartPreventExitStatus=2 does not restart), said before anything else happens
env -u YARD_JOIN_TOKEN timeout 20 "$bin/yard-agent" --master "$agents" --ca "$tmp/data/ca.pem" --name pn2 \
  --address 127.0.0.1 --data-dir "$tmp/agent-none" --cgroup-parent "yard/datadir$$" >/dev/null 2>"$tmp/agent.err"
rc=$?
[ $rc -eq 2 ] || fail "an agent without a certificate or a join token: exit $rc, want 2: $(cat "$tmp/agent.err")"
grep -q "no node certificate in $tmp/agent-none/tls and no join token to get one" "$tmp/agent.err" ||
  fail "an agent without a join token said: $(cat "$tmp/agent.err")"

# --- a data directory others may read is tightened, and the master says so
stop_master
chmod 0755 "$tmp/data"
cp "$tmp/data/admin.token" "$tmp/admin.token.before"
start_master
[ "$(mode "$tmp/data")" = 700 ] || fail "the master left its data directory at $(mode "$tmp/data"), want 700"
grep -q "data directory $tmp/data had mode 0755, which let other users read what is in it: set it to 0700" "$tmp/err" ||
  fail "the master did not say it tightened its directory: $(cat "$tmp/err")"
expect 0 'default' -- queue list

# --- an empty state.db is refused, untouched
stop_master
[ -f "$tmp/data/state.db-wal" ] && fail "state.db-wal left after a clean stop"
: >"$tmp/data/state.db"
timeout 20 "$bin/yard-master" --data-dir "$tmp/data" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 \
  >/dev/null 2>"$tmp/err7"
rc=$?
[ $rc -eq 1 ] || fail "an empty state.db: exit $rc, want 1"
grep -q "$tmp/data/state.db: the database file is empty (0 bytes); refusing to treat it as a new cluster.*Restore it from a backup, or remove it to start a new, empty cluster" "$tmp/err7" ||
  fail "an empty state.db: message: $(cat "$tmp/err7")"
[ -f "$tmp/data/state.db" ] && [ ! -s "$tmp/data/state.db" ] || fail "the empty state.db was changed"
cmp -s "$tmp/data/admin.token" "$tmp/admin.token.before" || fail "admin.token was rewritten over an empty state.db"

finish "data directory"
