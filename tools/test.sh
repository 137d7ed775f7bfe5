#!/usr/bin/env bash
# Builds and runs the whole test suite: an optimised build with warnings as
# errors, then an ASan+UBSan build, then the unit tests (threads, commit gate)
# under TSan. Every test runs under each dirty-tracker configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
# pjdfstest (the POSIX suite run on the FUSE mount, tests/fuse/pjdfstest.sh)
# and fsx (the file system exerciser, tests/fuse/fsx.sh) come from crates.io
# through cargo, each built once into .cache/.
if command -v cargo >/dev/null; then
  for tool in pjdfstest@0.2.2 fsx@0.2.0; do
    name=${tool%@*}
    if [ ! -x ".cache/$name/bin/$name" ]; then
      echo "== installing $name (cargo, once)"
      cargo install --quiet --locked "$name" --version "${tool#*@}" --root ".cache/$name"
    fi
    export PATH="$PWD/.cache/$name/bin:$PATH"
  done
else
  echo "cargo not found: fuse.pjdfstest and fuse.fsx will be skipped (install Rust to run them)" >&2
fi
jobs=$(nproc)
run() {  # run NAME CMAKE_ARGS...   (CTEST_ARGS narrows the tests, TARGETS what is built)
  local dir=build-$1; shift
  cmake -S . -B "$dir" -G Ninja -DPM_WERROR=ON "$@" >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$dir" ${TARGETS:+--target $TARGETS}
  # ctest -j: tests are independent (private temp dirs, random addresses).
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
  crash_counts "$dir/Testing/Temporary/LastTest.log"
}
crash_counts() {  # the crash tests' counts, from ctest's log of passed tests
  # A stage without crash tests (TSan) has no such lines: grep finding none is fine.
  { grep -h -E "^(crash harness|kill test)" "$1" 2>/dev/null || true; } | { grep -v "self-test" || true; } | sort -u |
    awk '{print} /crash harness/ {for (i = 1; i <= NF; i++) {
           if ($(i+1) == "crash" && $(i+2) == "states") s += $i; if ($(i+1) == "kills,") k += $i;
           if ($(i+1) == "failures,") f += $i }}
         END {if (s + k > 0) printf "crash harness total: %d crash states explored, %d kills, %d failures\n", s, k, f}'
}
# Line tables only (-g1): backtraces and sanitizer reports keep file and
# line, and the builds take a third less time (a third of CI was compiling).
rel=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
dbg=(-DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1)
echo "== release build (-Werror)"
run test -DCMAKE_BUILD_TYPE=RelWithDebInfo "${rel[@]}"
echo "== ASan+UBSan build"
# Without pm bench's engines (their smoke runs are the release stage's);
# the crash harness at a sixteenth of its work, the heap model at a
# quarter, fsx at a third, the corruption fuzz at a tenth: this stage looks
# for memory errors, not rare states. (At -O1 its tests ran faster, but
# its build took twice as long: -O0 is quicker end to end.)
ASAN_OPTIONS=allow_user_segv_handler=1:detect_leaks=1 PM_KILL_ROUNDS=60 PM_CRASH_QUICK=1 \
  PM_MODEL_STEPS=10000 FSX_OPS=4000 \
  run asan -DCMAKE_BUILD_TYPE=Debug "${dbg[@]}" -DPM_SANITIZE=address,undefined \
  -DPM_BUILD_BENCH=OFF
echo "== TSan build (unit tests)"
# Only the unit tests' executables. The heap model's random walks run a
# quarter of their steps: their threads (the uffd tracker's) are in every
# step, and the full walk is the release stage's. The uffd and mprotect
# trackers only: uffd-chunks runs uffd's threads (it registers the view in
# pieces, which ASan covers), and hints adds no thread or signal handler
# to the container's own.
TARGETS="pm_tests kvstore_tests pm_fuse_tests" CTEST_ARGS="-L unit -E ^(uffd-chunks|hints)[.]" \
  PM_MODEL_STEPS=10000 \
  TSAN_OPTIONS=halt_on_error=1 \
  run tsan -DCMAKE_BUILD_TYPE=Debug "${dbg[@]}" -DPM_SANITIZE=thread -DPM_BUILD_EXAMPLES=OFF
