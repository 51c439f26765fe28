#!/usr/bin/env bash
# pg-bytes.sh [TREE] — bytes one traced `demo build` adds to a fresh
# PostgreSQL database (initdb in a temporary directory, loopback port,
# CHECKPOINT and pg_database_size before and after), per table with its
# indexes. The figure behind the README's PostgreSQL bytes row; TREE
# defaults to the bench's generated 20,000-module tree. Needs a release
# build (make build) and Debian's postgresql.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-/tmp/spyglass-bench/tree-20000}
tool=build/release/spyglass
[ -x "$tool" ] || { echo "pg-bytes: build first (make build)" >&2; exit 1; }
[ -d "$tree" ] || { echo "pg-bytes: no tree at $tree (spyglass bench trace --quick makes one)" >&2; exit 1; }
. test/trace_lib.sh
out=$(mktemp -d /tmp/spy-pgbytes-XXXXXX)
trap 'pg_cleanup; rm -rf "$out"' EXIT
pg_start
sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d postgres -c "$1"; }
sql "CHECKPOINT" >/dev/null
before=$(sql "select pg_database_size('postgres')")
"$tool" demo build "$tree" --trace "$PG_URI" --out "$out" | tail -n 2
sql "CHECKPOINT" >/dev/null
after=$(sql "select pg_database_size('postgres')")
echo "database growth: $((after - before)) bytes"
sql "select relname || '  ' || pg_total_relation_size(oid) from pg_class
     where relkind = 'r' and relnamespace = 'public'::regnamespace
     order by pg_total_relation_size(oid) desc limit 12"
