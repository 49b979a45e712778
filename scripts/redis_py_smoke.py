#!/usr/bin/env python3
"""Smoke test: redis-py's r.bf() against `bloomgate serve`, every BFCommands method.

Usage: redis_py_smoke.py [--bin PATH_TO_bloomgate] [--port N]
  With --port, talks to a server already running on 127.0.0.1:N.
  Otherwise starts `bloomgate serve` (from --bin, default target/release/bloomgate) on a free
  loopback port with a temporary data directory, and stops it afterwards.
Exits non-zero on any mismatch.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis

failures = []


def check(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")
        print(f"FAIL {name}: got {got!r}, want {want!r}")
    else:
        print(f"ok   {name}")


def expect_error(name, fn, text):
    try:
        fn()
    except redis.ResponseError as e:
        check(name, str(e), text)
        return
    failures.append(f"{name}: no error")
    print(f"FAIL {name}: no error")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary):
    data = tempfile.mkdtemp(prefix="bloomgate-pysmoke-")
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen([binary, "serve", "--port", str(port), "--dir", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline and proc.poll() is None:
            try:
                if redis.Redis(port=port).ping():
                    return proc, port
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.05)
        proc.kill()
        proc.wait()
    sys.exit("could not start bloomgate serve")


def run(r):
    bf = r.bf()
    r.flushdb()
    check("create", bf.create("f", 0.01, 1000), True)
    check("reserve nonscaling", bf.reserve("ns", 0.01, 10, noScale=True), True)
    check("reserve expansion", bf.reserve("ex", 0.01, 100, expansion=4), True)
    expect_error("create twice", lambda: bf.create("f", 0.01, 1000), "item exists")
    expect_error("bad error rate", lambda: bf.create("g", 2, 100),
                 "error rate must be in the range (0.000000, 1.000000)")
    check("add new", bf.add("f", "a"), 1)
    check("add again", bf.add("f", "a"), 0)
    check("madd", bf.madd("f", "a", "b", "c"), [0, 1, 1])
    check("insert", bf.insert("ins", ["x", "y"], capacity=500, error=0.001, expansion=2), [1, 1])
    check("insert nocreate existing", bf.insert("ins", ["z"], noCreate=True), [1])
    expect_error("insert nocreate missing", lambda: bf.insert("nope", ["z"], noCreate=True), "not found")
    check("insert nonscaling", bf.insert("ins2", ["x"], noScale=True), [1])
    check("exists", bf.exists("f", "b"), 1)
    check("exists missing item", bf.exists("f", "zzz"), 0)
    check("exists missing key", bf.exists("nokey", "a"), 0)
    check("mexists", bf.mexists("f", "a", "zzz", "c"), [1, 0, 1])
    check("card", bf.card("f"), 3)
    check("card missing", bf.card("nokey"), 0)
    info = bf.info("f")
    check("info capacity", info.capacity, 1000)
    check("info filters", info.filterNum, 1)
    check("info items", info.insertedNum, 3)
    check("info expansion", info.expansionRate, 2)
    default_info = bf.info("ex")
    check("info expansion 4", default_info.expansionRate, 4)
    r.execute_command("BF.RESERVE", "sz", 0.01, 100)
    check("info size 240", bf.info("sz").size, 240)

    # SCANDUMP/LOADCHUNK round trip into a new key.
    for i in range(2000):
        bf.add("f", f"item{i}")
    chunks = []
    it = 0
    while True:
        it, data = bf.scandump("f", it)
        if it == 0:
            check("scandump end chunk empty", data, b"")
            break
        chunks.append((it, data))
    for it, data in chunks:
        # LOADCHUNK replies +OK (no redis-py callback: b"OK").
        check(f"loadchunk {it}", bf.loadchunk("copy", it, data) in (b"OK", "OK", True), True)
    check("copy exists", bf.mexists("copy", *[f"item{i}" for i in range(0, 2000, 97)]), [1] * len(range(0, 2000, 97)))
    check("copy card", bf.card("copy"), bf.card("f"))
    check("copy info", vars(bf.info("copy")), vars(bf.info("f")))
    expect_error("loadchunk bad header", lambda: bf.loadchunk("copy2", 1, b"garbage"), "received bad data")

    # pipeline() uses MULTI/EXEC by default.
    pipe = r.pipeline()
    pipe.bf().add("p", "one")
    pipe.bf().exists("p", "one")
    check("pipeline multi/exec", pipe.execute(), [1, 1])
    check("type", r.type("f"), b"MBbloom--")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join("target", "release", "bloomgate"))
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    proc = None
    port = args.port
    if port is None:
        proc, port = start_server(args.bin)
    try:
        r = redis.Redis(port=port)
        run(r)
        # RESP3 as well.
        r3 = redis.Redis(port=port, protocol=3)
        check("resp3 exists", r3.bf().exists("f", "a"), True)
        info3 = r3.bf().info("f")  # RESP3: a map, returned as a dict
        check("resp3 info capacity", info3.get("Capacity", info3.get(b"Capacity")), r.bf().info("f").capacity)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
            check("clean shutdown on SIGTERM", proc.returncode, 0)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all redis-py checks passed")


if __name__ == "__main__":
    main()
