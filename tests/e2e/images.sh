# Test images and a registry, all local (no network): a busybox-static image built with umoci,
# pushed with skopeo to Debian's docker-registry on 127.0.0.1, and a private containerd (own
# root, state and socket; CRI off). Source after cluster.sh or with $tmp, $pids and free_port.

# build_busybox_image DIR TAG: an OCI layout DIR with image TAG: /bin/busybox and applets,
# /etc/yard-image ("yard-test-image"), cmd /bin/sh, PATH=/bin.
build_busybox_image() {
  local dir=$1 tag=$2 b
  umoci init --layout "$dir" && umoci new --image "$dir:$tag" || return 1
  b=$(mktemp -d)
  umoci unpack --rootless --image "$dir:$tag" "$b/bundle" >/dev/null || return 1
  mkdir -p "$b/bundle/rootfs"/{bin,tmp,proc,sys,dev,etc,data}
  cp /bin/busybox "$b/bundle/rootfs/bin/busybox"
  for c in sh echo cat ls sleep true false env id hostname mount touch test head tail dd tr nc wc grep cut pwd unshare; do ln -sf busybox "$b/bundle/rootfs/bin/$c"; done
  echo yard-test-image >"$b/bundle/rootfs/etc/yard-image"
  umoci repack --image "$dir:$tag" "$b/bundle" >/dev/null || return 1
  umoci config --image "$dir:$tag" --config.cmd /bin/sh --config.env PATH=/bin >/dev/null || return 1
  rm -rf "$b"
}

# start_registry: docker-registry on 127.0.0.1:<free port>; sets $registry (HOST:PORT).
start_registry() {
  local port
  port=$(free_port)
  mkdir -p "$tmp/registry"
  printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$tmp/registry" "$port" >"$tmp/registry.yml"
  docker-registry serve "$tmp/registry.yml" >"$tmp/registry.log" 2>&1 &
  pids+=("$!")
  registry=127.0.0.1:$port
  for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://$registry/v2/', timeout=1)" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "registry did not start: $(cat "$tmp/registry.log")"
  return 1
}

# start_auth_registry USER PASSWORD: a second registry that wants HTTP basic auth (htpasswd,
# bcrypt); sets $auth_registry (HOST:PORT).
start_auth_registry() {
  local port hash
  port=$(free_port)
  hash=$(python3 -W ignore -c 'import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))' "$2")
  mkdir -p "$tmp/auth-registry"
  echo "$1:$hash" >"$tmp/auth-registry.htpasswd"
  printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\nauth:\n  htpasswd:\n    realm: yard\n    path: %s\n' \
    "$tmp/auth-registry" "$port" "$tmp/auth-registry.htpasswd" >"$tmp/auth-registry.yml"
  docker-registry serve "$tmp/auth-registry.yml" >"$tmp/auth-registry.log" 2>&1 &
  pids+=("$!")
  auth_registry=127.0.0.1:$port
  for _ in $(seq 50); do
    [ "$(python3 -c "
import urllib.request, urllib.error
try: urllib.request.urlopen('http://$auth_registry/v2/', timeout=1); print(200)
except urllib.error.HTTPError as e: print(e.code)
except Exception: print(0)")" = 401 ] && return 0
    sleep 0.1
  done
  echo "auth registry did not start: $(cat "$tmp/auth-registry.log")"
  return 1
}

# push_image DIR TAG NAME: pushes the OCI image to $registry/NAME over plain HTTP.
push_image() {
  skopeo copy --quiet --dest-tls-verify=false "oci:$1:$2" "docker://$registry/$3" >/dev/null
}

# runc keeps its state in /run/containerd/runc/<namespace> whichever containerd started it,
# so a test killed before stop_containerd ran (a ctest timeout) leaves containers there; the
# next run's agent creates the same ids (node-1-7-0: a fresh master numbers replicas from 1)
# and runc refuses with "container with given ID already exists" — the agent's "exit code
# 127: agent: containerd: create task …" that failed a run now and then (docs/containerd.md).
# Such leftovers have no shim any more: they are removed before a test's containerd starts.
clear_stale_runc() {
  local root=/run/containerd/runc/yard id
  [ -d "$root" ] || return 0
  for id in $(runc --root "$root" list -q 2>/dev/null); do
    case "$id" in node-*-*-*) ;; *) continue ;; esac
    pgrep -f "containerd-shim-runc-v2 .*-id $id( |\$)" >/dev/null && continue  # a live one's shim still runs
    runc --root "$root" kill --all "$id" KILL 2>/dev/null
    runc --root "$root" delete --force "$id" 2>/dev/null
  done
}

# start_containerd: a private containerd; sets $containerd_sock and $containerd_pid.
start_containerd() {
  clear_stale_runc
  printf 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' >"$tmp/containerd.toml"
  containerd_sock=$tmp/containerd.sock
  containerd --config "$tmp/containerd.toml" --address "$containerd_sock" --root "$tmp/containerd-root" \
    --state "$tmp/containerd-state" >"$tmp/containerd.log" 2>&1 &
  containerd_pid=$!
  pids+=("$containerd_pid")
  for _ in $(seq 100); do [ -S "$containerd_sock" ] && ctr --address "$containerd_sock" version >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "containerd did not start: $(tail -5 "$tmp/containerd.log")"
  return 1
}

# stop_containerd: stops it, and every container and shim it started (a failed test can leave
# them running; runc's state is shared by every containerd of the host, so a leftover would
# collide with the next test's ids), and unmounts what it left under the temp dir.
stop_containerd() {
  local shim id ns
  for shim in $(pgrep -f "containerd-shim-runc-v2 .*-address $containerd_sock\$"); do
    id=$(tr '\0' ' ' <"/proc/$shim/cmdline" | sed -n 's/.* -id \([^ ]*\) .*/\1/p')
    ns=$(tr '\0' ' ' <"/proc/$shim/cmdline" | sed -n 's/.* -namespace \([^ ]*\) .*/\1/p')
    [ -n "$id" ] && runc --root "/run/containerd/runc/$ns" kill --all "$id" KILL 2>/dev/null
    [ -n "$id" ] && runc --root "/run/containerd/runc/$ns" delete --force "$id" 2>/dev/null
    kill -9 "$shim" 2>/dev/null
  done
  [ -n "${containerd_pid:-}" ] && kill "$containerd_pid" 2>/dev/null && wait "$containerd_pid" 2>/dev/null
  grep -o "$tmp/containerd-[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
}
