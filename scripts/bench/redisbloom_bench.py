#!/usr/bin/env python3
"""Side by side against RedisBloom, in one run, printed as tables.

1. module  — bloomgate's module and RedisBloom inside the same redis-server binary: Redis 8.2
   with RedisBloom 8, Redis 7.0 with RedisBloom 2.4. BF.ADD, BF.EXISTS, CF.ADD, CF.EXISTS driven
   by redis-benchmark (-c 50, -r 100000, -P 1 and -P 16), the two servers interleaved command by
   command; throughput, and the server-side microseconds per call from INFO commandstats (the
   time inside the command, no network). With --callgrind, also the instructions per call
   inside RedisModuleCommandDispatcher under valgrind: independent of machine load. With
   --floor, a third server in the same binary runs scripts/bench/module_floor.c (built here with cc):
   the four commands doing only the module API calls any implementation needs (open the key,
   check its type, reply, replicate a CF.ADD), no filter — the host's share of every figure.
   sketches — the same for CMS.INCRBY/QUERY, TOPK.ADD/QUERY, TDIGEST.ADD/QUANTILE in Redis 8.2.
2. serve   — `bloomgate serve` against Redis 8.2 + RedisBloom 8, both with an append-only log
   fsynced every second: the server process' CPU time (user + system, all threads) per request
   over each redis-benchmark run, and throughput; with --floor, PING as well (the request path
   alone).
3. bgsave  — a ~240 MB Bloom filter (BF.RESERVE 0.01 200000000 NONSCALING, filled with random
   bits through LOADCHUNK so its pages are resident), then BGSAVE with 1,000 random BF.ADDs sent
   one per millisecond from its start: each write's latency, the server's resident memory
   before the save and its peak during it (VmHWM after resetting it), for `bloomgate serve`
   and, for reference, Redis 8.2 + RedisBloom (its parent process; its child is the fork).

RedisBloom is found through --redisbloom DIR or $REDISBLOOM_DIR (a directory holding
redisbloom-8.so and/or redisbloom-2.4.23.so); comparisons whose pieces are missing are skipped
with a message (a clone without RedisBloom skips them all and exits 0). Redis 8.2 comes from
--redis8 or $REDIS8_SERVER, Redis 7.0 from --redis7 or $REDIS7_SERVER (default: `redis-server` on
PATH if it is 7.x). The module and binary default to target/release.

Usage: scripts/bench/redisbloom_bench.py [--only module,sketches,serve,bgsave] [--scale 1.0] [--rounds 2]
           [--callgrind] [--floor] [--redisbloom DIR] [--redis8 PATH] [--redis7 PATH]
           [--module target/release/libbloomgate_module.so] [--bloomgate target/release/bloomgate]
Prints the load average at start and end: on a shared machine, prefer the same-run ratios and
the instruction counts to absolute figures.
"""

import argparse
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)
from bgtest import Resp  # noqa: E402

