#!/usr/bin/env bash
# Every file the documentation names is there: a path in backquotes in a
# Markdown file of the tree that starts in a source folder (`src/...`,
# `include/...`, `test/...`, `examples/...`, `.ci/...`, `doc/...`) or a
# public header (`vat/net.h`) must exist, from the root or from the
# Markdown file's folder (a header made from a `.in` template counts). Code moves; the pages that point at it must move
# with it.
# Usage: test/doc_paths.sh SOURCE_ROOT
set -euo pipefail

cd "$1"
missing=0
checked=0
while IFS= read -r -d '' md; do
  dir=$(dirname "$md")
  while IFS= read -r path; do
    checked=$((checked + 1))
    path=${path%/}
    case $path in
    vat/*) [[ -e include/$path || -e include/$path.in ]] && continue ;;
    *) [[ -e $path || -e $dir/$path ]] && continue ;;
    esac
    echo "$md: names \`$path\`, which does not exist" >&2
    missing=$((missing + 1))
  done < <(grep -o '`\(src\|include\|test\|examples\|\.ci\|doc\|vat\)/[A-Za-z0-9_./-]*`' "$md" |
    tr -d '`' | sort -u)
done < <(find . \( -name node_modules -o -name 'build*' -o -name .git \) -prune -o \
  -name '*.md' -type f -print0)

if ((missing > 0)); then
  echo "doc_paths: $missing of $checked paths named in the pages are missing" >&2
  exit 1
fi
echo "doc_paths: all $checked paths named in the pages exist"
