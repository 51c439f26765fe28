#!/usr/bin/env bash
# zones_peers.sh TOOL [REPS] — one zone pair streaming to a live consumer
# in another process: `spyglass bench zones` next to Tracy's zone pair
# drained by tracy::Worker, interleaved in one run, each as a ratio to the
# two-rdtsc floor its own process measured (wall and the thread's CPU).
#
# Tracy comes from the peer harness: run ../shared/peers/bench-peers.sh
# once (it builds Tracy from source into $PEERS/bin); this script only
# runs its harness_tracy + harness_tracy_consumer binaries.
#   PEERS       where bench-peers.sh built them   [/tmp/peers]
#   BENCH_ARGS  more arguments to bench zones (e.g. --quick)
#   BASE_TOOL   another spyglass binary (e.g. the main branch's) run in
#               each rep too: a "spyglass (base)" row of the same run
set -euo pipefail
tool=${1:?usage: zones_peers.sh TOOL [REPS]}
reps=${2:-3}
PEERS=${PEERS:-/tmp/peers}
bin=$PEERS/bin
for b in harness_tracy harness_tracy_consumer; do
  [ -x "$bin/$b" ] || { echo "zones_peers: $bin/$b missing: run bench-peers.sh first (PEERS=$PEERS)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/spy-zpeers-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== $(uptime)" >&2

tracy_once() { # prints the worker's RESULT line and the consumer's line
  local port=$((19000 + RANDOM % 2000)) ready=$work/ready.$RANDOM
  HARNESS_READY=$ready TRACY_PORT=$port "$bin/harness_tracy" run zone 1 \
    >"$work/tw" 2>>"$work/err" &
  local wp=$!
  sleep 0.2
  HARNESS_READY=$ready "$bin/harness_tracy_consumer" $port \
    >"$work/tc" 2>>"$work/err" &
  local cp=$!
  wait $wp || true
  wait $cp || true
  printf '%s | %s\n' "$(grep RESULT "$work/tw" || true)" \
    "$(grep CONSUMER "$work/tc" || true)"
}

for r in $(seq "$reps"); do
  echo "== rep $r: tracy" >&2
  tracy_once >>"$work/tracy.txt"
  echo "== rep $r: spyglass" >&2
  "$tool" bench zones --json ${BENCH_ARGS:-} >>"$work/spy.jsonl"
  if [ -n "${BASE_TOOL:-}" ]; then
    echo "== rep $r: spyglass (base)" >&2
    "$BASE_TOOL" bench zones --json ${BENCH_ARGS:-} >>"$work/base.jsonl"
  fi
done
touch "$work/base.jsonl"
echo "== $(uptime)" >&2

python3 - "$work/tracy.txt" "$work/spy.jsonl" "$work/base.jsonl" <<'PY'
import json, re, statistics, sys
def kv(line, key):
    m = re.search(r"\b%s=([-0-9.e]+)" % key, line)
    return float(m.group(1)) if m else float("nan")
med = statistics.median
T = [l for l in open(sys.argv[1]) if "RESULT" in l]
S = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
B = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
def row(rows, name):
    return next(x for x in rows["rows"] if x["case"].startswith(name))
t_wall = [kv(l, "ns_frame") for l in T]; t_cpu = [kv(l, "cpu_ns_frame") for l in T]
t_fl = [kv(l, "fl_rdtsc") for l in T]
t_got = [kv(l.split("|")[1], "zones") / kv(l, "frames") for l in T]
def spy_rows(S):
    on = [row(s, "streaming") for s in S]; fl = [row(s, "two clock") for s in S]
    drop = [row(s, "zones dropped at full")["ns_per_zone"] for s in S]
    return ([x["ns_per_zone"] for x in on], [x["thread_cpu_ns"] for x in on],
            [x["ns_per_zone"] for x in fl], [x["thread_cpu_ns"] for x in fl],
            [1 - d / 100 for d in drop])
s_on = [row(s, "streaming") for s in S]; s_fl = [row(s, "two clock") for s in S]
# Tracy's harness times its floor by wall clock only; the CPU column of
# both uses the thread-CPU floor bench zones measured (the same rdtsc pair
# on the same machine), which preemption on a loaded machine does not move.
cpu_fl = [x["thread_cpu_ns"] for x in s_fl]
s_drop = [row(s, "zones dropped at full")["ns_per_zone"] for s in S]
print("| zone pair streaming to a consumer process | ns wall | x floor (wall) | ns thread CPU | x floor (CPU) | floor ns (wall / CPU) | reached consumer |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, w, c, fw, fc, got in [
    ("Tracy (tracy::Worker)", t_wall, t_cpu, t_fl, [med(cpu_fl)] * len(T), t_got),
    ("spyglass",) + spy_rows(S)] + ([("spyglass (base)",) + spy_rows(B)] if B else []):
    if not w: print(f"| {name} | no result |"); continue
    print(f"| {name} | {med(w):.1f} | {med([a/b for a,b in zip(w,fw)]):.2f} | {med(c):.1f} | "
          f"{med([a/b for a,b in zip(c,fc)]):.2f} | {med(fw):.1f} / {med(fc):.1f} | {100*med(got):.0f} % |")
print(f"\nmedians of {len(T)} Tracy and {len(S)} spyglass runs, interleaved; Tracy's floor is"
      " its harness's two-rdtsc loop (wall); spyglass's is bench zones' two-clock-read loop"
      " (calibrated TSC); x floor (CPU) divides both threads' CPU by bench zones' CPU floor;"
      " reached consumer: Tracy's zones received, spyglass's 100 % - dropped at full speed.")
PY
