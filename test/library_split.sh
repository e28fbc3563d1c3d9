#!/bin/sh
# libvat and libvat-net, as built: libvat.so needs neither jansson nor
# libuv and defines nothing of CapTP; libvat-net.so defines CapTP and
# nothing of libvat's own (one copy of the runtime, one atom table).
# usage: library_split.sh LIBVAT_SO LIBVAT_NET_SO
set -eu
vat=$1
net=$2
fail=0

if readelf -d "$vat" | grep -E 'NEEDED.*(jansson|libuv)'; then
  echo "$vat needs the libraries above" >&2
  fail=1
fi
readelf -d "$net" | grep -q 'NEEDED.*libvat\.so' ||
  { echo "$net does not load libvat.so" >&2; fail=1; }

defined() { nm -D --defined-only "$1" | awk '{print $3}'; }
if defined "$vat" |
  grep -E '^vat_(captp|conn|connect|listen|listener|sim_(link|serve|connect|dial|net))'; then
  echo "$vat defines the CapTP functions above" >&2
  fail=1
fi
for sym in vat_captp_decode vat_captp_encode_frame vat_connect vat_listen \
  vat_sim_connect; do
  defined "$net" | grep -qx "$sym" ||
    { echo "$net does not define $sym" >&2; fail=1; }
done
if defined "$net" | grep -E '^vat_(init|system_new|send|atom_intern)$'; then
  echo "$net has its own copy of libvat's functions above" >&2
  fail=1
fi
exit $fail
