#!/usr/bin/env bash
# Installs the Debian packages that libpm needs to build, test and benchmark
# (librocksdb-dev and gnuplot-nox: the rocksdb engine and --plot of `pm bench kv`;
# libcuckoo-dev and libtbb-dev: its DRAM hash-table anchors; help2man: the man
# page of pm; libevent-dev: pmcached's event loop; memcached, libmemcached-tools
# and python3-pymemcache: the reference server and the clients pmcached is
# tested with; nutcracker: twemproxy, in front of a pmcached cluster;
# libsqlite3-dev and sqlite3: the SQLite port, and the shell it is tested in;
# libdb5.3-dev and liblmdb-dev: the baselines of `pm bench ordered`).
# Idempotent: asks apt only for what is missing. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      libpmem-dev libpmemobj-dev libxxhash-dev libgtest-dev
      libfmt-dev libcli11-dev nlohmann-json3-dev libboost-dev
      librocksdb-dev gnuplot-nox fuse3 libfuse3-dev
      libcuckoo-dev libtbb-dev help2man file
      libevent-dev memcached libmemcached-tools python3-pymemcache nutcracker
      libsqlite3-dev sqlite3 libdb5.3-dev liblmdb-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
