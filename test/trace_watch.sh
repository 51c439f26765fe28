#!/usr/bin/env bash
# trace_watch.sh TOOL — `spyglass demo build --watch` against a real tree
# and inotify. Proves: a change to b.h makes a second build of the same
# session that loads and transforms only b.h and the two modules including
# it; deleting one file and adding another in one burst makes a third
# build that transforms only the new file and whose graph lost the
# deleted one; five rapid saves make one rebuild, not five; SIGTERM ends
# the session cleanly (exit 0, every build with its BuildEnd, nothing lost)
# and the reader lists the four builds separately.
set -euo pipefail
tool=$1
fail() { echo "FAIL: $*" >&2; [ -f "$work/log" ] && cat "$work/log" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-watch-XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src/d"
printf '#include "b.h"\n/* a */\nint a;\n' >"$src/a.c"
printf '// b\nint b;\n' >"$src/b.h"
printf 'int c; /* c */\n' >"$src/d/c.c"
printf '#include "../b.h"\nint e;\n' >"$src/d/e.c"

# waits (up to 60 s: a loaded machine) for line pattern $1 in the log
wait_for() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q "$1" "$work/log" && return 0
    kill -0 "$pid" 2>/dev/null || fail "the watcher exited before '$1'"
    sleep 0.1
  done
  fail "no '$1' within 60 s"
}

"$tool" demo build "$src" --watch --debounce-ms 1000 --trace sqlite \
  --out "$work/out" >"$work/log" 2>&1 &
pid=$!
wait_for '^build 1: 4 modules, 4 transformed'

echo "// changed" >>"$src/b.h"
wait_for '^build 2:'
grep -q '^build 2: 4 modules, 3 transformed' "$work/log" ||
  fail "build 2 should transform b.h and its two importers only"

rm "$src/d/c.c"
printf 'int f;\n' >"$src/f.c"
wait_for '^build 3:'
grep -q '^build 3: 4 modules, 1 transformed' "$work/log" ||
  fail "build 3 should transform the new f.c only"

for i in 1 2 3 4 5; do echo "// save $i" >>"$src/a.c"; done
wait_for '^build 4:'
grep -q '^build 4: 4 modules, 1 transformed' "$work/log" ||
  fail "build 4 should transform a.c only"
sleep 2 # a fifth build would start within the 1 s debounce
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "the watcher exited $rc on SIGTERM"
grep -q '^build 5:' "$work/log" && fail "five rapid saves made more than one rebuild"
grep -q 'session ended after 4 builds' "$work/log" || fail "no session summary"
grep -q ' 0 not stored' "$work/log" || fail "actions not stored"

store=$(ls -d "$work"/out/.spyglass/*)
"$tool" trace builds "$store" --json >"$work/builds.json"
for b in 2 3 4; do
  "$tool" trace hooks "$store" --build $b --json >"$work/hooks$b.json"
done
"$tool" trace module "$store" d/c.c --build 3 >/dev/null 2>&1 &&
  fail "d/c.c is still in build 3's graph"
"$tool" trace module "$store" f.c --build 3 --json >"$work/f.json"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
b = json.load(open(f"{w}/builds.json"))["builds"]
assert [x["build"] for x in b] == [1, 2, 3, 4], b
assert all(x["ended_us"] for x in b), "a build without its BuildEnd"
assert [x["modules"] for x in b] == [4, 4, 4, 4], b
want = {2: {"a.c", "b.h", "d/e.c"}, 3: {"f.c"}, 4: {"a.c"}}
for n, mods in want.items():
    h = json.load(open(f"{w}/hooks{n}.json"))["hook_calls"]
    got = {x["module"] for x in h if x["hook"] in ("load", "transform")}
    assert got == mods, (n, got, mods)
f = json.load(open(f"{w}/f.json"))
assert f["build"] == 3 and len(f["hook_calls"]) == 6, f
print("watch: 4 builds; rebuilt", {n: sorted(m) for n, m in want.items()})
PY
echo "trace_watch: ok"
