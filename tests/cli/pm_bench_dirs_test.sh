#!/usr/bin/env bash
# pm bench and the directory it is given: a suite works in a directory of
# its own inside it and leaves what the user had there alone (ordered,
# sqlite and memcached used to empty --dir: `pm bench ordered --dir ~/x`
# removed ~/x); an interrupted run stops its children and removes its files.
set -u
PM=$1
dir=$(mktemp -d /dev/shm/pm-bench-dirs-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
user_files() {  # a user's files, some named as the suites name theirs
  mkdir -p "$1/tmpfs" "$1/e0"
  echo keep >"$1/keep.txt"
  echo keep >"$1/tmpfs/x"
  echo keep >"$1/probe.pm"
}
left_alone() {  # left_alone WHAT DIR
  local got
  got=$(cd "$2" && find . | sort | tr '\n' ' ')
  if [ "$got" != ". ./e0 ./keep.txt ./probe.pm ./tmpfs ./tmpfs/x " ]; then
    echo "FAIL: $1: $2 holds: $got"; fail=1
  fi
}
export PMEM_IS_PMEM_FORCE=1
user_files "$dir/o"
"$PM" bench ordered --smoke --dir "$dir/o" >/dev/null 2>"$dir/err" || { echo "FAIL: ordered"; cat "$dir/err"; fail=1; }
left_alone "pm bench ordered" "$dir/o"
user_files "$dir/a"
"$PM" bench alloc --smoke --dir "$dir/a" >/dev/null 2>"$dir/err" || { echo "FAIL: alloc"; cat "$dir/err"; fail=1; }
left_alone "pm bench alloc" "$dir/a"
if "$PM" bench sqlite --help >/dev/null 2>&1; then
  user_files "$dir/s"
  user_files "$dir/f"
  "$PM" bench sqlite --smoke --dir "$dir/s" --fs-dir "$dir/f" >/dev/null 2>"$dir/err" ||
    { echo "FAIL: sqlite"; cat "$dir/err"; fail=1; }
  left_alone "pm bench sqlite --dir" "$dir/s"
  left_alone "pm bench sqlite --fs-dir" "$dir/f"
fi
# A directory the run creates goes with it, its missing parents too.
"$PM" bench alloc --smoke --dir "$dir/new/a/b" >/dev/null 2>"$dir/err" || { echo "FAIL: alloc new"; fail=1; }
[ ! -e "$dir/new" ] || { echo "FAIL: $dir/new left behind"; fail=1; }
# Interrupted (SIGTERM; a background job of a script ignores SIGINT).
user_files "$dir/k"
"$PM" bench kv --smoke --dir "$dir/k" >/dev/null 2>"$dir/err" &
pid=$!
sleep 1.5
kill -TERM "$pid" 2>/dev/null
wait "$pid"
status=$?
grep -q "interrupted" "$dir/err" && echo "(kv interrupted)"
if grep -q "interrupted" "$dir/err"; then
  [ "$status" -eq 143 ] || { echo "FAIL: interrupted run exited $status, not by SIGTERM"; fail=1; }
fi
sleep 0.5
left_alone "an interrupted pm bench kv" "$dir/k"
if pgrep -f -- "$dir/k" >/dev/null; then echo "FAIL: processes left: $(pgrep -af -- "$dir/k")"; fail=1; fi
exit $fail
