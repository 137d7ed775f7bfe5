#!/usr/bin/python3
"""pmcached driven by pymemcache (Debian python3-pymemcache) and raw sockets.

Every scenario runs against pmcached and, when it is installed, against
Debian's memcached 1.6 as the reference: a scenario returns what it observed,
and the two observations must be equal, so a difference in behaviour shows
as a failing comparison. Then pmcached alone: kill -9 and restart lose no
acknowledged item (flags, expiry and CAS included), a clean stop leaves no log
to replay, bad input gets the protocol's errors and the server stays up.

usage: pymemcache_test.py PMCACHED [MEMCACHED]
       pymemcache_test.py --memcapable PMCACHED   (libmemcached's conformance suite)
Exit 77 (skipped) when pymemcache or memcapable is not installed.
"""
import hashlib
import os
import shutil
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

MEMCAPABLE = sys.argv[1] == "--memcapable"
if MEMCAPABLE:
    sys.argv.pop(1)
try:
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheServerError
except ImportError:
    if not MEMCAPABLE:
        print("SKIP: python3-pymemcache is not installed")
        sys.exit(77)

PMCACHED = sys.argv[1]
MEMCACHED = sys.argv[2] if len(sys.argv) > 2 else shutil.which("memcached")
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, wanted {want!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


RUNNING = []


class Server:
    def __init__(self, argv, port):
        self.port = port
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        RUNNING.append(self.proc)
        wait_for(port, self.proc)

    def client(self):
        return Client(("127.0.0.1", self.port), default_noreply=False, connect_timeout=5, timeout=10)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read().decode()


def start_pmcached(store, *extra):
    port = free_port()
    threads = [] if "-t" in extra else ["-t", "2"]
    return Server([PMCACHED, store, "-p", str(port), *threads, *extra], port)


def start_memcached():
    port = free_port()
    user = ["-u", "nobody"] if os.geteuid() == 0 else []
    return Server([MEMCACHED, "-p", str(port), "-U", "0", "-l", "127.0.0.1", "-t", "2", *user], port)


def raw(port, data, closes=False, timeout=20):
    """Sends bytes, returns every byte the server answered. A request that
    leaves the connection open is followed by a meta no-op (mn), and the
    reply is complete at its MN: no guessing from a quiet period, which a
    slow (sanitizer) build under load would break. One that closes it
    (quit, a line too long) is read until the close."""
    if not closes:
        want = data.count(b"mn\r\n") + 1
        data += b"mn\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # A request the server closes on (a line too long) may be cut
            # off while it is still being sent: 20 KB do not fit a fresh
            # socket's send buffer, and the server closes after 8 KB.
            if not closes:
                raise
        s.settimeout(timeout)
        out = b""
        try:
            while closes or out.count(b"MN\r\n") < want:
                d = s.recv(1 << 20)
                if not d:
                    return out + b"<closed>"
                out += d
        except socket.timeout:
            return out + b"<timeout>"
        except ConnectionResetError:  # closed with our bytes unread
            return out + b"<closed>"
        return out[:-len(b"MN\r\n")]


def half_closed(port, data, timeout=20, digest=False):
    """Sends bytes, shuts the socket for writing (as `nc -N` does), and
    returns everything the server sends until it closes (with digest, only
    how many bytes and their SHA-256: replies of hundreds of MB)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(timeout)
        out = bytearray()   # bytes += would copy all that came before: 300 MB, quadratic
        n, h = 0, hashlib.sha256()
        while True:
            d = s.recv(1 << 20)
            if not d:
                return (n, h.hexdigest()) if digest else bytes(out)
            if digest:
                n += len(d)
                h.update(d)
            else:
                out += d


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def pipelined_gets_stay_bounded(tmp):
    """300 gets of a 1 MB item in one 2.7 KB write, then one get naming it
    300 times, from four clients at once: the server makes the replies as
    they are sent, not 300 MB of them at once per client."""
    s = start_pmcached(os.path.join(tmp, "pipe.kv"))
    c = s.client()
    c.set("big", b"b" * 1000000)
    before = peak_rss_mib(s.proc.pid)
    requests = [b"get big\r\n" * 300, b"get" + b" big" * 300 + b"\r\n"] * 2
    got = [None] * len(requests)
    def fetch(i):
        got[i] = half_closed(s.port, requests[i], timeout=120, digest=True)
    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reply = b"VALUE big 0 1000000\r\n" + b"b" * 1000000 + b"\r\n"
    def want(parts):
        h = hashlib.sha256()
        for p in parts:
            h.update(p)
        return sum(map(len, parts)), h.hexdigest()
    check("300 pipelined gets of 1 MB: every reply", got[0], want([reply + b"END\r\n"] * 300))
    check("a get of 300 values of 1 MB: the whole reply", got[1], want([reply] * 300 + [b"END\r\n"]))
    check("four clients: the same replies", got[0] == got[2] and got[1] == got[3], True)
    grew = peak_rss_mib(s.proc.pid) - before
    with open(f"/proc/{s.proc.pid}/maps") as f:
        sanitized = any("libasan" in line or "libtsan" in line for line in f)
    if sanitized:   # freed memory waits in the sanitizer's quarantine: RSS says nothing
        print(f"note: sanitizer build; peak RSS grew by {grew} MiB (not checked)")
    else:
        check(f"1.2 GB of replies to four clients: peak RSS grew by {grew} MiB (< 100)",
              grew < 100, True)
    s.stop()


def a_long_reply_shares_its_worker(tmp):
    """One worker thread: a get of 1,000 values of 1 MB, read as fast as
    the client can, does not hold the worker's other connections until it
    ends (the socket takes each part at once, so nothing else ever made
    the server stop between parts)."""
    s = start_pmcached(os.path.join(tmp, "share.kv"), "-t", "1")
    c = s.client()
    c.set("big", b"b" * 1000000)
    c.set("x", b"y")
    whole = 1000 * len(b"VALUE big 0 1000000\r\n" + b"b" * 1000000 + b"\r\n") + 5
    received = [0]
    def fetch():
        with socket.create_connection(("127.0.0.1", s.port)) as so:
            so.sendall(b"get" + b" big" * 1000 + b"\r\n")
            so.settimeout(120)
            while received[0] < whole:
                d = so.recv(1 << 20)
                if not d:
                    break
                received[0] += len(d)
    t = threading.Thread(target=fetch)
    t.start()
    while received[0] < 20000000 and t.is_alive():
        time.sleep(0.001)
    got = c.get("x")
    streaming = received[0] < whole
    t.join()
    check("a get beside a 1 GB reply on the same worker: served", got, b"y")
    check("a get beside a 1 GB reply on the same worker: before the reply ends", streaming, True)
    check("the 1 GB reply, whole", received[0], whole)
    s.stop()


# ---------------------------------------------------------------- scenarios
# Each returns a list of observations; pmcached's must equal memcached's.

def scenario_storage(c, port):
    obs = []
    obs.append(c.set("k", b"v1", flags=7))
    obs.append(c.get("k"))
    obs.append(c.add("k", b"x"))                 # exists: NOT_STORED
    obs.append(c.add("new", b"n", flags=3))
    obs.append(c.replace("missing", b"x"))       # NOT_STORED
    obs.append(c.replace("k", b"v2", flags=9))
    obs.append(c.append("k", b"-tail"))
    obs.append(c.prepend("k", b"head-"))
    obs.append(c.append("missing", b"x"))
    obs.append(c.get("k"))
    obs.append(raw(port, b"get k new missing\r\n"))  # flags and sizes as sent
    obs.append(c.get_many(["k", "new", "missing"]))
    obs.append(c.delete("new"))
    obs.append(c.delete("new"))
    obs.append(raw(port, b"set nr 0 0 1 noreply\r\na\r\nget nr\r\n"))
    obs.append(raw(port, b"set e 0 0 0\r\n\r\nget e\r\n"))   # empty value
    return obs


def scenario_cas(c, port):
    obs = []
    c.set("c", b"1")
    v, cas = c.gets("c")
    obs.append(v)
    obs.append(c.cas("c", b"2", cas))            # STORED
    obs.append(c.cas("c", b"3", cas))            # EXISTS: stale unique
    obs.append(c.cas("nope", b"3", cas))         # NOT_FOUND
    v2, cas2 = c.gets("c")
    obs.append((v2, cas2 != cas))
    c.touch("c", 100)
    obs.append(c.gets("c")[1] == cas2)           # touch keeps the unique
    obs.append(raw(port, b"cas c 0 0 1 bad\r\nx\r\n"))
    return obs


def scenario_counters(c, port):
    obs = []
    c.set("n", b"10")
    obs.append(c.incr("n", 5))
    obs.append(c.decr("n", 100))                 # stops at 0
    obs.append(c.get("n"))                        # memcached pads with spaces
    c.set("big", b"18446744073709551615")
    obs.append(c.incr("big", 2))                  # wraps at 2^64
    obs.append(c.incr("missing", 1))
    c.set("text", b"abc")
    obs.append(raw(port, b"incr text 1\r\n"))
    obs.append(raw(port, b"incr n -1\r\n"))
    obs.append(raw(port, b"incr n 1 noreply\r\nget n\r\n"))
    return obs


def scenario_expiry(c, port):
    obs = []
    obs.append(c.set("neg", b"x", expire=-1))     # expired at once
    obs.append(c.get("neg"))
    obs.append(c.set("past", b"x", expire=int(time.time()) - 100000))  # absolute, past
    obs.append(c.get("past"))
    obs.append(c.set("future", b"x", expire=int(time.time()) + 100000))
    obs.append(c.get("future"))
    obs.append(c.set("short", b"x", expire=1))
    obs.append(c.set("touched", b"x", expire=1))
    obs.append(c.touch("touched", 100))
    obs.append(c.touch("missing", 100))
    obs.append(raw(port, b"gat 100 short touched missing\r\n"))
    obs.append(raw(port, b"set g 5 0 1\r\nx\r\ngats 100 g\r\n").split(b" ")[:4])
    time.sleep(2.2)
    obs.append(c.get("short"))                    # gat gave it 100 s
    c.set("soon", b"x", expire=1)
    time.sleep(2.2)
    obs.append(c.get("soon"))
    return obs


def scenario_flush(c, port):
    obs = []
    c.set("a", b"1")
    c.set("b", b"2")
    obs.append(c.flush_all())
    obs.append(c.get_many(["a", "b"]))
    obs.append(c.set("a", b"after"))
    obs.append(c.get("a"))
    obs.append(raw(port, b"flush_all noreply\r\nget a\r\n"))
    c.set("d", b"1")
    obs.append(raw(port, b"flush_all 2\r\nget d\r\n"))
    time.sleep(3.1)
    obs.append(c.get("d"))
    # A flush now replaces a delayed one still to come.
    obs.append(raw(port, b"flush_all 2\r\nflush_all\r\nset e 0 0 1\r\nx\r\n"))
    time.sleep(2.2)
    obs.append(c.get("e"))
    return obs


def scenario_large(c, port):
    obs = []
    # memcached's -I (1 MiB) bounds the item with its header; ours the value:
    # the two agree below and above the boundary.
    big = bytes(range(250)) * 4000
    obs.append(c.set("big", big))
    obs.append(c.get("big") == big)
    try:
        c.set("huge", b"x" * ((1 << 20) + 1))
        obs.append("stored")
    except MemcacheServerError as e:
        obs.append(str(e))
    obs.append(raw(port, b"set huge 0 0 2000000\r\n" + b"x" * 2000000 + b"\r\nget big1\r\n"))
    # A set too large to store removes the value it would have replaced.
    c.set("stale", b"old")
    obs.append(raw(port, b"set stale 0 0 2000000\r\n" + b"x" * 2000000 + b"\r\nget stale\r\n"))
    # A client that half-closes after its requests still gets every reply.
    obs.append(half_closed(port, b"get big\r\n" * 3) == (b"VALUE big 0 1000000\r\n" + big + b"\r\nEND\r\n") * 3)
    obs.append(c.get("k" * 250) is None)
    return obs


def scenario_bad_input(c, port):
    obs = []
    obs.append(raw(port, b"bogus\r\n"))
    obs.append(raw(port, b"\r\n"))
    obs.append(raw(port, b"set k 0 0 3\r\nabcde\r\n"))          # longer than declared
    obs.append(raw(port, b"set k 0 0 -1\r\n"))
    obs.append(raw(port, b"set k abc 0 1\r\nx\r\n"))
    obs.append(raw(port, b"set " + b"k" * 251 + b" 0 0 1\r\nx\r\n"))
    obs.append(raw(port, b"get " + b"k" * 251 + b"\r\n"))
    obs.append(raw(port, b"delete k 1\r\n"))
    obs.append(raw(port, b"touch k abc\r\n"))
    obs.append(raw(port, b"get\r\n"))
    obs.append(raw(port, b"quit\r\n", closes=True))
    obs.append(raw(port, b"x" * 20000, closes=True))            # no newline: closed
    obs.append(c.set("still", b"up"))                           # and the server lives
    return obs


def scenario_misc(c, port):
    obs = []
    obs.append(raw(port, b"verbosity 1\r\nverbosity 1 noreply\r\nmn\r\n"))
    s = c.stats()
    obs.append(sorted(k for k in [b"curr_items", b"bytes", b"get_hits", b"get_misses", b"evictions",
                                  b"curr_connections", b"uptime", b"cmd_get", b"cmd_set",
                                  b"total_items", b"limit_maxbytes", b"threads"] if k in s))
    obs.append(raw(port, b"stats reset\r\n"))
    obs.append(raw(port, b"stats nosuchthing\r\n"))
    obs.append(c.version().startswith(b"1.6"))
    return obs


def scenario_meta(c, port):
    """The meta protocol, compared with memcached byte for byte (no CAS
    values: they differ between servers)."""
    obs = []
    obs.append(raw(port, b"ms m1 2 F5 T0\r\nhi\r\nmg m1 v f s t k Oab\r\n"))
    obs.append(raw(port, b"mg missing v\r\nmg missing v q\r\nmn\r\n"))
    obs.append(raw(port, b"mg missing k O123 v\r\nmg missing Oxy k\r\n"))
    obs.append(raw(port, b"ms m2 1 q\r\nx\r\nms m2 1 ME\r\ny\r\nms m3 1 MR\r\ny\r\nmn\r\n"))
    obs.append(raw(port, b"ms m2 1 MA\r\nz\r\nms m2 1 MP\r\na\r\nmg m2 v\r\n"))
    obs.append(raw(port, b"ms m4 1 C999999\r\nx\r\nmd m2 C999999\r\nmd m2 q\r\nmd m2\r\nmn\r\n"))
    obs.append(raw(port, b"ma cnt\r\nma cnt N0 J10\r\nma cnt v\r\nma cnt MD D20 v\r\nma cnt q\r\nmn\r\n"))
    obs.append(raw(port, b"ms t1 1 T100\r\nx\r\nmg t1 t v\r\nmg t1 T-1\r\nmg t1 v\r\n"))
    obs.append(raw(port, b"mg m1 Z\r\nms m5 abc\r\nma m1\r\n"))
    c.set("casd", b"v")
    _, cas = c.gets("casd")
    obs.append(raw(port, b"md casd C" + cas + b"\r\nmg casd v\r\n"))
    return obs


SCENARIOS = [scenario_storage, scenario_cas, scenario_counters, scenario_expiry, scenario_flush,
             scenario_large, scenario_bad_input, scenario_misc, scenario_meta]


def run_scenarios(server):
    results = {}
    for sc in SCENARIOS:
        print(f"  {sc.__name__}", file=sys.stderr, flush=True)
        c = server.client()
        c.flush_all()
        results[sc.__name__] = sc(c, server.port)
        c.close()
    return results


def compare(ours, ref):
    for name in ours:
        for i, (a, b) in enumerate(zip(ours[name], ref[name])):
            check(f"{name}[{i}] pmcached vs memcached", a, b)


# ---------------------------------------------------------------- pmcached only

def restart_keeps_acknowledged(tmp):
    store = os.path.join(tmp, "restart.kv")
    s = start_pmcached(store)
    c = s.client()
    n = 2000
    uniques = {}
    for i in range(n):
        c.set(f"key{i}", f"value{i}".encode(), flags=i, expire=0 if i % 2 else 100000)
    for i in range(0, n, 97):
        uniques[i] = c.gets(f"key{i}")[1]
    c.delete("key5")
    c.incr("nope", 1)
    c.set("counter", b"41")
    c.incr("counter", 1)
    code, _ = s.stop(signal.SIGKILL)
    check("kill -9", code, -signal.SIGKILL)
    s = start_pmcached(store)
    c = s.client()
    got = c.get_many([f"key{i}" for i in range(n)])
    check("items after kill -9", len(got), n - 1)
    check("a deleted key stays deleted", c.get("key5"), None)
    check("incr survives", c.get("counter"), b"42")
    bad = [i for i in range(n) if i != 5 and got.get(f"key{i}") != f"value{i}".encode()]
    check("values after kill -9", bad, [])
    for i, u in uniques.items():
        if i != 5:
            check(f"cas unique of key{i} after kill -9", c.gets(f"key{i}")[1], u)
    raw_flags = raw(s.port, b"get key7 key8\r\n")
    check("flags after kill -9", raw_flags,
          b"VALUE key7 7 6\r\nvalue7\r\nVALUE key8 8 6\r\nvalue8\r\nEND\r\n")
    # A new unique is never one handed out before the crash.
    c.set("fresh", b"x")
    check("new uniques are new", int(c.gets("fresh")[1]) > max(int(u) for u in uniques.values()), True)
    code, err = s.stop()
    check("SIGTERM exit code", code, 0)
    # A clean stop checkpoints: the next start replays no log record.
    s = start_pmcached(store, "-v")
    time.sleep(0.3)
    code, err = s.stop()
    check("clean stop leaves no log to replay", "replayed 0 log records" in err, True)


def kill_under_load(tmp, rounds=3):
    """kill -9 while four clients write: every acknowledged write is found
    after the restart (its value or a later one of the same writer)."""
    store = os.path.join(tmp, "load.kv")
    acked = {}  # key -> last acknowledged sequence number
    lock = threading.Lock()
    for r in range(rounds):
        s = start_pmcached(store)
        stop = threading.Event()

        def writer(w):
            c = s.client()
            i = 0
            try:
                while not stop.is_set():
                    key = f"w{w}-{i % 500}"
                    if c.set(key, f"{r}:{i}".encode()):
                        with lock:
                            acked[key] = (r, i)
                    i += 1
            except Exception:
                pass  # the server died under us

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5 + 0.3 * r)
        s.proc.kill()
        stop.set()
        for t in threads:
            t.join()
        s.proc.wait()
        s = start_pmcached(store)
        c = s.client()
        with lock:
            keys = list(acked.items())
        got = c.get_many([k for k, _ in keys])
        lost = []
        for k, (rr, i) in keys:
            v = got.get(k)
            seen = tuple(int(x) for x in v.split(b":")) if v else None
            if seen is None or seen < (rr, i):
                lost.append((k, (rr, i), seen))
        check(f"kill -9 under load, round {r}: acknowledged writes lost", lost[:5], [])
        s.stop()


def eviction_under_memory_limit(tmp):
    s = start_pmcached(os.path.join(tmp, "evict.kv"), "-m", "2")
    c = s.client()
    value = b"v" * 1000
    for i in range(6000):                       # ~6 MB into a 2 MiB cache
        check(f"set {i} under -m 2", c.set(f"e{i}", value), True)
    st = c.stats()
    check("evictions happened", st[b"evictions"] > 0, True)
    check("bytes within the limit", st[b"bytes"] <= 2 << 20, True)
    check("recent items stay", c.get("e5999"), value)
    s.stop()
    s = start_pmcached(os.path.join(tmp, "noevict.kv"), "-m", "1", "-I", "256k", "-M")
    c = s.client()
    outcome = None
    for i in range(3000):
        try:
            c.set(f"e{i}", value)
        except MemcacheServerError as e:
            outcome = "out of memory storing object" in str(e)
            break
    check("-M: a full cache refuses writes with memcached's error", outcome, True)
    s.stop()


def many_connections(tmp):
    s = start_pmcached(os.path.join(tmp, "conns.kv"), "-c", "50")
    # The start-up probe's close may still be on its way to the server: hold
    # one connection that sees itself as the only one, and open 59 beside it.
    first = s.client()
    deadline = time.time() + 10
    while first.stats()[b"curr_connections"] != 1 and time.time() < deadline:
        time.sleep(0.05)
    socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(59)]
    time.sleep(0.3)
    # Several workers accept from one socket, so which ten are refused is
    # not fixed; that exactly ten are is.
    rejected, pending = 0, list(socks)
    deadline = time.time() + 5
    while rejected < 10 and time.time() < deadline:
        readable, _, _ = select.select(pending, [], [], 0.2)
        for so in readable:
            pending.remove(so)
            if so.recv(100).startswith(b"ERROR Too many open connections"):
                rejected += 1
    time.sleep(0.2)                             # an eleventh would show now
    readable, _, _ = select.select(pending, [], [], 0)
    rejected += sum(1 for so in readable if so.recv(100).startswith(b"ERROR Too many"))
    check("connections over -c are refused with memcached's message", rejected, 10)
    for so in socks:
        so.close()
    first.close()
    served, deadline = None, time.time() + 10   # once the closes have reached it
    while served is None:
        try:
            c = s.client()
            served = c.set("x", b"y")
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    check("the server serves after", served, True)
    # A client that sends but never reads: the server stops reading it and
    # keeps serving others.
    hog = socket.create_connection(("127.0.0.1", s.port))
    c.set("v", b"z" * 100000)
    hog.setblocking(False)
    sent = 0
    try:
        for _ in range(2000):
            sent += hog.send(b"get v\r\n" * 100)
    except BlockingIOError:
        pass
    check("a client that never reads does not stall others", c.get("x"), b"y")
    hog.close()
    s.stop()


MEMCACHED_TOOL = "/usr/share/memcached/scripts/memcached-tool"  # (Debian's memcached)


def dumps_with_tools_nobody_here_wrote(tmp):
    """memcached-tool's dump (lru_crawler metadump, then a get per key) and
    keys, and libmemcached's memcdump (stats cachedump): every item, and the
    dump restores them into another server."""
    a = start_pmcached(os.path.join(tmp, "dump_a.kv"))
    c = a.client()
    want = {}
    for i in range(300):
        key = f"user:{i}" if i % 3 else f"k%{i}"
        value = (b"v%d-" % i) * (1 + i % 40)
        c.set(key, value, expire=0 if i % 2 else 1000, flags=i % 7)
        want[key] = (value, i % 7)
    tool, perl = MEMCACHED_TOOL, shutil.which("perl")
    if os.path.exists(tool) and perl:
        addr = f"127.0.0.1:{a.port}"
        keys = subprocess.run([perl, tool, addr, "keys"], capture_output=True, timeout=60)
        listed = {urllib.parse.unquote(line.split(" ", 1)[0][4:])
                  for line in keys.stdout.decode().splitlines() if line.startswith("key=")}
        check("memcached-tool keys lists every key", listed, set(want))
        dump = subprocess.run([perl, tool, addr, "dump"], capture_output=True, timeout=60).stdout
        check("memcached-tool dump writes an add per item", dump.count(b"add "), len(want))
        b = start_pmcached(os.path.join(tmp, "dump_b.kv"))
        replies = raw(b.port, dump)
        check("the dump restores into another server", replies.count(b"STORED\r\n"), len(want))
        # The same replies (values and flags) from both, and the expiries.
        ttls_ok = True
        for i, key in enumerate(want):
            request = f"get {key}\r\n".encode()
            check(f"{key} restored", raw(b.port, request), raw(a.port, request))
            ttl = int(raw(b.port, f"mg {key} t\r\n".encode()).split(b" t", 1)[1].split()[0])
            ttls_ok &= ttl == -1 if i % 2 else 900 <= ttl <= 1000  # (slow builds)
        check("the dump keeps the expiries", ttls_ok, True)
        b.stop()
    else:
        print("note: memcached-tool (Debian's memcached) or perl missing: not run")
    memcdump = shutil.which("memcdump")
    if memcdump:
        r = subprocess.run([memcdump, f"--servers=127.0.0.1:{a.port}"], capture_output=True,
                           timeout=60)
        check("memcdump lists every key", set(r.stdout.decode().split()), set(want))
    a.stop()


def stats_conns(tmp):
    """stats conns as memcached prints it: the listening socket, then each
    connection (its address, the listening address, a state)."""
    s = start_pmcached(os.path.join(tmp, "conns_list.kv"))
    idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(2)]
    for c in idle:  # served once: its worker has registered it
        c.settimeout(20)
        c.sendall(b"mn\r\n")
        check("an idle connection is served", c.recv(100), b"MN\r\n")
    asker = socket.create_connection(("127.0.0.1", s.port))
    asker.sendall(b"stats conns\r\n")
    out = b""
    asker.settimeout(20)
    while not out.endswith(b"END\r\n"):
        d = asker.recv(1 << 16)
        if not d:
            break
        out += d
    lines = out.decode().splitlines()[:-1]
    rows = {}
    for line in lines:
        _, name, value = line.split(" ", 2)
        fd, field = name.split(":", 1)
        rows.setdefault(fd, {})[field] = value
    me = "tcp:127.0.0.1:%d" % asker.getsockname()[1]
    listening = [r for r in rows.values() if r.get("state") == "conn_listening"]
    clients = {r["addr"]: r for r in rows.values() if "listen_addr" in r}
    check("stats conns: one listening socket", len(listening), 1)
    check("stats conns: every connection",
          {"tcp:127.0.0.1:%d" % c.getsockname()[1] for c in idle + [asker]} <= set(clients), True)
    check("stats conns: the asker is running its command", clients.get(me, {}).get("state"),
          "conn_parse_cmd")
    check("stats conns: every line well formed",
          all(set(r) <= {"addr", "listen_addr", "state", "secs_since_last_cmd"} for r in rows.values()),
          True)
    for c in idle + [asker]:
        c.close()
    s.stop()


def memcapable():
    """libmemcached's memcapable (Debian names it memccapable): its ascii
    and binary tests."""
    tool = shutil.which("memccapable") or shutil.which("memcapable")
    if tool is None:
        print("SKIP: memcapable (libmemcached-tools) is not installed")
        return 77
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        s = start_pmcached(os.path.join(tmp, "capable.kv"))
        r = subprocess.run([tool, "-h", "127.0.0.1", "-p", str(s.port), "-t", "10"],
                           capture_output=True, text=True, timeout=300)
        print(r.stdout + r.stderr)
        code, _ = s.stop()
    finally:
        for p in RUNNING:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    ok = r.returncode == 0 and "All tests passed" in r.stdout and code == 0
    return 0 if ok else 1


def main():
    if MEMCAPABLE:
        return memcapable()
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        ours = start_pmcached(os.path.join(tmp, "cache.kv"))
        mine = run_scenarios(ours)
        code, err = ours.stop()
        check("pmcached exit after SIGTERM", code, 0)
        if MEMCACHED:
            ref = start_memcached()
            theirs = run_scenarios(ref)
            ref.stop()
            compare(mine, theirs)
        else:
            print("note: memcached not installed; no reference comparison")
        restart_keeps_acknowledged(tmp)
        kill_under_load(tmp)
        eviction_under_memory_limit(tmp)
        many_connections(tmp)
        pipelined_gets_stay_bounded(tmp)
        a_long_reply_shares_its_worker(tmp)
        dumps_with_tools_nobody_here_wrote(tmp)
        stats_conns(tmp)
    finally:
        for p in RUNNING:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("pmcached pymemcache tests passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
