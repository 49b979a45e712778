#!/usr/bin/env python3
"""BENCHMARKS.md's memory and snapshot rows for `bloomgate serve` (run by
scripts/bench/memory_bench.sh).

1. Bytes per key: resident memory (VmRSS) before and after 100,000 default `BF.ADD key item`
   (pipelined through redis-py), divided by the key count; `used_memory` (INFO memory) and the
   sum of `MEMORY USAGE` over a sample, against the same resident growth.
2. BGSAVE of one large filter (`BF.RESERVE big 0.01 <capacity>`, 138 MB at 100M): one client
   sends BF.ADD one at a time while BGSAVE runs and records each reply's latency (p50/p99/max);
   a sampler thread reads VmRSS every 5 ms for the peak during the save.

Bounded: fixed key and command counts, every wait has a deadline. Binds 127.0.0.1 only.
"""

import os
import sys
import threading
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

BIN = os.environ.get("BLOOMGATE_BIN", "target/release/bloomgate")
KEYS = int(os.environ.get("MEM_KEYS", "100000"))
BIG_CAPACITY = int(os.environ.get("BIG_CAPACITY", "100000000"))


def info_field(r, section, name):
    return int(r.info(section)[name])


class Server(bgtest.Server):
    """`bloomgate serve` with an append-only log fsynced every second, and a redis-py client."""

    def __init__(self):
        super().__init__(bgtest.serve_argv(BIN, "--bind", "127.0.0.1", "--appendfsync", "everysec"),
                         prefix="bloomgate-membench-")
        self.r = redis.Redis(port=self.port, socket_timeout=60, decode_responses=True)

    def rss(self):
        return self.status("VmRSS")