COMMANDS = [("BF.ADD", "bf"), ("BF.EXISTS", "bf"), ("CF.ADD", "cf"), ("CF.EXISTS", "cf")]
# The other three RedisBloom types (CMS, Top-K, t-digest): (command, its arguments after the name).
SKETCH_COMMANDS = [
    ("CMS.INCRBY", "cms __rand_int__ 1"), ("CMS.QUERY", "cms __rand_int__"),
    ("TOPK.ADD", "topk __rand_int__"), ("TOPK.QUERY", "topk __rand_int__"),
    ("TDIGEST.ADD", "td __rand_int__"), ("TDIGEST.QUANTILE", "td 0.5 0.99"),
]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Server(bgtest.Server):
    """A named server (`bgtest.Server`: a free port, its own directory, ready once it answers
    PING) with a RESP client, and the /proc figures the tables read."""

    def __init__(self, name, argv):
        self.name = name
        try:
            super().__init__(argv, prefix="bloomgate-rbbench-")
        except RuntimeError as e:
            raise RuntimeError("%s did not start: %s" % (name, e)) from None
        self.client = Resp(self.port)

    def cpu_ns(self):
        """CPU time (user + system) of the whole process so far, threads that have exited
        included (a per-thread sum would lose them: serve's worker threads come and go), in
        nanoseconds, at the kernel's clock-tick resolution (10 ms; runs last seconds)."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")

    def reset_peak(self):
        with open("/proc/%d/clear_refs" % self.proc.pid, "w") as f:
            f.write("5")


def benchmark(port, n, pipeline, command, key):
    """`key` is the key (then `__rand_int__` is the item), or every argument, space-separated
    (empty: none, for PING)."""
    rest = [] if not key else key.split(" ") if " " in key else [key, "__rand_int__"]
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(n), "-P", str(pipeline),
         "-r", "100000", "-q", command, *rest],
        capture_output=True, text=True, check=True).stdout.replace("\r", "\n")
    rates = re.findall(r"([0-9.]+) requests per second", out)
    if not rates:
        raise RuntimeError("redis-benchmark gave no rate: %s" % out[-500:])
    return float(rates[-1])


def commandstats(client):
    info = client.call("INFO", "commandstats").decode()
    out = {}
    for m in re.finditer(r"cmdstat_([^:]+):calls=(\d+),usec=\d+,usec_per_call=([0-9.]+)", info):
        out[m.group(1).upper()] = (int(m.group(2)), float(m.group(3)))
    return out


def setup_filters(client):
    client.call("BF.RESERVE", "bf", "0.01", "200000")
    client.call("CF.RESERVE", "cf", "200000")


def setup_sketches(client):
    client.call("CMS.INITBYDIM", "cms", "2000", "5")
    client.call("TOPK.RESERVE", "topk", "50", "2000", "7", "0.925")
    client.call("TDIGEST.CREATE", "td", "COMPRESSION", "100")


def ratio(a, b):
    return a / b if b else float("nan")


def table(title, header, rows):
    print("\n" + title)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join("%%-%ds" % w if i == 0 else "%%%ds" % w for i, w in enumerate(widths))
    print(fmt % tuple(header))
    for r in rows:
        print(fmt % tuple(r))


def callgrind_per_call(binary, module, n):
    """Instructions per call inside RedisModuleCommandDispatcher, per command, under valgrind."""
    def argv(port, d):
        return ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(d, "cg.out"),
                "--collect-atstart=no", "--toggle-collect=RedisModuleCommandDispatcher",
                *bgtest.redis_argv(binary, module)(port, d)]
    server = bgtest.Server(argv, prefix="bloomgate-callgrind-", seconds=120)
    try:
        port, pid = server.port, server.proc.pid
        setup_filters(Resp(port, 30))
        result = {}
        for command, key in COMMANDS:
            subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", "2000", "-P", "16",
                            "-r", "100000", "-q", command, key, "__rand_int__"],
                           capture_output=True, check=True)
            subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True)
            subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", str(n), "-P", "16",
                            "-r", "100000", "-q", command, key, "__rand_int__"],
                           capture_output=True, check=True)
            subprocess.run(["callgrind_control", "-d", command, str(pid)], capture_output=True)
        server.stop(seconds=60)
        for f in os.listdir(server.dir):
            if not f.startswith("cg.out."):
                continue
            text = open(os.path.join(server.dir, f)).read()
            trigger = re.search(r"^desc: Trigger: dump (\S+)", text, re.M)
            summary = re.search(r"^summary: (\d+)", text, re.M)
            if trigger and summary:
                result[trigger.group(1)] = int(summary.group(1)) / n
        return result
    finally:
        server.close("kill")


def interleaved(rb, ours, commands, args, cpu=False, extra=()):
    """Runs every command at -P 1 and -P 16 against both servers (and the `extra` ones, after
    them), `args.rounds` times, alternating which side goes first round by round. Returns
    {(server name, pipeline, command): [(requests/s, server CPU microseconds per request or
    None)]}."""
    n1, n16 = int(100000 * args.scale), int(600000 * args.scale)
    runs = {}
    for rnd in range(args.rounds):
        for pipeline in (1, 16):
            n = n1 if pipeline == 1 else n16
            for command, key in commands:
                order = (rb, ours) if rnd % 2 == 0 else (ours, rb)
                for s in order + tuple(extra):
                    before = s.cpu_ns() if cpu else 0
                    rps = benchmark(s.port, n, pipeline, command, key)
                    used = (s.cpu_ns() - before) / 1000 / n if cpu else None
                    runs.setdefault((s.name, pipeline, command), []).append((rps, used))
    return runs


def mean_run(runs, server, pipeline, command, field=0):
    """The mean over rounds of one figure of `interleaved`'s runs for `server`: field 0 is
    requests/s, 1 the server CPU microseconds per request."""
    values = [run[field] for run in runs[(server.name, pipeline, command)]]
    return sum(values) / len(values)


def build_floor():
    """scripts/bench/module_floor.c as a shared object in a temporary directory, or None (with the
    reason printed) when cc or the redis-module crate's redismodule.h is missing."""
    cc = shutil.which("cc") or shutil.which("gcc")
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    headers = sorted(glob.glob(os.path.join(
        home, "registry", "src", "*", "redis-module-*", "src", "include", "redismodule.h")))
    if not cc or not headers:
        print("(--floor skipped: needs cc and the redis-module crate's redismodule.h; "
              "`cargo fetch` brings the latter)")
        return None
    out = os.path.join(tempfile.mkdtemp(prefix="bloomgate-floor-"), "floor.so")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "module_floor.c")
    subprocess.run([cc, "-O2", "-fPIC", "-shared", "-I", os.path.dirname(headers[-1]), "-o", out,
                    source], check=True)
    return out


