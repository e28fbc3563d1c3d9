#!/bin/sh
# Fails when the worked example in include/vat/sim_net.h (the two code
# excerpts after "The served object, and watching the connection") differs
# from the parts of examples/sim_job_queue.c between its "in
# vat/sim_net.h" marks, the program the build compiles and runs: the
# header cannot drift from code that works. Blank lines are not compared.
# usage: sim_net_example_sync.sh include/vat/sim_net.h examples/sim_job_queue.c
set -eu
header=${1:?usage: sim_net_example_sync.sh HEADER EXAMPLE}
example=${2:?usage: sim_net_example_sync.sh HEADER EXAMPLE}
from_header=$(awk '/^ \* The served object, and watching the connection/ {
                     on = 1; next }
                   !on { next }
                   /^ \*   / { if (!inside) { if (runs) print "--"; runs++;
                                              inside = 1 }
                               print substr($0, 6); next }
                   /^ \*$/ { next }
                   inside { inside = 0; if (runs == 2) exit }' "$header")
from_example=$(awk '/in vat\/sim_net.h: begin/ { if (n) print "--"; on = 1;
                                                 n++; next }
                    /in vat\/sim_net.h: end/ { on = 0; next }
                    on && !/^$/ { print }' "$example")
if [ -z "$from_header" ] || [ -z "$from_example" ]; then
  echo "sim_net_example_sync: no example found in $header or $example" >&2
  exit 1
fi
# diff reads the example on stdin and the header's copy from a here-document.
printf '%s\n' "$from_example" | diff -u - /dev/fd/3 3<<END || {
$from_header
END
  echo "sim_net_example_sync: $header's example differs from $example" >&2
  exit 1
}
