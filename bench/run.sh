#!/usr/bin/env bash
# The benchmark runner: builds libvat (release) and every peer whose
# toolchain is present, runs each workload on each system with one worker
# and with all cores, and reports medians, spread, peak RSS and libvat's
# ratio to the best peer (bench/report.py).
#
#   bash bench/run.sh                  # everything, 3 repeats, full sizes
#   bash bench/run.sh -s 0.01 -r 1     # quick pass: sizes x 0.01, one run
#   bash bench/run.sh ring spawn go    # only these workloads / systems
#
# Options: -s SCALE (multiplies every size), -r REPEATS (default 3),
# -t SECONDS (per-run limit; default 300 x SCALE, at least 30),
# -w "1 N" (worker counts; default 1 and all cores), -o DIR (results;
# default bench/results). Other arguments name workloads (ring counter
# fanin selfsend skynet chain pingpong spawn flood) or systems (libvat go
# erlang caf); none of a kind means all of it. A system `libvat@REV` is
# libvat as of git revision REV, built beside the working tree's: with
# `libvat libvat@REV` the ratio column reads as now / then, a change's
# before-and-after measured side by side in one run.
# As root it installs what is missing with apt-get; a peer whose build
# fails is left out. A run that fails or overruns shows as "fail" (or as
# "n/a" when the program does not take those sizes); the runner goes on.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scale=1
repeats=3
limit=
threads="1 $(nproc)"
out=bench/results
usage() { # -h: to stdout, exit 0; misuse: to stderr, exit 2
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&"$((1 + ${1:-1}))"
  exit $((2 * ${1:-1}))
}
while getopts "s:r:t:w:o:h" opt; do
  case $opt in
    s) scale=$OPTARG ;;
    r) repeats=$OPTARG ;;
    t) limit=$OPTARG ;;
    w) threads=$OPTARG ;;
    o) out=$OPTARG ;;
    h) usage 0 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
awk -v s="$scale" 'BEGIN { exit !(s + 0 > 0) }' || usage
[[ $repeats =~ ^[1-9][0-9]*$ ]] || usage
[ "$threads" = "1 1" ] && threads=1

all_workloads="ring counter fanin selfsend skynet chain pingpong spawn flood"
all_systems="libvat go erlang caf"
want_workloads=
want_systems=
for arg in "$@"; do
  if [[ " $all_workloads " == *" $arg "* ]]; then
    want_workloads+=" $arg"
  elif [[ " $all_systems " == *" $arg "* || $arg == libvat@?* ]]; then
    want_systems+=" $arg"
  else
    echo "run.sh: unknown workload or system '$arg'" >&2
    usage
  fi
done
want_workloads=${want_workloads:-$all_workloads}
want_systems=${want_systems:-$all_systems}
if [ -z "$limit" ]; then
  limit=$(awk -v s="$scale" 'BEGIN { t = 300 * s; print int(t < 30 ? 30 : t) }')
fi

# --- Tools ------------------------------------------------------------------

is_root() { [ "$(id -u)" -eq 0 ]; }
updated=
apt_install() {
  is_root || return 1
  if [ -z "$updated" ]; then
    apt-get update -q >/dev/null 2>&1
    updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1
}
has_caf() { [ -f /usr/include/caf/all.hpp ]; }

need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists bdw-gc 2>/dev/null || need+=(libgc-dev)
command -v python3 >/dev/null || need+=(python3)
[ -x /usr/bin/time ] || need+=(time)
if ((${#need[@]})) && ! apt_install "${need[@]}"; then
  echo "run.sh: missing ${need[*]} (run as root, or install them)" >&2
  exit 1
fi
command -v gnuplot >/dev/null || apt_install gnuplot-nox ||
  echo "run.sh: no gnuplot; the chart is left out" >&2

# Peers: install a missing toolchain (best effort), one package at a time so
# that one unavailable package does not keep the others out.
for sys in $want_systems; do
  case $sys in
    go) command -v go >/dev/null || apt_install golang-go ;;
    erlang) command -v erlc >/dev/null || apt_install erlang-base ;;
    caf)
      command -v g++ >/dev/null || apt_install g++
      has_caf || apt_install libcaf-dev
      ;;
  esac
done

# --- Builds -----------------------------------------------------------------

build=build-bench
if [ ! -d "$build" ]; then
  meson setup "$build" --buildtype=release -Dtests=false >/dev/null || exit 1
fi
ninja -C "$build" >/dev/null || { echo "run.sh: libvat build failed" >&2; exit 1; }

# libvat at another revision: its tree from git, built beside ours.
build_revision() {
  local rev=${1#libvat@} dir=$build/$1
  mkdir -p "$dir/src" &&
    git archive "$rev" | tar -x -C "$dir/src" &&
    { [ -d "$dir/build" ] ||
      meson setup "$dir/build" "$dir/src" --buildtype=release -Dtests=false; } &&
    ninja -C "$dir/build"
}

systems=
for sys in $want_systems; do
  if [ "$sys" = libvat ]; then
    systems+=" libvat"
    continue
  fi
  if [[ $sys == libvat@* ]]; then
    if build_revision "$sys" >"$build/$sys.log" 2>&1; then
      systems+=" $sys"
    else
      echo "run.sh: $sys did not build (see $build/$sys.log); left out" >&2
    fi
    continue
  fi
  case $sys in
    go) command -v go >/dev/null ;;
    erlang) command -v erlc >/dev/null && command -v erl >/dev/null ;;
    caf) command -v g++ >/dev/null && has_caf ;;
  esac || { echo "run.sh: no toolchain for $sys; left out" >&2; continue; }
  if sh "bench/peers/$sys/build.sh" "$build/peers/$sys" \
    >"$build/peers-$sys.log" 2>&1; then
    systems+=" $sys"
  else
    echo "run.sh: $sys peer did not build (see $build/peers-$sys.log); left out" >&2
  fi
