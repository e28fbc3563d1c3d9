#!/bin/sh
# Runs an example and compares its output with the expected text.
# usage: [STDIN_FILE=F] check.sh EXPECTED_FILE PROGRAM [ARGS...]
expected=$1
shift
# STDIN_FILE, when set, is the program's input; else it reads nothing.
out=$("$@" <"${STDIN_FILE:-/dev/null}") ||
  { echo "$1 failed with status $?" >&2; exit 1; }
printf '%s\n' "$out" | diff -u "$expected" - || exit 1
