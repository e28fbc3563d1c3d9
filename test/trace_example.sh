#!/bin/sh
# Runs an example with --trace FILE, compares its output with the expected
# text, and checks the trace.
# usage: trace_example.sh PROGRAM TRACE_CHECK EXPECTED_FILE TRACE_FILE
set -eu
program=$1 check=$2 expected=$3 file=$4
rm -f "$file"
out=$("$program" --trace "$file" </dev/null) ||
  { echo "$program failed with status $?" >&2; exit 1; }
printf '%s\n' "$out" | diff -u "$expected" - || exit 1
"$check" "$file"
