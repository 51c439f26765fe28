#!/usr/bin/env bash
# web_pixels.sh WEB_HELPER — the dashboard's image and draw-list decoders
# (web/wire_pixels.js: PIXELS, BUFFERS metadata, BATCHES, PASSES, parts)
# against golden frames the C encoder wrote (web_helper golden: DIR/img),
# field by field, the malformed ones refused as the C decoder refuses them.
set -euo pipefail
helper=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "web_pixels: node is not installed (scripts/deps.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-web-pixels-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$helper" golden "$work" >/dev/null
SPY_GOLDEN_DIR="$work/img" node --test "$here/web_pixels.test.mjs"
