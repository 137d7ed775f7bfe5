#!/usr/bin/python3
"""The meta protocol, fuzzed against Debian's memcached as the oracle.

Random sequences of meta commands (mg, ms, md, ma, me, mn) with random
flags, good and bad, run in lockstep on pmcached and on memcached; after
each command the two replies must be equal. What legitimately differs is
normalised first: CAS uniques (each server's own numbering: a unique is
replaced by its rank among those that server has shown), and clock-derived
numbers (TTLs, last access) may differ by one second. A CAS a command sends
(C<cas>) is each server's own unique of the same rank, so compares hit and
miss alike on both.

usage: meta_fuzz_test.py PMCACHED [MEMCACHED] [--seed N] [--sequences N]
Exit 77 (skipped) when memcached is not installed.
"""
import argparse
import base64
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import time

KEYS = ["k0", "k1", "k2", "n0", "bin", "p:0"]  # (p:0 for stats detail's prefixes)
RAW_BIN = bytes([0, 1, 32, 255, 10])  # the key "bin" stands for with b: NUL, space, newline


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited with {proc.returncode}")
        try:
            return proc, socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{argv[0]} did not start")


def stop_all(procs, tmp):
    """SIGTERM to every server, a kill for one that does not stop, and the
    temporary directory removed."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def report(failures, success):
    """Prints the failures, or `success`; the exit code."""
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(success)
    return 1 if failures else 0


class Conn:
    """One server: sends a request followed by mn and reads up to its MN."""

    def __init__(self, sock, port):
        self.sock = sock
        self.port = port
        self.buf = b""
        self.cas_seen = []  # uniques in the order this server showed them

    def reconnect(self):
        """After the server closed the connection (as both do on a line
        past their limit). What came before the close is not compared:
        memcached drops the replies it had not sent yet (an error for the
        command before the long line), pmcached sends them."""
        self.sock.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.buf = b""
        return b"<closed>"

    def request(self, data):
        if data.startswith(b"lru_crawler metadump "):
            return self.metadump(data)
        # The reply ends at the MN of our mn (after those of any mn sent).
        want = len(re.findall(rb"(?:^|\n)mn[ \r]", data)) + 1
        try:
            self.sock.sendall(data + b"mn\r\n")
            while self.buf.count(b"MN\r\n") < want:
                d = self.sock.recv(1 << 16)
                if not d:
                    return self.reconnect()
                self.buf += d
        except (BrokenPipeError, ConnectionResetError):
            return self.reconnect()
        parts = self.buf.split(b"MN\r\n", want)
        self.buf = parts[-1]
        return b"MN\r\n".join(parts[:-1])

    def metadump(self, data):
        """memcached answers a metadump from its crawler thread and reads
        nothing more of the connection meanwhile (an mn sent behind it is
        lost): the reply is one error line, or lines ending in END."""
        for _ in range(100):
            self.sock.sendall(data)
            while not (self.buf.endswith(b"END\r\n") or
                       (self.buf.endswith(b"\r\n") and self.buf.count(b"\n") == 1)):
                d = self.sock.recv(1 << 16)
                if not d:
                    return self.reconnect()
                self.buf += d
            reply, self.buf = self.buf, b""
            # memcached's own expiry crawls run now and then: a metadump
            # meanwhile is BUSY.
            if not reply.startswith(b"BUSY "):
                return reply
            time.sleep(0.05)
        return reply

    def rank(self, cas):
        if cas not in self.cas_seen:
            self.cas_seen.append(cas)
        return self.cas_seen.index(cas)

    def cas_of_rank(self, r):
        return self.cas_seen[r] if r < len(self.cas_seen) else str(10**9 + r)


CAS_IN_REPLY = re.compile(rb"(?<= c)(\d+)|(?<=cas=)(\d+)")


def normalise_dump(reply):
    """lru_crawler metadump's lines (ended by \\n alone), in key order (the
    order is each server's own: memcached's crawls its LRUs), without the
    slab class and the item size (memcached's own) and the CAS unique (the
    lines may differ, dump_covers, and ranks taken from them would shift
    every later one); and stats detail dump's PREFIX lines, in key order."""
    if reply.startswith(b"key=") or b"\nkey=" in reply:
        body, end, rest = reply.partition(b"END\r\n")
        lines = sorted(line for line in body.split(b"\n") if line)
        lines = [b" ".join(t for t in line.split(b" ")
                          if not t.startswith((b"cls=", b"size=", b"cas="))) for line in lines]
        return b"\n".join(lines + [end + rest])
    if reply.startswith(b"PREFIX "):
        body, end, rest = reply.partition(b"END\r\n")
        return b"\r\n".join(sorted(body.split(b"\r\n"))) + end + rest
    return reply


