#!/usr/bin/env bash
# tool_preload.sh TOOL — the spyglass tool runs under a preloaded
# allocator (jemalloc, as a user profiling or tuning it would preload).
# The tool wraps glibc's malloc family to count allocations for `bench`;
# every block it frees must come from the allocator its free goes to, and
# before the aligned entry points were wrapped too, a traced build aborted
# in free ("free(): invalid pointer") on the session's aligned blocks.
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
lib=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1 || true)
if [ -z "$lib" ]; then
  echo "tool_preload: libjemalloc.so.2 is not installed (Debian: libjemalloc2)" >&2
  exit 1
fi
work=$(mktemp -d /tmp/spy-preload-XXXXXX)
trap 'rm -rf "$work"' EXIT
gen_tree "$work/src" 4 10
for w in jsonl sqlite; do
  LD_PRELOAD=$lib "$tool" demo build "$work/src" --out "$work/out-$w" \
    --trace "$w" --no-bus >"$work/$w.log" 2>&1 || {
    cat "$work/$w.log"
    echo "tool_preload: demo build --trace $w failed under $lib" >&2
    exit 1
  }
  store=$(ls -d "$work/out-$w"/.spyglass/*/ | head -n 1)
  calls=$(LD_PRELOAD=$lib "$tool" trace summary "$store" --json | jq '.hook_calls')
  # 40 modules: a load and 7 transforms each, one resolveId per #include
  if [ "${calls:-0}" -lt 320 ]; then
    echo "tool_preload: $w store holds $calls hook calls, expected at least 320" >&2
    exit 1
  fi
  echo "tool_preload: $w: built and read back under $lib ($calls hook calls)"
done
LD_PRELOAD=$lib "$tool" bench trace --emit-only >"$work/bench.log" 2>&1 || {
  tail -n 20 "$work/bench.log"
  echo "tool_preload: bench trace --emit-only failed under $lib" >&2
  exit 1
}
echo "tool_preload: bench trace --emit-only ran under $lib"
