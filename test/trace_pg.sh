#!/usr/bin/env bash
# trace_pg.sh TOOL TEST_TRACE — the store against a real PostgreSQL server
# started here: every action kind round-trips, and so does text with tabs,
# line ends, backslashes and bytes that are not UTF-8; a traced build lands
# in it;
# the server goes away mid-build and comes back in time (nothing lost), also
# after a crash that loses batches committed but not flushed yet; it
# stays away too long for the retry budget (the summary counts exactly what
# was not stored); no stored delta ever names a base that is not stored; a
# schema 4 store is migrated in place, an older one refused; a newer schema
# is refused; the tables' statistics targets are small and the hook Start
# tables have no by-module index; a build killed mid-build (SIGKILL) leaves
# a hook_calls row for each stored Start, the open calls' unended.
set -euo pipefail
tool=$1
test_trace=$2
. "$(dirname "$0")/trace_lib.sh"
work=$(mktemp -d /tmp/spy-trace-pg-XXXXXX)
chmod 755 "$work"
trap 'pg_cleanup; rm -rf "$work"' EXIT
pg_start
echo "postgres up on 127.0.0.1:$PG_PORT"

echo "== every action kind round-trips"
SPY_TEST_PG="$PG_CONNINFO" "$test_trace" every_kind_round_trips_through_postgres

echo "== text with tabs, line ends, backslashes and \\N round-trips"
SPY_TEST_PG="$PG_CONNINFO" "$test_trace" escaped_text_round_trips_through_postgres

echo "== a dropped batch's payload is sent again when named again"
for verb in down up; do
  { echo "#!/usr/bin/env bash"; declare -p PG_BIN PG_DIR PG_PORT PG_USER
    echo ". '$(cd "$(dirname "$0")" && pwd)/trace_lib.sh'"
    declare -p PG_BIN PG_DIR PG_PORT PG_USER; echo "pg_$verb"; } >"$work/pg_$verb.sh"
  chmod +x "$work/pg_$verb.sh"
done
SPY_TEST_PG="$PG_CONNINFO" SPY_TEST_PG_DOWN="$work/pg_down.sh" SPY_TEST_PG_UP="$work/pg_up.sh" \
  "$test_trace" payload_of_a_dropped_batch_is_sent_again

echo "== an application kind gets its own tables"
SPY_TEST_PG="$PG_CONNINFO" "$test_trace" application_kind_into_postgres
[ "$(pg_sql "select frame || ' ' || scene || ' ' || plugins_count || ' ' || (shader_source_id is null) from frame_stats")" = "9 desert 2 true" ] ||
  fail "frame_stats row"
[ "$(pg_sql "select string_agg(name || ':' || plugin_id, ',' order by i0) from frame_stats__plugins")" = "shader-cache:3,lod:4" ] ||
  fail "frame_stats__plugins rows"
[ "$(pg_sql "select string_agg(distinct attstattarget::text, ',') from pg_attribute where attrelid='frame_stats__plugins'::regclass and attnum > 0")" = 10 ] ||
  fail "an application kind's statistics targets"

echo "== a chain of similar payloads round-trips as deltas"
SPY_TEST_PG="$PG_CONNINFO" "$test_trace" delta_chain_round_trips_through_postgres

echo "== a batch of many COPYs per table round-trips"
SPY_TEST_PG="$PG_CONNINFO" "$test_trace" many_copies_a_batch_round_trip_through_postgres

echo "== a traced build"
gen_tree "$work/src" 20 10
"$tool" demo build "$work/src" --trace "$PG_URI" --out "$work/out1" >"$work/b1.txt"
cat "$work/b1.txt"
grep -q ' 0 not stored' "$work/b1.txt" || fail "actions were not stored"
"$tool" trace summary "$PG_URI" >"$work/s1.txt"
grep -q '^modules     200$' "$work/s1.txt" || { cat "$work/s1.txt"; fail "summary"; }
grep -q '^not stored  0 actions$' "$work/s1.txt" || fail "summary lost"
sid=$(sed -n 's/.*session \([^,]*\),.*/\1/p' "$work/b1.txt")
[ "$(pg_sql "select count(*) from hook_calls where hook_type='transform' and session_id='$sid'")" -eq 1000 ] ||
  fail "hook_calls"