def module_comparison(label, binary, rb_so, module, args, commands=COMMANDS,
                      setup=setup_filters):
    floor_so = args.floor_so if commands is COMMANDS else None
    servers = [Server("%s + RedisBloom" % label, bgtest.redis_argv(binary, rb_so))]
    try:
        servers.append(Server("%s + bloomgate" % label, bgtest.redis_argv(binary, module)))
        if floor_so:
            servers.append(Server("%s + floor" % label, bgtest.redis_argv(binary, floor_so)))
        rb, ours = servers[0], servers[1]
        for s in servers:
            setup(s.client)
            s.client.call("CONFIG", "RESETSTAT")
        runs = interleaved(rb, ours, commands, args, extra=servers[2:])
        stats = {s.name: commandstats(s.client) for s in servers}
    finally:
        for s in servers:
            s.close()

    def usec(server, command):
        return stats[server.name].get(command, (0, 0))[1]

    rows = []
    for command, _ in commands:
        a, b = usec(rb, command), usec(ours, command)
        row = [command, "%.3f" % a, "%.3f" % b, "%.2f" % ratio(b, a)]
        for pipeline in (1, 16):
            ra, rbm = mean_run(runs, rb, pipeline, command), mean_run(runs, ours, pipeline, command)
            row += ["%.0f" % ra, "%.0f" % rbm, "%.2f" % ratio(rbm, ra)]
        rows.append(row)
    table("module vs RedisBloom in %s (%d rounds, -c 50, -r 100000; usec = INFO commandstats "
          "usec_per_call; target: usec ratio <= 0.80, rps ratio >= 1.00 at -P 1, >= 1.10 at -P 16)"
          % (label, args.rounds),
          ["command", "usec RB", "usec ours", "ratio", "P1 RB", "P1 ours", "ratio",
           "P16 RB", "P16 ours", "ratio"], rows)
    if floor_so:
        rows = []
        floor = servers[2]
        for command, _ in commands:
            a, f = usec(rb, command), usec(floor, command)
            row = [command, "%.3f" % a, "%.3f" % f, "%.2f" % ratio(f, a)]
            for pipeline in (1, 16):
                rf = mean_run(runs, floor, pipeline, command)
                row += ["%.0f" % rf, "%.2f" % ratio(rf, mean_run(runs, rb, pipeline, command))]
            rows.append(row)
        table("the module API's floor in %s (scripts/bench/module_floor.c: key open, type check, reply, "
              "replication, no filter; same runs): usec per call and throughput, each against "
              "RedisBloom's — no module can beat these ratios" % label,
              ["command", "usec RB", "usec floor", "floor/RB", "P1 floor", "floor/RB",
               "P16 floor", "floor/RB"], rows)
    if args.callgrind and commands is COMMANDS:
        if not shutil.which("valgrind"):
            print("(no valgrind: instruction counts skipped)")
            return
        n = int(20000 * args.scale)
        a = callgrind_per_call(binary, rb_so, n)
        b = callgrind_per_call(binary, module, n)
        f = callgrind_per_call(binary, floor_so, n) if floor_so else {}
        rows = []
        for c, _ in COMMANDS:
            row = [c, "%.0f" % a.get(c, 0), "%.0f" % b.get(c, 0), "%.2f" % ratio(b.get(c, 0), a.get(c, 0))]
            if floor_so:
                row += ["%.0f" % f.get(c, 0), "%.2f" % ratio(f.get(c, 0), a.get(c, 0))]
            rows.append(row)
        table("instructions per call inside RedisModuleCommandDispatcher, %s (callgrind, %d calls "
              "at -P 16, -c 1; independent of machine load)" % (label, n),
              ["command", "RedisBloom", "bloomgate", "ratio"]
              + (["floor", "floor/RB"] if floor_so else []), rows)


