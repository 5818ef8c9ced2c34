#!/usr/bin/env bash
# Builds the Debian packages yard-master, yard-agent (with yard-shim and yard-rsh) and yardctl
# from the CMake build in build/, with CPack (cmake/Packaging.cmake). docs/operations.md,
# "Packages", says what they install.
#
#   scripts/package.sh [--no-build] [--release N] [--out DIR] [--build-dir DIR]
#
#   --no-build   package build/ as it is (default: an incremental build first, with the
#                flags build/ was configured with; configure it with scripts/build.sh)
#   --release N  the Debian revision, 0.1.0-N (default 1); a higher one upgrades
#   --out DIR    where the .deb files go (default build/packages)
#   --build-dir DIR  the configured build tree (default build)
#
# Prints the path of each package built. Needs dpkg-dev (dpkg-shlibdeps computes Depends).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build
release=1
out=""
do_build=1
usage() { echo "usage: scripts/package.sh [--no-build] [--release N] [--out DIR] [--build-dir DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) do_build=0 ;;
    --release) [ $# -ge 2 ] || usage; release=$2; shift ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
    --build-dir) [ $# -ge 2 ] || usage; build=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument $1" >&2; usage ;;
  esac
  shift
done
case "$release" in
  ''|*[!0-9A-Za-z.+~]*) echo "package.sh: --release: \"$release\" must be a Debian revision ([0-9A-Za-z.+~])" >&2; exit 2 ;;
esac
[ -f "$build/CPackConfig.cmake" ] || { echo "package.sh: no configured build in $build (run scripts/build.sh)" >&2; exit 1; }
build=$(cd "$build" && pwd)
command -v dpkg-shlibdeps >/dev/null || { echo "package.sh: dpkg-shlibdeps not found (apt-get install dpkg-dev; scripts/setup.sh installs it)" >&2; exit 1; }
out=${out:-$build/packages}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ "$do_build" = 1 ]; then
  cmake --build "$build" --target yard-master yard-agent yard-shim yard-rsh yardctl -j"${YARD_JOBS:-2}"
fi
for b in yard-master yard-agent yard-shim yard-rsh yardctl; do
  [ -x "$build/bin/$b" ] || { echo "package.sh: $build/bin/$b is not built" >&2; exit 1; }
done

# cpack stages each package under $out/_CPack_Packages; its log stays there on failure.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! (cd "$build" && cpack -G DEB -B "$out" -D CPACK_DEBIAN_PACKAGE_RELEASE="$release") >"$log" 2>&1; then
  cat "$log" >&2
  echo "package.sh: cpack failed" >&2
  exit 1
fi
rm -rf "$out/_CPack_Packages"
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
arch=$(dpkg --print-architecture)
for p in yard-master yard-agent yardctl; do
  f="$out/${p}_${version}-${release}_${arch}.deb"
  [ -f "$f" ] || { cat "$log" >&2; echo "package.sh: $f was not made" >&2; exit 1; }
  echo "$f"
done
