#!/usr/bin/env python3
"""The seed's workload at scale: 120-candidate batches against a 100M-item filter far bigger than
the CPU cache, RedisBloom 8 against bloomgate's module (both in the same Redis 8.2 binary) and
`bloomgate serve`, in one run, printed as tables.

Data. RedisBloom 8 is filled to capacity (BF.RESERVE big 0.01 CAPACITY) with items in
redis-benchmark's `__rand_int__` form (12 digits, zero-padded): two thirds of them every 30th
number below R = 20 x CAPACITY (2,000,000,000 at 100M), the rest just above R, so
`redis-benchmark -r R` queries hit 3.3% of the time, as the seed's feed does (97% of candidates
are new). Its bits are copied bit for bit into the module and into serve with
BF.SCANDUMP / BF.LOADCHUNK, so all three answer the same questions from the same bits. A cuckoo
filter of the same capacity holding 60% of it (every 30th number) is copied the same way
(CF.SCANDUMP / CF.LOADCHUNK). With `LAYOUT blocked` available, our module and serve also get a
blocked filter holding the same items (filled with BF.MADD; its false-positive rate is measured
on 100,000 numbers that were never added).

Runs. redis-benchmark `-c 50 -P 1 -r R`, each command against every server in turn, rounds
alternating which server goes first:
  BF.MEXISTS x 120 on the big filter; BF.MADD x 120 into an empty filter of the same
  capacity; CF.MEXISTS x 120 on the big cuckoo filter; BF.MEXISTS x 120 on a 1M filter (in
  cache, filled the same way, -r 20M); BF.EXISTS of one item on the big filter; and
  BF.MEXISTS x 120 on the blocked filter and BF.MADD x 120 into an empty blocked filter of the
  same capacity, their ratios taken against RedisBloom's classic filter doing the same.
Figures: the server-side microseconds per call from INFO commandstats (Redis servers: the time
inside the command, no network) and each server process' CPU time per request (user + system,
all threads; serve's only figure, since it has no commandstats of its own module API), each as
a ratio to RedisBloom's. With --floor, scripts/bench/module_floor.c runs the same commands in a
third Redis: the module API's own cost (open the key, check its type, read 120 arguments,
reply 120 integers, replicate a MADD), the part no module can save.

Usage: scripts/bench/scale_bench.py --redisbloom DIR --redis8 PATH [--module SO]
           [--bloomgate BIN] [--capacity 100000000] [--requests 30000] [--rounds 3] [--floor]
Needs about 2 GB of memory at 100M and ~10 minutes, most of it filling. Prints the load
average at start and end; run it on an idle machine.
"""

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402
import redisbloom_bench as rbb  # noqa: E402
from redisbloom_bench import Server, ratio, table  # noqa: E402

BATCH = 120


def items(capacity):
    """The fill as (start, stop, step) ranges of numbers, and R (redis-benchmark's -r)."""
    low = capacity * 2 // 3
    r = 30 * low
    return [(0, r, 30), (r, r + capacity - low, 1)], r