def serve_comparison(redis8, rb8, bloomgate, args):
    rb = Server("Redis 8.2 + RedisBloom", bgtest.redis_argv(
        redis8, rb8, "--appendonly", "yes", "--appendfsync", "everysec"))
    ours = Server("bloomgate serve", bgtest.serve_argv(
        bloomgate, "--appendfsync", "everysec"))
    try:
        for s in (rb, ours):
            setup_filters(s.client)
        # With --floor, PING too: each server's request path alone (read, parse, reply, write),
        # the part of every command's CPU that no command can save.
        commands = COMMANDS + ([("PING", "")] if args.floor else [])
        runs = interleaved(rb, ours, commands, args, cpu=True)
    finally:
        rb.close()
        ours.close()
    rows = []
    for pipeline in (1, 16):
        for command, _ in commands:
            ca, cb = (mean_run(runs, s, pipeline, command, field=1) for s in (rb, ours))
            ra, rbm = (mean_run(runs, s, pipeline, command) for s in (rb, ours))
            rows.append(["P%d %s" % (pipeline, command), "%.2f" % ca, "%.2f" % cb,
                         "%.2f" % ratio(cb, ca), "%.0f" % ra, "%.0f" % rbm, "%.2f" % ratio(rbm, ra)])
    table("bloomgate serve vs Redis 8.2 + RedisBloom (appendfsync everysec, -c 50; CPU = server "
          "user+system microseconds per request, all threads; target: CPU ratio <= 0.80)",
          ["command", "CPU RB", "CPU ours", "ratio", "rps RB", "rps ours", "ratio"], rows)


def fill_random(client, key):
    """Fills `key`'s bit array with random bytes through SCANDUMP's chunk plan and LOADCHUNK."""
    it, _header = client.call("BF.SCANDUMP", key, 0)
    rng = random.Random(24)
    while True:
        it, data = client.call("BF.SCANDUMP", key, it)
        if it == 0:
            break
        client.call("BF.LOADCHUNK", key, it, rng.randbytes(len(data)))


def bgsave_run(server, writes, interval_ms):
    c = server.client
    c.call("BF.RESERVE", "big", "0.01", "200000000", "NONSCALING")
    fill_random(c, "big")
    size = c.call("BF.INFO", "big", "SIZE")[0]
    time.sleep(1.5)  # let freed buffers go back to the OS
    before = server.status("VmRSS")
    server.reset_peak()
    writer = Resp(server.port)
    latencies, during = [], 0
    rng = random.Random(7)
    c.call("BGSAVE")
    start = time.perf_counter()
    for i in range(writes):
        due = start + i * interval_ms / 1000
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t = time.perf_counter()
        writer.call("BF.ADD", "big", "w%d" % rng.getrandbits(64))
        latencies.append((time.perf_counter() - t) * 1000)
        if i % 50 == 0 and b"rdb_bgsave_in_progress:1" in c.call("INFO", "persistence"):
            during = i + 1
    while b"rdb_bgsave_in_progress:1" in c.call("INFO", "persistence"):
        time.sleep(0.01)
    saved = time.perf_counter() - start
    peak = server.status("VmHWM")
    latencies.sort()
    pct = lambda p: bgtest.percentile(latencies, p)  # noqa: E731
    return [server.name, "%.0f" % (size / 1e6), "%.2f" % saved, "~%d" % during,
            "%.2f" % pct(0.5), "%.2f" % pct(0.99), "%.2f" % latencies[-1],
            "%.0f" % (before / 1e6), "%.0f" % (peak / 1e6), "%.3f" % (peak / before)]


