#!/bin/sh
# Fails when the complete program in README.md (the first ```c block after
# "## A complete program") differs from test/install/readme.c, the copy the
# build and .ci/install-check compile and run: the README cannot drift
# from a program that works.
# usage: readme-sync.sh README.md test/install/readme.c
set -eu
readme=${1:?usage: readme-sync.sh README.md COPY}
copy=${2:?usage: readme-sync.sh README.md COPY}
program=$(awk '/^## A complete program/ { found = 1 }
               found && /^```c$/ { inside = 1; next }
               inside && /^```$/ { exit }
               inside { print }' "$readme")
if [ -z "$program" ]; then
  echo "readme-sync: no complete program found in $readme" >&2
  exit 1
fi
printf '%s\n' "$program" | diff -u "$copy" - || {
  echo "readme-sync: $readme's complete program differs from $copy" >&2
  exit 1
}
