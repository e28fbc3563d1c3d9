#!/bin/sh
# Runs an example and compares its output with the expected text.
# usage: [STDIN_FILE=F] check.sh EXPECTED_FILE PROGRAM [ARGS...]
# A program that exits 77 skipped itself (something it needs is missing).
expected=$1
shift
# STDIN_FILE, when set, is the program's input; else it reads nothing.
out=$("$@" <"${STDIN_FILE:-/dev/null}")
status=$?
[ "$status" -eq 77 ] && exit 77
[ "$status" -eq 0 ] || { echo "$1 failed with status $status" >&2; exit 1; }
printf '%s\n' "$out" | diff -u "$expected" - || exit 1
