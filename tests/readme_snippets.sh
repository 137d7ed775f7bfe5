#!/usr/bin/env bash
# Every C++ block of README.md is the marked part of a program in
# examples/readme/ (which CI builds and runs): the README cannot show code
# that does not compile or that drifted from what runs.
# Usage: readme_snippets.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d /tmp/pm-readme-XXXXXX)
trap 'rm -rf "$work"' EXIT
# The blocks, one file each.
awk -v dir="$work" '/^```c\+\+$/ {n++; f=dir "/block" n; inblk=1; next}
                    /^```/ {inblk=0; next}
                    inblk {print > f}' "$src/README.md"
blocks=$(ls "$work" | wc -l)
[ "$blocks" -gt 0 ] || { echo "FAIL: no C++ block in README.md"; exit 1; }
fail=0
for b in "$work"/block*; do
  found=0
  for ex in "$src"/examples/readme/*.cc; do
    sed -n '/^\/\/ README: begin$/,/^\/\/ README: end$/p' "$ex" | sed '1d;$d' >"$work/marked"
    if cmp -s "$b" "$work/marked"; then found=1; echo "README block $(basename "$b") = $(basename "$ex")"; fi
  done
  if [ $found -eq 0 ]; then
    echo "FAIL: README.md block $(basename "$b") is not the marked part of any examples/readme/*.cc:"
    cat "$b"
    fail=1
  fi
done
exit $fail
