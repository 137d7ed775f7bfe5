#!/usr/bin/python3
"""The binary protocol, run in lockstep on pmcached and Debian's memcached.

First a fixed list of requests that covers every opcode pmcached serves
and the ways a request can be wrong (lengths that do not fit the opcode,
an unknown opcode, a key over 250 bytes, a value over the item limit,
CAS mismatches, quiet opcodes' misses and errors); then random sequences
of requests over a few keys. Each request is followed by a NOOP, whose
reply ends what is compared; a connection the server closed is compared
as such. CAS uniques are replaced by their rank among those each server
has shown; `stat` replies, whose figures differ, by whether they end
properly, `version`'s text by whether there is one, and numbers a decr
padded with spaces without them. At the end, the counters the same
requests must move alike are compared.

usage: binary_lockstep_test.py PMCACHED [MEMCACHED] [--seed N] [--sequences N]
Exit 77 (skipped) when memcached is not installed.
"""
import argparse
import os
import random
import re
import shutil
import socket
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from meta_fuzz_test import free_port, report, start, stop_all  # noqa: E402

HEADER = struct.Struct(">BBHBBHIIQ")  # magic, opcode, keylen, extlen, type, vbucket/status,
                                      # body length, opaque, cas
NOOP, STAT = 0x0A, 0x10
ITEM_MAX = 1 << 20


def request(opcode, key=b"", extras=b"", value=b"", cas=0, opaque=0, bodylen=None,
            keylen=None):
    body = len(extras) + len(key) + len(value) if bodylen is None else bodylen
    klen = len(key) if keylen is None else keylen
    return HEADER.pack(0x80, opcode, klen, len(extras), 0, 0, body, opaque, cas) + extras + key + value


def store_extras(flags=0, exptime=0):
    return struct.pack(">II", flags, exptime)


def delta_extras(by, initial=0, exptime=0xFFFFFFFF):
    return struct.pack(">QQI", by, initial, exptime)