[ "$(pg_sql "select count(*) from modules where session_id='$sid'")" -eq 200 ] ||
  fail "modules"
[ "$(pg_sql "select count(*) from hook_transform_call_end e join sessions s using (session) where s.session_id='$sid'")" -eq 1000 ] ||
  fail "hook_transform_call_end rows"
[ "$(pg_sql "select count(*) from module_imports where session_id='$sid'")" -eq 370 ] ||
  fail "module_imports"

echo "== the store's statistics targets and indexes"
# ANALYZE samples 300 rows per unit of a table's largest target: 10 on
# every column (0 on a payload's bytes), not the server's default 100
# (schema 6: a hook kind's name is a view over hook_calls and its _kept
# table; the statistics are those tables')
for t in hook_call_rows hook_transform_call_start_kept; do
  [ "$(pg_sql "select string_agg(distinct attstattarget::text, ',') from pg_attribute where attrelid='$t'::regclass and attnum > 0")" = 10 ] ||
    fail "$t's statistics targets"
done
for v in hook_transform_call_start hook_calls; do
  [ "$(pg_sql "select relkind from pg_class where relname='$v'")" = v ] || fail "$v is not a view"
done
[ "$(pg_sql "select attname || '=' || attstattarget from pg_attribute where attrelid='sources'::regclass and attstattarget <> 10 and attnum > 0")" = "content=0" ] ||
  fail "sources' statistics targets"
[ "$(pg_sql "select count(*) from pg_indexes where indexname in ('hook_calls_plugin', 'module_graph_ready__modules__imports_parent')")" -eq 2 ] ||
  fail "the by-plugin and parent indexes"
[ "$(pg_sql "select count(*) from pg_indexes where indexname like 'hook\_%\_module'")" -eq 0 ] ||
  fail "a hook Start table indexed by module"

echo "== two builds start at once on an empty team database"
pg_sql "create database team" >/dev/null
team_uri=${PG_URI/\/postgres?/\/team?}
for i in 1 2; do
  "$tool" demo build "$work/src" --trace "$team_uri" --out "$work/team$i" >"$work/team$i.txt" 2>&1 &
  eval "team_pid$i=$!"
done
wait "$team_pid1" || { cat "$work/team1.txt"; fail "first concurrent build"; }
wait "$team_pid2" || { cat "$work/team2.txt"; fail "second concurrent build"; }
grep -q ' 0 not stored' "$work/team1.txt" && grep -q ' 0 not stored' "$work/team2.txt" ||
  fail "a concurrent build lost actions"
team_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d team -c "$1"; }
[ "$(team_sql "select count(*) from sessions")" -eq 2 ] || fail "team sessions"
[ "$(team_sql "select count(*) from hook_calls where hook_type='transform'")" -eq 2000 ] ||
  fail "team hook_calls"
[ "$(team_sql "select count(*) from pg_indexes where indexname='hook_calls_plugin'")" -eq 1 ] ||
  fail "team indexes"

echo "== a store of one session: its indexes come with the second session"
pg_sql "create database solo" >/dev/null
solo_uri=${PG_URI/\/postgres?/\/solo?}
solo_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d solo -c "$1"; }
hook_idx="select count(*) from pg_indexes where indexname ~ '^hook_.*_(call|plugin)$'"
all_idx="select count(*) from pg_indexes where indexname ~ '^(hook_.*_(call|plugin)|.*_parent|build_end_build)$'"
"$tool" demo build "$work/src" --trace "$solo_uri" --out "$work/solo1" >"$work/solo1.txt" 2>&1 ||
  { cat "$work/solo1.txt"; fail "first solo build"; }
