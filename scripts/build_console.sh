#!/usr/bin/env bash
# Builds the web console (console/, docs/console.md) into $BUILD_DIR/console (BUILD_DIR
# defaults to build, relative to the repo root), which yard-master serves at `/`.
# `npm ci` runs only when console/node_modules is missing or package-lock.json changed since
# it last ran; the build itself is skipped when nothing it reads is newer than its output.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
out="$build_dir/console"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "build_console: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done

cd console
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.yard-package-lock.sha256
if [ ! -d node_modules ] || [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
  echo "build_console: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" >"$stamp"
fi

inputs=(src index.html package.json package-lock.json tsconfig.json vite.config.ts)
if [ -f "$out/index.html" ] && [ -z "$(find "${inputs[@]}" -newer "$out/index.html" -print -quit)" ]; then
  echo "build_console: $out is up to date"
  exit 0
fi
YARD_CONSOLE_OUT="$out" npm run --silent build
echo "build_console: built $out"
