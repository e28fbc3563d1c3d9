#!/bin/sh
# layering.sh must fail on an upward call that no include shows: a
# scratch tree whose sched/ calls a function core/ defines, declared in
# the caller itself. And it must pass the same tree with the call going
# down. Usage: layering_selftest.sh LAYERING_SH CC...
set -eu
check=${1:?usage: layering_selftest.sh LAYERING_SH CC...}
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src/core" "$dir/src/sched" "$dir/obj"
cat >"$dir/src/core/engine.c" <<'C'
int vat__core_fn(void) { return 1; }
C
cat >"$dir/src/sched/place.c" <<'C'
int vat__core_fn(void); /* declared here, defined above: no include */
int vat__sched_fn(void) { return vat__core_fn(); }
C
"$@" -c "$dir/src/core/engine.c" -o "$dir/obj/core_engine.c.o"
"$@" -c "$dir/src/sched/place.c" -o "$dir/obj/sched_place.c.o"
ar rc "$dir/up.a" "$dir/obj/core_engine.c.o" "$dir/obj/sched_place.c.o"
if sh "$check" "$dir/src" "$dir/up.a" >"$dir/out" 2>&1; then
  echo "layering.sh passed an upward call:" >&2
  cat "$dir/out" >&2
  exit 1
fi
grep -q 'sched/ calls core/ (vat__core_fn)' "$dir/out" || {
  echo "layering.sh failed, but not for the upward call:" >&2
  cat "$dir/out" >&2
  exit 1
}
# The same call downward (core calls sched) passes.
cat >"$dir/src/core/engine.c" <<'C'
int vat__sched_fn2(void);
int vat__core_fn(void) { return vat__sched_fn2(); }
C
cat >"$dir/src/sched/place.c" <<'C'
int vat__sched_fn2(void) { return 2; }
C
"$@" -c "$dir/src/core/engine.c" -o "$dir/obj/core_engine.c.o"
"$@" -c "$dir/src/sched/place.c" -o "$dir/obj/sched_place.c.o"
rm -f "$dir/down.a"
ar rc "$dir/down.a" "$dir/obj/core_engine.c.o" "$dir/obj/sched_place.c.o"
sh "$check" "$dir/src" "$dir/down.a" >"$dir/out" 2>&1 || {
  echo "layering.sh failed a downward call:" >&2
  cat "$dir/out" >&2
  exit 1
}
echo "layering-selftest: an upward call fails, a downward one passes"