[ "$(solo_sql "$all_idx")" -eq 0 ] || fail "a store of one session got indexes at close"
[ "$(solo_sql "select count(*) from hook_calls where hook_type='transform' and ended_at is not null")" -eq 1000 ] ||
  fail "solo hook_calls"
"$tool" trace hooks "$solo_uri" --plugin demo:banner --slowest 3 >"$work/solo_hooks.txt" ||
  fail "trace hooks on a store of one session"
[ "$(grep -c demo:banner "$work/solo_hooks.txt")" -ge 3 ] || { cat "$work/solo_hooks.txt"; fail "solo slowest hooks"; }
"$tool" demo build "$work/src" --trace "$solo_uri" --out "$work/solo2" >"$work/solo2.txt" 2>&1 ||
  { cat "$work/solo2.txt"; fail "second solo build"; }
[ "$(solo_sql "$hook_idx")" -eq 1 ] || fail "the second session did not make hook_calls' index"
[ "$(solo_sql "select count(*) from pg_indexes where indexname in ('module_graph_ready__modules__imports_parent', 'build_end_build')")" -eq 2 ] ||
  fail "the second session did not make the parent and build indexes"
[ "$(solo_sql "select count(*) from module_imports")" -eq 740 ] || fail "solo module_imports"

# The server goes away mid-build; the build keeps going (buffered).
slow_build() { # out_dir extra-args… ; runs in the background, sets pid
  "$tool" demo build "$work/src" --trace "$PG_URI" --out "$work/$1" \
    --hook-delay-us 3000 "${@:2}" >"$work/$1.txt" 2>"$work/$1.err" &
  pid=$!
}
wait_rows() { # waits until the store holds more than $1 actions
  for _ in $(seq 200); do
    n=$(pg_sql "select coalesce(sum(count),0) from action_batches" 2>/dev/null || echo 0)
    [ "${n:-0}" -gt "$1" ] && return 0
    sleep 0.02
  done
  fail "no rows arrived"
}

echo "== server away mid-build, back in time"
before=$(pg_sql "select coalesce(sum(count),0) from action_batches")
slow_build out2 --retry-ms 20000
wait_rows "$before"
pg_down
sleep 0.5
pg_up
wait "$pid" || { cat "$work/out2.err"; fail "build failed"; }
cat "$work/out2.txt"
grep -q "lost the connection" "$work/out2.err" || { cat "$work/out2.err"; fail "the outage was not reported"; }
grep -q ' 0 not stored' "$work/out2.txt" || fail "actions lost although the server came back"
"$tool" trace summary "$PG_URI" --json >"$work/s2.json"
emitted=$(sed -n 's/.*session [^,]*, \([0-9]*\) actions.*/\1/p' "$work/out2.txt")
python3 - "$work/s2.json" "$emitted" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["not_stored"] == 0, s
assert s["actions"] == int(sys.argv[2]), (s["actions"], sys.argv[2])
PY

echo "== a crash loses batches committed but not yet flushed: sent again"
# a batch's COMMIT does not wait for the WAL flush; with the WAL writer
# stopped its WAL stays in the server's memory, and the WAL writer killed
# makes the server restart as after a crash (restart_after_crash): those
# batches are gone, and the writer must find them missing and send them
# again (the final counts' COMMIT flushes everything before it)
ww=$(pg_sql "select pid from pg_stat_activity where backend_type='walwriter'")
[ -n "$ww" ] || fail "no WAL writer"
kill -STOP "$ww"
before=$(pg_sql "select coalesce(sum(count),0) from action_batches")
slow_build out5 --retry-ms 20000
wait_rows "$before"
sleep 0.3
kill -KILL "$ww"
kill -CONT "$ww" 2>/dev/null || true
wait "$pid" || { cat "$work/out5.err"; fail "build failed"; }
cat "$work/out5.txt"
grep -q ' 0 not stored' "$work/out5.txt" || fail "actions lost although the server came back"
emitted=$(sed -n 's/.*session [^,]*, \([0-9]*\) actions.*/\1/p' "$work/out5.txt")
sid5=$(sed -n 's/.*session \([^,]*\),.*/\1/p' "$work/out5.txt")
[ "$(pg_sql "select sum(count) from action_batches where session_id='$sid5'")" -eq "$emitted" ] ||
  fail "the store holds $(pg_sql "select sum(count) from action_batches where session_id='$sid5'") of $emitted actions after the crash"
