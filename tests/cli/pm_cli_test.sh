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
check "create --json" 0 "$PM" --json create "$dir/j.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['journal']=='clean', d" "$dir/out" || { echo "FAIL: create --json shows the journal as pm info would"; fail=1; }
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
check "check of a damaged superblock" 1 "$PM" check "$dir/a.pm"
has "its copy is used" out "superblock damaged (not a libpm container (bad magic)); its copy"
check "check after the copy was written back" 0 "$PM" check "$dir/a.pm"
printf 'garbage' | dd of="$dir/a.pm" bs=1 seek=3600 conv=notrunc status=none
check "check of a damaged copy of the superblock" 1 "$PM" check "$dir/a.pm"
has "the damaged copy is named" out "copy at byte 3584 is damaged"
check "check after the copy was rewritten" 0 "$PM" check "$dir/a.pm"
# An info that repairs the superblock says so (a user trial: it repaired it
# silently, and the check after it found nothing).
printf '\377\377\377\377' | dd of="$dir/a.pm" bs=1 seek=64 conv=notrunc status=none
check "info of a damaged superblock" 0 "$PM" info "$dir/a.pm"
has "info warns" err "warning: .*superblock damaged (superblock checksum mismatch"
has "info shows the damage" out "^damage  *superblock damaged.*rewritten from it"
check "info --json of a repaired superblock" 0 "$PM" info "$dir/a.pm" --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['superblock_damage']==[], d" "$dir/out" || { echo "FAIL: the repair did not last"; fail=1; }
printf 'garbage' | dd of="$dir/a.pm" bs=1 seek=3584 conv=notrunc status=none
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
has "the unknown word is named" err "'frobnicate' is not a pm command"
check "unknown flag" 2 "$PM" info --frobnicate "$dir/a.pm"
has "the unknown flag is named" err "frobnicate"
check "negative size" 2 "$PM" create "$dir/neg.pm" --size -5MiB
has "negative size explained" err "negative"
check "not a number" 2 "$PM" create "$dir/neg.pm" --max-size lots
# Sizes a container cannot take are usage errors too, named by their option
# (a user trial: exit 1, with the library's option names).
if ! "$PM" bench --help 2>&1 | grep -q "not in this build"; then  # a build with pm bench
  check "a plot into no directory" 2 "$PM" bench kv --plot "$dir/none/x.png"
  has "the plot's directory is named" err "no directory $dir/none"
fi
check "a zero size" 2 "$PM" create "$dir/neg.pm" --size 0
has "the size's option is named" err "^--size: "
# pm kv names the initial heap --heap, pm create --size: each takes both.
check "create with --heap" 0 "$PM" create "$dir/heap.pm" --heap 2MiB
has "--heap is the initial heap" out "2.0 MiB heap"
check "a max size that is not whole GiB" 2 "$PM" create "$dir/neg.pm" --max-size 1MiB
has "the max size's rule" err "not a multiple of 1GiB"
[ -e "$dir/neg.pm" ] && { echo "FAIL: a usage error created a file"; fail=1; }
# --json covers failures: one JSON document on stdout, the message on stderr.
check "--json failure" 1 "$PM" --json info "$dir/missing.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['error']['code']=='Not found' and 'missing.pm' in d['error']['message'], d" "$dir/out" || { echo "FAIL: --json failure document"; fail=1; }
check "--json usage error" 2 "$PM" --json frobnicate
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['error']['code']=='usage', d" "$dir/out" || { echo "FAIL: --json usage document"; fail=1; }
check "--json check of a damaged file" 1 "$PM" --json check "$dir/a.pm"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['ok'] is False, d" "$dir/out" || { echo "FAIL: check --json prints one report"; fail=1; }
check "--version" 0 "$PM" --version
has "version printed" out "^pm (libpm) [0-9][0-9.]*$"
# A second open names the file once, with the holder.
check "create b" 0 "$PM" create "$dir/b.pm" --size 4MiB
python3 - "$dir/b.pm" "$PM" "$dir" <<'PY' || { echo "FAIL: busy message"; fail=1; }
import fcntl, os, subprocess, sys
path, pm, d = sys.argv[1:]
fd = os.open(path, os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what an open container holds
r = subprocess.run([pm, "info", path], capture_output=True, text=True)
assert r.returncode == 1, r
assert "locked by" in r.stderr and r.stderr.count(path) == 1, r.stderr
PY
check "no subcommand" 2 "$PM"
check "create another" 0 "$PM" create "$dir/c.pm" --size 8MiB
# A path that is not UTF-8 comes out in JSON as U+FFFD, and the command works.
check "--json create of a path that is not UTF-8" 0 "$PM" --json create "$dir/bad"$'\xff'"name"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['path'].endswith('bad\ufffdname'), d" "$dir/out" || { echo "FAIL: --json of a path that is not UTF-8"; fail=1; }
# Output that cannot be written fails the command.
if [ -w /dev/full ]; then
  "$PM" info "$dir/c.pm" >/dev/full 2>"$dir/err"
  got=$?
  [ "$got" -eq 1 ] || { echo "FAIL: info >/dev/full: exit $got"; cat "$dir/err"; fail=1; }
  has "the lost output is said" err "write stdout"
fi
# A closed stdout: the container must not take its descriptor.
"$PM" --json info "$dir/c.pm" >&- 2>"$dir/err"
got=$?
[ "$got" -eq 1 ] || { echo "FAIL: info with stdout closed: exit $got"; fail=1; }
check "the container is whole after a command with stdout closed" 0 "$PM" check "$dir/c.pm"
check "a NaN wait" 2 "$PM" bench sqlite --seconds nan
[ $fail -eq 0 ] && echo "cli tests passed"
exit $fail
