#!/bin/sh
# Build the Erlang peer into OUTDIR: vatbench.beam, the runner vatpeer-erl and
# one wrapper script per workload (ring, counter, ...).
set -e
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
src=$(cd "$(dirname "$0")" && pwd)
erlc -o "$out" "$src/vatbench.erl"
cp "$src/vatpeer-erl" "$out/vatpeer-erl"
chmod +x "$out/vatpeer-erl"
for w in ring counter fanin selfsend skynet chain pingpong spawn flood; do
	printf '#!/bin/sh\nexec "$(dirname "$0")/vatpeer-erl" %s "$@"\n' "$w" >"$out/$w"
	chmod +x "$out/$w"
done
