#!/usr/bin/env bash
# Runs the pm binary as a user would: exit codes, messages, --json.
set -u
PM=$1
FIXTURE=$2
dir=$(mktemp -d /dev/shm/pm-cli-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
check() {  # check DESCRIPTION EXPECTED_EXIT COMMAND...
  local what=$1 want=$2; shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, wanted $want"; cat "$dir/out" "$dir/err"; fail=1
  fi
}
has() {  # has DESCRIPTION FILE TEXT
  grep -q -- "$3" "$dir/$2" || { echo "FAIL: $1: '$3' not in $2:"; cat "$dir/$2"; fail=1; }
}
check "create" 0 "$PM" create "$dir/a.pm" --size 8MiB --max-size 2GiB --layout demo
has "create says where" out "created $dir/a.pm"
check "create again" 1 "$PM" create "$dir/a.pm"
has "create again says why" err "already exists"
check "info" 0 "$PM" info "$dir/a.pm"
has "info shows the tracker" out "tracker"
check "info --json" 0 "$PM" info "$dir/a.pm" --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['layout']=='demo' and d['journal']=='clean' and d['heap_bytes']==8<<20, d" "$dir/out" || { echo "FAIL: info --json content"; fail=1; }
check "check" 0 "$PM" check "$dir/a.pm"
has "check says consistent" out "consistent"
check "check --json" 0 "$PM" --json check "$dir/a.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['ok'] is True and d['problems']==[], d" "$dir/out" || { echo "FAIL: check --json content"; fail=1; }
printf 'garbage' | dd of="$dir/a.pm" bs=1 seek=0 conv=notrunc status=none
check "check of a damaged file" 1 "$PM" check "$dir/a.pm"
has "damage is named" err "not a libpm container"
check "missing file" 1 "$PM" info "$dir/missing.pm"
has "missing file is named" err "no such container"
# Garbage and an escaping pointer, written by another process.
check "fixture" 0 "$FIXTURE" "$dir/f.pm"
check "check names the escaping pointer" 1 "$PM" check "$dir/f.pm"
has "escaping pointer shown" out "escaping      object"
has "escape explained" err "volatile memory"
check "gc --dry-run" 0 "$PM" --json gc --dry-run "$dir/f.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['unreachable_blocks']==3 and d['live_blocks']==1, d" "$dir/out" || { echo "FAIL: gc --dry-run content"; fail=1; }
check "gc" 0 "$PM" gc "$dir/f.pm"
has "gc says freed" out "freed         3 blocks"
check "gc again finds nothing" 0 "$PM" --json gc --dry-run "$dir/f.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['unreachable_blocks']==0, d" "$dir/out" || { echo "FAIL: gc was not durable"; fail=1; }
check "usage error" 2 "$PM" frobnicate
check "no subcommand" 2 "$PM"
[ $fail -eq 0 ] && echo "cli tests passed"
exit $fail
