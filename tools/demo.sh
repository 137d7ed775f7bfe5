#!/usr/bin/env bash
# Installs dependencies, builds (release) and runs the demo: a linked list in
# a container under ./data that survives from one run to the next.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build
mkdir -p data
echo "== run 1: create data/notes.pm, add a note, commit"
./build/examples/notes "written by run 1 at $(date +%T)" data/notes.pm
echo "== run 2: reopen (raw pointers still valid), add a note, commit"
./build/examples/notes "written by run 2 at $(date +%T)" data/notes.pm
echo "== the container"
./build/tools/pm info data/notes.pm
