#!/usr/bin/env python3
"""Does a /metrics scrape stall commands? (BENCHMARKS.md's `/metrics` stall row)

Starts `bloomgate serve` with a metrics listener, loads a dataset of Bloom filters (default
500 MB: five 100 MB filters with a million items each, so every page of their bits is written),
then times one client's `BF.EXISTS` round trips for a while without scraping and for as long
again while another thread scrapes `/metrics` back to back. Prints the latency percentiles of
both phases, the worst one, and the scrape durations. A scrape holds the store lock for as long
as it takes to read every key's counters: it must add no stall above 1 ms.

    python3 scripts/bench/metrics_stall.py --bin target/release/bloomgate [--mb 500] [--seconds 10]
"""

import argparse
import multiprocessing
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)
from bgtest import Resp  # noqa: E402


def percentiles(samples):
    s = sorted(samples)
    pick = lambda q: bgtest.percentile(s, q)  # noqa: E731
    return {
        "n": len(s),
        "p50": pick(0.50),
        "p99": pick(0.99),
        "p99.9": pick(0.999),
        "max": s[-1],
    }


def timed_loop(port, seconds, stop_early=None):
    client = Resp(port)
    samples = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        t = time.perf_counter()
        client.call("BF.EXISTS", "k%d" % (i % 5), "probe%d" % i)
        samples.append((time.perf_counter() - t) * 1e6)
        i += 1
    return samples


def scrape(mport, stop, results):
    url = "http://127.0.0.1:%d/metrics" % mport
    times = []
    while not stop.is_set():
        t = time.perf_counter()
        body = urllib.request.urlopen(url).read()
        times.append((time.perf_counter() - t) * 1e3)
        assert b"bloomgate_" in body
    results.put(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/bloomgate")
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--items", type=int, default=1_000_000, help="items per filter")
    args = ap.parse_args()

    mport = bgtest.free_port()
    server = bgtest.Server(bgtest.serve_argv(args.bin, "--metrics-addr", "127.0.0.1:%d" % mport),
                           prefix="bloomgate-stall-")
    port = server.port
    try:
        c = Resp(port)
        # 11.04 bits per item at the first link's 0.5%: capacity for mb/5 MB per filter.
        capacity = int(args.mb * 1e6 / 5 * 8 / 11.04)
        started = time.time()
        for k in range(5):
            c.call("BF.RESERVE", "k%d" % k, "0.01", capacity)
            for base in range(0, args.items, 2000):
                c.call("BF.MADD", "k%d" % k, *("i%d" % j for j in range(base, base + 2000)))
        used = next(l for l in c.call("INFO", "memory").decode().splitlines()
                    if l.startswith("used_memory:"))
        print("dataset: 5 Bloom filters, capacity %d each, %d items each, %s, loaded in %.1f s"
              % (capacity, args.items, used, time.time() - started))

        quiet = timed_loop(port, args.seconds)
        # The scraper is another process: a thread would take the GIL from the timing loop.
        stop, results = multiprocessing.Event(), multiprocessing.Queue()
        scraper = multiprocessing.Process(target=scrape, args=(mport, stop, results))
        scraper.start()
        busy = timed_loop(port, args.seconds)
        stop.set()
        scrapes = results.get()
        scraper.join()

        for name, samples in (("without scrapes", quiet), ("while scraping", busy)):
            p = percentiles(samples)
            print("BF.EXISTS %-16s n=%-7d p50 %6.0f us  p99 %6.0f us  p99.9 %6.0f us  max %7.0f us"
                  % (name, p["n"], p["p50"], p["p99"], p["p99.9"], p["max"]))
        s = percentiles(scrapes)
        print("/metrics scrapes: n=%d  p50 %.2f ms  p99 %.2f ms  max %.2f ms"
              % (s["n"], s["p50"], s["p99"], s["max"]))
        print("load average: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        server.close("terminate")


if __name__ == "__main__":
    main()
