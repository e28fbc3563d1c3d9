#!/usr/bin/env bash
# Builds libvat in release mode and runs the ring benchmark:
#   bash bench/ring.sh                 # 1,000,000 vats x 200 tokens, all cores
#   bash bench/ring.sh -w 1 100000 200 # any arguments go to bench/ring
# As root on a fresh Debian 12 machine it installs what the build needs.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists bdw-gc 2>/dev/null || need+=(libgc-dev)
if ((${#need[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need[*]} (run as root, or install them)" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

if [ ! -d build-release ]; then
  meson setup build-release --buildtype=release -Dtests=false >/dev/null
fi
ninja -C build-release bench/ring >/dev/null
exec build-release/bench/ring "$@"
