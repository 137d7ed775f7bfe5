#!/usr/bin/env bash
# Installs a build into a staging prefix and builds two consumers outside the
# tree against it, as a user of the installed library would: a C program
# through pkg-config, a C++ program through find_package(libpm CONFIG) (shared
# and static). Then builds the Debian package and checks what it holds.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d /tmp/pm-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
stage=$work/stage

step() { echo "== $*"; }
step "cmake --install into $stage"
cmake --install "$build" --prefix "$stage" >/dev/null
libdir=$(cd "$stage" && dirname "$(find . -name libpm.pc)")
libdir=$stage/${libdir#./}
libdir=${libdir%/pkgconfig}
export PKG_CONFIG_PATH=$libdir/pkgconfig
for f in "$stage/bin/pm" "$stage/include/pm.h" "$stage/include/kv/kv.h" \
         "$libdir/libpm.so.0" "$libdir/libpmkv.so.0" "$libdir/libpm.a" "$libdir/libpmkv.a" \
         "$libdir/cmake/libpm/libpmConfig.cmake"; do
  [ -e "$f" ] || { echo "missing after install: $f" >&2; exit 1; }
done
"$stage/bin/pm" --version | grep -q "^pm (libpm) [0-9]" || { echo "pm --version" >&2; exit 1; }
# pm bench fuse's baselines go with pm (an installed pm found them only in the build tree).
if [ -x "$build/tools/fuse_passthrough" ] && [ ! -x "$stage/libexec/libpm/fuse_passthrough" ]; then
  echo "missing after install: $stage/libexec/libpm/fuse_passthrough" >&2; exit 1
fi
objdump -p "$libdir/libpm.so" | grep -q "SONAME *libpm.so.0" || { echo "libpm.so: no SONAME" >&2; exit 1; }

step "C consumer through pkg-config ($(pkg-config --modversion libpm-kv))"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer_c" "$src/tests/install/consumer.c" \
  $(pkg-config --cflags --libs libpm-kv)
LD_LIBRARY_PATH=$libdir "$work/consumer_c" "$work/c.pm" "$work/c.kv"
step "C consumer with a run path to the prefix, as-needed linking, no LD_LIBRARY_PATH"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -Wl,--as-needed -Wl,-rpath,"$libdir" -o "$work/consumer_kv" \
  "$src/tests/install/consumer_kv.c" $(pkg-config --cflags --libs libpm-kv)
env -u LD_LIBRARY_PATH "$work/consumer_kv" "$work/ckv.kv"
step "C consumer, static, through pkg-config --static"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer_c_static" "$src/tests/install/consumer.c" \
  $(pkg-config --cflags libpm-kv) -L"$libdir" -Wl,-Bstatic -lpmkv -lpm -Wl,-Bdynamic \
  $(pkg-config --static --libs-only-l libpm-kv | sed 's/-lpmkv//; s/-lpm\b//')
ldd "$work/consumer_c_static" | grep -q "libpm\.so" && { echo "static consumer links libpm.so" >&2; exit 1; }
"$work/consumer_c_static" "$work/cs.pm" "$work/cs.kv"

step "C++ consumer through pkg-config, as README shows it"
# shellcheck disable=SC2046
c++ -std=c++20 -Wall -Werror -o "$work/consumer_cc_pc" "$src/tests/install/consumer.cc" \
  $(pkg-config --cflags --libs libpm-kv)
LD_LIBRARY_PATH=$libdir "$work/consumer_cc_pc" "$work/cpc.pm" "$work/cpc.kv"

step "C consumer through find_package(libpm CONFIG), a project without C++"
cmake -S "$src/tests/install/c" -B "$work/c" -G Ninja -DCMAKE_PREFIX_PATH="$stage" >/dev/null
cmake --build "$work/c" >/dev/null
"$work/c/consumer_kv_shared" "$work/cks.kv"
"$work/c/consumer_kv_static" "$work/ckst.kv"

step "C++ consumer through find_package(libpm CONFIG)"
cmake -S "$src/tests/install/cpp" -B "$work/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$stage" >/dev/null
cmake --build "$work/cpp" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/cpp/consumer_shared" "$work/cpp.pm" "$work/cpp.kv"
"$work/cpp/consumer_static" "$work/cpps.pm" "$work/cpps.kv"

if [ -e "$build/examples/sqlite/libpmsqlite.so" ]; then
  step "the SQLite extension, installed, in Debian's sqlite3 shell"
  [ -e "$libdir/libpmsqlite.so" ] || { echo "missing after install: $libdir/libpmsqlite.so" >&2; exit 1; }
  [ -e "$stage/include/pmsqlite/vfs.h" ] || { echo "missing after install: pmsqlite/vfs.h" >&2; exit 1; }
  if command -v sqlite3 >/dev/null; then
    db="file:$work/s.db?vfs=pm"
    sqlite3 -batch -bail :memory: ".load $libdir/libpmsqlite" ".open $db" "CREATE TABLE t(x); INSERT INTO t VALUES(42);"
    got=$(sqlite3 -batch -bail :memory: ".load $libdir/libpmsqlite" ".open $db" "SELECT x FROM t;")
    [ "$got" = 42 ] || { echo "installed libpmsqlite: got [$got]" >&2; exit 1; }
  fi
  if [ -e /usr/include/sqlite3.h ]; then
    step "the SQLite extension, installed, loaded by a C program"
    cc -std=c11 -Wall -Werror -I"$stage/include" -o "$work/sqlite_consumer" \
      "$src/tests/install/sqlite_consumer.c" -L"$libdir" -lpmsqlite -lsqlite3 -Wl,-rpath,"$libdir"
    "$work/sqlite_consumer" "$libdir/libpmsqlite" "$work/c.db"
  fi
fi

if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  step "Debian package (cpack -G DEB)"
  (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >/dev/null)
  deb=$(ls "$work"/libpm_*.deb)
  dpkg-deb -c "$deb" > "$work/deb.list"
  want=(./usr/bin/pm ./usr/include/pm.h libpm.so.0 libpmkv.so.0 pkgconfig/libpm.pc
        cmake/libpm/libpmConfig.cmake)
  [ -e "$build/examples/sqlite/libpmsqlite.so" ] && want+=(libpmsqlite.so)
  [ -e "$build/pm.1" ] && want+=(./usr/share/man/man1/pm.1)  # (built where help2man is)
  for f in "${want[@]}"; do
    grep -q -- "$f" "$work/deb.list" || { echo "$(basename "$deb") lacks $f" >&2; exit 1; }
  done
  dpkg-deb -f "$deb" Depends | grep -q libpmem || { echo "$(basename "$deb"): no libpmem dependency" >&2; exit 1; }
  dpkg-deb -x "$deb" "$work/deb"
  "$work/deb/usr/bin/pm" --version
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
fi
echo "install test: ok"