def bytes_per_key():
    s = Server()
    try:
        time.sleep(0.3)
        before_rss = s.rss()
        before_used = info_field(s.r, "memory", "used_memory")
        batch = 1000
        for start in range(0, KEYS, batch):
            p = s.r.pipeline(transaction=False)
            for i in range(start, min(start + batch, KEYS)):
                p.execute_command("BF.ADD", f"key:{i:08d}", "item")
            p.execute()
        time.sleep(0.3)
        early_rss = s.rss()
        # Freed pages (table growth, request buffers) go back to the OS within a second.
        time.sleep(3)
        after_rss = s.rss()
        used = info_field(s.r, "memory", "used_memory")
        sample = [s.r.memory_usage(f"key:{i:08d}") for i in range(0, KEYS, KEYS // 1000)]
        per_key_usage = sum(sample) / len(sample)
        grown = after_rss - before_rss
        print(f"bytes/key resident: {grown / KEYS:.0f} B  ({KEYS} default BF.ADD keys; "
              f"RSS {before_rss / 1e6:.1f} -> {after_rss / 1e6:.1f} MB 3 s after the load; "
              f"{(early_rss - before_rss) / KEYS:.0f} B/key 0.3 s after it)")
        print(f"used_memory: {used / 1e6:.1f} MB vs RSS {after_rss / 1e6:.1f} MB "
              f"(ratio {used / after_rss:.3f}); growth {(used - before_used) / KEYS:.0f} B/key "
              f"vs resident {grown / KEYS:.0f} B/key (ratio {(used - before_used) / grown:.3f})")
        print(f"MEMORY USAGE per key (mean of {len(sample)}): {per_key_usage:.0f} B "
              f"(ratio to resident {per_key_usage * KEYS / grown:.3f})")
    finally:
        s.close("kill")


def cow_bytes(r):
    return int(r.info("persistence")["cow_copied_bytes_total"])


def during_bgsave(s, key, size, what):
    """BF.ADD to `key` one at a time while a BGSAVE of the `size`-byte filter runs, every acked
    item checked afterwards; prints the latencies, the peak RSS against RSS before the save, and
    the bytes copy-on-write copied (`what` names the case)."""
    before = s.rss()
    cow0 = cow_bytes(s.r)
    peak = [before]
    saving = threading.Event()
    saving.set()

    def sample():
        while saving.is_set():
            peak[0] = max(peak[0], s.rss())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    lat, acked = [], []
    s.r.bgsave()
    deadline = time.time() + 120
    i = 0
    while time.time() < deadline:
        item = f"during-{key}-{i}"
        t = time.perf_counter()
        s.r.execute_command("BF.ADD", key, item)
        lat.append(time.perf_counter() - t)
        acked.append(item)
        i += 1
        if i % 200 == 0 and s.r.info("persistence")["rdb_bgsave_in_progress"] == 0:
            break
    saving.clear()
    sampler.join()
    assert s.r.info("persistence")["rdb_last_bgsave_status"] == "ok"
    missing = [x for x in acked if not s.r.execute_command("BF.EXISTS", key, x)]
    assert not missing, missing[:3]
    copied = cow_bytes(s.r) - cow0
    peak = peak[0]
    lat.sort()
    pct = lambda q: bgtest.percentile(lat, q) * 1e3  # noqa: E731
    print(f"BGSAVE of a {size / 1e6:.0f} MB filter, {what}: {len(lat)} BF.ADD, "
          f"p50 {pct(0.5):.3f} ms, p99 {pct(0.99):.3f} ms, max {lat[-1] * 1e3:.1f} ms; "
          f"peak RSS {peak / 1e6:.1f} MB vs {before / 1e6:.1f} MB before (ratio "
          f"{peak / before:.3f}); segments copied {copied / 1e6:.1f} MB; peak / (before + "
          f"copied) = {peak / (before + copied):.3f}")


def bgsave_stall():
    s = Server()
    try:
        empty = s.rss()
        s.r.execute_command("BF.RESERVE", "big", "0.01", BIG_CAPACITY)
        time.sleep(1.5)
        grown = s.rss() - empty
        usage = s.r.memory_usage("big")
        used = info_field(s.r, "memory", "used_memory")
        print(f"large filter: MEMORY USAGE {usage / 1e6:.1f} MB, used_memory {used / 1e6:.1f} MB, "
              f"resident growth {grown / 1e6:.1f} MB (ratios {usage / grown:.3f} / "
              f"{used / grown:.3f})")
        for i in range(1000):
            s.r.execute_command("BF.ADD", "big", f"warm{i}")
        size = s.r.execute_command("BF.INFO", "big", "SIZE")
        # redis-py parses BF.INFO into a dict for some versions.
        size = int(next(iter(size.values())) if isinstance(size, dict) else size)
        time.sleep(0.5)
        # Writes to another key: nothing of the big filter is copied.
        during_bgsave(s, "other", size, "writes to another key")
        # Writes to the filter being saved: each first write to a 256 KiB segment copies it.
        during_bgsave(s, "big", size, "writes to it")
        # A BGSAVE killed mid-write leaves its temp file; the next start removes it.
        s.r.bgsave()
        tmp = os.path.join(s.dir, "dump.bgs.tmp")
        deadline = time.time() + 10
        while not os.path.exists(tmp) and time.time() < deadline:
            time.sleep(0.001)
        left = os.path.getsize(tmp) if os.path.exists(tmp) else 0
        s.stop("kill")
        left = os.path.getsize(tmp) if os.path.exists(tmp) else left
        s.start()
        print(f"kill -9 during BGSAVE left a {left / 1e6:.1f} MB temp file; after restart: "
              f"{'still there' if os.path.exists(tmp) else 'removed'}")
    finally:
        s.close("kill")


if __name__ == "__main__":
    print(f"load average: {os.getloadavg()[0]:.2f} (2 vCPUs shared with other engineers)")
    what = sys.argv[1:] or ["keys", "bgsave"]
    if "keys" in what:
        bytes_per_key()
    if "bgsave" in what:
        bgsave_stall()
