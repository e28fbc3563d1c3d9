#!/usr/bin/env bash
# Runs the libFuzzer targets for a while each, seeded from the recorded
# Endo exchange (test/captp/corpus): frames as they crossed the socket for
# fuzz_frames; their JSON payloads and the smallcaps bodies for
# fuzz_decode and fuzz_decode_diff. Usage: test/fuzz/run.sh BUILD_DIR SECONDS [OUT_DIR]
# Findings (crash-*, leak-*, timeout-*) land in OUT_DIR; the exit status
# is non-zero when a target finds one.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS [OUT_DIR]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [OUT_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${3:-$build/fuzz-out}
corpus=$root/test/captp/corpus
mkdir -p "$out/frames" "$out/decode" "$out/decode_diff" "$out/seeds-decode"

# fuzz_frames' input: two control bytes, then the stream.
for f in "$corpus"/frames/*.ns; do
  printf '\000\001' | cat - "$f" >"$out/seeds-frames-$(basename "$f")"
done
mkdir -p "$out/seeds-frames"
mv "$out"/seeds-frames-*.ns "$out/seeds-frames/"
# fuzz_decode's (and fuzz_decode_diff's) input: a message, or a body.
python3 - "$corpus" "$out/seeds-decode" <<'PY'
import json, os, re, sys
corpus, dest = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(os.path.join(corpus, 'frames'))):
    raw = open(os.path.join(corpus, 'frames', name), 'rb').read()
    payload = raw[raw.index(b':') + 1:-1]
    open(os.path.join(dest, name + '.json'), 'wb').write(payload)
for name in sorted(os.listdir(os.path.join(corpus, 'smallcaps'))):
    cd = json.load(open(os.path.join(corpus, 'smallcaps', name)))
    open(os.path.join(dest, 'smallcaps-' + name), 'w').write(cd['body'])
PY

status=0
for target in frames decode decode_diff; do
  echo "== fuzz_$target for ${seconds}s"
  # -rss_limit_mb: the collector's heap counts; -timeout: a hang is a find.
  (cd "$out" && "$build/test/fuzz/fuzz_$target" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    "$out/$target" "$out/seeds-${target%_diff}") || status=1
done
exit $status