PADDED_VALUE = re.compile(rb"(VALUE \S+ \d+ |VA )(\d+)([^\r\n]*\r\n)(\d+) +\r\n")


def unpad(reply):
    """A decr (or ma) whose number gets shorter pads it with spaces to the
    old length when memcached changes its item in place, and not when it
    replaces a copy that a reply being sent still references (timing);
    pmcached always pads. Values of digits and spaces lose the spaces (no
    generator stores one)."""
    return PADDED_VALUE.sub(lambda m: m.group(1) + str(len(m.group(4))).encode() + m.group(3) +
                            m.group(4) + b"\r\n", reply)


def normalise(conn, reply):
    """CAS uniques become ranks; a line's clock numbers are kept for a
    tolerant compare."""
    def sub(m):  # (0 is no unique: ms's c on a failure)
        v = m.group(0).decode()
        return b"0" if v == "0" else b"#" + str(conn.rank(v)).encode()
    reply = unpad(normalise_dump(reply))
    # A key whose bytes break a reply line: memcached sends them raw (and
    # the stream breaks), pmcached in base64.
    reply = reply.replace(b" k" + RAW_BIN + b" ", b" k" + base64.b64encode(RAW_BIN) + b" b ")
    reply = reply.replace(b" k" + RAW_BIN + b"\r\n", b" k" + base64.b64encode(RAW_BIN) + b" b\r\n")
    lines = reply.split(b"\r\n")
    out = []
    for line in lines:
        if line[:3] in (b"VA ", b"HD ", b"ME ", b"EN ", b"NF ", b"NS ", b"EX ") or \
                line in (b"HD", b"VA"):
            line = CAS_IN_REPLY.sub(sub, line)
            if line.startswith(b"ME "):  # slab class and size are memcached's own
                line = b" ".join(t for t in line.split(b" ")
                                 if not t.startswith((b"cls=", b"size=")))
        elif line.startswith(b"VALUE ") and line.count(b" ") == 4:  # gets
            head, cas = line.rsplit(b" ", 1)
            line = head + b" #" + str(conn.rank(cas.decode())).encode()
        out.append(line)
    return b"\r\n".join(out)


CLOCK = re.compile(rb"^(t|l|exp=|la=)(-?\d+)$")


def clock_value(kind, v):
    """A TTL of an item a negative T or N expired at once is memcached's
    clock minus its uptime, as an unsigned 32-bit number, and ours a
    negative number of our own: both are "expired"."""
    if kind == b"t":
        if v >= 1 << 31:
            v -= 1 << 32
        if v < -1:
            return "expired"
    return v


def plain_keys(tokens):
    """k<base64> b as k<key>: whether an item's key reads back in base64
    after ma rewrote it depends on memcached's reference counts (an item
    still referenced by a reply being sent is replaced, not changed in
    place, and the copy is not marked binary)."""
    out = []
    for t in tokens:
        if t == b"b" and out and out[-1].startswith(b"k"):
            try:
                key = base64.b64decode(out[-1][1:], validate=True)
            except ValueError:
                key = b""
            if key and all(0x20 < c < 0x7f for c in key):
                out[-1] = b"k" + key
                continue
        out.append(t)
    return out


def key_of(template):
    """The key a command names (decoded when it is base64)."""
    t = template.split("\r\n", 1)[0].split(" ")
    if len(t) < 2:
        return None
    if t[0] in ("mg", "ms", "md", "ma") and "b" in t[2:]:
        try:
            return base64.b64decode(t[1], validate=True)
        except ValueError:
            return None
    return t[1].encode()


