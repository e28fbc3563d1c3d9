#!/bin/sh
# Build the CAF peer into OUTDIR: one binary, linked under each workload name.
set -e
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
src=$(cd "$(dirname "$0")" && pwd)
${CXX:-g++} -O2 -std=c++17 -o "$out/vatpeer-caf" "$src/vatpeer.cpp" -lcaf_core -pthread
for w in ring counter fanin selfsend skynet chain pingpong spawn flood; do
	ln -f "$out/vatpeer-caf" "$out/$w"
done
