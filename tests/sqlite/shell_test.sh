#!/usr/bin/env bash
# Debian's sqlite3 shell loads libpmsqlite and runs a script on a database
# in a container; a second shell sees what the first committed, ROLLBACK
# works, and `PRAGMA integrity_check` is ok after each scenario.
# Usage: shell_test.sh path/to/libpmsqlite.so   (77 = skipped: no sqlite3)
set -euo pipefail
ext=${1:?usage: shell_test.sh libpmsqlite.so}
command -v sqlite3 >/dev/null || { echo "sqlite3 not installed: skipped"; exit 77; }
dir=$(mktemp -d "${PM_TEST_DIR:-/dev/shm}/pmsqlite-shell.XXXXXX")
trap 'rm -rf "$dir"' EXIT
db="file:$dir/shop.db?vfs=pm"
ext=${ext%.so}  # .load takes the name without the suffix too

expect() {  # expect WANT GOT WHAT
  if [ "$1" != "$2" ]; then echo "FAIL: $3: want [$1], got [$2]" >&2; exit 1; fi
}
shell() { sqlite3 -batch -bail :memory: ".load $ext" ".open $db" "$@"; }

shell "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT UNIQUE, qty INTEGER);" \
      "INSERT INTO items(name, qty) VALUES('apple', 3), ('pear', 5);" \
      "BEGIN; UPDATE items SET qty = qty - 1 WHERE name = 'apple'; COMMIT;" \
      "BEGIN; DELETE FROM items; ROLLBACK;"
expect "apple|2 pear|5" "$(shell "SELECT name, qty FROM items ORDER BY id;" | tr '\n' ' ' | sed 's/ $//')" \
  "a second shell reads the committed rows"
expect ok "$(shell "PRAGMA integrity_check;")" "integrity after the first scenario"

# A script from a file: a thousand rows, an index, a failing statement
# inside a transaction (its effects undone, the transaction goes on).
cat >"$dir/script.sql" <<'SQL'
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
  INSERT INTO items(name, qty) SELECT 'item' || i, i FROM n;
CREATE INDEX by_qty ON items(qty);
COMMIT;
SQL
shell ".read $dir/script.sql"
expect "1002" "$(shell "SELECT count(*) FROM items;")" "rows after the script"
out=$(shell "INSERT INTO items(name, qty) VALUES('kiwi', 1), ('apple', 9);" 2>&1 || true)
case "$out" in *UNIQUE*) ;; *) echo "FAIL: no constraint error: $out" >&2; exit 1 ;; esac
expect "0" "$(shell "SELECT count(*) FROM items WHERE name = 'kiwi';")" "a failed statement left nothing"
expect ok "$(shell "PRAGMA integrity_check;")" "integrity after the script"

# WAL is refused with the reason; the database stays as it was.
out=$(shell "PRAGMA journal_mode=WAL;" 2>&1 || true)
case "$out" in *"not available with the pm VFS"*) ;; *) echo "FAIL: WAL: $out" >&2; exit 1 ;; esac
# An ordinary SQLite file is not opened through pm, and stays intact.
sqlite3 "$dir/plain.db" "CREATE TABLE t(x); INSERT INTO t VALUES(1);"
out=$(sqlite3 -batch -bail :memory: ".load $ext" ".open file:$dir/plain.db?vfs=pm" "SELECT * FROM t;" 2>&1 || true)
case "$out" in *"not a database"*) ;; *) echo "FAIL: plain file: $out" >&2; exit 1 ;; esac
expect 1 "$(sqlite3 "$dir/plain.db" "SELECT x FROM t;")" "the plain file is untouched"
# ... and is copied into a container with VACUUM INTO.
sqlite3 -batch -bail "$dir/plain.db" ".load $ext" "VACUUM INTO 'file:$dir/copy.db?vfs=pm';"
expect 1 "$(sqlite3 -batch :memory: ".load $ext" ".open file:$dir/copy.db?vfs=pm" "SELECT x FROM t;")" \
  "VACUUM INTO a container"
echo "sqlite3 shell: all scenarios passed"
