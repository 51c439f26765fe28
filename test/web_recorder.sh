#!/usr/bin/env bash
# web_recorder.sh — the dashboard flight recorder's image store
# (web/recorder_images.js): its 64 MiB and per-cell bounds and what
# parking keeps, under node's test runner.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "web_recorder: node is not installed (scripts/deps.sh)" >&2; exit 1; }
node --test "$here/web_recorder.test.mjs"
