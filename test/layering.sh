#!/bin/sh
# Checks the layering of src/ (see src/README.md) from its #include lines:
#  - no cycle between the subsystem folders (util, value, core, sched,
#    timer, promise, exits, trace, embed, runtime);
#  - src/lib/ and src/net/ include public headers (vat.h, vat/...), system
#    headers and their own files only: they are built on the public API;
#  - src/captp/ (CapTP's wire format) includes only value/, util/ and its
#    own headers: it needs no runtime, so it stays testable and fuzzable
#    alone.
# Usage: layering.sh SRC_DIR
set -eu
src=${1:?usage: layering.sh SRC_DIR}
cd "$src"
fail=0

# Edges "from to" for every #include "folder/..." crossing folders.
edges=$(for dir in */; do
  dir=${dir%/}
  [ "$dir" = lib ] && continue
  grep -ho '^#include "[a-z_]*/' $(find "$dir" -name '*.[ch]') 2>/dev/null |
    sed 's/^#include "//; s/\/$//' | sort -u |
    while read -r to; do
      if [ -d "$to" ] && [ "$to" != "$dir" ]; then echo "$dir $to"; fi
    done
done)
if ! printf '%s\n' "$edges" | tsort >/dev/null 2>tsort.err.$$; then
  echo "layering: include cycle between folders:" >&2
  cat tsort.err.$$ >&2
  fail=1
fi
rm -f tsort.err.$$

# lib/ and net/: only public or same-folder headers.
for f in $(find lib $( [ -d net ] && echo net) -name '*.[ch]'); do
  dir=$(dirname "$f")
  grep -o '^#include "[^"]*"' "$f" | sed 's/^#include "//; s/"$//' |
    while read -r h; do
      case $h in
      vat.h | vat/*) ;;
      */*) echo "layering: $f includes $h, not a public header" >&2
        exit 1 ;;
      *) [ -f "$dir/$h" ] || {
          echo "layering: $f includes $h, not a public header" >&2
          exit 1
        } ;;
      esac
    done || fail=1
done

# captp/: values and utilities only.
if [ -d captp ]; then
  bad=$(grep -Ho '^#include "[a-z_]*/' $(find captp -name '*.[ch]') |
    sed 's/^\(.*\):#include "\(.*\)\/$/\1 \2/' |
    awk '$2 != "captp" && $2 != "value" && $2 != "util" && $2 != "vat"')
  if [ -n "$bad" ]; then
    echo "layering: captp/ includes beyond value/ and util/:" >&2
    echo "$bad" >&2
    fail=1
  fi
fi

if [ $fail = 0 ]; then
  echo "layering: ok"
  printf '%s\n' "$edges" | sort
fi
exit $fail
