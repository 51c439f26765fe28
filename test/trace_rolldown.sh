#!/usr/bin/env bash
# trace_rolldown.sh TOOL TEST_TRACE CACHE_DIR — installs @rolldown/debug
# 1.2.x from npm (once, into CACHE_DIR) and checks spyglass's JSON-lines
# output with it: every kind (written by test_trace), then a traced
# `demo build`, parsed by the package's parseToEvents and checked against
# its declared action types.
set -euo pipefail
tool=$1
test_trace=$2
cache=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/trace_lib.sh"
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
pkg="$cache/node_modules/@rolldown/debug"
if [ ! -f "$pkg/package.json" ]; then
  mkdir -p "$cache"
  timeout 150 npm install --prefix "$cache" --no-audit --no-fund --silent \
    '@rolldown/debug@~1.2.0' || fail "npm install @rolldown/debug failed"
fi
node -e 'const v=require(process.argv[1]).version; if(!v.startsWith("1.2.")) {console.error("version", v); process.exit(1)}' \
  "$pkg/package.json"
work=$(mktemp -d /tmp/spy-trace-rd-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== every action kind"
SPY_TEST_JSONL_DIR="$work/all" "$test_trace" write_every_kind_for_rolldown
node "$here/rolldown_check.mjs" "$pkg" "$work/all" all

echo "== a traced demo build"
gen_tree "$work/src" 5 10
"$tool" demo build "$work/src" --trace jsonl --out "$work/out" >"$work/b.txt"
dir=$(sed -n 's/^trace: \(\/.*\)$/\1/p' "$work/b.txt")
[ -f "$dir/logs.json" ] || fail "no logs.json in '$dir'"
case "$dir" in "$work/out/.spyglass/"*) ;; *) fail "session not under --out: $dir" ;; esac
node "$here/rolldown_check.mjs" "$pkg" "$dir"
echo "trace_rolldown: all passed"
