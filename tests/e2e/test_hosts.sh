# Sourced first (before cluster.sh) by a test that dials masters by host name: it runs the
# test again in a mount namespace of its own whose /etc/hosts also maps 127.0.0.1 to the names
# given, and exits with its status. The machine's /etc/hosts is untouched, and the new one
# lives on a tmpfs of the namespace (its directory is removed before the test starts), so
# nothing is left behind if the test is killed.
#   source "$(dirname "$0")/test_hosts.sh" yard-m1.test yard-m2.test
if [ -z "${YARD_E2E_HOSTS:-}" ]; then
  export YARD_E2E_HOSTS="127.0.0.1 $*"
  unshare --mount --propagation private bash -c '
    d=$(mktemp -d) || exit 1
    mount -t tmpfs -o size=1m yard-hosts "$d" || { rmdir "$d"; exit 1; }
    { cat /etc/hosts; echo "$YARD_E2E_HOSTS"; } >"$d/hosts"
    mount --bind "$d/hosts" /etc/hosts || exit 1
    umount "$d" && rmdir "$d" || exit 1
    exec bash "$@"' bash "$0" "${YARD_E2E_ARGS[@]}"
  exit $?
fi
