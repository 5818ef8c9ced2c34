#!/usr/bin/env bash
# Configures and builds Yard into build/ (binaries in build/bin). Extra arguments go to
# cmake's configure step, e.g. scripts/build.sh -DYARD_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && [ ! -f build/Makefile ] && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" "$@" >/dev/null
cmake --build build -j"${YARD_JOBS:-2}"
