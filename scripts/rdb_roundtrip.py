#!/usr/bin/env python3
"""RDB round trip of all five RedisBloom types between RedisBloom and our module (issue 22).

A development check against a live RedisBloom (a user's clone has none; the repository's own test
is the fixture this script writes, tests/fixtures/redisbloom8-rdb, loaded by the module's tests):

1. Redis 8.2 + RedisBloom 8 (or Redis 7.0 + RedisBloom 2.4.23: pass them instead) builds keys of every type (BF, CF, CMS, TopK, t-digest) and SAVEs;
   its answers to a fixed set of read commands are recorded.
2. The same redis-server binary with our module loads that dump.rdb: every answer must be equal.
   It SAVEs again (our encoding).
3. RedisBloom loads our dump.rdb: every answer must be equal again.

    python3 scripts/rdb_roundtrip.py --redis8 /tmp/bloomgate-peer/bin/redis-server \
        --redisbloom ../shared/peer/redisbloom-8.so --module target/release/libbloomgate_module.so \
        [--fixture tests/fixtures/redisbloom8-rdb]

Exits 1 on the first difference, naming the command.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis

from resp_client import Resp, free_port


def start(binary, module, d):
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                             "--save", "", "--appendonly", "no", "--loadmodule", module],
                            stdout=open(os.path.join(d, "log"), "a"), stderr=subprocess.STDOUT)
    c = redis.Redis(port=port)
    deadline = time.time() + 30
    while True:
        try:
            c.ping()
            if c.info("persistence").get("loading", 0) == 0:
                break
        except (redis.ConnectionError, redis.BusyLoadingError):
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit("redis-server did not start; log:\n" + open(os.path.join(d, "log")).read())
        time.sleep(0.1)
    return proc, c


def stop(proc, c):
    try:
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    proc.wait(30)


BUILD = [
    "BF.RESERVE bf 0.01 1000", *["BF.ADD bf item-%d" % i for i in range(0, 3000, 7)],
    "CF.RESERVE cf 1000 BUCKETSIZE 2 EXPANSION 2", *["CF.ADD cf item-%d" % i for i in range(0, 3000, 3)],
    "CF.DEL cf item-3",
    "CMS.INITBYDIM cms 200 5", *["CMS.INCRBY cms w%d %d" % (i % 50, i) for i in range(400)],
    "CMS.INITBYPROB cmsp 0.001 0.01", "CMS.INCRBY cmsp a 10 b 20 c 30",
    "TOPK.RESERVE topk 10 50 4 0.9", *["TOPK.ADD topk w%d" % (i * i % 97) for i in range(500)],
    "TDIGEST.CREATE td COMPRESSION 100", *["TDIGEST.ADD td %d.25 %d" % (i, i * 3 % 101) for i in range(300)],
    "TDIGEST.CREATE td_empty",
    "TDIGEST.CREATE td_buffered", "TDIGEST.ADD td_buffered 1 2 3",
]


def reads():
    out = ["BF.INFO bf", "CF.INFO cf", "CMS.INFO cms", "CMS.INFO cmsp", "TOPK.INFO topk",
           "TDIGEST.INFO td", "TDIGEST.INFO td_empty"]
    out.append("BF.MEXISTS bf " + " ".join("item-%d" % i for i in range(0, 4000, 5)))
    out.append("CF.MEXISTS cf " + " ".join("item-%d" % i for i in range(0, 4000, 5)))
    out.append("CF.COUNT cf item-6")
    out.append("CMS.QUERY cms " + " ".join("w%d" % i for i in range(60)))
    out.append("CMS.QUERY cmsp a b c d")
    out.append("TOPK.LIST topk WITHCOUNT")
    out.append("TOPK.QUERY topk " + " ".join("w%d" % i for i in range(97)))
    out.append("TOPK.COUNT topk " + " ".join("w%d" % i for i in range(97)))
    for key in ("td", "td_buffered", "td_empty"):
        out += ["TDIGEST.MIN " + key, "TDIGEST.MAX " + key,
                "TDIGEST.QUANTILE %s 0 0.1 0.5 0.9 0.99 1" % key,
                "TDIGEST.CDF %s 0 10 100 250 1000" % key,
                "TDIGEST.RANK %s 0 50 150" % key, "TDIGEST.REVRANK %s 0 50 150" % key,
                "TDIGEST.BYRANK %s 0 1 100 299" % key, "TDIGEST.TRIMMED_MEAN %s 0.1 0.9" % key]
    out += ["TYPE bf", "TYPE cf", "TYPE cms", "TYPE topk", "TYPE td"]
    return out


def raw(reply):
    """A reply as the fixture writes it: strings as latin-1 text, integers, lists, None."""
    if isinstance(reply, bytes):
        return reply.decode("latin-1")
    if isinstance(reply, list):
        return [raw(r) for r in reply]
    return reply


def answers(c):
    # Raw RESP2 replies: redis-py parses module replies differently depending on the server.
    conn = Resp(c.connection_pool.connection_kwargs["port"])
    out = {}
    for line in reads():
        try:
            out[line] = raw(conn.call(*line.split(" ")))
        except RuntimeError as e:
            out[line] = "error: %s" % e
    return out


def compare(stage, want, got):
    bad = [k for k in want if want[k] != got.get(k)]
    for k in bad[:5]:
        print("%s: %s\n  RedisBloom: %s\n  ours:       %s" % (stage, k, str(want[k])[:300], str(got.get(k))[:300]))
    print("%s: %d of %d answers equal" % (stage, len(want) - len(bad), len(want)))
    return not bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--redis8", required=True)
    p.add_argument("--redisbloom", required=True)
    p.add_argument("--module", required=True)
    p.add_argument("--fixture", help="also write dump.rdb and expected.json here")
    a = p.parse_args()
    d1, d2 = tempfile.mkdtemp(prefix="rt-rb-"), tempfile.mkdtemp(prefix="rt-ours-")
    try:
        proc, c = start(a.redis8, a.redisbloom, d1)
        for line in BUILD:
            c.execute_command(*line.split(" "))
        # Reads merge a t-digest's buffer in place (INFO's counts change): the answers are taken
        # once to settle that, then recorded.
        answers(c)
        want = answers(c)
        c.save()
        stop(proc, c)
        shutil.copy(os.path.join(d1, "dump.rdb"), os.path.join(d2, "dump.rdb"))
        proc, c = start(a.redis8, os.path.abspath(a.module), d2)
        ok = compare("RedisBloom's RDB in the same redis-server with bloomgate", want, answers(c))
        c.save()
        stop(proc, c)
        d3 = tempfile.mkdtemp(prefix="rt-back-")
        shutil.copy(os.path.join(d2, "dump.rdb"), os.path.join(d3, "dump.rdb"))
        proc, c = start(a.redis8, a.redisbloom, d3)
        ok = compare("bloomgate's RDB back in RedisBloom", want, answers(c)) and ok
        stop(proc, c)
        shutil.rmtree(d3, ignore_errors=True)
        if a.fixture:
            os.makedirs(a.fixture, exist_ok=True)
            shutil.copy(os.path.join(d1, "dump.rdb"), os.path.join(a.fixture, "dump.rdb"))
            with open(os.path.join(a.fixture, "expected.json"), "w") as f:
                json.dump({"made_by": BUILD, "answers": want}, f, indent=1, sort_keys=True)
        return 0 if ok else 1
    finally:
        shutil.rmtree(d1, ignore_errors=True)
        shutil.rmtree(d2, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
