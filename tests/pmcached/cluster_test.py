#!/usr/bin/python3
"""Three pmcached instances behind twemproxy (examples/pmcached/cluster):
100k keys set through the proxy spread over every instance; one instance is
killed with SIGKILL and restarted, and every acknowledged key is found again
through the proxy.

usage: cluster_test.py PMCACHED CLUSTER_SH     (exit 77 without nutcracker or pymemcache)
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    from pymemcache.client.base import Client
except ImportError:
    print("SKIP: python3-pymemcache is not installed")
    sys.exit(77)
if shutil.which("nutcracker") is None and not os.path.exists("/usr/sbin/nutcracker"):
    print("SKIP: nutcracker (twemproxy) is not installed")
    sys.exit(77)

PMCACHED, CLUSTER = sys.argv[1], sys.argv[2]
N, KEYS = 3, 100_000


def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_ports():
    for _ in range(100):
        base = random.randrange(20000, 60000, 10)
        if all(free(base + i) for i in range(N + 3)):
            return base, base + N + 1
    raise RuntimeError("no free ports")


def main():
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    env = dict(os.environ, PMCACHED=PMCACHED,
               NUTCRACKER=shutil.which("nutcracker") or "/usr/sbin/nutcracker")
    base, proxy = pick_ports()
    fails = []
    try:
        subprocess.run([CLUSTER, "start", tmp, str(N), str(base), str(proxy)], env=env, check=True)
        c = Client(("127.0.0.1", proxy), default_noreply=False, connect_timeout=5, timeout=10)
        keys = [f"key:{i}" for i in range(KEYS)]
        for i in range(0, KEYS, 1000):
            failed = c.set_many({k: f"value-{k}".encode() for k in keys[i:i + 1000]})
            if failed:
                fails.append(f"sets refused through the proxy: {failed[:3]}")
                break
        counts = []
        for i in range(1, N + 1):
            d = Client(("127.0.0.1", base + i))
            counts.append(int(d.stats()[b"curr_items"]))
            d.close()
        print("items per instance:", counts)
        if sum(counts) != KEYS:
            fails.append(f"instances hold {sum(counts)} items, not {KEYS}")
        if min(counts) < KEYS / N / 2:
            fails.append(f"keys not spread over the instances: {counts}")
        # kill -9 one instance, restart it on its store.
        with open(os.path.join(tmp, "pm2.pid")) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        subprocess.run([CLUSTER, "restart", tmp, "2"], env=env, check=True)
        deadline = time.time() + 10
        while True:  # the proxy reconnects on its next request to it
            try:
                c.close()
                c = Client(("127.0.0.1", proxy), default_noreply=False, connect_timeout=5, timeout=10)
                got = {}
                for i in range(0, KEYS, 1000):
                    got.update(c.get_many(keys[i:i + 1000]))
                break
            except Exception as e:  # noqa: BLE001 - the proxy's error for a down server
                if time.time() > deadline:
                    raise
                print("retrying after:", e)
                time.sleep(0.2)
        missing = [k for k in keys if got.get(k) != f"value-{k}".encode()]
        if missing:
            fails.append(f"{len(missing)} acknowledged keys lost after kill -9 of an instance, "
                         f"e.g. {missing[:3]}")
        # A restart of a running instance is refused and leaves its pid file
        # (it used to succeed, record a process that had exited at once, and
        # leave the running one to outlive `stop`).
        with open(os.path.join(tmp, "pm2.pid")) as f:
            running = f.read()
        r = subprocess.run([CLUSTER, "restart", tmp, "2"], env=env, capture_output=True, text=True)
        if r.returncode == 0 or "runs already" not in r.stderr:
            fails.append(f"restart of a running instance: exit {r.returncode}, {r.stderr!r}")
        with open(os.path.join(tmp, "pm2.pid")) as f:
            if f.read() != running:
                fails.append("restart of a running instance rewrote its pid file")
    finally:
        subprocess.run([CLUSTER, "stop", tmp], env=env)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print("pmcached cluster test passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
