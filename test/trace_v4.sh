#!/usr/bin/env bash
# trace_v4.sh TOOL [--write-expected] [VERSION] — every `spyglass trace`
# reader command on the schema VERSION (4, the default, or 5) stores
# under test/fixtures (trace_vN.sql, the SQLite store as SQL text;
# trace_v4_jsonl/, the JSON-lines session, for 4 only) prints what the
# schema N build printed on them (trace_vN.expected, written by that
# build's binary with --write-expected; see fixtures/README.md), and
# `trace source` gives the exact bytes of each file that build loaded
# (trace_v4_src/*.txt, the same files for both).
set -euo pipefail
tool=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
fx=$here/fixtures
v=${3:-${2:-4}}
[ "$v" = --write-expected ] && v=4
case $v in 4 | 5) ;; *) v=4 ;; esac
fail() { echo "trace_v$v: FAIL: $*" >&2; exit 1; }
command -v sqlite3 >/dev/null || fail "sqlite3 is not installed (scripts/deps.sh)"
work=$(mktemp -d /tmp/spy-trace-v4-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/sql"
sqlite3 "$work/sql/trace.db" <"$fx/trace_v$v.sql"
stores=sql
if [ "$v" = 4 ]; then
  cp -r "$fx/trace_v4_jsonl" "$work/jsonl"
  stores="sql jsonl"
fi
cd "$work"
ids=$(sqlite3 sql/trace.db "SELECT source_id FROM sources ORDER BY source_id")

run_all() { # every reader command on both stores, each under a header
  local s m id
  for s in $stores; do
    for args in "summary $s" "summary $s --json" "builds $s" \
                "builds $s --json" "hooks $s" \
                "hooks $s --plugin demo:strip-comments" \
                "hooks $s --build 1 --slowest 3 --json"; do
      echo "== trace $args"
      # shellcheck disable=SC2086
      "$tool" trace $args || echo "(exit $?)"
    done
    for m in app/main.c lib/util.c lib/util.h; do
      for opt in "" "--diff" "--build 1 --diff --json"; do
        echo "== trace module $s $m $opt"
        # shellcheck disable=SC2086
        "$tool" trace module "$s" "$m" $opt || echo "(exit $?)"
      done
    done
    for id in $ids; do
      echo "== trace source $s $id"
      "$tool" trace source "$s" "$id" || echo "(exit $?)"
    done
  done
}

if [ "${2:-}" = --write-expected ]; then
  run_all >"$fx/trace_v$v.expected"
  echo "trace_v$v: wrote $fx/trace_v$v.expected"
  exit 0
fi
run_all >got.txt
if ! cmp -s got.txt "$fx/trace_v$v.expected"; then
  diff -u "$fx/trace_v$v.expected" got.txt | head -n 60
  fail "the reader's output differs from the schema $v build's"
fi
grep -q "^(exit" got.txt && fail "a reader command failed"
echo "== the loaded files' bytes"
for s in $stores; do
  for f in app/main.c lib/util.c lib/util.h; do
    # the load hook's output (the first hook call): the file's bytes
    id=$("$tool" trace module "$s" "$f" --json |
      grep -o '"output_source_id":"[0-9a-f]\{32\}"' | head -n 1 | cut -d'"' -f4)
    [ -n "$id" ] || fail "$s: no input source for $f"
    "$tool" trace source "$s" "$id" >src.bin
    cmp -s src.bin "$fx/trace_v4_src/$f.txt" || fail "$s: $f: the bytes differ"
  done
done
echo "trace_v$v: all passed"
