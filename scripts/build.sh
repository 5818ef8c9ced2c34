#!/usr/bin/env bash
# Configures and builds Yard into build/ (binaries in build/bin, the web console in
# build/console). Extra arguments go to cmake's configure step, e.g.
# scripts/build.sh -DYARD_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && [ ! -f build/Makefile ] && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" "$@" >/dev/null
cmake --build build -j"${YARD_JOBS:-2}"
# The web console (docs/console.md) into build/console; YARD_NO_CONSOLE=1 skips it.
[ "${YARD_NO_CONSOLE:-0}" = 1 ] || BUILD_DIR=build scripts/build_console.sh
