#!/bin/sh
# Build the Endo peer of bench/remote.sh into OUTDIR: remote.js, the npm
# packages package-lock.json pins (npm ci), and the runner `remote`.
set -e
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
src=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null
cp "$src/package.json" "$src/package-lock.json" "$src/remote.js" "$out/"
(cd "$out" && npm ci --prefer-offline --no-audit --no-fund >/dev/null)
printf '#!/bin/sh\nexec node "$(dirname "$0")/remote.js" "$@"\n' >"$out/remote"
chmod +x "$out/remote"
