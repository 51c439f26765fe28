#!/usr/bin/env bash
# web_codec.sh WEB_HELPER — the JS wire codec (web/wire.js) decodes the
# frames the C encoder wrote exactly as the C decoder does, field by field,
# and refuses the malformed ones with the same error; and web/model.js
# (state + flight recorder) on frames built in the test (node --test).
set -euo pipefail
helper=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "web_codec: node is not installed (scripts/deps.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-web-codec-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Every module of the page parses (as an ES module: node --check on .mjs).
for f in "$here"/../web/*.js; do
  cp "$f" "$work/check.mjs"
  node --check "$work/check.mjs" || { echo "web_codec: $f does not parse" >&2; exit 1; }
done
"$helper" golden "$work"
SPY_GOLDEN_DIR="$work" node --test "$here/web_codec.test.mjs" "$here/web_model.test.mjs"
