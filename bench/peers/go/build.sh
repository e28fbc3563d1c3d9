#!/bin/sh
# Build the Go peer into OUTDIR: one binary, linked under each workload name.
set -e
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"
GOPROXY=off GOFLAGS=-mod=mod go build -trimpath -o "$out/vatpeer-go" .
for w in ring counter fanin selfsend skynet chain pingpong spawn flood; do
	ln -f "$out/vatpeer-go" "$out/$w"
done
