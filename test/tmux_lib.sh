# tmux_lib.sh — sourced by the tests that drive `spyglass top` in a real
# terminal (top_zones_tmux.sh, top_build_tmux.sh): a private tmux server
# in $work (no user configuration, a fixed-size window) and a deadline
# loop reading its screen back. The caller defines fail() and $work.

sock=$work/tmux.sock
tmux_session=
tmux_pid=     # a process the screen waits on: its exit fails the wait
tmux_logs=()  # files shown when a wait fails

# tmux_start SESSION COMMAND: COMMAND in a 120x50 window of a private server
tmux_start() {
  tmux_session=$1
  tmux -S "$sock" -f /dev/null new-session -d -s "$1" -x 120 -y 50 "$2"
}
# tmux_stop: the server killed, and waited for (10 s at most) until the
# pane's processes are gone, so that nothing writes into $work any more
# when the caller removes it (top leaving its bus ring raced an rm -rf)
tmux_stop() {
  local pids p deadline=$((SECONDS + 10))
  pids=$(tmux -S "$sock" list-panes -a -F '#{pane_pid}' 2>/dev/null || true)
  for p in $pids; do pids="$pids $(pgrep -P "$p" || true)"; done # top itself
  tmux -S "$sock" kill-server 2>/dev/null || true
  for p in $pids; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  done
}
tmux_keys() { tmux -S "$sock" send-keys -t "$tmux_session" "$@"; }
screen() { tmux -S "$sock" capture-pane -p -t "$tmux_session"; }

# wait_screen SECONDS RE…: until the screen matches every extended regexp
# (a deadline, not a fixed sleep); leaves the screen in $shown; prints
# the last screen and $tmux_logs when it never does.
shown=
wait_screen() {
  local deadline=$((SECONDS + $1)) s= re ok
  shift
  while [ $SECONDS -lt $deadline ]; do
    s=$(screen)
    ok=1
    for re in "$@"; do grep -Eq -- "$re" <<<"$s" || { ok=0; break; }; done
    if [ $ok = 1 ]; then
      shown=$s
      return 0
    fi
    if [ -n "$tmux_pid" ] && ! kill -0 "$tmux_pid" 2>/dev/null; then
      cat "${tmux_logs[@]}" >&2 || true
      fail "pid $tmux_pid exited"
    fi
    sleep 0.2
  done
  printf '%s\n' "$s" >&2
  cat "${tmux_logs[@]}" >&2 || true
  fail "screen never showed: $*"
}
