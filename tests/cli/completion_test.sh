#!/usr/bin/env bash
# yardctl completion bash|zsh against a real master: the bash script, sourced in a bash
# subshell and driven through its completion function as bash drives it (COMP_WORDS,
# COMP_CWORD), offers subcommands, flags, choices, files and the master's live job, queue,
# node and dataset names; the zsh script parses (zsh -n) and, with zsh's compadd stubbed,
# offers the same. Without a master the live names are nothing, quickly and quietly.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
command -v zsh >/dev/null || fail "zsh is not installed (scripts/setup.sh installs it)"

printf 'join_token = "s3cret"\ndataset_roots = ["/mnt"]\n' >"$tmp/master.toml"
start_master --config "$tmp/master.toml"
YARD_JOIN_TOKEN=s3cret "$bin/yard-synthetic-nodes" --master "$agents" --ca "$YARD_CA" --count 2 --cpu 1 --memory 1Gi --gpu 0 --once >/dev/null 2>&1 ||
  fail "synthetic nodes did not register"
"$bin/yardctl" queue create team-a --cpu 4 --memory 4Gi >/dev/null
"$bin/yardctl" dataset create imagenet --path /mnt/imagenet >/dev/null
cat >"$tmp/spec.yaml" <<'YAML'
name: comp-train
tasks:
  - name: work
    kind: container-job
    container: { image: host, command: "true", resources: { cpu: 8, memory: 1Gi } }
YAML
"$bin/yardctl" job submit "$tmp/spec.yaml" >/dev/null || fail "submit"

"$bin/yardctl" completion bash >"$tmp/yardctl.bash" || fail "completion bash"
"$bin/yardctl" completion zsh >"$tmp/_yardctl" || fail "completion zsh"
bash -n "$tmp/yardctl.bash" || fail "the bash script does not parse"
zsh -n "$tmp/_yardctl" || fail "the zsh script does not parse"
[ "$(bash -c 'source "$1"; complete -p yardctl' _ "$tmp/yardctl.bash")" = "complete -F _yardctl yardctl" ] ||
  fail "the bash script registers no completion for yardctl"

# bashc WORD...: what bash offers for the last word (COMPREPLY, sorted, on one line).
bashc() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _yardctl; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$tmp/yardctl.bash" "$bin/yardctl" "$@" 2>&1 | sort | xargs
}
# zshc WORD...: the same through the zsh script, compadd and _files stubbed.
zshc() {
  zsh -f -c 'compdef() { :; }; _files() { print FILES; }
    compadd() { [[ $1 == -- ]] && shift; local w; for w; do [[ $w == ${words[CURRENT]}* ]] && print -r -- $w; done; }
    source "$1"; shift; words=("$@"); CURRENT=$#; _yardctl' _ "$tmp/_yardctl" "$bin/yardctl" "$@" 2>&1 | sort | xargs
}
# offers WANT WORD...: both shells offer exactly WANT (sorted, space-separated).
offers() {
  local want=$1; shift
  local got
  got=$(bashc "$@"); [ "$got" = "$want" ] || fail "bash: yardctl $*<TAB>: '$got', want '$want'"
  got=$(zshc "$@"); [ "$got" = "$want" ] || fail "zsh: yardctl $*<TAB>: '$got', want '$want'"
}

for c in audit completion dataset job logs node queue token usage user validate version whoami; do
  bashc "" | grep -qw "$c" || fail "bash: yardctl <TAB> does not offer $c: $(bashc "")"
  zshc "" | grep -qw "$c" || fail "zsh: yardctl <TAB> does not offer $c: $(zshc "")"
done
offers "job" "jo"
offers "cancel delete events hold list release requeue scale show submit top" job ""
offers "delete drain label list show top undrain" node ""
offers "--ca --follow --help --master --output --request-id --token -f -h -o" job events -
offers "--all --array --ca --help --master --output --owner --queue --request-id --state --token --watch" job list --
offers "json table" -o ""
offers "json table" job list -o ""
offers "Cancelled Cancelling" job list --state Canc
offers "binpack spread" queue update team-a --placement ""
offers "closed running stopped" queue state team-a ""
offers "job queue user" usage --by ""
offers "bash zsh" completion ""
# Live names from the master ($YARD_MASTER, or --master on the line).
offers "comp-train" job show ""
offers "comp-train" job events -f ""
offers "comp-train" logs ""
offers "comp-train" job cancel --wait ""
offers "default team-a" queue show ""
offers "default team-a" job list --queue ""
offers "node-1 node-2" node drain ""
offers "imagenet" dataset delete ""
offers "" job show comp-train ""   # one name only
host=${addr%:*} port=${addr##*:}
got=$(YARD_MASTER= bashc --master "$host" : "$port" job show "")   # bash splits HOST:PORT at the ':'
[ "$got" = comp-train ] || fail "bash with --master $addr: '$got'"
got=$(YARD_MASTER= zshc --master "$addr" job show "")
[ "$got" = comp-train ] || fail "zsh with --master $addr: '$got'"
# Files for a spec argument.
cd "$tmp" || exit 1
[ "$(bashc job submit sp)" = spec.yaml ] || fail "bash: job submit sp<TAB>: $(bashc job submit sp)"
[ "$(zshc job submit "")" = FILES ] || fail "zsh: job submit offers no files"
cd - >/dev/null || exit 1
# Hidden commands are not offered.
bashc "" | grep -q __complete && fail "the hidden __complete is offered"

# The master gone: nothing offered, no error text, and no wait.
kill -TERM "$master"; wait "$master" 2>/dev/null
start=$(date +%s%N)
got=$(bashc job show "")
[ -z "$got" ] || fail "no master: bash offered '$got'"
got=$("$bin/yardctl" __complete jobs 2>&1); rc=$?
[ $rc -eq 1 ] && [ -z "$got" ] || fail "__complete without a master: rc $rc, '$got'"
took=$((($(date +%s%N) - start) / 1000000))
[ "$took" -lt 3000 ] || fail "completion without a master took ${took} ms"

finish "cli.completion"