def drop_item_marks(reply, keys=()):
    """An incr, decr or ma changes memcached's item in place, or replaces it
    with a copy that has lost its marks (fetched, stale, token sent) when a
    reply being sent still references it: which one depends on timing.
    After one, an mg's h, W, X and Z are not compared, nor a metadump's
    fetch= of `keys`."""
    if reply.startswith(b"key="):
        encoded = [b"key=" + urllib.parse.quote_from_bytes(k, safe="-._~").encode() + b" "
                   for k in keys if k]
        return b"\n".join(b" ".join(t for t in line.split(b" ") if not t.startswith(b"fetch="))
                          if line.startswith(tuple(encoded)) else line
                          for line in reply.split(b"\n"))
    lines = reply.split(b"\r\n")
    head = [t for t in lines[0].split(b" ") if t not in (b"h0", b"h1", b"W", b"X", b"Z")]
    return b"\r\n".join([b" ".join(head)] + lines[1:])


def dump_covers(ours, theirs):
    """A metadump lists every live item in pmcached; memcached's crawler
    passes over an item that a connection still references (the one a
    reply just sent named, often): every line of memcached's must be in
    ours, alike but for the clock."""
    if not (ours.startswith(b"key=") or theirs.startswith(b"key=")):
        return same(ours, theirs)
    def lines(d):
        return {line.split(b" ", 1)[0]: line for line in d.split(b"\n") if line.startswith(b"key=")}
    mine, ref = lines(ours), lines(theirs)
    return ours.endswith(b"END\r\n") and theirs.endswith(b"END\r\n") and \
        all(k in mine and same(mine[k], line) for k, line in ref.items())


def same(a, b):
    """Equal, but for clock-derived numbers within one second."""
    if a == b:
        return True
    la, lb = plain_keys(a.split()), plain_keys(b.split())
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x == y:
            continue
        mx, my = CLOCK.match(x), CLOCK.match(y)
        if not (mx and my and mx.group(1) == my.group(1)):
            return False
        vx, vy = (clock_value(m.group(1), int(m.group(2))) for m in (mx, my))
        if vx != vy and (isinstance(vx, str) or isinstance(vy, str) or abs(vx - vy) > 1):
            return False
    return True


# ------------------------------------------------------------------ generators

def ttl(rng):
    return rng.choice(["0", "100", "1000", "-1", "5000", "x", "", "99999999999"])


def horizon(rng):
    """R's argument: as many choices as ttl's (the same random draws), none
    within a second of a TTL, so that whether an item expires before it
    does not depend on where each server's clock ticks."""
    return rng.choice(["0", "50", "1500", "-1", "4000", "x", "", "99999999999"])


def key_token(rng, binary):
    k = rng.choice(KEYS)
    if binary:
        if rng.random() < 0.1:
            return "!!notbase64"
        raw = k.encode() if k != "bin" else RAW_BIN
        return base64.b64encode(raw).decode()
    if rng.random() < 0.03:
        return "x" * 251
    return k


def flags_for(rng, menu, extra):
    """A random subset of `menu` (flag -> token generator), sometimes a
    duplicate, an unknown flag or too many."""
    picks = []
    for f, arg in menu.items():
        if rng.random() < 0.3:
            picks.append(f + (arg(rng) if arg else ""))
    r = rng.random()
    if r < 0.05 and picks:
        picks.append(rng.choice(picks))  # a duplicate
    elif r < 0.1:
        picks.append(rng.choice(extra))  # unknown here, or foreign to the command
    elif r < 0.12:
        picks += ["k"] + ["P"] * 20  # past the limit on flags
    rng.shuffle(picks)
    return picks


def opaque(rng):
    return rng.choice(["1", "abc", "x" * 31, "y" * 32, ""])


def cas_token(rng):
    r = rng.random()
    if r < 0.6:
        return "{cas%d}" % rng.randrange(6)
    return rng.choice(["0", "999999", "abc", "-1"])


