#!/usr/bin/env python3
"""Python's sqlite3 module on the pm VFS: loads libpmsqlite, runs a small
order-book application, and checks rollbacks, a second connection, a
killed writer, and PRAGMA integrity_check after every scenario.

Usage: python_test.py path/to/libpmsqlite.so   (exit 77: skipped)
"""
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

EXT = os.path.splitext(sys.argv[1])[0]


def load_vfs():
    probe = sqlite3.connect(":memory:")
    if not hasattr(probe, "enable_load_extension"):
        print("this Python's sqlite3 cannot load extensions: skipped")
        sys.exit(77)
    probe.enable_load_extension(True)
    probe.load_extension(EXT)  # registers "pm" for the whole process
    probe.close()


def connect(path, **kw):
    return sqlite3.connect(f"file:{path}?vfs=pm", uri=True, **kw)


def check(con, what):
    got = con.execute("PRAGMA integrity_check").fetchone()[0]
    assert got == "ok", f"{what}: integrity_check says {got}"


def order_book(path):
    con = connect(path)
    with con:
        con.executescript("""
            CREATE TABLE products(sku TEXT PRIMARY KEY, stock INTEGER CHECK (stock >= 0));
            CREATE TABLE orders(id INTEGER PRIMARY KEY, sku TEXT REFERENCES products, qty INTEGER);
        """)
        con.executemany("INSERT INTO products VALUES(?, ?)", [(f"sku{i}", 100) for i in range(200)])

    def place(sku, qty):
        with con:  # one transaction: commits, or rolls back on an exception
            con.execute("INSERT INTO orders(sku, qty) VALUES(?, ?)", (sku, qty))
            con.execute("UPDATE products SET stock = stock - ? WHERE sku = ?", (qty, sku))

    rng = random.Random(5)
    placed = refused = 0
    for _ in range(3000):
        try:
            place(f"sku{rng.randrange(200)}", rng.randrange(1, 9))
            placed += 1
        except sqlite3.IntegrityError:  # out of stock: the order is rolled back too
            refused += 1
    assert refused > 0, "the workload never ran out of stock"
    sold = con.execute("SELECT coalesce(sum(qty), 0) FROM orders").fetchone()[0]
    stock = con.execute("SELECT sum(stock) FROM products").fetchone()[0]
    assert sold + stock == 200 * 100, (sold, stock)
    assert con.execute("SELECT count(*) FROM orders").fetchone()[0] == placed
    check(con, "order book")
    con.close()

    # Reopened, with a second connection reading while the first writes.
    a, b = connect(path), connect(path, timeout=0)
    assert b.execute("SELECT count(*) FROM orders").fetchone()[0] == placed
    a.execute("BEGIN")
    a.execute("DELETE FROM orders")
    a.rollback()
    assert b.execute("SELECT count(*) FROM orders").fetchone()[0] == placed
    check(b, "after a rollback")
    a.close()
    b.close()
    print(f"order book: {placed} orders placed, {refused} refused")


WRITER = r"""
import sqlite3, sys
probe = sqlite3.connect(":memory:"); probe.enable_load_extension(True)
probe.load_extension(sys.argv[1])
con = sqlite3.connect(f"file:{sys.argv[2]}?vfs=pm", uri=True, isolation_level=None)
n = con.execute("SELECT count(*) FROM log").fetchone()[0]
while True:
    con.execute("BEGIN")
    con.execute("INSERT INTO log VALUES(?, randomblob(2000))", (n + 1,))
    con.execute("UPDATE counter SET n = n + 1")
    con.execute("COMMIT")
    n += 1
    print(n, flush=True)
"""


def killed_writers(path, rounds=10):
    con = connect(path)
    with con:
        con.executescript("CREATE TABLE log(n INTEGER PRIMARY KEY, pad BLOB);"
                          "CREATE TABLE counter(n INTEGER); INSERT INTO counter VALUES(0);")
    con.close()
    acked = 0
    for r in range(rounds):
        child = subprocess.Popen([sys.executable, "-c", WRITER, EXT, path], stdout=subprocess.PIPE, text=True)
        for _ in range(random.Random(r).randrange(5, 200)):
            line = child.stdout.readline()
            if not line:
                break
            acked = int(line)
        child.send_signal(signal.SIGKILL)
        for line in child.stdout:
            acked = int(line)
        child.wait()
        con = connect(path)
        check(con, f"kill round {r}")
        rows = con.execute("SELECT count(*) FROM log").fetchone()[0]
        counter = con.execute("SELECT n FROM counter").fetchone()[0]
        assert rows == counter, f"round {r}: {rows} rows but counter {counter}"
        assert rows in (acked, acked + 1), f"round {r}: acknowledged {acked}, found {rows}"
        acked = rows
        con.close()
    print(f"killed writers: {rounds} kills, {acked} transactions kept")


def main():
    load_vfs()
    base = os.environ.get("PM_TEST_DIR", "/dev/shm" if os.path.isdir("/dev/shm") else None)
    with tempfile.TemporaryDirectory(dir=base) as d:
        order_book(os.path.join(d, "shop.db"))
        killed_writers(os.path.join(d, "log.db"))
    print("python sqlite3: all scenarios passed")


if __name__ == "__main__":
    main()
