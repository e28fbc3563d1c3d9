#!/bin/sh
# Runs an example and compares its output with the expected text.
# usage: check.sh EXPECTED_FILE PROGRAM [ARGS...]
expected=$1
shift
out=$("$@") || { echo "$1 failed with status $?" >&2; exit 1; }
printf '%s\n' "$out" | diff -u "$expected" - || exit 1
