#!/usr/bin/env bash
# Installs every build and test dependency of Yard from Debian 12 packages.
# Non-interactive and idempotent: packages already present are not reinstalled,
# and apt is only asked when something is missing. Runs as root, or through sudo.
#   scripts/setup.sh          everything: the build and every test (scripts/test.sh)
#   scripts/setup.sh --demo   only what builds the product and runs scripts/demo.sh
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config ninja-build
  libasio-dev capnproto libcapnp-dev libsqlite3-dev libcgroup-dev
  # the masters' Raft group (docs/ha.md): canonical/raft on libuv
  libraft-dev libuv1-dev
  libyaml-cpp-dev libtomlplusplus-dev libcli11-dev libssl-dev nlohmann-json3-dev
  # the HTTP API (docs/http_api.md): RESTinio, header-only, with its fmt and http-parser
  librestinio-dev libfmt-dev libhttp-parser-dev
  # containerd's gRPC API: generated at build time from the protos Debian ships
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  golang-github-containerd-containerd-dev golang-github-gogo-protobuf-dev
  golang-github-containerd-cgroups-dev
  # the demo's example job (python3) and its process checks
  python3 procps
)
[ "${1:-}" = --demo ] || packages+=(
  # tests
  catch2 sqlite3
  # metrics tests: promtool (check metrics / check rules / test rules) and curl; Debian 12
  # ships promtool only inside the prometheus package, whose own service Yard does not use
  prometheus curl
  # yardctl completion: the zsh script is checked by zsh itself (tests/cli/completion_test.sh)
  zsh
  # end-to-end framework tests: real PyTorch (gloo) and OpenMPI with mpi4py
  python3-torch openmpi-bin python3-mpi4py
  # elastic rendezvous: a real etcd (3.4; torch 1.13's etcd-v2 backend needs python3-etcd)
  etcd-server python3-etcd
  # the containerd driver's tests run a real containerd with runc, and images built locally
  # (umoci, busybox-static) served by a registry on 127.0.0.1 (docker-registry, skopeo)
  containerd runc umoci busybox-static docker-registry skopeo
  # the chaos suite: network namespaces and a veth link it cuts (ip), and in HA mode the
  # leader's raft traffic it drops (iptables, its cgroup match)
  iproute2
  iptables
  # Debian packages (scripts/package.sh: dpkg-shlibdeps) and their test: the postinst's
  # adduser, systemd-analyze for the units (systemd need not run as PID 1)
  dpkg-dev adduser systemd
  # the web console's browser tests (console/, docs/console.md): playwright-core drives
  # Debian's chromium, no downloaded browser
  chromium
  # the HTTP API's answers checked against its OpenAPI document; the Python client's tests
  # (clients/python: pytest, and an offline pip install into a venv)
  python3-jsonschema python3-yaml python3-pytest python3-venv python3-pip
)

# The web console is built with Node and npm (Debian 12 has Node 18); a Node already on
# PATH (say a newer one in a CI image) is used as it is.
if [ "${1:-}" != --demo ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
