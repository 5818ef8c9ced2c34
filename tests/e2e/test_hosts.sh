# Sourced first (before cluster.sh) by a test that dials masters by host name: it runs the
# test again in a mount namespace of its own whose /etc/hosts also maps 127.0.0.1 to the names
# given, and exits with its status. The machine's /etc/hosts is untouched.
#   source "$(dirname "$0")/test_hosts.sh" yard-m1.test yard-m2.test
if [ -z "${YARD_E2E_HOSTS:-}" ]; then
  YARD_E2E_HOSTS=$(mktemp)
  { cat /etc/hosts; echo "127.0.0.1 $*"; } >"$YARD_E2E_HOSTS"
  export YARD_E2E_HOSTS
  unshare --mount --propagation private \
    bash -c 'mount --bind "$YARD_E2E_HOSTS" /etc/hosts && exec bash "$@"' bash "$0" "${YARD_E2E_ARGS[@]}"
  rc=$?
  rm -f "$YARD_E2E_HOSTS"
  exit $rc
fi