COMMON = {"k": None, "O": opaque, "q": None, "b": None, "P": None, "L": lambda r: "x"}


def gen_mg(rng):
    menu = dict(COMMON, v=None, c=None, f=None, s=None, t=None, h=None, l=None, u=None,
                N=ttl, R=horizon, T=ttl, C=cas_token)
    fl = flags_for(rng, menu, ["E5", "x", "Z", "!", "W", "I", "F3", "MS", "D2"])
    return "mg %s %s\r\n" % (key_token(rng, "b" in fl), " ".join(fl)), fl


def gen_ms(rng):
    menu = dict(COMMON, c=None, C=cas_token, F=lambda r: r.choice(["0", "7", "4294967296", "z"]),
                I=None, s=None, T=ttl, M=lambda r: r.choice("SEAPRseapX") + r.choice(["", "", "S"]),
                N=ttl, v=None, f=None, t=None)
    fl = flags_for(rng, menu, ["E5", "x", "Z", "!", "J3", "h", "u"])
    data = rng.choice(["", "1", "abc", "12", "hello world", "x" * 300])
    n = len(data)
    r = rng.random()
    if r < 0.04:
        n = len(data) - 1 if data else 0  # longer than said: a bad data chunk
    elif r < 0.06:
        n = "z"
    elif r < 0.07:
        data = "x" * (2 << 20)  # too large for the cache: swallowed
        n = len(data)
    return "ms %s %s %s\r\n%s\r\n" % (key_token(rng, "b" in fl), n, " ".join(fl), data), fl


def gen_md(rng):
    menu = dict(COMMON, C=cas_token, I=None, T=ttl)
    fl = flags_for(rng, menu, ["x", "E5", "v", "Z", "!"])
    return "md %s %s\r\n" % (key_token(rng, "b" in fl), " ".join(fl)), fl


def gen_ma(rng):
    # No T: memcached 1.6.18 loses it when the number grows a digit (it
    # sets the expiry of the item the new one replaced), which pmcached
    # does not copy; the unit tests check ma's T.
    menu = dict(COMMON, C=cas_token, N=ttl,
                J=lambda r: r.choice(["0", "10", "x", "18446744073709551615"]),
                D=lambda r: r.choice(["1", "5", "x", "18446744073709551615", ""]),
                M=lambda r: r.choice("ID+-idX"), t=None, c=None, v=None)
    fl = flags_for(rng, menu, ["x", "E5", "Z", "!", "F1", "h"])
    return "ma %s %s\r\n" % (key_token(rng, "b" in fl), " ".join(fl)), fl


def gen_other(rng):
    return rng.choice([
        "me %s\r\n" % rng.choice(KEYS),
        "me %s b\r\n" % base64.b64encode(b"k0").decode(),
        "mg\r\n", "ms k0\r\n", "md\r\n", "ma\r\n", "me\r\n", "mn extra\r\n", "mz k0\r\n",
        "set k1 0 0 2\r\n10\r\n", "set n0 3 0 1\r\n7\r\n", "get k0 k1 n0\r\n",
        "gets k0 k1\r\n", "touch k0 100\r\n",
    ]), []


