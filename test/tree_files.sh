#!/usr/bin/env bash
# Prints the source tree's files, NUL-separated, relative to ROOT: what a
# copy of the tree needs (test/mutate.sh's scratch tree), committed or not.
#
#   test/tree_files.sh [ROOT]     (default: the tree this script is in)
#
# In a git work tree with git installed this is `git ls-files -c -o
# --exclude-standard` less files deleted but not yet committed. Elsewhere
# (an unpacked tarball, a machine without git) it walks the tree and
# leaves out .git and what the top-level .gitignore names, read as git
# reads it (a pattern with no inner slash matches at any depth, one with a
# slash from the root; a trailing slash, directories only). Only the
# top-level .gitignore is read: test/no_repository.sh checks that both
# ways list the same files, so one added deeper would show there.
set -euo pipefail

ROOT=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$ROOT"

if command -v git >/dev/null &&
  [[ $(git rev-parse --show-toplevel 2>/dev/null) == "$ROOT" ]]; then
  git ls-files -c -o --exclude-standard -z |
    while IFS= read -r -d '' f; do
      [[ -e $f ]] && printf '%s\0' "$f"
    done
  exit 0
fi

python3 - <<'PY'
import fnmatch, os, sys

rules = []  # (pattern, anchored, directories only)
if os.path.exists(".gitignore"):
    for line in open(".gitignore"):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        dir_only = line.endswith("/")
        pattern = line.rstrip("/")
        anchored = "/" in pattern
        rules.append((pattern.lstrip("/"), anchored, dir_only))

def ignored(path, is_dir):
    name = os.path.basename(path)
    for pattern, anchored, dir_only in rules:
        if dir_only and not is_dir:
            continue
        if fnmatch.fnmatchcase(path if anchored else name, pattern):
            return True
    return False

out = sys.stdout.buffer
for top, dirs, files in os.walk("."):
    rel = os.path.relpath(top)
    prefix = "" if rel == "." else rel + "/"
    dirs[:] = sorted(d for d in dirs
                     if d != ".git" and not ignored(prefix + d, True))
    for f in sorted(files):
        if not ignored(prefix + f, False):
            out.write((prefix + f).encode() + b"\0")
PY
