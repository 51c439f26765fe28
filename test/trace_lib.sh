#!/usr/bin/env bash
# trace_lib.sh — helpers sourced by the trace CTest scripts: a generated C
# source tree, and a throw-away PostgreSQL server (initdb in a temporary
# directory, loopback port, run as an unprivileged user; stopped on exit).

# gen_tree DIR NDIRS NFILES: NDIRS directories of NFILES .c/.h files each,
# with comments, blank runs and #include edges within and across dirs.
gen_tree() {
  local root=$1 nd=$2 nf=$3 d f
  mkdir -p "$root"
  for ((d = 0; d < nd; d++)); do
    mkdir -p "$root/d$d"
    for ((f = 0; f < nf; f++)); do
      {
        printf '/* d%d/f%d.h — generated module %d of dir %d */\n' "$d" "$f" "$f" "$d"
        [ "$f" -gt 0 ] && printf '#include "f%d.h"\n' $((f - 1))
        [ "$d" -gt 0 ] && printf '#include "d%d/f%d.h"\n' $((d - 1)) "$f"
        printf '#include <stdio.h>\n\n\n\n'
        printf 'static int v%d_%d = %d;   \n' "$d" "$f" $((d * 100 + f))
        printf '// a line comment\nint f%d_%d(int x) { return x + v%d_%d; }\n' "$d" "$f" "$d" "$f"
      } >"$root/d$d/f$f.h"
    done
  done
}

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PG_DIR=""
PG_PORT=""
PG_USER=""

as_pg() { # runs a command as the unprivileged server user
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

pg_start() { # initdb + start; sets PG_CONNINFO and PG_URI
  [ -x "$PG_BIN/postgres" ] || { echo "postgresql is not installed" >&2; return 1; }
  PG_DIR=$(mktemp -d /tmp/spy-pg-XXXXXX)
  if [ "$(id -u)" -eq 0 ]; then
    PG_USER=postgres
    id "$PG_USER" >/dev/null 2>&1 || PG_USER=nobody
    chown "$PG_USER" "$PG_DIR"
  else
    PG_USER=$(id -un)
  fi
  chmod 700 "$PG_DIR"
  as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U spy --auth=trust -E UTF8 \
    --no-sync >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log"; return 1; }
  # a free loopback port
  PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  pg_up
  PG_CONNINFO="host=127.0.0.1 port=$PG_PORT user=spy dbname=postgres connect_timeout=2"
  PG_URI="postgresql://spy@127.0.0.1:$PG_PORT/postgres?connect_timeout=2"
}

pg_up() {
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off" \
    start >/dev/null
}

pg_down() { # stop now, like a crash or a network cut
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
}

pg_cleanup() {
  if [ -n "$PG_DIR" ]; then
    pg_down
    rm -rf "$PG_DIR"
    PG_DIR=""
  fi
}

pg_sql() { # prints the result of one query, unaligned
  "$PG_BIN/psql" -X -q -t -A -h 127.0.0.1 -p "$PG_PORT" -U spy -d postgres -c "$1"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