[ "$(pg_sql "select actions from sessions where session_id='$sid5'")" -eq "$emitted" ] ||
  fail "the session's count after the crash"

echo "== server away too long for the retry budget"
before=$(pg_sql "select coalesce(sum(count),0) from action_batches")
slow_build out3 --retry-bytes 1 --retry-ms 20000
wait_rows "$before"
pg_down
sleep 1
pg_up
wait "$pid" && fail "the build should report lost actions" || true
cat "$work/out3.txt"
lost=$(sed -n 's/.*, \([0-9]*\) not stored.*/\1/p' "$work/out3.txt")
emitted=$(sed -n 's/.*session [^,]*, \([0-9]*\) actions.*/\1/p' "$work/out3.txt")
[ "${lost:-0}" -gt 0 ] || fail "expected lost actions"
"$tool" trace summary "$PG_URI" --json >"$work/s3.json"
python3 - "$work/s3.json" "$emitted" "$lost" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
emitted, lost = int(sys.argv[2]), int(sys.argv[3])
assert s["not_stored"] == lost, (s["not_stored"], lost)
assert s["actions"] + lost == emitted, (s["actions"], lost, emitted)
print("summary: %d stored + %d not stored = %d emitted" % (s["actions"], lost, emitted))
PY

echo "== every stored delta's base is stored"
deltas=$(pg_sql "select count(*) from sources where codec in (2, 3)")
[ "$deltas" -gt 0 ] || fail "no source was stored as a delta"
dangling=$(pg_sql "select count(*) from sources s where base_source_id is not null and not exists (select 1 from sources b where b.source_id=s.base_source_id)")
[ "$dangling" -eq 0 ] || fail "$dangling deltas name a base that is not stored"
echo "$deltas deltas, none dangling"

