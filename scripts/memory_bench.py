#!/usr/bin/env python3
"""Memory and snapshot rows of issue 16 for `bloomgate serve` (run by scripts/memory_bench.sh).

1. Bytes per key: resident memory (VmRSS) before and after 100,000 default `BF.ADD key item`
   (pipelined through redis-py), divided by the key count; `used_memory` (INFO memory) and the
   sum of `MEMORY USAGE` over a sample, against the same resident growth.
2. BGSAVE of one large filter (`BF.RESERVE big 0.01 <capacity>`, 138 MB at 100M): one client
   sends BF.ADD one at a time while BGSAVE runs and records each reply's latency (p50/p99/max);
   a sampler thread reads VmRSS every 5 ms for the peak during the save.

Bounded: fixed key and command counts, every wait has a deadline. Binds 127.0.0.1 only.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

BIN = os.environ.get("BLOOMGATE_BIN", "target/release/bloomgate")
KEYS = int(os.environ.get("MEM_KEYS", "100000"))
BIG_CAPACITY = int(os.environ.get("BIG_CAPACITY", "100000000"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def info_field(r, section, name):
    return int(r.info(section)[name])


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bloomgate-membench-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [BIN, "serve", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
             "--appendfsync", "everysec"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(port=self.port, socket_timeout=60)
        deadline = time.time() + 30
        while True:
            try:
                if self.r.ping():
                    break
            except redis.exceptions.RedisError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("server did not start")
            time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def bytes_per_key():
    s = Server()
    try:
        time.sleep(0.3)
        before_rss = rss(s.proc.pid)
        before_used = info_field(s.r, "memory", "used_memory")
        batch = 1000
        for start in range(0, KEYS, batch):
            p = s.r.pipeline(transaction=False)
            for i in range(start, min(start + batch, KEYS)):
                p.execute_command("BF.ADD", f"key:{i:08d}", "item")
            p.execute()
        time.sleep(0.3)
        after_rss = rss(s.proc.pid)
        used = info_field(s.r, "memory", "used_memory")
        sample = [s.r.memory_usage(f"key:{i:08d}") for i in range(0, KEYS, KEYS // 1000)]
        per_key_usage = sum(sample) / len(sample)
        grown = after_rss - before_rss
        print(f"bytes/key resident: {grown / KEYS:.0f} B  ({KEYS} default BF.ADD keys; "
              f"RSS {before_rss / 1e6:.1f} -> {after_rss / 1e6:.1f} MB)")
        print(f"used_memory: {used / 1e6:.1f} MB vs RSS {after_rss / 1e6:.1f} MB "
              f"(ratio {used / after_rss:.3f}); growth {(used - before_used) / KEYS:.0f} B/key "
              f"vs resident {grown / KEYS:.0f} B/key (ratio {(used - before_used) / grown:.3f})")
        print(f"MEMORY USAGE per key (mean of {len(sample)}): {per_key_usage:.0f} B "
              f"(ratio to resident {per_key_usage * KEYS / grown:.3f})")
    finally:
        s.stop()


def bgsave_stall():
    s = Server()
    try:
        s.r.execute_command("BF.RESERVE", "big", "0.01", BIG_CAPACITY)
        for i in range(1000):
            s.r.execute_command("BF.ADD", "big", f"warm{i}")
        size = s.r.execute_command("BF.INFO", "big", "SIZE")
        # redis-py parses BF.INFO into a dict for some versions.
        size = int(next(iter(size.values())) if isinstance(size, dict) else size)
        time.sleep(0.5)
        before = rss(s.proc.pid)
        peak = [before]
        saving = threading.Event()
        saving.set()

        def sample():
            while saving.is_set():
                peak[0] = max(peak[0], rss(s.proc.pid))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        saves = int(s.r.info("persistence")["rdb_changes_since_last_save"] >= 0)
        lat = []
        acked = []
        s.r.bgsave()
        deadline = time.time() + 120
        i = 0
        while time.time() < deadline:
            item = f"during{i}"
            t = time.perf_counter()
            s.r.execute_command("BF.ADD", "big", item)
            lat.append(time.perf_counter() - t)
            acked.append(item)
            i += 1
            if i % 200 == 0 and s.r.info("persistence")["rdb_bgsave_in_progress"] == 0:
                break
        saving.clear()
        sampler.join()
        ok = s.r.info("persistence")["rdb_last_bgsave_status"]
        lat.sort()
        pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
        print(f"BGSAVE of a {size / 1e6:.0f} MB filter ({ok}): {len(lat)} BF.ADD during it, "
              f"latency p50 {pct(0.5):.3f} ms, p99 {pct(0.99):.3f} ms, max {lat[-1] * 1e3:.1f} ms")
        print(f"peak RSS during BGSAVE: {peak[0] / 1e6:.1f} MB vs {before / 1e6:.1f} MB before "
              f"(ratio {peak[0] / before:.3f}; a written 2 MiB segment is copied once)")
        missing = [x for x in acked if not s.r.execute_command("BF.EXISTS", "big", x)]
        assert not missing and saves >= 0, missing[:3]
    finally:
        s.stop()


if __name__ == "__main__":
    print(f"load average: {os.getloadavg()[0]:.2f} (2 vCPUs shared with other engineers)")
    what = sys.argv[1:] or ["keys", "bgsave"]
    if "keys" in what:
        bytes_per_key()
    if "bgsave" in what:
        bgsave_stall()
