#!/usr/bin/env bash
# The remote benchmark's runner: calls across a connection between two
# processes on 127.0.0.1, libvat (bench/remote.c, CapTP over TCP) side by
# side with Endo (two @endo/captp endpoints in Node) and Erlang/OTP (two
# nodes, gen_server calls and casts). Builds what is missing, runs the
# systems in turns, and prints per system the medians of sequential round
# trips/s, their p50/p99 latency, pipelined calls/s (1,000 outstanding) and
# one-way sends/s (libvat vat_send_msg, Endo E.sendOnly, Erlang
# gen_server:cast; then one call that checks the count), with libvat's
# ratio to the best peer and its fraction of the floor: bench/floor.c, two
# processes exchanging 64-byte records over the same loopback with one
# thread each polling its socket and no runtime, in the same three patterns.
#
#   bash bench/remote.sh                    # 5 runs each, default sizes
#   bash bench/remote.sh -r 3 -s 0.2 libvat erlang
#
# Options: -r REPEATS (default 5), -s SCALE (multiplies the sizes: libvat
# and Erlang 5,000 sequential and 100,000 pipelined calls and one-way
# sends, Endo 1,000 and 10,000, as it is ten times slower), -w W (workers per process; default
# the library's and the peer's own), -o DIR (default bench/results/remote).
# Other arguments name systems (libvat libvat-loop endo erlang floor); none
# means all. libvat-loop is libvat with one thread a process (remote -w 0):
# a host-driven system and its sockets on one libuv loop, which polls 40 µs
# before it sleeps, as the library's own loop thread does.
set -uo pipefail
cd "$(dirname "$0")/.."

repeats=5
scale=1
workers=
out=bench/results/remote
usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
while getopts "r:s:w:o:h" opt; do
  case $opt in
    r) repeats=$OPTARG ;;
    s) scale=$OPTARG ;;
    w) workers=$OPTARG ;;
    o) out=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ $repeats =~ ^[1-9][0-9]*$ ]] || usage
systems=${*:-libvat libvat-loop endo erlang floor}
for s in $systems; do
  [[ " libvat libvat-loop endo erlang floor " == *" $s "* ]] || usage
done
build=build-bench
mkdir -p "$out/logs"

sizes() { # system -> "N P", scaled, at least 100 and 1000
  local n=5000 p=100000
  [ "$1" = endo ] && n=1000 p=10000
  [ "$1" = floor ] && p=1000000 # 100,000 take it a few milliseconds
  awk -v s="$scale" -v n=$n -v p=$p 'BEGIN {
    n = int(n * s); p = int(p * s)
    print (n < 100 ? 100 : n), (p < 1000 ? 1000 : p) }'
}

program() { # system -> its executable, built if missing; empty if it fails
  case $1 in
    libvat | libvat-loop) # ninja rebuilds what changed
      [ -d "$build" ] ||
        meson setup "$build" --buildtype=release -Dtests=false >&2
      nice -n 10 ninja -C "$build" bench/remote >&2 || return
      echo "$build/bench/remote" ;;
    floor)
      [ -d "$build" ] ||
        meson setup "$build" --buildtype=release -Dtests=false >&2
      nice -n 10 ninja -C "$build" bench/floor >&2 || return
      echo "$build/bench/floor" ;;
    *) # built again when its sources changed since
      if [ ! -x "$build/peers/$1/remote" ] ||
        [ -n "$(find "bench/peers/$1" -newer "$build/peers/$1/remote" \
          -not -path '*/node_modules/*' -print -quit)" ]; then
        sh "bench/peers/$1/build.sh" "$build/peers/$1" >&2 || return
      fi
      echo "$build/peers/$1/remote" ;;
  esac
}

declare -A prog
for s in $systems; do
  p=$(program "$s")
  if [ -n "$p" ] && [ -x "$p" ]; then
    prog[$s]=$p
  else
    echo "remote.sh: $s does not build; left out" >&2
  fi
done

raw=$out/raw.csv
echo "system,run,workload,rate,p50_us,p99_us,ok" >"$raw"
for ((run = 1; run <= repeats; run++)); do
  for s in $systems; do
    [ -n "${prog[$s]:-}" ] || continue
    log=$out/logs/$s-$run.log
    # shellcheck disable=SC2046
    w=$workers
    [ "$s" = libvat-loop ] && w=0
    timeout 300 nice -n 10 "${prog[$s]}" ${w:+-w "$w"} \
      $(sizes "$s") >"$log" 2>&1
    echo "$s run $run: exit $?" >&2
    awk -v s="$s" -v r="$run" '/^RESULT / {
        ok = 1; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2]
          if ($i == "ok=0") ok = 0 }
        print s "," r "," f["workload"] "," f["rate"] "," f["p50_us"] "," \
          f["p99_us"] "," ok }' "$log" >>"$raw"
  done
done

python3 - "$raw" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(system, workload, key):
    v = [float(r[key]) for r in rows
         if r["system"] == system and r["workload"] == workload and r["ok"] == "1"]
    return statistics.median(v) if v else None
systems = list(dict.fromkeys(r["system"] for r in rows))
fmt = lambda x, d=0: "fail" if x is None else f"{x:,.{d}f}"
print(f"| system | sequential round trips/s | p50 µs | p99 µs | pipelined calls/s (1,000 outstanding) | one-way sends/s (casts) |")
print("|---|---:|---:|---:|---:|---:|")
for s in systems:
    print(f"| {s} | {fmt(med(s, 'remote_seq', 'rate'))} "
          f"| {fmt(med(s, 'remote_seq', 'p50_us'), 1)} "
          f"| {fmt(med(s, 'remote_seq', 'p99_us'), 1)} "
          f"| {fmt(med(s, 'remote_pipe', 'rate'))} "
          f"| {fmt(med(s, 'remote_cast', 'rate'))} |")
# The issue's targets against Erlang/OTP: 1.5x, 5x and 3x.
for w, what, target in (("remote_seq", "sequential", 1.5),
                        ("remote_pipe", "pipelined", 5),
                        ("remote_cast", "one-way", 3)):
    for me in ("libvat", "libvat-loop"):
        mine = med(me, w, "rate")
        peers = [(med(s, w, "rate"), s) for s in systems
                 if not s.startswith("libvat") and s != "floor"]
        peers = [p for p in peers if p[0] is not None]
        parts = []
        if mine and peers:
            best = max(peers)
            parts.append(f"{mine / best[0]:.2f}x the best peer ({best[1]})")
        erl = med("erlang", w, "rate")
        if mine and erl:
            parts.append(f"{mine / erl:.2f}x Erlang (target {target}x)")
        floor = med("floor", w, "rate")
        if mine and floor:
            parts.append(f"{100 * mine / floor:.1f}% of the floor")
        if parts:
            print(f"{me}, {what}: " + ", ".join(parts))
EOF