echo "== every payload a stored action names is stored (also after dropped batches)"
for col in hook_transform_call_start.content_source_id \
  hook_transform_call_end.content_source_id hook_load_call_end.content_source_id \
  hook_render_chunk_start.content_source_id hook_render_chunk_end.content_source_id \
  assets_ready__assets.content_source_id; do
  t=${col%.*} c=${col#*.}
  n=$(pg_sql "select count(*) from $t a where a.$c is not null and not exists (select 1 from sources s where s.source_id = a.$c)")
  [ "$n" -eq 0 ] || fail "$n rows of $t name a payload that is not stored"
done

echo "== a build killed mid-build (SIGKILL): a hook_calls row per stored Start"
# the calls still open have their Starts stored and no End: each is a
# hook_calls row with ended_at NULL, as in SQLite's hook_calls (and as the
# schema 5 view's LEFT JOIN gave it); the ended ones once each
starts_q="select sum(n) from (select count(*) n from hook_transform_call_start s join sessions x using (session) where x.session_id='%s' union all select count(*) from hook_load_call_start s join sessions x using (session) where x.session_id='%s' union all select count(*) from hook_resolve_id_call_start s join sessions x using (session) where x.session_id='%s' union all select count(*) from hook_render_chunk_start s join sessions x using (session) where x.session_id='%s') t"
ends_q=${starts_q//_start/_end}
count_of() { local q; q=${1//%s/$2}; pg_sql "$q"; }
before=$(pg_sql "select coalesce(max(session),0) from sessions")
slow_build kill1
ksid="" ok=0
for _ in $(seq 1000); do # until a stored Start's End is not stored yet
  [ -n "$ksid" ] || ksid=$(pg_sql "select session_id from sessions where session > $before" 2>/dev/null || true)
  if [ -n "$ksid" ] && [ "$(count_of "$starts_q" "$ksid")" -gt "$(count_of "$ends_q" "$ksid")" ]; then
    ok=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.02
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ "$ok" -eq 1 ] || { cat "$work/kill1.err"; fail "no Start was stored without its End before the build ended"; }
starts=$(count_of "$starts_q" "$ksid") ends=$(count_of "$ends_q" "$ksid")
read -r rows ended ids < <(pg_sql "select count(*), count(ended_at), count(distinct (hook_type, call_id)) from hook_calls where session_id='$ksid'" | tr '|' ' ')
echo "killed: $starts Starts and $ends Ends stored; hook_calls $rows rows, $ended ended, $ids calls"
[ "$starts" -gt "$ends" ] || fail "the killed build left no call open"
[ "$rows" -eq "$starts" ] || fail "hook_calls has $rows rows for $starts stored Starts"
[ "$ended" -eq "$ends" ] || fail "hook_calls has $ended ended rows for $ends stored Ends"
[ "$ids" -eq "$rows" ] || fail "a call is in hook_calls twice"
[ "$(pg_sql "select actions is null from sessions where session_id='$ksid'")" = t ] ||
  fail "the killed session's counts were written"

echo "== a schema 4 store is migrated in place, an older one refused"
# schema 5 only added a codec of sources rows: a schema 4 store has the
# same tables, made here by the same DDL and then marked as version 4 the
# way a schema 4 build left it (its meta row and its session's version)
pg_sql "create database v4" >/dev/null
v4_uri=${PG_URI/\/postgres?/\/v4?}
v4_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d v4 -c "$1"; }
SPY_TRACE_PG_SCHEMA=5 "$tool" demo build "$work/src" --trace "$v4_uri" --out "$work/v4a" >"$work/v4a.txt"
v4_sql "update spyglass_meta set value='4' where key='schema_version'; delete from spyglass_meta where key='ddl_hash'; update sessions set schema_version=4" >/dev/null
"$tool" demo build "$work/src" --trace "$v4_uri" --out "$work/v4b" >"$work/v4b.txt" 2>"$work/v4b.err" ||
  { cat "$work/v4b.err"; fail "a build refused the schema 4 store"; }
grep -q ' 0 not stored' "$work/v4b.txt" || fail "actions lost appending to the schema 4 store"
[ "$(v4_sql "select value from spyglass_meta where key='schema_version'")" = 5 ] ||
  fail "the schema 4 store was not marked as schema 5"
[ "$(v4_sql "select string_agg(schema_version::text, ',' order by session) from sessions")" = "4,5" ] ||
  fail "sessions' schema versions"
"$tool" trace summary "$v4_uri" >"$work/v4s.txt" || fail "summary of the migrated store"
[ "$(v4_sql "select count(*) from hook_calls where hook_type='transform'")" -eq 2000 ] ||
  fail "both sessions' hook_calls in the migrated store"
v4_sql "update spyglass_meta set value='3' where key='schema_version'" >/dev/null
if "$tool" demo build "$work/src" --trace "$v4_uri" --out "$work/v4c" 2>"$work/v4c.err"; then
  fail "a writer appended to a schema 3 store"
fi
grep -q 'schema version 3' "$work/v4c.err" || fail "schema 3 error: $(cat "$work/v4c.err")"

echo "== a schema 5 store is still written in its layout and reads the same"
# a table per hook Start and End kind; a new session adds to those tables
# (no migration), the readers read both layouts alike
pg_sql "create database v5" >/dev/null
v5_uri=${PG_URI/\/postgres?/\/v5?}
v5_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d v5 -c "$1"; }
SPY_TRACE_PG_SCHEMA=5 "$tool" demo build "$work/src" --trace "$v5_uri" --out "$work/v5a" >"$work/v5a.txt"
[ "$(v5_sql "select value from spyglass_meta where key='schema_version'")" = 5 ] || fail "not a schema 5 store"
"$tool" demo build "$work/src" --trace "$v5_uri" --out "$work/v5b" >"$work/v5b.txt" 2>"$work/v5b.err" ||
  { cat "$work/v5b.err"; fail "a build refused the schema 5 store"; }
grep -q ' 0 not stored' "$work/v5b.txt" || fail "actions lost appending to the schema 5 store"
[ "$(v5_sql "select value from spyglass_meta where key='schema_version'")" = 5 ] ||
  fail "the schema 5 store's version changed"
[ "$(v5_sql "select relkind from pg_class where relname='hook_transform_call_start'")" = r ] ||
  fail "the schema 5 store's hook Start table is gone"
[ "$(v5_sql "select count(*) from pg_class where relname='hook_transform_call_start_kept'")" -eq 0 ] ||
  fail "the schema 5 store got schema 6 tables"
[ "$(v5_sql "select count(*) from hook_calls where hook_type='transform' and ended_at is not null")" -eq 2000 ] ||
  fail "both sessions' hook_calls in the schema 5 store"
# the same build into a schema 6 store: the same summary and hook calls
pg_sql "create database v6" >/dev/null
v6_uri=${PG_URI/\/postgres?/\/v6?}
v6_sql() { "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d v6 -c "$1"; }
"$tool" demo build "$work/src" --trace "$v6_uri" --out "$work/v6a" >"$work/v6a.txt"
[ "$(v6_sql "select value from spyglass_meta where key='schema_version'")" = 6 ] || fail "not a schema 6 store"
"$tool" trace summary "$v5_uri" >"$work/v5s.txt" || fail "summary of the schema 5 store"
"$tool" trace summary "$v6_uri" >"$work/v6s.txt" || fail "summary of the schema 6 store"
diff <(grep -E '^(actions|modules|chunks|hook calls|not stored) ' "$work/v5s.txt") \
     <(grep -E '^(actions|modules|chunks|hook calls|not stored) ' "$work/v6s.txt") ||
  fail "the schema 5 and 6 stores' summaries differ"
calls="select hook_type || ' ' || plugin_name || ' ' || coalesce(module_id, '-') || ' ' || coalesce(input_source_id, '-') || ' ' || coalesce(output_source_id, '-') || ' ' || (ended_at >= started_at) from hook_calls h join sessions s using (session_id) where s.session = (select max(session) from sessions) order by 1"
diff <(v5_sql "$calls") <(v6_sql "$calls") >/dev/null || fail "the two layouts' hook_calls differ"
for u in "$v5_uri" "$v6_uri"; do
  "$tool" trace hooks "$u" --plugin demo:banner --slowest 3 >"$work/h.txt" || fail "trace hooks on $u"
  [ "$(grep -c demo:banner "$work/h.txt")" -ge 3 ] || { cat "$work/h.txt"; fail "slowest hooks on $u"; }
done

echo "== a newer schema is refused"
pg_sql "update spyglass_meta set value='99' where key='schema_version'" >/dev/null
if "$tool" trace summary "$PG_URI" 2>"$work/e.txt"; then fail "newer schema read"; fi
grep -q 'newer' "$work/e.txt" || fail "no clear error: $(cat "$work/e.txt")"
if "$tool" demo build "$work/src" --trace "$PG_URI" --out "$work/out4" 2>"$work/e2.txt"; then
  fail "a writer appended to a newer schema"
fi
grep -q 'newer schema' "$work/e2.txt" || fail "writer error: $(cat "$work/e2.txt")"
echo "trace_pg: all passed"
