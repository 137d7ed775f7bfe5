#!/usr/bin/env bash
# Runs fsx (crates.io package `fsx`, the Rust rewrite of the File System
# eXerciser that xfstests' fsx tests come from) on pmfs mounts: random
# reads, writes, mapped reads and writes, msync invalidations, truncates,
# fsyncs, fallocate (allocate, punch hole), sendfile, copy_file_range and
# reopens, each read checked against fsx's model of the file. Two stores:
# the default one (files up to 1 MiB are one value, larger ones chunks of
# 1 MiB) and one with 16 KiB values (every file over 16 KiB is chunked, so
# operations cross many chunk boundaries). After each run the file is
# checked again after a remount. Exit 77 (skipped) without fsx (looked up
# as $FSX, then in PATH) or without usable FUSE.
# FSX_OPS (default 12000) operations per seed.
set -u
PM=$1
export PMEM_IS_PMEM_FORCE=1 RUST_BACKTRACE=0
FSX=${FSX:-$(command -v fsx)}
[ -x "$FSX" ] || { echo "SKIP: fsx is not installed (cargo install fsx)"; exit 77; }
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE"; exit 77; }
ops=${FSX_OPS:-12000}

dir=$(mktemp -d /dev/shm/pm-fsx-XXXXXX)
mnt=$dir/mnt
mkdir "$mnt"
trap 'cd /; fusermount3 -u -z "$mnt" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/daemon.err" 2>/dev/null; exit 1; }

# The daemon runs in the foreground as a child of this shell, so that its
# exit status (a sanitizer's report fails it) is checked at each unmount.
first=1
mount_store() {  # mount_store STORE [CREATE OPTIONS...]
  local store=$1; shift
  "$PM" mount "$store" "$mnt" -f "$@" 2>>"$dir/daemon.err" &
  pid=$!
  for _ in $(seq 300); do  # 30 s: a sanitizer build on a loaded machine is slow
    grep -q " $mnt fuse" /proc/mounts && { first=0; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # The kernel refusing FUSE mounts (a container without the privilege) is
  # a skip, but only at the first mount: later ones worked before.
  [ "$first" = 1 ] && grep -q refused "$dir/daemon.err" && { cat "$dir/daemon.err"; exit 77; }
  fail "the mount did not come up"
}
unmount() {
  fusermount3 -u "$mnt" || fail "unmount"
  wait "$pid" || fail "the daemon exited with status $?"
}

config() {  # config FLEN MAXOP: every operation fsx has that Linux offers
  cat <<TOML
flen = $1
[opsize]
max = $2
[weights]
close_open = 2
read = 10
write = 10
mapread = 10
mapwrite = 10
invalidate = 1
truncate = 4
fsync = 1
fdatasync = 1
posix_fallocate = 2
punch_hole = 2
sendfile = 2
copy_file_range = 2
posix_fadvise = 1
TOML
}

exercise() {  # exercise NAME FLEN MAXOP SEEDS... (on the mounted store)
  local name=$1 flen=$2 maxop=$3; shift 3
  config "$flen" "$maxop" >"$dir/$name.toml"
  for seed in "$@"; do
    rm -f "$mnt/$name"
    if ! (cd "$dir" && "$FSX" -f "$dir/$name.toml" -N "$ops" -S "$seed" -P "$dir" "$mnt/$name") \
        >"$dir/$name.out" 2>&1; then
      tail -40 "$dir/$name.out"
      fail "fsx $name (flen $flen, seed $seed)"
    fi
    sums[$name]=$(digest "$mnt/$name") || exit 1
    echo "ok: fsx $name: $ops operations, seed $seed, file of up to $flen bytes"
  done
}

# The file's digest; fails the test when it cannot be read.
digest() {
  local sum
  sum=$(sha256sum <"$1") || { echo "FAIL: cannot read $1" >&2; exit 1; }
  echo "$sum"
}
declare -A sums
# Default store: the file crosses from one value to chunks and back.
mount_store "$dir/a.kv"
exercise one-value 262144 65536 1 2
exercise chunked 3145728 262144 3 4
unmount
mount_store "$dir/a.kv"
for f in one-value chunked; do
  sum=$(digest "$mnt/$f") || exit 1
  [ "$sum" = "${sums[$f]}" ] || fail "$f differs after a remount"
done
echo "ok: the files are the same after a remount"
unmount

# Small chunks: operations span many chunks, holes and partial chunks.
mount_store "$dir/b.kv" --max-value 16384
exercise small-chunks 524288 65536 5 6
unmount
mount_store "$dir/b.kv"
sum=$(digest "$mnt/small-chunks") || exit 1
[ "$sum" = "${sums[small-chunks]}" ] ||
  fail "small-chunks differs after a remount"
echo "ok: the file is the same after a remount"
unmount
echo PASS
