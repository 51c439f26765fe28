#!/usr/bin/env bash
# reader_pg.sh TOOL TEST_READER [TEST_TRACE_QUERY] — the reader against all
# three stores with a real PostgreSQL server started here (trace_lib.sh):
# every test_reader case (and test_trace_query's) with SPY_TEST_PG set
# (unless SPY_TEST_PG is set already: then the reader and trace_query
# tests ran them against that server), the same in schema 5's layout,
# then a build over a tree holding Latin-1
# bytes traced into each store: the JSON-lines files pass a strict parser
# line by line, the summary counts the replaced bytes, the SQL stores
# count none, and the three summaries agree on everything else; a cut
# last line is read up to the line before with a warning on stderr.
set -euo pipefail
tool=$1
test_reader=$2
test_trace_query=${3:-}
. "$(dirname "$0")/trace_lib.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-reader-pg-XXXXXX)
chmod 755 "$work"
trap 'pg_cleanup; rm -rf "$work"' EXIT
pg_start
echo "postgres up on 127.0.0.1:$PG_PORT"
# a loaded machine can take more than 2 s to answer a connection
PG_CONNINFO=${PG_CONNINFO/connect_timeout=2/connect_timeout=20}
PG_URI=${PG_URI/connect_timeout=2/connect_timeout=20}

if [ -n "${SPY_TEST_PG:-}" ]; then
  # scripts/test.sh's server: the reader and trace_query tests ran every
  # case against it already (schema 6); this script adds what they do not
  echo "== every reader case against postgres: done by the reader and trace_query tests (SPY_TEST_PG is set)"
else
  echo "== every reader case, postgres included"
  SPY_TEST_PG="$PG_CONNINFO" "$test_reader"
  if [ -n "$test_trace_query" ]; then
    echo "== trace builds/hooks/module/source, postgres included"
    SPY_TEST_PG="$PG_CONNINFO" "$test_trace_query"
  fi
fi

echo "== every reader case again, the postgres store in schema 5's layout"
# a table per hook Start and End kind (SPY_TRACE_PG_SCHEMA=5 makes a new
# store that way; later sessions keep writing it so), read as schema 6's
pg_sql "create database r5" >/dev/null
r5=${PG_CONNINFO/dbname=postgres/dbname=r5}
SPY_TRACE_PG_SCHEMA=5 SPY_TEST_PG="$r5" "$test_reader"
if [ -n "$test_trace_query" ]; then
  SPY_TRACE_PG_SCHEMA=5 SPY_TEST_PG="$r5" "$test_trace_query"
fi
r5_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d r5 -c "$1"; }
[ "$(r5_sql "select value from spyglass_meta where key='schema_version'")" = 5 ] ||
  fail "the schema 5 store's version"
[ "$(r5_sql "select relkind from pg_class where relname='hook_transform_call_start'")" = r ] ||
  fail "the schema 5 store has no hook Start table"

echo "== a Latin-1 tree through each store"
gen_tree "$work/src" 3 4
printf '/* caf\xe9 */\nint latin1 = 1; /* na\xefve */\n' >"$work/src/d0/latin1.c"
printf '#include "latin1.c"\n' >>"$work/src/d0/f0.h"
for store in jsonl sqlite "$PG_URI"; do
  name=${store%%:*}
  "$tool" demo build "$work/src" --trace "$store" --out "$work/$name" >"$work/$name.txt"
  grep -q ' 0 not stored' "$work/$name.txt" || { cat "$work/$name.txt"; fail "$name: not stored"; }
done
[ "$(pg_sql "select value from spyglass_meta where key='schema_version'")" = 6 ] ||
  fail "a new store is not schema 6"
sess=$(ls -d "$work"/jsonl/.spyglass/*)
python3 - "$sess" <<'PY'
import json, sys
n = 0
for name in ("meta.json", "logs.json"):
    with open(f"{sys.argv[1]}/{name}", "rb") as f:
        for i, raw in enumerate(f, 1):
            json.loads(raw.decode("utf-8"))  # strict: bad UTF-8 raises
            n += 1
print(f"strict parser: {n} lines, all valid")
PY
if command -v node >/dev/null 2>&1; then
  node -e '
    const fs = require("fs"); let n = 0;
    for (const f of ["meta.json", "logs.json"]) {
      const b = fs.readFileSync(process.argv[1] + "/" + f);
      new TextDecoder("utf-8", {fatal: true}).decode(b);
      for (const l of b.toString("utf8").split("\n")) if (l) { JSON.parse(l); n++; }
    }
    console.log("node: " + n + " lines, all valid");' "$sess"
fi
"$tool" trace summary "$sess" >"$work/s_jsonl.txt"
"$tool" trace summary "$(ls -d "$work"/sqlite/.spyglass/*)" >"$work/s_sqlite.txt"
"$tool" trace summary "$PG_URI" >"$work/s_pg.txt"
cat "$work/s_jsonl.txt"
grep -q '^not UTF-8   2 bytes' "$work/s_jsonl.txt" || fail "jsonl summary does not count the 2 Latin-1 bytes"
! grep -q 'not UTF-8' "$work/s_sqlite.txt" || fail "sqlite replaced bytes"
! grep -q 'not UTF-8' "$work/s_pg.txt" || fail "postgres replaced bytes"
for f in s_sqlite s_pg; do
  diff <(grep -E '^(actions|modules|chunks|hook calls|not stored) ' "$work/s_jsonl.txt") \
       <(grep -E '^(actions|modules|chunks|hook calls|not stored) ' "$work/$f.txt") ||
    fail "$f disagrees with jsonl"
done
"$tool" trace summary "$PG_URI" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["not_utf8_bytes"] == 0, d'
"$tool" trace summary "$sess" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["not_utf8_bytes"] == 2, d'

echo "== a cut last line: read up to the line before, with a warning"
size=$(stat -c %s "$sess/logs.json")
truncate -s $((size - 20)) "$sess/logs.json"
"$tool" trace summary "$sess" >"$work/cut.txt" 2>"$work/cut.err" || { cat "$work/cut.err"; fail "cut trace rejected"; }
cat "$work/cut.err"
grep -q 'warning: .*logs.json: the last line (.*at byte [0-9]*) is cut short' "$work/cut.err" ||
  fail "no warning naming the line and offset"
echo "reader_pg: all good"
