# Start and stop a private etcd (Debian's etcd-server, 3.4) on 127.0.0.1 for elastic
# rendezvous in tests and demos. Source it, then:
#   start_etcd DATA_DIR   # sets etcd_pid and ETCD_ENDPOINT (127.0.0.1:PORT)
#   stop_etcd
# v2 is enabled: torch 1.13's etcd rendezvous (backend etcd-v2) speaks etcd's v2 API;
# Paddle's launcher speaks v3. Both work against this one server.
start_etcd() {
  local dir=$1 port peer
  mkdir -p "$dir"
  read -r port peer < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
  etcd --name yard-test --data-dir "$dir/data" --enable-v2=true \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "yard-test=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  etcd_pid=$!
  ETCD_ENDPOINT="127.0.0.1:$port"
  for _ in $(seq 100); do
    python3 -c "import urllib.request,sys; sys.exit(0 if b'true' in urllib.request.urlopen('http://$ETCD_ENDPOINT/health', timeout=1).read() else 1)" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "etcd did not come up:" >&2
  tail -20 "$dir/etcd.log" >&2
  return 1
}
stop_etcd() {
  if [ -n "${etcd_pid:-}" ]; then kill "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null; fi
  etcd_pid=""
}
