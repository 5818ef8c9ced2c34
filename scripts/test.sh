#!/usr/bin/env bash
# The test command: installs what is needed (Debian 12 packages), builds with warnings as
# errors, and runs every test through ctest. Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DYARD_WERROR=ON -DBUILD_TESTING=ON  # ON: a build dir scripts/demo.sh made has it OFF
cd build
ctest --output-on-failure -j"${YARD_JOBS:-2}" "$@"
