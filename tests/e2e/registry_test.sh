#!/usr/bin/env bash
# The image pipeline the containerd driver's tests stand on, with nothing from the network:
# a busybox-static image built with umoci, pushed with skopeo to Debian's docker-registry on
# 127.0.0.1, pulled over plain HTTP by a private containerd (ctr), and run with `ctr run`:
# its root filesystem is the image's, not the host's. Also: Yard's containerd client sees
# that containerd. Prints `ctr run`'s start-to-exit time (the driver's future baseline).
bin=$1
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/images.sh"
trap 'stop_containerd; cleanup' EXIT

say "build, push, pull and run a local image"
build_busybox_image "$tmp/oci" 1 || fail "umoci could not build the image"
start_registry || exit 1
push_image "$tmp/oci" 1 yard/busybox:1 || fail "skopeo push to $registry failed"
start_containerd || exit 1
ref=$registry/yard/busybox:1
ctr --address "$containerd_sock" -n yard images pull --plain-http "$ref" >"$tmp/pull.log" 2>&1 || fail "pull: $(tail -3 "$tmp/pull.log")"
t0=$(date +%s%N)
out=$(ctr --address "$containerd_sock" -n yard run --rm "$ref" probe cat /etc/yard-image 2>&1)
t1=$(date +%s%N)
[ "$out" = yard-test-image ] || fail "the container did not see the image's file: $out"
out=$(ctr --address "$containerd_sock" -n yard run --rm "$ref" probe2 sh -c 'test -e /usr/bin/python3 && echo host || echo image' 2>&1)
[ "$out" = image ] || fail "the container's root is the host's: $out"
echo "ctr run (image cached), start to exit: $(( (t1 - t0) / 1000000 )) ms"
# A missing image is an error containerd names.
ctr --address "$containerd_sock" -n yard images pull --plain-http "$registry/yard/missing:1" >"$tmp/missing.log" 2>&1 \
  && fail "pulling a missing image succeeded"
grep -qi "not found" "$tmp/missing.log" || fail "missing image error: $(cat "$tmp/missing.log")"
[ -z "$(ctr --address "$containerd_sock" -n yard containers list -q)" ] || fail "containers left behind"
finish e2e.registry