def bgsave_comparison(redis8, rb8, bloomgate, args):
    rows = []
    ours = Server("bloomgate serve", bgtest.serve_argv(
        bloomgate, "--appendfsync", "everysec"))
    try:
        rows.append(bgsave_run(ours, 1000, 1.0))
    finally:
        ours.close()
    if redis8 and rb8:
        rb = Server("Redis 8.2 + RedisBloom", bgtest.redis_argv(redis8, rb8))
        try:
            rows.append(bgsave_run(rb, 1000, 1.0))
        except (RuntimeError, OSError) as e:
            print("(Redis 8.2 + RedisBloom reference row failed: %s)" % e)
        finally:
            rb.close()
    table("BGSAVE of a ~240 MB filter with 1,000 random BF.ADDs at 1/ms from its start (latency "
          "ms; RSS MB: before the save, peak during it; target for serve: p99 <= 5 ms, peak/before "
          "<= 1.10)",
          ["server", "MB", "save s", "writes during", "p50", "p99", "max", "RSS before",
           "RSS peak", "peak/before"], rows)


def redis_version(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"v=(\d+\.\d+)", out)
    return m.group(1) if m else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="module,sketches,serve,bgsave")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every request count")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--callgrind", action="store_true", help="also count instructions per call")
    p.add_argument("--floor", action="store_true",
                   help="also run scripts/bench/module_floor.c (the module API's own cost) beside them")
    p.add_argument("--redisbloom", default=os.environ.get("REDISBLOOM_DIR"))
    p.add_argument("--redis8", default=os.environ.get("REDIS8_SERVER", "/tmp/bloomgate-peer/bin/redis-server"))
    p.add_argument("--redis7", default=os.environ.get("REDIS7_SERVER", shutil.which("redis-server") or ""))
    p.add_argument("--module", default="target/release/libbloomgate_module.so")
    p.add_argument("--bloomgate", default="target/release/bloomgate")
    args = p.parse_args()
    only = set(args.only.split(","))
    args.floor_so = build_floor() if args.floor and "module" in only else None
    module = os.path.abspath(args.module)
    bloomgate = os.path.abspath(args.bloomgate)
    rb_dir = args.redisbloom
    rb8 = rb24 = None
    if rb_dir:
        rb8 = os.path.join(rb_dir, "redisbloom-8.so")
        rb24 = os.path.join(rb_dir, "redisbloom-2.4.23.so")
        rb8 = rb8 if os.path.exists(rb8) else None
        rb24 = rb24 if os.path.exists(rb24) else None
    else:
        print("RedisBloom not given (--redisbloom DIR or REDISBLOOM_DIR): comparisons with it "
              "are skipped")
    redis8 = args.redis8 if redis_version(args.redis8 or "") == "8.2" else None
    redis7 = args.redis7 if (redis_version(args.redis7 or "") or "").startswith("7.") else None
    if not shutil.which("redis-benchmark"):
        print("redis-benchmark not found: nothing to run")
        return 0
    print("load average %s at start, %d cores, %s" % (loadavg(), os.cpu_count(), time.strftime(
        "%Y-%m-%d %H:%M:%S %Z")))
    if "module" in only:
        if not os.path.exists(module):
            print("skipped module: no %s (cargo build --release -p bloomgate-module)" % module)
        else:
            for label, binary, so in (("Redis 8.2", redis8, rb8), ("Redis 7.0", redis7, rb24)):
                if binary and so:
                    module_comparison(label, binary, so, module, args)
                else:
                    print("\nskipped module vs RedisBloom in %s: %s" % (
                        label, "no redis-server of that version" if not binary else "no RedisBloom .so"))
    if "sketches" in only:
        if redis8 and rb8 and os.path.exists(module):
            module_comparison("Redis 8.2 (CMS, TopK, t-digest)", redis8, rb8, module, args,
                              SKETCH_COMMANDS, setup_sketches)
        else:
            print("\nskipped sketches: needs Redis 8.2, RedisBloom 8 and the module")
    if "serve" in only:
        if not os.path.exists(bloomgate):
            print("skipped serve: no %s (cargo build --release -p bloomgate-cli)" % bloomgate)
        elif redis8 and rb8:
            serve_comparison(redis8, rb8, bloomgate, args)
        else:
            print("\nskipped serve vs Redis 8.2 + RedisBloom: no Redis 8.2 or no RedisBloom 8")
    if "bgsave" in only:
        if not os.path.exists(bloomgate):
            print("skipped bgsave: no %s" % bloomgate)
        else:
            bgsave_comparison(redis8, rb8, bloomgate, args)
    print("\nload average %s at end" % loadavg())
    if args.floor_so:
        shutil.rmtree(os.path.dirname(args.floor_so), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
