#!/usr/bin/env bash
# The web console in Debian's chromium against a real dev cluster (docs/console.md, "Browser
# tests"): starts `yard-master --dev` serving the built console, registers a dataset, and runs
# console/tests/browser/console.test.js (playwright-core), which draws, submits and watches jobs.
#   browser_test.sh BIN_DIR CONSOLE_DIR
# Exits 77 (skipped) when /usr/bin/chromium is missing. YARD_SCREENSHOTS=1 saves the main
# pages into docs/console/*.png; a failed step leaves failed.png and failed.html in
# ./browser-failure (the ctest working directory, build/tests/console).
bin=${1:?usage: browser_test.sh BIN_DIR CONSOLE_DIR}
console_dir=${2:?usage: browser_test.sh BIN_DIR CONSOLE_DIR}
bin=$(cd "$bin" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}

[ -x "$chromium" ] || { echo "SKIP: $chromium is missing (scripts/setup.sh installs the chromium package)"; exit 77; }
[ -f "$console_dir/index.html" ] || { echo "FAIL: no built console in $console_dir (run scripts/build_console.sh)"; exit 1; }
[ -d "$root/console/node_modules/playwright-core" ] ||
  { echo "FAIL: console/node_modules/playwright-core is missing (scripts/build_console.sh runs npm ci)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is missing (scripts/setup.sh installs it)"; exit 1; }

source "$here/dev_cluster.sh"
start_dev_master --console-dir "$console_dir" || exit 1
wait_dev_node || exit 1
mkdir -p "$tmp/datasets/demo"
"$bin/yardctl" dataset create demo --path "$tmp/datasets/demo" >/dev/null || { echo "FAIL: yardctl dataset create"; exit 1; }

shots=
[ "${YARD_SCREENSHOTS:-}" = 1 ] && { shots="$root/docs/console"; mkdir -p "$shots"; }
rm -rf "$PWD/browser-failure"
YARD_URL="https://$http" DATASET=demo SCREENSHOT_DIR="$shots" FAIL_DIR="$PWD/browser-failure" CHROMIUM="$chromium" \
  timeout 240 node "$root/console/tests/browser/console.test.js"
rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL: console.test.js exited $rc; the master's log:"
  tail -40 "$tmp/master.err"
  exit 1
fi
echo "PASS console.browser"
