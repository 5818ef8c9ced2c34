#!/usr/bin/env bash
# The console's unit tests (vitest, console/test/; docs/console.md): `npm test` in console/,
# with the built yardctl so the tests that compare against the real loader run too.
#   unit_test.sh BIN_DIR
bin=${1:?usage: unit_test.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v npm >/dev/null || { echo "FAIL: npm is missing (scripts/setup.sh installs it)"; exit 1; }
[ -d "$root/console/node_modules" ] || { echo "FAIL: console/node_modules is missing (scripts/build_console.sh runs npm ci)"; exit 1; }
cd "$root/console" && YARDCTL="$bin/yardctl" exec npm test --silent
