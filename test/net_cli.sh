#!/usr/bin/env bash
# net_cli.sh TOOL CACHE_DIR — `spyglass serve` as a user runs it, with real
# processes on loopback: `top --connect` shows a `demo --headless`'s live
# numbers, `ls --connect`, $SPYGLASS_CONNECT; refusals (0.0.0.0 without a
# token, a busy port, a wrong token); WebSocket edge cases and a flood
# beyond --max-clients with the `ws` npm package (installed once into
# CACHE_DIR), with no fd leaked; TLS with a certificate made here.
set -euo pipefail
tool=$1
cache=$2
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "net_cli: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-net-XXXXXX)
chmod 700 "$work"
export SPYGLASS_DIR=$work/bus
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts `spyglass serve ARGS…` in the background; sets srv_pid, srv_port.
serve() {
    local log=$work/serve.$RANDOM.log
  # made here: the background shell may not have opened them yet when the
  # loop first reads the log (sed failing under pipefail ended the test)
  : >"$log"
  : >"$log.err"
  "$tool" serve "$@" >"$log" 2>"$log.err" &
  srv_pid=$!
  pids+=("$srv_pid")
  for _ in $(seq 100); do
    srv_port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$log" | head -1)
    [ -n "$srv_port" ] && return 0
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log.err" >&2
  fail "serve $* did not start"
}

echo "== refusals at start"
set +e
err=$("$tool" serve --listen 0.0.0.0:0 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || fail "0.0.0.0 without a token: exit $rc"
grep -q "listening on 0.0.0.0 needs --token-file" <<<"$err" || fail "message: $err"
# serve parses with the one option parser (opts.c): bad values exit 2
# naming the option; --allow-origin / --allow-host repeat, up to 32 each.
bad() {
  local want=$1; shift
  set +e
  err=$("$tool" serve "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "serve $*: exit $rc, not 2"
  grep -q -- "$want" <<<"$err" || fail "serve $*: message: $err"
}
bad "--max-clients wants a number of clients 1..4096, not '0'" --max-clients 0
bad "--max-clients wants a number of clients 1..4096, not '12x'" --max-clients 12x
bad "--allow-origin wants" --allow-origin
bad "--allow-host wants" --allow-host=
bad "unknown option '--bogus'" --bogus 1
many=()
for i in $(seq 33); do many+=(--allow-host "h$i.example"); done
bad "--allow-host is given at most 32 times" "${many[@]}"
bad "--tls-cert and --tls-key go together" --tls-cert x.pem

echo "== top --connect through serve"
"$tool" demo --headless >"$work/demo.log" 2>&1 &
pids+=($!)
serve --listen 127.0.0.1:0 --max-clients 8
port=$srv_port
set +e
err=$("$tool" serve --listen 127.0.0.1:$port 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 1 ] || fail "busy port: exit $rc"
grep -q "port $port on 127.0.0.1 is already in use" <<<"$err" || fail "busy port message: $err"
json=$("$tool" top --once --json --wait 10000 --connect 127.0.0.1:$port)
python3 - "$json" <<'PY' || fail "top --connect: $json"
import json, sys
s = json.loads(sys.argv[1])
assert s["conn"] == "connected", s["conn"]
assert s["provider"]["name"] == "spyglass-demo"
assert s["samples"] > 0 and s["fps"] > 0, (s["samples"], s["fps"])
assert s["counters"]["particles"] > 0
print("net_cli: top --connect: %.1f fps, %d samples" % (s["fps"], s["samples"]))
PY
SPYGLASS_CONNECT=127.0.0.1:$port "$tool" ls --json | grep -q '"name":"spyglass-demo"' \
  || fail "ls with \$SPYGLASS_CONNECT"
echo 0123456789abcdef0123456789abcdeX >"$work/bad.token"
set +e
err=$("$tool" ls --connect 127.0.0.1:$port --token-file "$work/bad.token" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "wrong or missing token" <<<"$err" || fail "wrong token: $rc $err"
set +e
err=$("$tool" ls --connect 127.0.0.1:1 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "connection refused" <<<"$err" || fail "nothing listening: $rc $err"

echo "== WebSocket edge cases (the ws npm package)"
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
if [ ! -f "$cache/node_modules/ws/package.json" ]; then
  mkdir -p "$cache"
  timeout 150 npm install --prefix "$cache" --no-audit --no-fund --silent 'ws@^8' \
    || fail "npm install ws failed"
fi
mods=$cache/node_modules/ws
node "$here/net_ws.mjs" "$mods" "ws://127.0.0.1:$port/link" edges
fds_before=$(ls /proc/$srv_pid/fd | wc -l)
node "$here/net_ws.mjs" "$mods" "ws://127.0.0.1:$port/link" flood 200
for _ in $(seq 50); do
  n=$(curl -s "http://127.0.0.1:$port/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_clients"])')
  [ "$n" -le 1 ] && break
  sleep 0.1
done
fds_after=$(ls /proc/$srv_pid/fd | wc -l)
echo "net_cli: serve fds before the flood $fds_before, after $fds_after"
[ "$fds_after" -le "$fds_before" ] || fail "fds leaked: $fds_before -> $fds_after"
curl -s "http://127.0.0.1:$port/healthz" | grep -q '"refused_full":[1-9]' || fail "refusals not counted"

echo "== TLS"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
serve --listen 127.0.0.1:0 --tls-cert "$work/cert.pem" --tls-key "$work/key.pem"
curl -s --cacert "$work/cert.pem" "https://localhost:$srv_port/healthz" | grep -q '"status":"ok"' \
  || fail "https /healthz"
node "$here/net_ws.mjs" "$mods" "wss://localhost:$srv_port/link" tls "$work/cert.pem"
json=$(SPYGLASS_CA=$work/cert.pem "$tool" top --once --json --wait 10000 --connect "tls://localhost:$srv_port")
grep -q '"conn":"connected"' <<<"$json" || fail "top --connect tls://: $json"
echo "net_cli: top --connect tls:// connected"
set +e
err=$(env -u SPYGLASS_CA "$tool" ls --connect "tls://localhost:$srv_port" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "an untrusted certificate was accepted: $rc $err"
set +e
curl -s "http://127.0.0.1:$srv_port/healthz" >/dev/null; rc=$?
set -e
[ $rc -ne 0 ] || fail "plain HTTP answered on a TLS port"
echo "net_cli: all passed"