def gen_classic(rng):
    """The text protocol's own commands, good and bad, mixed in: they share
    the items (and their meta state) with the meta commands."""
    key = rng.choice(KEYS + ["x" * 251] if rng.random() < 0.05 else KEYS)
    noreply = " noreply" if rng.random() < 0.15 else ""
    number = lambda: rng.choice(["0", "7", "4294967295", "4294967296", "-1", "x", "+5", "007"])
    cmd = rng.choice(["set", "add", "replace", "append", "prepend", "cas", "get", "gets", "gat",
                      "gats", "incr", "decr", "delete", "touch", "verbosity", "flush_all"])
    if cmd in ("set", "add", "replace", "append", "prepend", "cas"):
        data = rng.choice(["", "5", "12", "abc", " 9", "18446744073709551615", "x" * 300])
        n = len(data) if rng.random() < 0.95 else rng.choice(["x", "-1", str(max(len(data) - 1, 0))])
        cas = " " + cas_token(rng) if cmd == "cas" else ""  # ({casN}: filled per server)
        extra = " junk" if rng.random() < 0.03 else ""
        return f"{cmd} {key} {number()} {ttl(rng) or 0} {n}{cas}{noreply}{extra}\r\n{data}\r\n", []
    if cmd in ("get", "gets"):
        return f"{cmd} " + " ".join(rng.sample(KEYS, rng.randint(1, 4))) + "\r\n", []
    if cmd in ("gat", "gats"):
        return f"{cmd} {ttl(rng) or 'x'} " + " ".join(rng.sample(KEYS, rng.randint(1, 3))) + "\r\n", []
    if cmd in ("incr", "decr"):
        return f"{cmd} {key} {rng.choice(['1', '5', 'x', '18446744073709551615', '-1'])}{noreply}\r\n", []
    if cmd == "delete":
        return f"delete {key}{rng.choice(['', ' 0', ' 5'])}{noreply}\r\n", []
    if cmd == "touch":
        return f"touch {key} {ttl(rng) or 'x'}{noreply}\r\n", []
    if cmd == "verbosity":
        return f"verbosity {rng.choice(['1', 'x', ''])}{noreply}\r\n", []
    return f"flush_all{rng.choice(['', ' 0', ' x', ' -1'])}{noreply}\r\n", []


def gen_admin(rng):
    """Dumps and stats subcommands (memcached-tool's dump and keys read
    lru_crawler metadump). Not lru_crawler crawl: memcached's runs in the
    background, and a metadump right after it is BUSY. No metadump of
    numbered classes: pmcached's one class (1) holds every item, and
    memcached's class 1 its smallest."""
    return rng.choice([
        "lru_crawler metadump all\r\n", "lru_crawler metadump 99\r\n",
        "lru_crawler metadump x\r\n", "lru_crawler metadump 1,99\r\n",
        "lru_crawler metadump\r\n", "lru_crawler tocrawl x\r\n",
        "lru_crawler sleep 2000000\r\n", "lru_crawler nothing\r\n",
        "stats detail on\r\n", "stats detail off\r\n", "stats detail dump\r\n",
        "stats detail\r\n", "stats detail x\r\n", "stats sizes\r\n",
        "stats cachedump 99 0\r\n", "stats cachedump 1\r\n", "stats cachedump x 0\r\n",
        "stats cachedump 2 0\r\n",
    ]), []


GENERATORS = [gen_mg] * 4 + [gen_ms] * 4 + [gen_md] * 2 + [gen_ma] * 2 + [gen_other] + \
    [gen_classic] * 4 + [gen_admin]


def fill_cas(conn, template):
    return re.sub(r"\{cas(\d)\}", lambda m: conn.cas_of_rank(int(m.group(1))), template)


# Classic commands with malformed arguments, in order (they share state),
# before the fuzzing: each once departed from memcached's answer (a user
# trial listed them): a wrong argument count, gat without keys or with a bad
# exptime, "-0" where a number goes (memcached takes it, refuses "-1").
CLASSIC_LINES = [
    b"delete\r\n", b"delete \r\n", b"delete k 0\r\n", b"delete k 5\r\n",
    b"delete a b c d\r\n", b"delete a 0 noreply\r\n",
    b"gat\r\n", b"gat 10\r\n", b"gat k\r\n", b"gats 10\r\n", b"gat -1 k\r\n",
    b"set k -0 0 1\r\nx\r\n", b"set k2 -00 0 1\r\nx\r\n", b"set k2 -5 0 1\r\nx\r\n",
    b"set k2 - 0 1\r\nx\r\n", b"set k 0 0 1 noreplyx\r\ny\r\n", b"set k 0 0 1 foo\r\ny\r\n",
    b"get k\r\n", b"set k 0 0 -1\r\nx\r\n", b"set k 0 0\r\nx\r\n",
    b"set n 0 0 1\r\n5\r\n", b"incr n -0\r\n", b"incr n -1\r\n", b"incr n abc\r\n",
    b"incr n 18446744073709551616\r\n", b"decr n 100\r\n", b"incr n 1 noreply\r\n",
    b"get n\r\n", b"touch\r\n", b"touch k\r\n", b"touch k abc\r\n", b"touch k -0\r\n",
    b"verbosity\r\n", b"verbosity -0\r\n", b"verbosity -1\r\n", b"flush_all abc\r\n",
    b"flush_all -1\r\n", b"cas k 0 0 1 -1\r\nx\r\n", b"get\r\n", b"gets\r\n",
    b"get  k\r\n", b"get k \r\n", b"GET k\r\n",
]