def madd_fill(client, key, ranges, command="BF.MADD", per=1000, depth=32):
    """Adds every number of `ranges` (as 12-digit items) to `key` with pipelined multi-item
    commands; only counts the reply lines, so a Python client keeps up with the server.
    `command` is BF.MADD, or CF.INSERT (whose items follow ITEMS)."""
    head_words = [command.encode(), key.encode()] + ([b"ITEMS"] if command == "CF.INSERT" else [])
    sock = client.sock
    pending_lines = 0
    buf = b""

    def drain(until):
        nonlocal pending_lines, buf
        while pending_lines > until:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection while filling")
            # A CRLF may be split across two reads: count in the previous read's last byte
            # plus this one (one byte cannot hold a whole CRLF, so none is counted twice).
            joined = buf[-1:] + chunk
            if b"\n-" in joined or (not buf and chunk.startswith(b"-")):
                raise RuntimeError("fill error: %r" % chunk[:200])
            pending_lines -= joined.count(b"\r\n")
            buf = chunk

    queued = 0
    for start, stop, step in ranges:
        for lo in range(start, stop, per * step):
            nums = range(lo, min(stop, lo + per * step), step)
            head = b"*%d\r\n" % (len(head_words) + len(nums)) + b"".join(
                b"$%d\r\n%s\r\n" % (len(w), w) for w in head_words)
            sock.sendall(head + b"".join(b"$12\r\n%012d\r\n" % x for x in nums))
            pending_lines += len(nums) + 1
            queued += 1
            if queued % depth == 0:
                drain(pending_lines // 2)
    drain(0)


def copy_filter(src, dst, key, family="BF"):
    """Copies `key` from `src` to `dst` chunk by chunk (SCANDUMP / LOADCHUNK)."""
    it = 0
    while True:
        it, data = src.call("%s.SCANDUMP" % family, key, it)
        if it == 0:
            break
        dst.call("%s.LOADCHUNK" % family, key, it, data)


def run(server, n, command, r, commandstats):
    """One redis-benchmark run; returns (requests/s, CPU microseconds per request, server-side
    microseconds per call from INFO commandstats or None)."""
    import re
    import subprocess
    if commandstats:
        server.client.call("CONFIG", "RESETSTAT")
    before = server.cpu_ns()
    out = subprocess.run(
        ["redis-benchmark", "-p", str(server.port), "-c", "50", "-n", str(n), "-P", "1",
         "-r", str(r), "-q", *command],
        capture_output=True, text=True, check=True).stdout.replace("\r", "\n")
    cpu = (server.cpu_ns() - before) / 1000 / n
    rates = re.findall(r"([0-9.]+) requests per second", out)
    if not rates:
        raise RuntimeError("redis-benchmark gave no rate: %s" % out[-500:])
    usec = rbb.commandstats(server.client).get(command[0])[1] if commandstats else None
    return float(rates[-1]), cpu, usec


def measured_fpr(client, key, r, n=100000):
    """The share of `n` numbers never added (odd offsets from multiples of 30 below R) that
    `key` reports present."""
    hits = 0
    probes = [30 * i + 7 for i in range(0, r // 30, max(1, (r // 30) // n))][:n]
    for lo in range(0, len(probes), 1000):
        reply = client.call("BF.MEXISTS", key, *[b"%012d" % x for x in probes[lo:lo + 1000]])
        hits += sum(reply)
    return hits / len(probes)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--redisbloom", default=os.environ.get("REDISBLOOM_DIR"))
    p.add_argument("--redis8", default=os.environ.get("REDIS8_SERVER"))
    p.add_argument("--module", default="target/release/libbloomgate_module.so")
    p.add_argument("--bloomgate", default="target/release/bloomgate")
    p.add_argument("--capacity", type=int, default=100_000_000)
    p.add_argument("--small", type=int, default=1_000_000, help="the in-cache filter's capacity")
    p.add_argument("--requests", type=int, default=30000, help="requests per redis-benchmark run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--floor", action="store_true")
    p.add_argument("--no-serve", action="store_true")
    args = p.parse_args()
    rb8 = os.path.join(args.redisbloom or "", "redisbloom-8.so")
    if not args.redisbloom or not os.path.exists(rb8):
        print("RedisBloom 8 not found (--redisbloom DIR holding redisbloom-8.so): nothing to run")
        return 0
    if rbb.redis_version(args.redis8 or "") != "8.2" or not shutil.which("redis-benchmark"):
        print("needs Redis 8.2 (--redis8) and redis-benchmark: nothing to run")
        return 0
    module, bloomgate = os.path.abspath(args.module), os.path.abspath(args.bloomgate)
    floor_so = rbb.build_floor() if args.floor else None
    print("load average %s at start, %d cores, %s" % (
        rbb.loadavg(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M:%S %Z")))
    cap = args.capacity
    ranges, r = items(cap)
    small_ranges, small_r = items(args.small)
    cf_ranges = [(0, 30 * (cap * 6 // 10), 30)]
    servers = []
    try:
        rb = Server("RedisBloom 8", bgtest.redis_argv(args.redis8, rb8))
        servers.append(rb)
        ours = Server("bloomgate module", bgtest.redis_argv(args.redis8, module))
        servers.append(ours)
        serve = None
        if not args.no_serve:
            serve = Server("bloomgate serve", bgtest.serve_argv(bloomgate))
            servers.append(serve)
        floor = None
        if floor_so:
            floor = Server("module API floor", bgtest.redis_argv(args.redis8, floor_so))
            servers.append(floor)
        ours_all = [s for s in (ours, serve) if s]

        t = time.time()
        rb.client.call("BF.RESERVE", "big", "0.01", cap)
        madd_fill(rb.client, "big", ranges)
        rb.client.call("BF.RESERVE", "small", "0.01", args.small)
        madd_fill(rb.client, "small", small_ranges)
        rb.client.call("CF.RESERVE", "cf", cap)
        madd_fill(rb.client, "cf", cf_ranges, command="CF.INSERT")
        print("filled RedisBloom in %.0f s: big %s, cf %s" % (
            time.time() - t, rb.client.call("BF.INFO", "big", "ITEMS"),
            rb.client.call("CF.INFO", "cf")[:6]))
        t = time.time()
        for s in ours_all:
            for key in ("big", "small"):
                copy_filter(rb.client, s.client, key)
            copy_filter(rb.client, s.client, "cf", "CF")
        print("copied into %s in %.0f s" % (", ".join(s.name for s in ours_all), time.time() - t))
        blocked = []
        for s in ours_all:
            try:
                s.client.call("BF.RESERVE", "blocked", "0.01", cap, "LAYOUT", "blocked")
            except RuntimeError as e:
                print("(%s: no blocked layout: %s)" % (s.name, e))
                continue
            info = [x.decode() if isinstance(x, bytes) else x
                    for x in s.client.call("BF.INFO", "blocked")]
            if "Layout" not in info:
                # RedisBloom's grammar ignores unknown BF.RESERVE arguments: BF.INFO tells.
                print("(%s: no blocked layout: BF.INFO has no Layout field)" % s.name)
                s.client.call("DEL", "blocked")
                continue
            t = time.time()
            madd_fill(s.client, "blocked", ranges)
            info = s.client.call("BF.INFO", "blocked")
            s.client.call("BF.RESERVE", "emptyblocked", "0.01", cap, "LAYOUT", "blocked")
            blocked.append(s)
            print("blocked filter in %s filled in %.0f s; BF.INFO: %s" % (
                s.name, time.time() - t, info))
        for s in servers:
            s.client.call("BF.RESERVE", "empty", "0.01", cap)
            if s is floor:
                for key in ("big", "small"):
                    s.client.call("BF.RESERVE", key, "0.01", 100)
                s.client.call("CF.RESERVE", "cf", 100)
            s.client.call("CONFIG", "RESETSTAT")

        many = lambda cmd, key: [cmd, key] + ["__rand_int__"] * BATCH  # noqa: E731
        rows_spec = [
            ("BF.MEXISTS x120, %gM filter" % (cap / 1e6), many("BF.MEXISTS", "big"), r, None),
            ("BF.MADD x120 into an empty %gM filter" % (cap / 1e6), many("BF.MADD", "empty"), r, None),
            ("CF.MEXISTS x120, %gM cuckoo holding %gM" % (cap / 1e6, cap * 0.6 / 1e6),
             many("CF.MEXISTS", "cf"), r, None),
            ("BF.MEXISTS x120, %gM filter (in cache)" % (args.small / 1e6), many("BF.MEXISTS", "small"), small_r, None),
            ("BF.EXISTS, one item, %gM filter" % (cap / 1e6), ["BF.EXISTS", "big", "__rand_int__"], r, None),
        ]
        if blocked:
            # Measured against RedisBloom's classic filter doing the same (the row named last).
            rows_spec.append(("BF.MEXISTS x120, %gM LAYOUT blocked (vs RedisBloom's classic)"
                              % (cap / 1e6), many("BF.MEXISTS", "blocked"), r, rows_spec[0][0]))
            rows_spec.append(("BF.MADD x120 into an empty %gM LAYOUT blocked (vs RedisBloom's "
                              "classic)" % (cap / 1e6), many("BF.MADD", "emptyblocked"), r,
                              rows_spec[1][0]))
        results = {}
        for rnd in range(args.rounds):
            for label, command, rr, only in rows_spec:
                targets = [rb] + (blocked if only else ours_all + ([floor] if floor else []))
                if rnd % 2:
                    targets = targets[1:] + targets[:1]
                for s in targets:
                    results.setdefault((label, s.name), []).append(
                        run(s, args.requests, command, rr, s is not serve))

        def mean(label, s, field):
            v = [x[field] for x in results.get((label, s.name), []) if x[field] is not None]
            return sum(v) / len(v) if v else float("nan")

        rows = []
        for label, command, _, only in rows_spec:
            # A blocked row is measured against RedisBloom's classic filter (`only` names its row).
            anchor = only or label
            rb_usec, rb_cpu = mean(anchor, rb, 2), mean(anchor, rb, 1)
            row = [label, "%.2f" % rb_usec, "%.2f" % rb_cpu]
            for s, figures in ((ours, 2), (floor, 1), (serve, 0)):
                if s is None or (label, s.name) not in results:
                    row += ["-"] * (figures + 1) if figures else ["-"]
                    continue
                u, c = mean(label, s, 2), mean(label, s, 1)
                if figures == 2:
                    row += ["%.2f" % u, "%.2f" % ratio(u, rb_usec), "%.2f" % ratio(c, rb_cpu)]
                elif figures == 1:
                    row += ["%.2f" % u, "%.2f" % ratio(u, rb_usec)]
                else:
                    row += ["%.2f" % ratio(c, rb_cpu)]
            rows.append(row)
        table("120-item batches at scale (capacity %d, -c 50 -P 1, -r %d, %d requests x %d rounds, "
              "interleaved; usec = INFO commandstats usec_per_call; cpu = the server process' CPU "
              "microseconds per request, all threads; ratios against RedisBloom 8's)" % (
                  cap, r, args.requests, args.rounds),
              ["command", "usec RB", "cpu RB", "usec module", "module/RB", "cpu module/RB",
               "usec floor", "floor/RB", "serve cpu/RB"], rows)
        for s in blocked:
            print("measured FPR of the blocked filter in %s: %.4f (RedisBloom classic: %.4f)" % (
                s.name, measured_fpr(s.client, "blocked", r), measured_fpr(rb.client, "big", r)))
    finally:
        for s in servers:
            s.close()
        if floor_so:
            shutil.rmtree(os.path.dirname(floor_so), ignore_errors=True)
    print("\nload average %s at end" % rbb.loadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
