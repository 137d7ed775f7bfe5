#!/usr/bin/env bash
# Runs `pm kv` as a user would: every invocation reopens the store, so each
# read below also checks that the writes before it survived a close.
set -u
PM=$1
export PMEM_IS_PMEM_FORCE=1
dir=$(mktemp -d /dev/shm/pm-kv-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
check() {  # check DESCRIPTION EXPECTED_EXIT COMMAND...   (stdin is passed on)
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
same() {  # same DESCRIPTION FILE EXPECTED_FILE   (byte for byte)
  cmp -s "$dir/$2" "$3" || { echo "FAIL: $1: $2 differs from $3:"; od -c "$dir/$2" | head; fail=1; }
}
json() {  # json DESCRIPTION PYTHON_ASSERTION_ON_d   (on out)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert $2, d" "$dir/out" \
    || { echo "FAIL: $1"; fail=1; }
}
S=$dir/s.kv

# put from an argument; get prints the value with no newline added.
check "put" 0 "$PM" kv put "$S" alpha one
printf 'one' >"$dir/want"
check "get" 0 "$PM" kv get "$S" alpha
same "get gives the value as it is" out "$dir/want"
check "get --json" 0 "$PM" kv get "$S" alpha --json
json "get --json" "d == {'key': 'alpha', 'value': 'one'}"

# put from stdin, binary-safe (NUL, 0xff, newlines, tabs), with and without '-'.
printf 'a\x00b\xff\n\tz\x00\r\n' >"$dir/bin"
check "put from stdin" 0 "$PM" kv put "$S" bin <"$dir/bin"
check "get binary" 0 "$PM" kv get "$S" bin
same "binary value round trip" out "$dir/bin"
check "put from stdin with -" 0 "$PM" kv put "$S" bin2 - <"$dir/bin"
check "get binary 2" 0 "$PM" kv get "$S" bin2
same "binary value round trip with -" out "$dir/bin"
check "put empty value" 0 "$PM" kv put "$S" empty </dev/null
check "get empty value" 0 "$PM" kv get "$S" empty
[ -s "$dir/out" ] && { echo "FAIL: empty value is not empty"; fail=1; }
check "put --async" 0 "$PM" kv put "$S" lazy later --async
check "get after --async" 0 "$PM" kv get "$S" lazy
printf 'later' >"$dir/want"
same "--async put survives the process" out "$dir/want"
check "overwrite" 0 "$PM" kv put "$S" alpha two
check "get overwritten" 0 "$PM" kv get "$S" alpha
printf 'two' >"$dir/want"
same "overwrite wins" out "$dir/want"

# del, then get fails; del of an absent key fails too.
check "del" 0 "$PM" kv del "$S" alpha
check "get after del" 1 "$PM" kv get "$S" alpha
has "missing key is named" err "no key 'alpha'"
[ -s "$dir/out" ] && { echo "FAIL: get of a missing key wrote to stdout"; fail=1; }
check "del again" 1 "$PM" kv del "$S" alpha
has "del names the key" err "no key 'alpha'"

# ls: sorted, prefix, values, JSON.
for k in user:2 user:1 other usex; do check "put $k" 0 "$PM" kv put "$S" "$k" "v-$k"; done
check "ls --prefix" 0 "$PM" kv ls "$S" --prefix user:
printf 'user:1\nuser:2\n' >"$dir/want"
same "ls --prefix lists the prefix, sorted" out "$dir/want"
check "ls --prefix --values" 0 "$PM" kv ls "$S" --prefix user: --values
printf 'user:1\tv-user:1\nuser:2\tv-user:2\n' >"$dir/want"
same "ls --values" out "$dir/want"
check "ls all" 0 "$PM" kv ls "$S"
printf 'bin\nbin2\nempty\nlazy\nother\nuser:1\nuser:2\nusex\n' >"$dir/want"
same "ls lists every key, sorted" out "$dir/want"
check "ls --json" 0 "$PM" --json kv ls "$S" --prefix us
json "ls --json keys only" "d == [{'key': 'user:1'}, {'key': 'user:2'}, {'key': 'usex'}]"
check "ls --json --values" 0 "$PM" kv ls "$S" --prefix user: --values --json
json "ls --json --values" "d == [{'key': 'user:1', 'value': 'v-user:1'}, {'key': 'user:2', 'value': 'v-user:2'}]"
# Ranges: --start inclusive, --end exclusive, --limit, within a --prefix.
check "ls --start --end" 0 "$PM" kv ls "$S" --start lazy --end user:2
printf 'lazy\nother\nuser:1\n' >"$dir/want"
same "ls --start --end is [start, end)" out "$dir/want"
check "ls --start --limit" 0 "$PM" kv ls "$S" --start e --limit 2
printf 'empty\nlazy\n' >"$dir/want"
same "ls --limit stops after that many" out "$dir/want"
check "ls --prefix --start" 0 "$PM" kv ls "$S" --prefix user: --start user:2
printf 'user:2\n' >"$dir/want"
same "ls --prefix --start" out "$dir/want"
check "ls of an empty range" 0 "$PM" kv ls "$S" --start z --end a
[ -s "$dir/out" ] && { echo "FAIL: an empty range printed something"; fail=1; }
check "ls --json of an empty range" 0 "$PM" --json kv ls "$S" --prefix nothing
json "ls --json of nothing" "d == []"
for bad in -1 " -1" 18446744073709551616 1e3; do
  check "ls --limit '$bad' is a usage error" 2 "$PM" kv ls "$S" --limit "$bad"
done
has "a bad limit is named" err "is not a count"
check "ls --json --limit" 0 "$PM" --json kv ls "$S" --limit 1
json "ls --json --limit 1" "d == [{'key': 'bin'}]"
# A store made without the ordered index lists in order all the same.
U="$dir/unordered.kv"
for k in b c a; do check "put $k (unordered)" 0 "$PM" kv put "$U" "$k" v --unordered; done
check "stats of an unordered store" 0 "$PM" kv stats "$U" --json
json "no ordered index" "d['ordered'] == False"
check "ls of an unordered store" 0 "$PM" kv ls "$U" --start b
printf 'b\nc\n' >"$dir/want"
same "an unordered store lists in order" out "$dir/want"
check "stats of an ordered store" 0 "$PM" kv stats "$S" --json
json "an ordered index by default" "d['ordered'] == True"
check "stats as a table" 0 "$PM" kv stats "$S"
has "a text value in the table is not quoted" out "^durability  *sync$"

# Limits: a too-long key fails with a clear message and stores nothing.
long=$(head -c 2000 /dev/zero | tr '\0' k)
check "too-long key" 1 "$PM" kv put "$S" "$long" v
has "too-long key explained" err "key of 2000 bytes is over the limit of 1024"
check "creation options" 0 "$PM" kv put "$dir/small.kv" k v --logs 2 --log-mb 1 --max-key 8 --max-value 1000
check "stats of the small store" 0 "$PM" kv stats "$dir/small.kv" --json
json "creation options are used" "d['log_bytes'] == 2 << 20 and d['keys'] == 1"
check "key over --max-key" 1 "$PM" kv put "$dir/small.kv" 123456789 v
has "--max-key limit explained" err "key of 9 bytes is over the limit of 8"
head -c 1001 /dev/zero >"$dir/big"
check "value over --max-value" 1 "$PM" kv put "$dir/small.kv" k <"$dir/big"
has "--max-value limit explained" err "value of 1001 bytes is over the limit of 1000"
check "bad creation option" 2 "$PM" kv put "$dir/bad.kv" k v --logs 0
has "bad option explained" err "--logs: Value 0 not in range 1 to 256"
check "logs over the limit" 2 "$PM" kv put "$dir/bad.kv" k v --logs 257
check "a value limit the logs cannot hold" 2 "$PM" kv put "$dir/bad.kv" k v --log-mb 1 \
  --max-value 262144
has "the largest allowed value limit is given" err "so at most 260992 here"
check "exactly that limit" 0 "$PM" kv put "$dir/edge.kv" k v --log-mb 1 --max-value 260992

# A missing store: readers fail without creating it.
for cmd in "get $dir/none.kv k" "del $dir/none.kv k" "ls $dir/none.kv" "stats $dir/none.kv"; do
  # shellcheck disable=SC2086  # split on purpose
  check "$cmd on a missing store" 1 "$PM" kv $cmd
  has "$cmd says no such store" err "no such store"
done
check "put --no-create" 1 "$PM" kv put "$dir/none.kv" k v --no-create
has "put --no-create says no such store" err "no such store"
[ -e "$dir/none.kv" ] && { echo "FAIL: a missing store was created"; fail=1; }

# load: 10k lines, then ls counts them; the checkpoint leaves nothing to replay.
L=$dir/load.kv
seq 1 10000 | awk '{printf "k%05d\tvalue %d\twith a tab\n", $1, $1}' >"$dir/10k.tsv"
check "load 10k" 0 "$PM" kv load "$L" "$dir/10k.tsv"
has "load reports the count" out "loaded 10000 keys"
check "ls after load" 0 "$PM" kv ls "$L"
[ "$(wc -l <"$dir/out")" -eq 10000 ] || { echo "FAIL: ls after load: $(wc -l <"$dir/out") keys"; fail=1; }
check "get a loaded key" 0 "$PM" kv get "$L" k05000
printf 'value 5000\twith a tab' >"$dir/want"
same "loaded value (split at the first tab)" out "$dir/want"
check "stats after load" 0 "$PM" kv stats "$L" --json
json "load ended with a checkpoint" "d['keys'] == 10000 and d['backend_keys'] == 10000 and d['recovered_records'] == 0"
check "stats table" 0 "$PM" kv stats "$L"
has "stats table shows keys" out "keys  *10000"
has "stats table shows is_pmem" out "is_pmem"
check "stats --json" 0 "$PM" --json kv stats "$L"
python3 -c 'import json,sys; json.load(sys.stdin)' <"$dir/out" || { echo "FAIL: stats --json does not parse"; fail=1; }

# load --format jsonl; JSON can carry NUL bytes and tabs in keys and values.
printf '%s\n' '{"key":"j1","value":"one"}' '{"key":"j\u0000two","value":"a\tb"}' '' \
  '{"value":"three","key":"j3"}' >"$dir/in.jsonl"
check "load jsonl" 0 "$PM" kv load "$dir/j.kv" "$dir/in.jsonl" --format jsonl --json
json "load --json" "d['keys'] == 3 and d['lines'] == 4"
check "ls jsonl" 0 "$PM" kv ls "$dir/j.kv" --json --values
json "jsonl keys and values" "d == [{'key':'j\\0two','value':'a\\tb'},{'key':'j1','value':'one'},{'key':'j3','value':'three'}]"
check "load from stdin" 0 "$PM" kv load "$dir/stdin.kv" - <"$dir/10k.tsv"
has "load from stdin reports the count" out "loaded 10000 keys"

# A load is all or nothing: a bad line is named and nothing is loaded (not
# even the store is created). --partial keeps the lines before it.
printf 'a\t1\nb\t2\nc\t3\nno tab here\nd\t4\n' >"$dir/bad.tsv"
check "malformed line" 1 "$PM" kv load "$dir/bad.kv" "$dir/bad.tsv"
has "malformed line named" err "nothing loaded from $dir/bad.tsv: line 4: expected key<TAB>value"
[ -e "$dir/bad.kv" ] && { echo "FAIL: a refused load created its store"; fail=1; }
check "malformed line, --partial" 1 "$PM" kv load "$dir/bad.kv" "$dir/bad.tsv" --partial
has "malformed line named (--partial)" err "bad.tsv: line 4: expected key<TAB>value"
has "count before the bad line" out "loaded 3 keys"
check "keys before a bad line are kept (--partial)" 0 "$PM" kv get "$dir/bad.kv" c
check "keys after a bad line are not loaded" 1 "$PM" kv get "$dir/bad.kv" d
# Into a store that has keys: a line over the limits leaves every old value.
"$PM" kv put "$S" keep old >/dev/null
printf 'keep\tnew\nfresh\t1\n%s\tv\n' "$long" >"$dir/long.tsv"
check "too-long key in load" 1 "$PM" kv load "$S" "$dir/long.tsv"
has "too-long key line named" err "line 3: key of 2000 bytes is outside 1..1024"
check "old value kept" 0 "$PM" kv get "$S" keep
has "old value kept, exactly" out "^old$"
check "nothing new" 1 "$PM" kv get "$S" fresh
# JSON without loss: bytes that are not UTF-8 go as base64, and what ls
# prints loads back byte for byte.
printf '\xff\x00\xfe' >"$dir/bytes"
check "put a binary value under a non-UTF-8 key" 0 "$PM" kv put "$dir/rt.kv" "$(printf 'k\xe9y')" <"$dir/bytes"
check "put a UTF-8 pair" 0 "$PM" kv put "$dir/rt.kv" plain "héllo wörld"
check "ls --json --values of bytes" 0 "$PM" kv ls "$dir/rt.kv" --json --values
cp "$dir/out" "$dir/dump.json"
has "non-UTF-8 key as base64" dump.json '"key_base64": "a+l5"'
has "binary value as base64" dump.json '"value_base64": "/wD+"'
has "UTF-8 stays readable" dump.json '"value": "héllo wörld"'
check "load --format json" 0 "$PM" kv load "$dir/rt2.kv" "$dir/dump.json" --format json
check "ls of the copy" 0 "$PM" kv ls "$dir/rt2.kv" --json --values
cmp -s "$dir/out" "$dir/dump.json" || { echo "FAIL: ls --json | load --format json does not round-trip"; fail=1; }
check "get --json of bytes" 0 "$PM" kv get "$dir/rt2.kv" "$(printf 'k\xe9y')" --json
has "get --json uses base64 too" out '"value_base64": "/wD+"'
printf '%s\n' '{"key_base64":"a+l5","value_base64":"/wD+"}' '{"key":"x","value_base64":"!!"}' >"$dir/b64.jsonl"
check "bad base64 in jsonl" 1 "$PM" kv load "$dir/b64.kv" "$dir/b64.jsonl" --format jsonl
has "bad base64 named" err 'line 2: "value_base64" is not valid base64'

# Two commands at once: the second waits for the first (--wait, 10 s by
# default) instead of failing with Busy; --wait 0 fails at once, naming the
# holder.
for i in $(seq 8); do "$PM" kv put "$dir/two.kv" "a$i" x & "$PM" kv put "$dir/two.kv" "b$i" y & wait; done
check "both writers of each round landed" 0 "$PM" kv ls "$dir/two.kv"
[ "$(wc -l <"$dir/out")" -eq 16 ] || { echo "FAIL: concurrent puts: $(wc -l <"$dir/out") of 16 keys"; fail=1; }
python3 - "$PM" "$dir/two.kv" <<'PY' || { echo "FAIL: --wait"; fail=1; }
import fcntl, os, subprocess, sys, time
pm, path = sys.argv[1:]
fd = os.open(path, os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what an open store holds
r = subprocess.run([pm, "kv", "get", path, "a1", "--wait", "0"], capture_output=True, text=True)
assert r.returncode == 1 and "locked by" in r.stderr, r
t = time.time()
r = subprocess.run([pm, "kv", "get", path, "a1", "--wait", "0.5"], capture_output=True, text=True)
assert r.returncode == 1 and "waited 0.5 s" in r.stderr and time.time() - t >= 0.4, r
p = subprocess.Popen([pm, "kv", "get", path, "a1"], stdout=subprocess.PIPE, text=True)
time.sleep(0.3)
os.close(fd)  # the holder goes away: the waiting get goes on
out, _ = p.communicate(timeout=20)
assert p.returncode == 0 and out == "x", (p.returncode, out)
# A program reading it (a read-only open holds the lock shared): commands
# that read share the file at once, those that write wait.
fd = os.open(path, os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
r = subprocess.run([pm, "kv", "get", path, "a1", "--wait", "0"], capture_output=True, text=True)
assert r.returncode == 0 and r.stdout == "x", r
r = subprocess.run([pm, "kv", "ls", path, "--wait", "0"], capture_output=True, text=True)
assert r.returncode == 0 and len(r.stdout.splitlines()) == 16, r
r = subprocess.run([pm, "kv", "put", path, "c", "z", "--wait", "0"], capture_output=True, text=True)
assert r.returncode == 1 and "locked by" in r.stderr, r
for cmd in (["info", path], ["check", path]):  # they read too (they failed "busy")
    r = subprocess.run([pm] + cmd, capture_output=True, text=True)
    assert r.returncode == 0, (cmd, r)
os.close(fd)
PY

# Batches are sized to the store's log: many values near a small store's
# limit load as several transactions.
for i in $(seq 1 200); do printf 'u%s\t%s\n' "$i" "$(head -c 990 /dev/zero | tr '\0' x)"; done >"$dir/many.tsv"
check "a load of several transactions" 0 "$PM" kv load "$dir/small.kv" "$dir/many.tsv"
check "its last key" 0 "$PM" kv get "$dir/small.kv" u200
# A value at the store's limit after a batch's worth of small ones: it
# starts a batch of its own (it used to join the full one, past a record).
{ for i in $(seq 1 129); do printf 's%s\t%s\n' "$i" "$(head -c 500 /dev/zero | tr '\0' y)"; done
  printf 'big\t%s\n' "$(head -c 200000 /dev/zero | tr '\0' z)"; } >"$dir/batch.tsv"
check "a load whose last value is at the limit" 0 "$PM" kv load --log-mb 1 --max-value 200000 \
  "$dir/batch.kv" "$dir/batch.tsv"
check "the value at the limit" 0 "$PM" kv get "$dir/batch.kv" big
printf '%s\n' '{"key":"a","value":"1"}' '{"key":"b"' '{"key":"c","value":3}' >"$dir/bad.jsonl"
check "malformed jsonl" 1 "$PM" kv load "$dir/badj.kv" "$dir/bad.jsonl" --format jsonl
has "malformed jsonl line named" err "line 2: not valid JSON"
check "missing input file" 1 "$PM" kv load "$dir/x.kv" "$dir/no-such-file"
has "missing input file named" err "no-such-file"
[ -e "$dir/x.kv" ] && { echo "FAIL: load of a missing file created the store"; fail=1; }

# pm check on healthy stores: values that look like heap addresses are data.
printf '12345678\tabcdeU\n' >"$dir/ptr.tsv"
check "load a value that looks like a pointer" 0 "$PM" kv load "$dir/ptr.kv" "$dir/ptr.tsv"
check "check a healthy store" 0 "$PM" check "$dir/ptr.kv"
has "check walks the store" out "store"
check "check a healthy store, many keys" 0 "$PM" check "$S"
# pm gc would free entries a store links itself: refused, nothing changed.
check "gc refuses a store" 1 "$PM" gc "$S"
has "gc says why" err "key-value store"
check "the store is intact after gc" 0 "$PM" kv get "$S" bin
# Salvage copies a store; it will not overwrite.
check "salvage" 0 "$PM" kv salvage "$S" "$dir/saved.kv"
check "salvaged keys read back" 0 "$PM" kv get "$dir/saved.kv" bin
check "salvage refuses an existing target" 1 "$PM" kv salvage "$S" "$dir/saved.kv"

# A store this user may not write: the commands that only read open it
# read-only (the logs replayed in DRAM only), the others say they need write
# access, and the file is left as it was. Root writes any file, so as root
# these run as nobody.
if [ "$(id -u)" -ne 0 ]; then
  as_user() { "$@"; }
elif command -v setpriv >/dev/null; then
  as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  chmod 711 "$dir"
else
  as_user=
fi
if [ "$(type -t as_user)" = function ]; then
  mkdir -m 755 "$dir/ro"
  R=$dir/ro/s.kv
  check "put before read-only" 0 "$PM" kv put "$R" logged-only value
  chmod 0444 "$R"
  sum=$(md5sum <"$R")
  printf 'value' >"$dir/want"
  check "read-only get" 0 as_user "$PM" kv get "$R" logged-only
  same "read-only get sees a record still in the log" out "$dir/want"
  check "read-only ls" 0 as_user "$PM" kv ls "$R"
  has "read-only ls lists the key" out "logged-only"
  check "read-only stats" 0 as_user "$PM" kv stats "$R" --json
  json "read-only stats count the key" "d['keys'] == 1"
  check "read-only info" 0 as_user "$PM" info "$R"
  has "info says it opened read-only" out "read-only"
  check "read-only check" 0 as_user "$PM" check "$R"
  check "put on a read-only store" 1 as_user "$PM" kv put "$R" k v
  has "put says it needs write access" err "no write access"
  check "del on a read-only store" 1 as_user "$PM" kv del "$R" logged-only
  has "del says it needs write access" err "no write access"
  mkdir -m 777 "$dir/out_ro"
  check "salvage of a store it may only read" 0 as_user "$PM" kv salvage "$R" "$dir/out_ro/s.kv"
  check "what salvage copied" 0 "$PM" kv get "$dir/out_ro/s.kv" logged-only
  [ "$(md5sum <"$R")" = "$sum" ] || { echo "FAIL: read-only commands changed the file"; fail=1; }
  chmod 0644 "$R"
fi

# A small heap for a small disk (the default makes 64 MiB at once).
check "a key limit of 0" 2 "$PM" kv put "$dir/zero.kv" k v --max-key 0
check "a heap below 1 MiB" 2 "$PM" kv put "$dir/zero.kv" k v --heap 1b
[ -e "$dir/zero.kv" ] && { echo "FAIL: a usage error created a store"; fail=1; }
check "put with a small heap" 0 "$PM" kv put --heap 4MiB --logs 1 --log-mb 1 --max-value 65536 \
  "$dir/smallheap.kv" k v
size=$(stat -c %s "$dir/smallheap.kv")
[ "$size" -lt $((8 << 20)) ] || { echo "FAIL: --heap 4MiB made a file of $size bytes"; fail=1; }
# Rules across options are usage errors too, named by their options.
check "logs over 16 GiB in all" 2 "$PM" kv put "$dir/biglogs.kv" k v --log-mb 16384
has "the logs' total is named" err "^--logs, --log-mb: 8 logs of 16384 MiB"
check "a value that cannot fit a log" 2 "$PM" kv put "$dir/biglogs.kv" k v --log-mb 4 \
  --max-value 2000000
has "the value's rule is named" err "^--max-value, --log-mb: "
[ -e "$dir/biglogs.kv" ] && { echo "FAIL: a usage error created a store"; fail=1; }
check "creation options are ignored for a store that exists" 0 "$PM" kv put "$dir/edge.kv" k2 v \
  --log-mb 4 --max-value 2000000
check "put with --size, pm create's name for it" 0 "$PM" kv put --size 4MiB --logs 1 --log-mb 1 \
  --max-value 65536 "$dir/smallsize.kv" k v
size=$(stat -c %s "$dir/smallsize.kv")
[ "$size" -lt $((8 << 20)) ] || { echo "FAIL: --size 4MiB made a file of $size bytes"; fail=1; }

check "put of an empty key" 1 "$PM" kv put "$dir/never.kv" "" v
[ ! -e "$dir/never.kv" ] || { echo "FAIL: a put of an empty key made a store"; fail=1; }
check "put of a key over --max-key" 1 "$PM" kv put "$dir/never.kv" "$(printf 'k%.0s' {1..2000})" v
has "the limit is named" err "over the limit of 1024 (--max-key)"
[ ! -e "$dir/never.kv" ] || { echo "FAIL: a put of a key over the limit made a store"; fail=1; }
printf 'k\tlong value\n' >"$dir/long.tsv"
check "load of a value over --max-value" 1 "$PM" kv load "$dir/never.kv" "$dir/long.tsv" \
  --max-value 4
[ ! -e "$dir/never.kv" ] || { echo "FAIL: a load over the limits made a store"; fail=1; }

# A closed stdout: the store must not take its descriptor (the value would
# be written into the store).
"$PM" kv get "$S" bin >&- 2>"$dir/err"
got=$?
[ "$got" -eq 1 ] || { echo "FAIL: get with stdout closed: exit $got"; fail=1; }
check "the store is whole after a get with stdout closed" 0 "$PM" check "$S"
check "a NaN wait" 2 "$PM" kv get "$S" bin --wait nan
has "NaN is named" err "not a finite number"

# A store root that is not one is reported by check, not a usage error.
cp "$S" "$dir/badroot.kv"
off=$(grep -obUa BACKEND1 "$dir/badroot.kv" | head -1 | cut -d: -f1)
printf X | dd of="$dir/badroot.kv" bs=1 seek="$off" conv=notrunc status=none
check "check of a store whose root is damaged" 1 "$PM" check "$dir/badroot.kv"
has "the root is named" out "the store's root"
has "damage is inconsistent" out "INCONSISTENT"

# A damaged value fails a listing at its key: the keys before it are
# listed (in JSON too, however little was buffered), and a listing that
# stops before it succeeds.
for i in $(seq -w 0 999); do printf 'key%s\tVALUE-%s-unique\n' "$i" "$i"; done >"$dir/dm.tsv"
check "load of 1000 keys" 0 "$PM" kv load --logs 2 --log-mb 1 --max-value 65536 --heap 4mb \
  "$dir/dm.kv" "$dir/dm.tsv"
python3 - "$dir/dm.kv" <<'PY' || { echo "FAIL: no value of key500 in the heap"; fail=1; }
import re, sys
d = bytearray(open(sys.argv[1], "rb").read())
hits = [m.start() for m in re.finditer(b"VALUE-500-unique", d) if m.start() > 2 << 20]
assert hits
for h in hits: d[h + 6] ^= 1
open(sys.argv[1], "wb").write(d)
PY
check "ls of a store with a damaged value" 1 "$PM" kv ls "$dir/dm.kv"
[ "$(wc -l <"$dir/out")" -eq 500 ] && [ "$(tail -1 "$dir/out")" = key499 ] \
  || { echo "FAIL: ls did not list the 500 keys before the damaged one"; fail=1; }
has "the damage names the store" err "list $dir/dm.kv: store backend: the entry of key 'key500'"
check "get of the damaged value" 1 "$PM" kv get "$dir/dm.kv" key500
has "get names the store" err "get 'key500' from $dir/dm.kv: store backend"
# A path that cannot be looked up is not a store to create or a missing one.
ln -s loop "$dir/loop"
check "get through a symlink loop" 1 "$PM" kv get "$dir/loop" k
has "the loop is named" err "open $dir/loop: Too many levels of symbolic links"
check "put through a symlink loop" 1 "$PM" kv put "$dir/loop" k v
has "put names the loop" err "Too many levels of symbolic links"
mkfifo "$dir/fifo"
check "get of a FIFO" 1 "$PM" kv get "$dir/fifo" k
has "a FIFO is no container" err "open $dir/fifo: not a regular file"
rm -f "$dir/loop" "$dir/fifo"
check "ls that stops before the damage" 0 "$PM" kv ls "$dir/dm.kv" --start key300 --limit 1
same "ls --limit 1 lists its key" out <(echo key300)
check "ls --json of a store with a damaged value" 1 "$PM" --json kv ls "$dir/dm.kv"
json "ls --json lists the keys before the damage" 'len(d) == 500 and d[-1]["key"] == "key499"'

# One command per put: each applies what it logged, so the file holds the
# values, not a heap grown again by every command that replayed them (a
# user trial: 31 puts of 64 KiB made a 22 MiB file of a 1 MiB heap).
head -c 65536 /dev/zero | tr '\0' v >"$dir/v64k"
check "a store for large values" 0 "$PM" kv put "$dir/grow.kv" init x --logs 2 --log-mb 2 \
  --heap 1MiB --max-value 131072
for n in $(seq 0 30); do "$PM" kv put "$dir/grow.kv" "b$n" <"$dir/v64k" || fail=1; done
size=$(stat -c %s "$dir/grow.kv")
[ "$size" -le $((12 << 20)) ] || { echo "FAIL: 31 puts of 64 KiB made a file of $size bytes"; fail=1; }
check "the last of them" 0 "$PM" kv get "$dir/grow.kv" b30
same "its value" out "$dir/v64k"

# Usage errors exit 2.
check "an empty store path" 2 "$PM" kv get "" k
has "the empty path is named" err "the path is empty"
check "kv without subcommand" 2 "$PM" kv
check "an unknown kv command" 2 "$PM" kv bogus
has "the unknown command is named" err "'bogus' is not a pm kv command"
check "get without key" 2 "$PM" kv get "$S"
check "unknown format" 2 "$PM" kv load "$S" "$dir/10k.tsv" --format xml
[ $fail -eq 0 ] && echo "kv cli tests passed"
exit $fail