def classic_lines(mine, theirs):
    failures = []
    for line in CLASSIC_LINES:
        got = [normalise(c, c.request(line)) for c in (mine, theirs)]
        if not same(*got):
            failures.append(f"classic {line!r}\n    pmcached:  {got[0]!r}\n"
                            f"    memcached: {got[1]!r}")
    for c in (mine, theirs):
        c.request(b"flush_all\r\n")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pmcached")
    ap.add_argument("memcached", nargs="?", default=shutil.which("memcached"))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("META_FUZZ_SEED", "1")))
    ap.add_argument("--sequences", type=int,
                    default=int(os.environ.get("META_FUZZ_SEQUENCES", "400")))
    ap.add_argument("--length", type=int, default=25)
    ap.add_argument("--max-failures", type=int, default=15)
    a = ap.parse_args()
    if not a.memcached:
        print("SKIP: memcached is not installed (the oracle)")
        return 77
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    procs = []
    failures = []
    try:
        p1 = free_port()
        ours, s1 = start([a.pmcached, os.path.join(tmp, "fuzz.kv"), "-p", str(p1), "-t", "1"], p1)
        procs.append(ours)
        p2 = free_port()
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        ref, s2 = start([a.memcached, "-p", str(p2), "-U", "0", "-l", "127.0.0.1", "-t", "1",
                         *user], p2)
        procs.append(ref)
        mine, theirs = Conn(s1, p1), Conn(s2, p2)
        failures += classic_lines(mine, theirs)
        rng = random.Random(a.seed)
        commands = 0
        for seq in range(a.sequences):
            for c in (mine, theirs):
                c.request(b"flush_all\r\n")
                c.cas_seen.clear()
            history = []
            rewritten = set()  # keys an incr, decr or ma changed in this sequence
            for _ in range(a.length):
                template, _ = rng.choice(GENERATORS)(rng)
                got = []
                for name, c, proc in (("pmcached", mine, ours), ("memcached", theirs, ref)):
                    try:
                        got.append(normalise(c, c.request(fill_cas(c, template).encode("latin-1"))))
                    except OSError as e:
                        died = "" if proc.poll() is None else f", exit {proc.returncode}"
                        raise RuntimeError(f"{name} failed ({e}{died}) on {template!r} after "
                                           f"{[t for t, _ in history[-5:]]!r}") from None
                history.append((template, got[1]))
                commands += 1
                key = key_of(template)
                if template.split(" ", 1)[0] in ("incr", "decr", "ma"):
                    rewritten.add(key)
                elif template.startswith("mg ") and key in rewritten:
                    got = [drop_item_marks(g) for g in got]
                elif template.startswith("lru_crawler metadump") and rewritten:
                    got = [drop_item_marks(g, rewritten) for g in got]
                if not (dump_covers(*got) if template.startswith("lru_crawler metadump")
                        else same(*got)):
                    steps = "".join(f"    {t!r} -> {r!r}\n" for t, r in history[-6:-1])
                    failures.append(f"sequence {seq} (seed {a.seed}): after\n{steps}"
                                    f"  {template!r}\n    pmcached:  {got[0]!r}\n"
                                    f"    memcached: {got[1]!r}")
                    break  # the states may differ from here on
            if len(failures) >= a.max_failures:
                break
        print(f"{commands} commands in {seq + 1} sequences")
    finally:
        stop_all(procs, tmp)
    return report(failures, "meta protocol fuzz: pmcached answered as memcached")


if __name__ == "__main__":
    sys.exit(main())