class Conn:
    def __init__(self, port):
        self.port = port
        self.sock = None
        self.cas_seen = []
        self.connect()

    def connect(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.buf = b""

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rank(self, cas):
        if cas == 0:
            return 0
        if cas not in self.cas_seen:
            self.cas_seen.append(cas)
        return self.cas_seen.index(cas) + 1

    def cas_of_rank(self, rank):
        """The unique this server showed as `rank` (or one it never gave)."""
        return self.cas_seen[rank - 1] if 0 < rank <= len(self.cas_seen) else 987654321

    def exchange(self, data):
        """Sends `data` and a NOOP; the replies before the NOOP's, each as
        (opcode, status, extras, key, value, cas rank, opaque), or with
        "<closed>" last when the server closed the connection."""
        replies = []
        try:
            self.sock.sendall(data + request(NOOP, opaque=0xFEEDFACE))
            while True:
                magic, op, klen, elen, _, status, blen, opaque, cas = HEADER.unpack(self.read(24))
                body = self.read(blen)
                if op == NOOP and opaque == 0xFEEDFACE:
                    return replies
                ext, key, value = body[:elen], body[elen:elen + klen], body[elen + klen:]
                # A decr that shortens a number pads it with spaces when the
                # server rewrites the item in place, which memcached does or
                # not depending on whether a reply still holds the item.
                if re.fullmatch(rb"\d+ +", value):
                    value = value.rstrip(b" ")
                replies.append((magic, op, status, ext, key, value, self.rank(cas), opaque))
        except (EOFError, ConnectionError, socket.timeout):
            self.connect()
            return replies + ["<closed>"]


def summarise_stats(replies):
    """A stat reply's figures differ between the servers: compared are the
    status and that it ends with an empty reply. Versions differ too."""
    if replies and replies[0] != "<closed>" and replies[0][1] == 0x0B:
        return [replies[0][:5] + (bool(replies[0][5]),) + replies[0][6:]] + replies[1:]
    if replies and replies[-1] != "<closed>" and replies[0][1] == STAT and replies[0][2] == 0:
        return [("stat", len(replies) > 0, replies[-1][4:6] == (b"", b""))]
    return replies


# Counters that the same requests must move alike. (Not total_items:
# memcached rewrites a number in place, or links a new item and counts it,
# depending on whether a reply still holds the item, which is timing.)
COUNTED = [b"cmd_get", b"get_hits", b"get_misses", b"cmd_touch", b"touch_hits", b"touch_misses",
           b"delete_hits", b"delete_misses", b"incr_hits", b"incr_misses", b"decr_hits",
           b"decr_misses", b"cas_hits", b"cas_misses", b"cas_badval", b"curr_items"]


def stat_counts(conn):
    return {r[4]: r[5] for r in conn.exchange(request(STAT)) if r != "<closed>" and r[4]}


def fixed_cases():
    big = b"v" * (ITEM_MAX + 1)
    k = b"fixed"
    cases = [
        ("version", request(0x0B)),
        ("get miss", request(0x00, k)),
        ("getk miss", request(0x0C, k)),
        ("getq miss", request(0x09, k)),
        ("set", request(0x01, k, store_extras(7, 0), b"hello")),
        ("get", request(0x00, k, opaque=5)),
        ("getk", request(0x0C, k)),
        ("getq hit", request(0x09, k)),
        ("getkq hit", request(0x0D, k)),
        ("add exists", request(0x02, k, store_extras(), b"x")),
        ("addq exists", request(0x12, k, store_extras(), b"x")),
        ("replace missing", request(0x03, b"nope", store_extras(), b"x")),
        ("replaceq missing", request(0x13, b"nope", store_extras(), b"x")),
        ("append", request(0x0E, k, value=b" world")),
        ("prepend", request(0x0F, k, value=b">> ")),
        ("append missing", request(0x0E, b"nope", value=b"x")),
        ("appendq missing", request(0x19, b"nope", value=b"x")),
        ("get after append", request(0x00, k)),
        ("set bad cas", request(0x01, k, store_extras(), b"x", cas=987654321)),
        ("delete bad cas", request(0x04, k, cas=987654321)),
        ("incr non-numeric", request(0x05, k, delta_extras(1))),
        ("incr missing", request(0x05, b"n", delta_extras(1))),
        ("incr create", request(0x05, b"n", delta_extras(5, 40, 0))),
        ("incr", request(0x05, b"n", delta_extras(5, 40, 0))),
        ("decr below zero", request(0x06, b"n", delta_extras(1000))),
        ("incrq", request(0x15, b"n", delta_extras(2))),
        ("decrq", request(0x16, b"n", delta_extras(1))),
        ("get n", request(0x00, b"n")),
        ("incr wraps", request(0x05, b"n", delta_extras(2 ** 64 - 1))),
        ("touch", request(0x1C, k, struct.pack(">I", 100))),
        ("touch missing", request(0x1C, b"nope", struct.pack(">I", 100))),
        ("gat", request(0x1D, k, struct.pack(">I", 0))),
        ("gatk", request(0x23, k, struct.pack(">I", 0))),
        ("gatq missing", request(0x1E, b"nope", struct.pack(">I", 0))),
        ("gatkq hit", request(0x24, k, struct.pack(">I", 0))),
        ("set too large", request(0x01, k, store_extras(), big)),
        ("get after too large", request(0x00, k)),
        ("setq", request(0x11, b"q", store_extras(1, 0), b"quiet")),
        ("deleteq", request(0x14, b"q")),
        ("deleteq missing", request(0x14, b"q")),
        ("delete missing", request(0x04, b"q")),
        ("empty value", request(0x01, b"e", store_extras(), b"")),
        ("get empty", request(0x00, b"e")),
        ("binary key", request(0x01, b"\x00 \r\n\xff", store_extras(), b"b")),
        ("get binary key", request(0x0C, b"\x00 \r\n\xff")),
        ("flush delayed", request(0x08, extras=struct.pack(">I", 2))),
        ("flushq", request(0x18)),
        ("get after flush", request(0x00, b"n")),
        ("stat", request(STAT)),
        ("stat reset", request(STAT, b"reset")),
        ("stat reset, by its start", request(STAT, b"resetfoo")),
        ("stat settings", request(STAT, b"settings")),
        ("stat items", request(STAT, b"items")),
        ("stat slabs", request(STAT, b"slabs")),
        ("stat no such group", request(STAT, b"nosuchgroup")),
        ("stat conns (text only)", request(STAT, b"conns")),
        ("stat detail, no verb", request(STAT, b"detail")),
        ("stat detail on", request(STAT, b"detail on")),
        ("a key with line ends", request(0x01, b"evil\r\nERROR\r\n:x", store_extras(), b"v")),
        ("stat detail dump", request(STAT, b"detail dump")),
        ("stat detail off", request(STAT, b"detail off")),
        # (No key: memcached reads past as many bytes as the whole body
        # after the key, and so the start of the next request.)
        ("unknown opcode", request(0x40, value=b"value")),
        ("sasl list without sasl", request(0x20)),
        ("pipelined quiet sets then get",
         request(0x11, b"a", store_extras(), b"1") + request(0x11, b"b", store_extras(), b"2") +
         request(0x0D, b"a") + request(0x0D, b"zz") + request(0x0C, b"b")),
        # Each of these ends the connection. (A body claimed past what the
        # opcode takes is refused at once, not waited for.)
        ("get claiming 4 GiB", request(0x00, b"k", bodylen=0xFFFFFFFF)),
        ("delete claiming 4 GiB", request(0x04, b"k", bodylen=0xFFFFFFFF)),
        ("noop claiming 4 GiB", request(0x0A, bodylen=0xFFFFFFFF)),
        ("get with extras", request(0x00, b"k", extras=b"\0\0\0\0")),
        ("set without extras", request(0x01, b"k", value=b"v")),
        ("noop with a key", request(0x0A, b"k")),
        ("key over 250 bytes", request(0x00, b"k" * 251)),
        ("key longer than body", request(0x00, b"k", bodylen=0)),
        ("incr short extras", request(0x05, b"n", extras=b"\0" * 8)),
        ("quit", request(0x07)),
        ("quitq", request(0x17)),
        # (After a request: a first byte other than 0x80 is the text protocol.)
        ("bad magic", request(0x0A, opaque=1) + b"\x81" + request(0x0A)[1:]),
    ]
    return cases


def random_request(rng, conn_ranks):
    key = rng.choice([b"r0", b"r1", b"r2", b"n0"])
    op = rng.choice([0x00, 0x09, 0x0C, 0x0D, 0x01, 0x11, 0x02, 0x12, 0x03, 0x13, 0x0E, 0x19,
                     0x0F, 0x1A, 0x04, 0x14, 0x05, 0x15, 0x06, 0x16, 0x1C, 0x1D, 0x1E, 0x23,
                     0x24])
    cas_rank = rng.choice([0, 0, 0, 1, 2, 3, 99]) if op in (0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
                                                             0x0E, 0x0F, 0x11, 0x14) else 0
    if op in (0x00, 0x09, 0x0C, 0x0D, 0x04, 0x14):
        return op, key, b"", b"", cas_rank
    if op in (0x01, 0x11, 0x02, 0x12, 0x03, 0x13):
        value = rng.choice([b"1", b"17", b"abc", b"", b"x" * rng.randint(0, 300)])
        return op, key, store_extras(rng.randint(0, 2 ** 32 - 1), rng.choice([0, 0, 1000])), \
            value, cas_rank
    if op in (0x0E, 0x19, 0x0F, 0x1A):
        return op, key, b"", rng.choice([b"9", b"z", b""]), cas_rank
    if op in (0x05, 0x15, 0x06, 0x16):
        exptime = rng.choice([0, 0xFFFFFFFF, 1000])
        return op, key, delta_extras(rng.choice([0, 1, 7, 2 ** 63]), rng.randint(0, 50), exptime), \
            b"", cas_rank
    return op, key, struct.pack(">I", rng.choice([0, 100, 5000])), b"", 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pmcached")
    ap.add_argument("memcached", nargs="?", default=shutil.which("memcached"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sequences", type=int, default=300)
    ap.add_argument("--length", type=int, default=20)
    a = ap.parse_args()
    if not a.memcached:
        print("SKIP: memcached is not installed (the oracle)")
        return 77
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    procs, failures = [], []
    try:
        p1, p2 = free_port(), free_port()
        ours, s1 = start([a.pmcached, os.path.join(tmp, "bin.kv"), "-p", str(p1), "-t", "1"], p1)
        procs.append(ours)
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        ref, s2 = start([a.memcached, "-p", str(p2), "-U", "0", "-l", "127.0.0.1", "-t", "1",
                         *user], p2)
        procs.append(ref)
        s1.close()
        s2.close()
        mine, theirs = Conn(p1), Conn(p2)
        for name, data in fixed_cases():
            got = [summarise_stats(c.exchange(data)) for c in (mine, theirs)]
            if got[0] != got[1]:
                failures.append(f"{name}:\n    pmcached:  {got[0]!r}\n    memcached: {got[1]!r}")
        rng = random.Random(a.seed)
        seq = -1
        for seq in range(a.sequences):
            for c in (mine, theirs):
                c.exchange(request(0x08))
                c.cas_seen.clear()
            history = []
            for _ in range(a.length):
                op, key, ext, value, rank = random_request(rng, None)
                got = [c.exchange(request(op, key, ext, value, cas=c.cas_of_rank(rank) if rank
                                          else 0)) for c in (mine, theirs)]
                history.append((op, key, ext, value, rank))
                if got[0] != got[1]:
                    failures.append(f"sequence {seq} (seed {a.seed}) after {history[-6:-1]!r}:\n"
                                    f"  {history[-1]!r}\n    pmcached:  {got[0]!r}\n"
                                    f"    memcached: {got[1]!r}")
                    break
            if len(failures) >= 15:
                break
        # The same traffic made the same counts.
        counts = [stat_counts(c) for c in (mine, theirs)]
        for name in COUNTED:
            if counts[0].get(name) != counts[1].get(name):
                failures.append(f"stat {name}: pmcached {counts[0].get(name)}, "
                                f"memcached {counts[1].get(name)}")
        print(f"{len(fixed_cases())} fixed cases, {seq + 1} random sequences")
    finally:
        stop_all(procs, tmp)
    return report(failures, "binary protocol: pmcached answered as memcached")


if __name__ == "__main__":
    sys.exit(main())
