#!/usr/bin/env python3
"""Side by side against valkey-bloom, in one run, printed as a table: bloomgate's module and
valkey-bloom inside the same Valkey binary (Debian's valkey-server 8.0.1 by default).

Data. Each server gets a 100M-item filter at 1% (`BF.RESERVE big 0.01 CAPACITY`) filled to
capacity with items in redis-benchmark's `__rand_int__` form (12 digits, zero-padded): two thirds
of them every 30th number below R = 20 x CAPACITY, the rest just above R, so `redis-benchmark -r R`
queries hit 3.3% of the time, as the seed's feed does (the same fill as scale_bench.py). valkey-bloom
has no SCANDUMP, so each server is filled by BF.MADD on its own.

Servers. valkey-bloom (`--valkey-bloom SO`: a build of github valkey-io/valkey-bloom, which the
repository does not carry); bloomgate's module in its default dialect on Valkey (`valkey-bloom`:
valkey-bloom's replies and its `bloomfltr` filters, SipHash-1-3 over the `bloomfilter` crate's
bit layout); and, with --redisbloom-dialect, bloomgate's module with `DIALECT redisbloom` (its
classic chain, XXH3 hashing and prefetched batches), and with `LAYOUT blocked` there too. The
load arguments of each are options (--ours-args, --redisbloom-args): give the dialect switch's
words as the module spells them ('' loads the module with none, in its default dialect).

Runs. redis-benchmark `-c 50 -P 1 -r R`, each command against every server in turn, rounds
alternating which server goes first: BF.MEXISTS x 120 on the big filter; BF.MADD x 120 into an
empty filter of the same capacity; BF.ADD and BF.EXISTS of one item on the big filter. Figures:
the server-side microseconds per call from INFO commandstats (the time inside the command, no
network) and each server process' CPU time per request, as ratios to valkey-bloom's.

Usage: scripts/bench/valkey_bloom_bench.py --valkey-bloom SO [--valkey PATH] [--module SO]
           [--capacity 100000000] [--requests 30000] [--rounds 3] [--redisbloom-dialect]
           [--ours-args 'DIALECT valkey-bloom'] [--redisbloom-args 'DIALECT redisbloom']
Needs about 1 GB of memory per server at 100M and ~15 minutes, most of it filling. Prints the
load average at start and end; run it on an idle machine.
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
import scale_bench  # noqa: E402
from redisbloom_bench import Server, ratio, table  # noqa: E402

BATCH = 120


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--valkey-bloom", required=True, help="valkey-bloom's libvalkey_bloom.so")
    p.add_argument("--valkey", default=shutil.which("valkey-server") or "valkey-server")
    p.add_argument("--module", default="target/release/libbloomgate_module.so")
    p.add_argument("--capacity", type=int, default=100_000_000)
    p.add_argument("--requests", type=int, default=30000, help="requests per redis-benchmark run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--redisbloom-dialect", action="store_true",
                   help="also bloomgate's module in its RedisBloom dialect (classic and blocked)")
    p.add_argument("--ours-args", default="DIALECT valkey-bloom",
                   help="the module's load arguments for its valkey-bloom dialect "
                        "(default %(default)r; '' for none)")
    p.add_argument("--redisbloom-args", default="DIALECT redisbloom",
                   help="the module's load arguments for its RedisBloom dialect "
                        "(default %(default)r; '' for none)")
    args = p.parse_args()
    if not shutil.which("redis-benchmark"):
        print("needs redis-benchmark (redis-tools)")
        return 1
    vkb, module = os.path.abspath(args.valkey_bloom), os.path.abspath(args.module)
    print("load average %s at start, %d cores, %s" % (
        rbb.loadavg(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M:%S %Z")))
    cap = args.capacity
    ranges, r = scale_bench.items(cap)
    servers = []
    try:
        theirs = Server("valkey-bloom", bgtest.redis_argv(args.valkey, vkb))
        servers.append(theirs)
        ours = Server("bloomgate for valkey-bloom [%s]" % args.ours_args,
                      bgtest.redis_argv(args.valkey, module, *args.ours_args.split()))
        servers.append(ours)
        rbd = None
        if args.redisbloom_dialect:
            rbd = Server("bloomgate for RedisBloom [%s]" % args.redisbloom_args,
                         bgtest.redis_argv(args.valkey, module, *args.redisbloom_args.split()))
            servers.append(rbd)
        for s in servers:
            t = time.time()
            s.client.call("BF.RESERVE", "big", "0.01", cap)
            scale_bench.madd_fill(s.client, "big", ranges)
            s.client.call("BF.RESERVE", "empty", "0.01", cap)
            print("filled %s in %.0f s: BF.INFO big %s" % (
                s.name, time.time() - t, s.client.call("BF.INFO", "big")))
        if rbd:
            t = time.time()
            rbd.client.call("BF.RESERVE", "blocked", "0.01", cap, "LAYOUT", "blocked")
            scale_bench.madd_fill(rbd.client, "blocked", ranges)
            rbd.client.call("BF.RESERVE", "emptyblocked", "0.01", cap, "LAYOUT", "blocked")
            print("filled the blocked filter in %.0f s" % (time.time() - t))

        many = lambda cmd, key: [cmd, key] + ["__rand_int__"] * BATCH  # noqa: E731
        rows_spec = [
            ("BF.MEXISTS x120, %gM filter" % (cap / 1e6), many("BF.MEXISTS", "big"), "blocked"),
            ("BF.MADD x120 into an empty %gM filter" % (cap / 1e6), many("BF.MADD", "empty"),
             "emptyblocked"),
            ("BF.EXISTS, one item, %gM filter" % (cap / 1e6),
             ["BF.EXISTS", "big", "__rand_int__"], "blocked"),
            ("BF.ADD, one item, %gM filter" % (cap / 1e6), ["BF.ADD", "big", "__rand_int__"],
             "blocked"),
        ]
        results = {}
        for rnd in range(args.rounds):
            for label, command, blocked_key in rows_spec:
                runs = [(s, command) for s in servers]
                if rbd:
                    runs.append(((rbd, "blocked"), command[:1] + [blocked_key] + command[2:]))
                if rnd % 2:
                    runs = runs[1:] + runs[:1]
                for target, cmd in runs:
                    s = target[0] if isinstance(target, tuple) else target
                    name = s.name + (" LAYOUT blocked" if isinstance(target, tuple) else "")
                    results.setdefault((label, name), []).append(
                        scale_bench.run(s, args.requests, cmd, r, True))

        def mean(label, name, field):
            v = [x[field] for x in results.get((label, name), []) if x[field] is not None]
            return sum(v) / len(v) if v else float("nan")

        names = [s.name for s in servers] + (
            [rbd.name + " LAYOUT blocked"] if rbd else [])
        header = ["command", "usec valkey-bloom", "cpu valkey-bloom"]
        for name in names[1:]:
            header += ["usec " + name, "÷ valkey-bloom", "cpu ÷"]
        rows = []
        for label, _, _ in rows_spec:
            vu, vc = mean(label, theirs.name, 2), mean(label, theirs.name, 1)
            row = [label, "%.2f" % vu, "%.2f" % vc]
            for name in names[1:]:
                u, c = mean(label, name, 2), mean(label, name, 1)
                row += ["%.2f" % u, "%.2f" % ratio(u, vu), "%.2f" % ratio(c, vc)]
            rows.append(row)
        table("valkey-bloom vs bloomgate in %s (capacity %d, -c 50 -P 1, -r %d, %d requests x %d "
              "rounds, interleaved; usec = INFO commandstats usec_per_call; cpu = the server "
              "process' CPU microseconds per request)" % (
                  args.valkey, cap, r, args.requests, args.rounds), header, rows)
        for s in servers:
            print("MEMORY USAGE big in %s: %s" % (s.name, s.client.call("MEMORY", "USAGE", "big")))
    finally:
        for s in servers:
            s.close()
    print("\nload average %s at end" % rbb.loadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
