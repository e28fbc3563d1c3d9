#!/bin/sh
# Checks the layering of src/ (see src/README.md): every folder stands on
# a floor, and a folder includes headers from, and calls functions of,
# folders on floors below its own only. From its #include lines, and,
# given the library's archive, from its objects' symbols (`nm`): a call
# needs no include to go upward (a declaration above, a definition below
# is enough), so includes alone cannot show it. Besides:
#  - src/lib/ and src/net/ include public headers (vat.h, vat/...), system
#    headers and their own files only, and call no internal (vat__)
#    function: they are built on the public API;
#  - src/captp/ (CapTP's wire format) includes only value/, util/ and its
#    own headers: it needs no runtime, so it stays testable and fuzzable
#    alone.
# Usage: layering.sh SRC_DIR [ARCHIVE...]
#   ARCHIVE   the static libraries that hold all of src/'s objects as the
#             library is built (libvat_core.a, libvat_net_core.a); without
#             them only includes are checked.
set -eu
src=${1:?usage: layering.sh SRC_DIR [ARCHIVE...]}
shift
archive=
for a in "$@"; do
  archive="$archive $(cd "$(dirname "$a")" && pwd)/$(basename "$a")"
done
cd "$src"
fail=0

# The floors, top first. Folders on one floor use none of each other.
floors='sim
runtime
loop
promise
timer exits trace
core captp
sched value
util'

floor_of() {
  printf '%s\n' "$floors" | awk -v d="$1" '
    { for (i = 1; i <= NF; i++) if ($i == d) print NR }'
}

for dir in */; do
  dir=${dir%/}
  case $dir in lib | net) continue ;; esac
  if [ -z "$(floor_of "$dir")" ]; then
    echo "layering: src/$dir/ stands on no floor (add it to test/layering.sh)" >&2
    fail=1
  fi
done

# An edge "from to" may go only to a lower floor (a higher line number).
check_edges() { # what, then "from to [detail]" lines on stdin
  awk -v what="$1" -v floors="$floors" '
    BEGIN {
      n = split(floors, line, "\n")
      for (i = 1; i <= n; i++) {
        m = split(line[i], d, " ")
        for (j = 1; j <= m; j++) floor[d[j]] = i
      }
    }
    $1 in floor && $2 in floor && floor[$2] <= floor[$1] {
      printf "layering: %s/ %s %s/ (%s), which is not below it\n",
        $1, what, $2, $3
      bad = 1
    }
    END { exit bad }' >&2
}

# Includes: "from to header" for every #include "folder/..." crossing
# folders.
includes=$(for dir in */; do
  dir=${dir%/}
  case $dir in lib | net) continue ;; esac
  grep -Ho '^#include "[a-z_]*/[^"]*"' $(find "$dir" -name '*.[ch]') |
    sed 's/^\([^:]*\):#include "\(\([a-z_]*\)\/[^"]*\)"$/\1 \3 \2/' |
    while read -r file to header; do
      if [ -d "$to" ] && [ "$to" != "$dir" ]; then echo "$dir $to $file"; fi
    done
done)
printf '%s\n' "$includes" | grep . | check_edges includes || fail=1

# Calls: "from to symbol" for every vat_ or vat__ symbol an object of one
# folder uses and an object of another defines. An object's folder is its
# name's first part (meson names src/core/turn.c's core_turn.c.o).
if [ -n "$archive" ]; then
  # shellcheck disable=SC2086
  calls=$( { nm -A -g --defined-only $archive | sed 's/^/D /'
             nm -A -u $archive | sed 's/^/U /'; } |
    awk '
      { n = split($2, p, ":"); obj = p[n - 1]; sub(/.*\//, "", obj)
        dir = obj; sub(/_.*/, "", dir); sym = $NF }
      sym !~ /^vat_/ { next }
      $1 == "D" && $(NF - 1) ~ /^[TDBRCV]$/ { def[sym] = dir; next }
      $1 == "U" { use[dir " " sym] = 1 }
      END {
        for (k in use) {
          split(k, u, " ")
          if (u[2] in def && def[u[2]] != u[1]) print u[1], def[u[2]], u[2]
        }
      }' | sort)
  printf '%s\n' "$calls" | grep -v '^lib \|^net ' | grep . |
    check_edges calls || fail=1
  # lib/ and net/: the public API only.
  internal=$(printf '%s\n' "$calls" | awk '($1 == "lib" || $1 == "net") && $3 ~ /^vat__/')
  if [ -n "$internal" ]; then
    echo "layering: lib/ or net/ calls internal functions:" >&2
    printf '%s\n' "$internal" >&2
    fail=1
  fi
fi

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
  echo "includes between folders:"
  printf '%s\n' "$includes" | awk 'NF { print "  " $1 " -> " $2 }' | sort -u
  if [ -n "$archive" ]; then
    echo "calls between folders:"
    printf '%s\n' "$calls" | awk 'NF { print "  " $1 " -> " $2 }' | sort | uniq -c
  fi
fi
exit $fail