done
bin_dir() {
  case $1 in
    libvat) echo "$build/bench" ;;
    libvat@*) echo "$build/$1/build/bench" ;;
    *) echo "$build/peers/$1" ;;
  esac
}

# --- Rows -------------------------------------------------------------------

# workload, sizes, and which size the scale applies to (0-based; - none).
# Scaling keeps the shape of a row: ring keeps its 200 tokens, fanin its 4
# producers, selfsend 80000x1000 scales its vat count.
rows=(
  "ring 1000000,200 0"
  "ring 100000,200 0"
  "counter 3000000 0"
  "fanin 4,1000000 1"
  "selfsend 8,10000000 1"
  "selfsend 80000,1000 0"
  "skynet - -"
  "chain 100000 0"
  "chain 1000000 0"
  "pingpong 1000000 0"
  "spawn 1000000 0"
  "flood 10000000 0"
)

# Prints the sizes of a row after scaling, space separated (empty: the
# program's defaults).
scaled_sizes() {
  local workload=$1 sizes=$2 which=$3
  if [ "$workload" = skynet ]; then
    # Leaves must stay a power of ten (libvat and every peer take L).
    awk -v s="$scale" 'BEGIN {
      if (s >= 1) exit
      l = 1000000 * s; p = 100
      while (p * 10 <= l) p *= 10
      print p }'
    return
  fi
  awk -v s="$scale" -v sizes="$sizes" -v which="$which" -v w="$workload" 'BEGIN {
    n = split(sizes, a, ",")
    min["ring"] = 1000; min["counter"] = 1000; min["fanin"] = 1000
    min["selfsend"] = (which == 0 ? 10 : 100); min["chain"] = 100
    min["pingpong"] = 1000; min["spawn"] = 1000; min["flood"] = 1000
    for (i = 1; i <= n; i++) {
      v = a[i]
      if (i - 1 == which) { v = int(v * s + 0.5); if (v < min[w]) v = min[w] }
      printf "%s%d", (i > 1 ? " " : ""), v
    }
    print "" }'
}

# --- Runs -------------------------------------------------------------------

mkdir -p "$out/logs"
raw=$out/raw.csv
echo "workload,sizes,threads,system,repeat,status,seconds,rate,setup_seconds,peak_rss_kb" >"$raw"

# One run: prints a CSV record of it.
run_one() {
  local sys=$1 workload=$2 sizes=$3 w=$4 rep=$5
  local tag="$workload-${sizes// /x}-w$w-$sys-$rep"
  local log=$out/logs/$tag.out rss=$out/logs/$tag.rss
  local exe
  exe=$(bin_dir "$sys")/$workload
  # shellcheck disable=SC2086 # sizes are separate arguments
  /usr/bin/time -f %M -o "$rss" timeout -k 10 "$limit" \
    "$exe" -w "$w" $sizes >"$log" 2>&1 </dev/null
  local rc=$? status=ok
  local result
  result=$(grep '^RESULT ' "$log" | tail -n 1)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status=timeout
  elif [ $rc -eq 2 ]; then
    status=n/a
  elif [ $rc -ne 0 ] || [ -z "$result" ] || [[ $result == *" ok=0"* ]]; then
    status=fail
  fi
  field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$result"; }
  echo "$workload,${sizes:-default},$w,$sys,$rep,$status,$(field seconds),$(field rate),$(field setup_seconds),$(tail -n 1 "$rss" 2>/dev/null)"
}

for row in "${rows[@]}"; do
  read -r workload sizes which <<<"$row"
  [[ " $want_workloads " == *" $workload "* ]] || continue
  sizes=$(scaled_sizes "$workload" "${sizes//-/}" "$which")
  for w in $threads; do
    # The systems take turns, one repetition each: the machine's drift
    # then falls on all of them alike, not on whichever ran last.
    skip=" "
    for ((rep = 1; rep <= repeats; rep++)); do
      for sys in $systems; do
        [[ $skip == *" $sys "* ]] && continue
        rec=$(run_one "$sys" "$workload" "$sizes" "$w" "$rep")
        echo "$rec" >>"$raw"
        status=$(cut -d, -f6 <<<"$rec")
        printf '%-9s %-16s w%-3s %-7s #%d %s\n' "$workload" "${sizes:-default}" \
          "$w" "$sys" "$rep" "$(cut -d, -f6-8 <<<"$rec")" >&2
        # A program that overran or cannot take the sizes will again.
        if [ "$status" = timeout ] || [ "$status" = n/a ]; then
          skip+="$sys "
        fi
      done
    done
  done
done

python3 bench/report.py "$raw" "$out"
