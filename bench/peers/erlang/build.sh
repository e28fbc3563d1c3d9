#!/bin/sh
# Build the Erlang peer into OUTDIR: vatbench.beam, the runner vatpeer-erl and
# one wrapper script per workload (ring, counter, ...); vatremote.beam and
# remote, bench/remote.sh's two-node peer.
set -e
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
src=$(cd "$(dirname "$0")" && pwd)
erlc -o "$out" "$src/vatbench.erl" "$src/vatremote.erl"
cp "$src/remote-erl" "$out/remote" # bench/remote.sh: two nodes
cp "$src/vatpeer-erl" "$out/vatpeer-erl"
chmod +x "$out/vatpeer-erl"
for w in ring counter fanin selfsend skynet chain pingpong spawn flood; do
	printf '#!/bin/sh\nexec "$(dirname "$0")/vatpeer-erl" %s "$@"\n' "$w" >"$out/$w"
	chmod +x "$out/$w"
done
