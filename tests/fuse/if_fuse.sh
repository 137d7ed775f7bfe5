#!/usr/bin/env bash
# Runs its arguments when this machine can mount FUSE file systems, else
# exits 77 (CTest's "skipped"), like fuse_test.sh.
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "SKIP: no /dev/fuse or fusermount3"; exit 77
fi
exec "$@"
