#!/usr/bin/env bash
# The tree's own scripts work from an unpacked tarball on a machine with
# no git, as the README's quick start promises:
#   1. a copy of the tree with no .git, planted with files .gitignore
#      names (a build folder, node_modules, an object file), run with a
#      `git` on PATH that is not found;
#   2. test/mutate.sh -n there (.ci/run's first stage) passes;
#   3. test/tree_files.sh lists the same files there as in this tree, where
#      git lists them when it can: the walk that stands in for git honours
#      .gitignore as git does, and leaves nothing out.
# Usage: test/no_repository.sh SOURCE_ROOT
set -euo pipefail

SRC=$(cd "$1" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vat-norepo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "no_repository: $*" >&2
  exit 1
}

bash "$SRC/test/tree_files.sh" "$SRC" | tr '\0' '\n' | sort >"$WORK/want"
grep -qx meson.build "$WORK/want" || fail "the tree's listing has no meson.build"

mkdir "$WORK/tree"
tr '\n' '\0' <"$WORK/want" | (cd "$SRC" && xargs -0 -r cp --parents -t "$WORK/tree")
mkdir -p "$WORK/tree/build-x/src" "$WORK/tree/test/captp/endo/node_modules/x" \
  "$WORK/tree/bench/results"
touch "$WORK/tree/build-x/src/a.o" "$WORK/tree/build-x/build.ninja" \
  "$WORK/tree/test/captp/endo/node_modules/x/index.js" \
  "$WORK/tree/bench/results/run.txt" "$WORK/tree/src/stray.o"

# A git that is not there, whatever this machine has.
mkdir "$WORK/bin"
printf '#!/bin/sh\necho "git: command not found" >&2\nexit 127\n' >"$WORK/bin/git"
chmod +x "$WORK/bin/git"
export PATH="$WORK/bin:$PATH"

out=$(bash "$WORK/tree/test/mutate.sh" -n 2>&1) ||
  fail "test/mutate.sh -n without a repository: $out"

bash "$WORK/tree/test/tree_files.sh" "$WORK/tree" | tr '\0' '\n' | sort >"$WORK/got"
if ! cmp -s "$WORK/want" "$WORK/got"; then
  diff "$WORK/want" "$WORK/got" | head -20 >&2
  fail "without git, test/tree_files.sh lists other files than the tree has"
fi
echo "no_repository: mutate.sh -n and a $(wc -l <"$WORK/want")-file listing without git"
